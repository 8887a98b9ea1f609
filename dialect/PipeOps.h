//===- PipeOps.h - pipe dialect operations ----------------------*- C++ -*-===//
//
// Declares the ops of the `pipe` dialect; see PipeOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_DIALECT_PIPEOPS_H
#define STAGECRAFT_DIALECT_PIPEOPS_H

#include "dialect/PipeDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

namespace stagecraft::pipe {
class StageOp;
class RankOp;
} // namespace stagecraft::pipe

#include "dialect/PipeEnums.h.inc"

#define GET_OP_CLASSES
#include "dialect/PipeOps.h.inc"

#endif // STAGECRAFT_DIALECT_PIPEOPS_H
