#include "dialect/PipeOps.h"
