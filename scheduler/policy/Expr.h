//===- Expr.h - Integer expressions of schedule policies --------*- C++ -*-===//
//
// The expressions a policy writes its warm-up counts, conditions, caps and
// requirements in: integers with + - * floordiv (//) mod (%) min max,
// comparisons (< <= > >= == !=), and or not, and select(c, a, b). They read
// names the policy's context gives (rank, ranks, microbatches, chunks,
// stage, microbatch, the counters a rule may use, the policy's parameters).
// Parsing names the column of what is wrong; evaluation fails on a division
// by zero, naming the expression.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_POLICY_EXPR_H
#define STAGECRAFT_SCHEDULER_POLICY_EXPR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

struct PolicyExpr {
  enum class Op {
    Const,
    Name,
    Neg,
    Not,
    Add,
    Sub,
    Mul,
    FloorDiv,
    Mod,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Min,
    Max,
    Select,
  };
  Op op = Op::Const;
  int64_t value = 0;
  std::string name;
  std::vector<PolicyExpr> args;
  /// 1-based column of the expression in its text.
  int column = 1;

  /// The expression written back (fully parenthesized binary operations).
  std::string str() const;
};

/// Parses \p text; every name must be one of \p names. Fails naming the
/// column and what was expected.
llvm::Expected<PolicyExpr> parsePolicyExpr(llvm::StringRef text,
                                           llvm::ArrayRef<std::string> names);

/// Evaluates \p expr, each name through \p lookup. Fails on a division or
/// modulo by zero, or a name \p lookup does not know.
llvm::Expected<int64_t> evaluatePolicyExpr(
    const PolicyExpr &expr,
    llvm::function_ref<std::optional<int64_t>(llvm::StringRef)> lookup);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_POLICY_EXPR_H
