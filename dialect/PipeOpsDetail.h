//===- PipeOpsDetail.h - What the op parsers and verifiers share -*- C++
//-*-===//
//
// Internal to the dialect: PipeOps.cpp (syntax) and PipeVerify.cpp
// (verifiers) print numbers the same way in the IR and in diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_DIALECT_PIPEOPSDETAIL_H
#define STAGECRAFT_DIALECT_PIPEOPSDETAIL_H

#include <string>

namespace stagecraft::pipe::detail {

/// A cost or memory value as the printer writes it: the shortest exact
/// decimal form that MLIR's lexer reads back as a float.
std::string formatNumber(double value);

} // namespace stagecraft::pipe::detail

#endif // STAGECRAFT_DIALECT_PIPEOPSDETAIL_H
