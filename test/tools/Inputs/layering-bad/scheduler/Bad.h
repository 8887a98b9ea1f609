#include "scheduler/Problem.h"
#include "mlir/IR/Builders.h"
