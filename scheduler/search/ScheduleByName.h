//===- ScheduleByName.h - A schedule by kind name, with searches -*- C++
//-*-===//
//
// The front door of the scheduler: a kind by name, which is one of the fixed
// kinds (scheduler/kinds/), `auto` (AutoScheduler) or `exact` (ExactSearch),
// with the recomputation that fits the pipeline's capacity (Recompute). The
// passes, Python and the tools call `scheduleByName`.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_SCHEDULEBYNAME_H
#define STAGECRAFT_SCHEDULER_SEARCH_SCHEDULEBYNAME_H

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Policy.h"
#include "scheduler/search/Recompute.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

struct AutoProgress;

/// A schedule asked for by kind name, as `--pipe-schedule` and the Python
/// package take it: a fixed kind or "auto", with their options.
struct KindRequest {
  std::string kind = "1f1b";
  int chunks = 0;
  int folds = 2;
  /// Which forwards recompute; unset: auto with a capacity, else none
  /// (helix: full), as `defaultRecomputePolicy`.
  std::optional<RecomputePolicy> recompute;
  /// Per-rank limit on activation memory; 0: 1F1B's highest peak for auto,
  /// none for the fixed kinds (a fixed kind whose peak exceeds a given limit
  /// fails). The pipeline's capacity is checked besides it.
  double memoryLimit = 0.0;
  /// Seconds the auto search may take.
  double timeLimit = 10.0;
  /// Called while auto searches (may be empty).
  std::function<void(const AutoProgress &)> progress;
  /// auto: schedules to start from (AutoOptions::starts), microbatches by
  /// the problem's order.
  std::vector<Schedule> starts;
  /// What auto and the zero-bubble kinds minimize (kind=exact: the
  /// makespan only).
  Objective objective = Objective::Makespan;
  /// A policy auto tries beside its own search, or the one
  /// kind=policy-search searches: its parameters not in `fixed` are set by
  /// search (searchPolicy) within the memory limit.
  struct PolicyCandidate {
    Policy policy;
    PolicyParams fixed;
  };
  /// auto: these and, with `libraryPolicies`, the library's
  /// (examples/policies); kind=policy-search: exactly one.
  std::vector<PolicyCandidate> policies;
  bool libraryPolicies = true;
};

struct KindResult {
  Schedule schedule;
  /// The simulated timeline of `schedule`.
  Timeline timeline;
  /// The recomputation policy applied ("auto" may end as a uniform one).
  std::string recompute;
  /// auto only: the winning candidate, the lower bound and the
  /// memory-aware bound.
  std::string choice;
  double lowerBound = 0.0;
  double memoryAwareBound = 0.0;
  /// auto: the span bound (AutoResult::spanBound).
  double spanBound = 0.0;
  /// auto with `lengths`: the microbatch order it chose, position k runs
  /// the problem's microbatch `microbatchOrder[k]` (`schedule` and
  /// `timeline` index microbatches by position); empty: as given.
  std::vector<int> microbatchOrder;
};

/// \p problem with its microbatches in \p order (position k is microbatch
/// order[k]): only the lengths move.
Problem reorderedMicrobatches(const Problem &problem,
                              llvm::ArrayRef<int> order);

/// The schedule of \p problem for \p request, with its recomputation
/// planned. auto also tries the policies (each searched within its memory
/// limit: the one given, else 1F1B's highest peak, else the capacity) and
/// keeps the first best; its choice then reads "policy NAME k=v". With
/// `lengths`, auto also chooses the microbatch order: as given, longest first,
/// shortest first, and longest and shortest alternating, each searched for an
/// equal share of the time left (orders the time does not reach are skipped)
/// under the same memory limit (default: 1F1B's highest peak with the order as
/// given). unknown kinds, bad options, a fixed kind over its memory limit and a
/// plan over the pipeline's capacity fail with a message. With a capacity, auto
/// searches kind x recomputation: its own search (at its default limit, and at
/// the activation memory the capacity leaves) and every fixed kind that
/// applies, each with its recomputation planned; the fastest that fits wins.
llvm::Expected<KindResult> scheduleByName(const Problem &problem,
                                          const KindRequest &request);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_SCHEDULEBYNAME_H
