//===- PipeDialect.h - The pipe dialect -------------------------*- C++ -*-===//
//
// Declares the `pipe` dialect; see PipeDialect.td.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_DIALECT_PIPEDIALECT_H
#define STAGECRAFT_DIALECT_PIPEDIALECT_H

#include "mlir/IR/Dialect.h"

#include "dialect/PipeDialect.h.inc"

#endif // STAGECRAFT_DIALECT_PIPEDIALECT_H
