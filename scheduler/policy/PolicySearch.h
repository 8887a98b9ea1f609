//===- PolicySearch.h - A policy's parameters set by search -----*- C++ -*-===//
//
// The search over a policy's parameters (`kind=policy-search`, and auto's
// policy candidates): every combination of the values of the parameters
// not held fixed, each instantiated for the problem and simulated; the
// best by the objective among those within the memory limit wins.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_POLICY_POLICYSEARCH_H
#define STAGECRAFT_SCHEDULER_POLICY_POLICYSEARCH_H

#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Policy.h"

namespace stagecraft::pipe::sched {

struct PolicySearchResult {
  Schedule schedule;
  Timeline timeline;
  /// Every parameter's value, the fixed ones included.
  PolicyParams params;
  /// Combinations instantiated, and those of them within the limit.
  int tried = 0;
  int fitting = 0;
};

/// The best schedule \p policy gives \p problem over every combination of
/// its parameters' values (whole ranges; those in \p fixed held), each
/// rank's peak within \p memoryLimit (<= 0: no limit), by \p objective. A
/// tie goes to the combination found first (parameters in declaration
/// order, each from its low end). Fails when more than \p maxPoints
/// combinations would be tried, when a fixed value names no parameter or is
/// outside its range, when no combination instantiates (with the first
/// reason), or when none fits (naming the least memory any needed).
llvm::Expected<PolicySearchResult>
searchPolicy(const Policy &policy, const Problem &problem,
             const PolicyParams &fixed = {}, double memoryLimit = 0.0,
             Objective objective = Objective::Makespan,
             int64_t maxPoints = 4096);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_POLICY_POLICYSEARCH_H
