//===- DataParallelSearch.h - Schedules chosen with their reductions -*- C++
//-*-===//
//
// A pipeline inside data parallelism (scheduler/model/DataParallel.h): the
// step includes the collectives the schedule does not hide. The baselines
// place the reductions by rule on a kind's schedule (torch's after the last
// backward, Megatron's bucketed overlap); `planDataParallel` chooses the
// schedule (every kind within the memory limit, auto's, and each with its
// weight gradients run right after their input gradients, which finishes a
// stage's gradient early) together with the placement and the bucket size,
// minimizing the step.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_DATAPARALLELSEARCH_H
#define STAGECRAFT_SCHEDULER_SEARCH_DATAPARALLELSEARCH_H

#include "scheduler/model/DataParallel.h"
#include "scheduler/search/ScheduleByName.h"

namespace stagecraft::pipe::sched {

struct DataParallelPlan {
  /// Where the schedule came from ("1f1b", "auto (zb-h1)", "zb-h1, W
  /// after I") and how its reductions are placed ("torch", "bucketed
  /// 80 MB").
  std::string schedule, placement;
  Schedule plan;
  /// auto with `lengths`: the microbatch order its schedule runs (position
  /// k is the problem's microbatch microbatchOrder[k], as
  /// KindResult::microbatchOrder); `plan` and `timeline` index positions.
  /// Empty: as given.
  std::vector<int> microbatchOrder;
  Timeline timeline;
  DataParallelOptions options;
  DataParallelTimeline dp;
  /// dataParallelLowerBound at the pipeline's compute bound.
  double bound = 0.0;
};

/// Megatron-LM's default bucket: 40 M elements, here of 2 bytes.
constexpr double kMegatronBucketBytes = 40e6 * 2;

/// The step of \p schedule inside \p dp under \p options, as a plan.
llvm::Expected<DataParallelPlan>
evaluateDataParallel(const Problem &problem, const Schedule &schedule,
                     const DataParallel &dp, const DataParallelOptions &options,
                     std::string name);

/// The schedule with each W moved right after its I on its rank (the same
/// work; each stage's gradient done as early as its I allows).
Schedule weightsAfterInputs(const Schedule &schedule);

/// The fastest step over the candidates: every fixed kind within the
/// memory limit (\p request's, default 1F1B's highest peak) and auto's
/// schedule (\p request with kind auto), each as it is and with its W
/// after its I, each with its reductions after the last backward and
/// bucketed at the stage's gradient / 2, 4, 8, 16 and at Megatron's
/// default (\p buckets false: after the last backward only, a whole
/// stage's reduction, as torch's runtime reduces). Every plan tried goes to
/// \p tried when given. Fails when no candidate fits.
llvm::Expected<DataParallelPlan> planDataParallel(
    const Problem &problem, const DataParallel &dp, const KindRequest &request,
    std::vector<DataParallelPlan> *tried = nullptr, bool buckets = true);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_DATAPARALLELSEARCH_H
