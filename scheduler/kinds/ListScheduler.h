//===- ListScheduler.h - Memory-aware greedy list scheduling ----*- C++ -*-===//
//
// Builds per-rank orders by simulating the pipeline and letting each free
// rank pick one ready action by a policy: backward before forward, weight
// gradients deferred into idle time, a per-rank memory limit on forwards.
// The zero-bubble kinds (ZB-H1, ZB-H2, ZB-V) are policies of this scheduler,
// and `auto` searches over policies and placements. Works for any placement
// and any ranks/microbatches; the result is always verified before return.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_KINDS_LISTSCHEDULER_H
#define STAGECRAFT_SCHEDULER_KINDS_LISTSCHEDULER_H

#include "scheduler/model/Schedule.h"

#include <limits>
#include <vector>

namespace stagecraft::pipe::sched {

struct ListPolicy {
  /// Per rank: the most memory that may be live when a forward starts. A
  /// forward of a rank's non-last stage also reserves room for the same
  /// microbatch's forwards on the rank's later stages, so a started
  /// microbatch can always go on. Empty: no limit.
  std::vector<double> memoryLimit;
  /// Split backward (I, then W) or the fused B.
  bool splitBackward = true;
  /// Run a ready I/B before a ready F.
  bool backwardFirst = true;
  /// Run W only when neither F nor I is ready (zero-bubble); otherwise W
  /// runs as soon as it is ready, before F and I.
  bool deferWeights = true;
  /// Among ready forwards on a rank with several stages, prefer the later
  /// stage (depth first: finishes microbatches, frees memory sooner).
  bool laterStageFirst = true;
  /// Per rank: the most microbatches whose forward on the rank's first stage
  /// has run while their input gradient there (I or B) has not: the warm-up
  /// depth. Memory still held for deferred W counts against memoryLimit.
  /// Empty: no limit.
  std::vector<int> maxInFlight;
  /// Per rank: a fixed order of its F and I (or B) actions. When given, a
  /// rank runs the next action of its order once it is ready and memory
  /// admits it, and otherwise fills the wait with a deferred W: the
  /// zero-bubble way of adding W to a 1F1B-like order.
  std::vector<std::vector<Action>> backbone;
};

/// Greedy list schedule of \p problem on \p placement under \p policy.
/// Fails if a memory limit is below what one microbatch needs on a rank, or
/// if the policy leaves a rank unable to progress.
llvm::Expected<Schedule> listSchedule(const Problem &problem,
                                      llvm::ArrayRef<int> placement,
                                      const ListPolicy &policy);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_KINDS_LISTSCHEDULER_H
