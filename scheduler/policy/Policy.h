//===- Policy.h - Schedule families users write ------------------*- C++
//-*-===//
//
// A policy describes a schedule family, not a schedule: it instantiates for
// whatever pipeline it is applied to (its ranks, microbatches, stages and
// chunks) into the same explicit Schedule the kinds produce. The text form,
// one statement a line (`#` starts a comment):
//
//   policy NAME                      the first statement
//   placement loop | v | EXPR        the rank of `stage` (names: stage,
//                                    ranks, chunks, stages); default loop
//   group EXPR                       microbatches a rank forwards through
//                                    all its stages before the next group
//                                    (chunks > 1); default ranks
//   backwards reversed | in-order    microbatch order of each group's
//                                    backwards (default in-order)
//   warmup EXPR                      phases: forwards before the pattern
//   steady TOKENS                    phases: the repeating pattern over
//                                    F, B, I, W and X (the next forward
//                                    overlapped with the next backward);
//                                    without forwards left it drains the
//                                    backwards
//   rule KIND [when EXPR]            priority rules, tried in order: a
//                                    rank starts the first KIND (F, B, I or
//                                    W) that is ready and whose condition
//                                    holds
//   param NAME LO..HI [= DEFAULT]    a parameter a search may set
//   cap EXPR                         in-flight activations per rank
//   requires EXPR                    where the family applies
//
// Names every expression reads: rank, ranks, microbatches, chunks, stages
// and the parameters; a rule's condition also stage, microbatch (of the
// action it would start), forwards_issued, backwards_done and in_flight
// (this rank's counters: forwards started, backwards (B or I) started,
// forwards whose activations are not yet freed by a B or W). Phases give a
// static order; rules list-schedule on the problem's costs. Together, the
// phases order F and the kinds of their pattern and the rules the kinds it
// leaves out (W after `steady F I`): a rank starts its order's next action
// once it is ready and the cap admits it, and otherwise fills the wait with
// what a rule allows.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_POLICY_POLICY_H
#define STAGECRAFT_SCHEDULER_POLICY_POLICY_H

#include "scheduler/model/Schedule.h"
#include "scheduler/policy/Expr.h"

#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

struct Policy {
  std::string name;
  enum class Placement { Loop, V, Expr };
  Placement placement = Placement::Loop;
  std::optional<PolicyExpr> placementExpr;
  std::optional<PolicyExpr> group;
  /// Each group's backwards from its last microbatch to its first.
  bool backwardsReversed = false;
  /// `forwards by KEY`, `backwards by KEY`: each rank's forwards (its
  /// backwards) in ascending KEY over (rank, stage, microbatch, chunk: the
  /// stage's index among the rank's), ties in the groups' order.
  std::optional<PolicyExpr> forwardKey, backwardKey;
  /// Phases.
  std::optional<PolicyExpr> warmup;
  std::vector<ActionKind> steady;
  /// `defer W EXPR`: in the phases, a W runs only while more than EXPR
  /// input gradients of the rank wait for theirs (W trails I by EXPR, as
  /// torch's zero-bubble orders do); the rest run after the last I.
  std::optional<PolicyExpr> deferW;
  /// Priority rules, in order.
  struct Rule {
    ActionKind kind;
    std::optional<PolicyExpr> when;
    int line = 0;
  };
  std::vector<Rule> rules;
  struct Param {
    std::string name;
    int64_t lo = 0, hi = 0, value = 0;
  };
  std::vector<Param> params;
  std::optional<PolicyExpr> cap;
  std::vector<PolicyExpr> requirements;
  /// The line of each requirement.
  std::vector<int> requirementLines;
  /// Each statement's line, for messages ("warmup" -> 3).
  std::map<std::string, int> lines;
};

/// Parses a policy's text. Fails naming the line and column of what is
/// wrong: an unknown statement, name or action kind, a malformed
/// expression, an empty parameter range, a policy with neither phases nor
/// rules, or a rule beside phases for a kind the phases order.
llvm::Expected<Policy> parsePolicy(llvm::StringRef text);

/// Parameter values by name; a parameter not given takes its default.
using PolicyParams = std::map<std::string, int64_t>;

/// Parameter values as `NAME:VALUE` pairs separated by commas
/// ("offset:2,depth:1"); fails naming a pair that is not NAME:INTEGER.
llvm::Expected<PolicyParams> parsePolicyParams(llvm::StringRef text);

/// The policy's name and each parameter's value ("zb offset=2"), as
/// schedules record the choice; a parameter not in \p params takes its
/// default.
std::string describePolicyChoice(const Policy &policy,
                                 const PolicyParams &params);

/// Whether \p problem is inside the policy's `requires` (false, with the
/// failing requirement in \p why, when not).
llvm::Expected<bool> policyApplies(const Policy &policy, const Problem &problem,
                                   const PolicyParams &params,
                                   std::string *why = nullptr);

/// The schedule \p policy gives \p problem, verified. Fails, naming the
/// point (ranks, microbatches), when the problem is outside `requires`,
/// when a parameter is out of its range, when an expression divides by
/// zero, when a cap is below one activation, or when a rank can start
/// nothing while work remains (naming the rank, the actions it could
/// start and what each waits for). Never loops forever.
llvm::Expected<Schedule> instantiatePolicy(const Policy &policy,
                                           const Problem &problem,
                                           const PolicyParams &params = {});

/// A family of pipelines: every (ranks, microbatches, chunks) in the
/// inclusive ranges, each with ranks x chunks stages of \p stage's costs.
struct PolicyFamily {
  int ranksLo = 2, ranksHi = 8;
  int microbatchesLo = 1, microbatchesHi = 32;
  int chunksLo = 1, chunksHi = 1;
  Stage stage;
  double latency = 0.0;
};

/// What verifying a family found.
struct PolicyFamilyReport {
  /// Points instantiated and verified.
  int held = 0;
  /// Points outside the policy's requires, skipped.
  int skipped = 0;
};

/// Instantiates \p policy at every point of \p family and verifies each
/// schedule: dependencies and deadlock freedom of the compute order, then
/// of the lowered communication (every send matched by its receive, no
/// cycle of blocking receives). Fails at the first failing point, naming
/// it and the reason; points outside `requires` are skipped and counted.
llvm::Expected<PolicyFamilyReport>
verifyPolicyFamily(const Policy &policy, const PolicyFamily &family,
                   const PolicyParams &params = {});

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_POLICY_POLICY_H
