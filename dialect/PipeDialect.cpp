//===- PipeDialect.cpp - The pipe dialect ---------------------------------===//
//
// Registers the ops of the `pipe` dialect.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeDialect.h"
#include "dialect/PipeOps.h"

using namespace stagecraft::pipe;

#include "dialect/PipeDialect.cpp.inc"

void PipeDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/PipeOps.cpp.inc"
      >();
}
