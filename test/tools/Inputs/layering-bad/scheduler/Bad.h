// A scheduler header that includes MLIR: check-layering.py must refuse it.
#include "mlir/IR/Builders.h"
