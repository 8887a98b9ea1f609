//===- Passes.h - pipe dialect passes ---------------------------*- C++ -*-===//
//
// Declarations and registration of the passes in Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_PASSES_PASSES_H
#define STAGECRAFT_PASSES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace stagecraft::pipe {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace stagecraft::pipe

#endif // STAGECRAFT_PASSES_PASSES_H
