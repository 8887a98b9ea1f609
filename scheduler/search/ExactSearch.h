//===- ExactSearch.h - Exact makespan search for small problems -*- C++ -*-===//
//
// A branch-and-bound over the per-rank orders of F, I and W on a fixed
// placement under per-rank memory limits: the reference the heuristics are
// measured against. Actions are appended in order of their start times (ties
// in any order), each starting as early as its rank and its inputs allow, so
// every schedule the simulator can produce is enumerated; microbatches are
// interchangeable, so forwards of the first stage go in microbatch order. A
// branch is cut when, for some rank, Jackson's preemptive schedule of its
// remaining actions (each with the head and tail of its order statistic in
// the memory-aware bound, started no earlier than the current time) cannot
// beat the best makespan found; the search ends when the memory-aware lower
// bound is reached. The search is exponential: it states
// whether it proved optimality or stopped at its time or node limit.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_EXACTSEARCH_H
#define STAGECRAFT_SCHEDULER_SEARCH_EXACTSEARCH_H

#include "scheduler/model/Schedule.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <limits>
#include <optional>
#include <string>

namespace stagecraft::pipe::sched {

struct ExactOptions {
  /// Per-rank memory limit; empty: none.
  std::vector<double> memoryLimit;
  /// Wall-clock limit in seconds.
  double timeLimit = 10.0;
  /// Nodes searched before stopping (0: no limit); unlike the time limit,
  /// it stops at the same place on every machine.
  long long maxNodes = 0;
  /// A schedule to start from (its makespan is the first upper bound);
  /// ignored unless it is on the searched placement and fits the limits.
  std::optional<Schedule> initial;
  /// Only schedules faster than this are searched for (with `initial`, the
  /// smaller of the two bounds the search).
  double upperBound = std::numeric_limits<double>::infinity();
  /// Cut branches with the memory-aware bound's order statistics at every
  /// node (off: only each rank's remaining work); for comparison.
  bool orderStatisticCuts = true;
};

struct ExactResult {
  /// The best schedule found (split backward). Empty when `upperBound` was
  /// given and nothing faster was found: `makespan` is then infinity and
  /// `optimal` says whether the search proved that none exists.
  Schedule schedule;
  double makespan = 0.0;
  /// The memory-aware lower bound used to stop early.
  double lowerBound = 0.0;
  /// True when the search finished: `makespan` is optimal for this
  /// placement and memory limit.
  bool optimal = false;
  long long nodes = 0;
};

/// What the searches over per-rank orders (exact, ilp) model: a chain of
/// stages with F, I and W only, microbatches of one length and a plain
/// latency. The error names \p who ("exact search", "ILP") and what is
/// missing.
llvm::Error checkOrderSearchSupported(const Problem &problem,
                                      llvm::StringRef who);

/// Searches the orders of \p problem on \p placement. Fails if the problem
/// is invalid, a stage has overlapped or attention costs, or no schedule
/// fits the memory limits.
llvm::Expected<ExactResult> exactSchedule(const Problem &problem,
                                          llvm::ArrayRef<int> placement,
                                          const ExactOptions &options);

/// `kind=exact`: the exact search over every placement `auto` searches,
/// under one memory limit (<= 0: 1F1B's highest peak), within \p timeLimit
/// seconds in all. A quarter of the time goes to `auto`, whose schedule is
/// the first upper bound; then the placements in order of their
/// memory-aware bound, each given an equal share of the time left, skipping
/// those whose bound cannot beat the best found.
struct ExactOverPlacements {
  Schedule schedule;
  double makespan = 0.0;
  /// The smallest memory-aware bound over the placements.
  double memoryAwareBound = 0.0;
  /// Proven optimal over all of auto's placements at this memory limit.
  bool optimal = false;
  /// The winning schedule's source: auto's candidate name, or the
  /// placement the exact search improved on.
  std::string found;
  long long nodes = 0;
  int placementsProven = 0, placements = 0;
};

llvm::Expected<ExactOverPlacements> exactOverPlacements(const Problem &problem,
                                                        double memoryLimit,
                                                        double timeLimit);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_EXACTSEARCH_H
