//===- AutoScheduler.h - Search for the best schedule under memory -*- C++
//-*-===//
//
// `kind=auto`: searches placements (contiguous blocks, round-robin, V) and
// orders (every fixed kind, zero-bubble backbones with per-rank warm-up
// depths, greedy list policies) for the smallest simulated makespan whose
// peak memory stays within a per-rank limit on every rank. The fixed kinds
// are among the candidates, so the result is never worse than the best of
// them that fits the limit.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_AUTOSCHEDULER_H
#define STAGECRAFT_SCHEDULER_SEARCH_AUTOSCHEDULER_H

#include "scheduler/model/Schedule.h"
#include "scheduler/model/Simulator.h"

#include <functional>
#include <string>

namespace stagecraft::pipe::sched {

struct AutoProgress {
  int candidates = 0;
  double seconds = 0.0;
  double bestMakespan = 0.0;
  double lowerBound = 0.0;
  std::string bestName;
};

struct AutoOptions {
  /// Per-rank memory limit; <= 0 means the highest 1F1B peak of the problem.
  double memoryLimit = 0.0;
  /// Wall-clock budget of the search in seconds.
  double timeLimit = 10.0;
  /// The local search over per-rank orders stops after this many moves
  /// (each verified and simulated) without a shorter step, after five
  /// times as many in all, or at the time limit.
  int maxLocalSteps = 20000;
  /// Called every `progressInterval` seconds while the search runs, and once
  /// at the end if it ran longer than that.
  std::function<void(const AutoProgress &)> progress;
  double progressInterval = 1.0;
  /// Schedules to start from (a standing plan re-planned for new costs,
  /// e.g. new microbatch lengths): each is a candidate like the fixed
  /// kinds, so the result is never slower than one that fits.
  std::vector<Schedule> starts;
  /// What the search minimizes: every comparison between candidates, the
  /// local search and the bounds it prunes with follow it. kind=exact and
  /// auto's exact step optimize the makespan only (skipped for `Span`).
  Objective objective = Objective::Makespan;
};

struct AutoResult {
  Schedule schedule;
  /// Which candidate won, e.g. "zb-h1" or "backbone contiguous +2".
  std::string name;
  double makespan = 0.0;
  /// The winner's largest per-rank span, and the objective's value.
  double span = 0.0;
  double value = 0.0;
  Objective objective = Objective::Makespan;
  /// The smallest `spanLowerBound` over the placements the search
  /// considers: no schedule on them has a smaller span.
  double spanBound = 0.0;
  /// `lowerBound(problem)`: chain delay plus work, memory ignored.
  double lowerBound = 0.0;
  /// The smallest `memoryAwareLowerBound` at `memoryLimit` over the
  /// placements the search considers.
  double memoryAwareBound = 0.0;
  double memoryLimit = 0.0;
  int candidates = 0;
};

/// Max over ranks of (forward chain delay to the rank's first stage + the
/// rank's total work) for \p placement: no schedule on that placement ends
/// sooner.
double lowerBound(const Problem &problem, llvm::ArrayRef<int> placement);

/// Max over ranks of the rank's total work on \p placement (with each
/// stage's overlap gain taken off, as pairing an F with a B can save at
/// most that), and the round trip (roundTripSpanBound): every rank's span
/// covers both, so no schedule on that placement has a smaller largest
/// span, whatever the memory.
double spanLowerBound(const Problem &problem, llvm::ArrayRef<int> placement);

/// The smallest `lowerBound` over the placements `auto` considers for
/// \p problem (the user's pins only, when pinned).
double lowerBound(const Problem &problem);

/// A placement `auto` searches, with its name in `AutoResult::name`.
struct NamedPlacement {
  std::string name;
  std::vector<int> placement;
};

/// The placements `auto` searches for \p problem (pinned stages: theirs).
std::vector<NamedPlacement> candidatePlacements(const Problem &problem);

/// Runs the search. Fails if no candidate fits the memory limit (naming the
/// limit and the smallest peak found) or the problem is invalid.
llvm::Expected<AutoResult> autoSchedule(const Problem &problem,
                                        const AutoOptions &options);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_AUTOSCHEDULER_H
