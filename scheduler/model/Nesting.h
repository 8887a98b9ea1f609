//===- Nesting.h - Bracket depth of untrusted input -------------*- C++ -*-===//
//
// MLIR's parser and llvm::json recurse once per nested bracket, so a
// 10,000-deep `[[[...]]]` overflows the stack inside them. Inputs are scanned
// first and refused beyond a documented depth (kMaxNesting), which no real
// spec, schedule or plan comes near. Brackets inside string literals (and,
// for MLIR, `//` comments) do not count.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_NESTING_H
#define STAGECRAFT_SCHEDULER_MODEL_NESTING_H

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace stagecraft::pipe::sched {

/// The deepest bracket nesting accepted in any input file.
constexpr int kMaxNesting = 256;

struct DeepNesting {
  /// 1-based position of the bracket that goes one level too deep.
  int line, column;
};

/// The first bracket of \p text nested deeper than \p maxDepth: `(`, `[`,
/// `{` and, when \p mlirSyntax, `<` (but not the `>` of `->`), skipping
/// string literals and, for MLIR, comments. None when the text stays within.
std::optional<DeepNesting> findDeepNesting(llvm::StringRef text,
                                           bool mlirSyntax,
                                           int maxDepth = kMaxNesting);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_NESTING_H
