//===- CostFit.h - Costs fitted to measured computes -------------*- C++
//-*-===//
//
// What a traced run says about the costs the simulator should use, whatever
// runtime ran it (stagecraft-run's executor, or torch's through
// stagecraft.torch): each stage's F, I, W and fused B as the medians (or
// means) of its measured computes, each rank's per-compute overhead folded
// into them, and the time a message takes between ranks (the link
// latency), from the receivers that sat idle waiting for it; then one
// stretch of every cost, so that the measured steps, replayed in the order
// their ranks ran them, take the time they took.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_COSTFIT_H
#define STAGECRAFT_SCHEDULER_MODEL_COSTFIT_H

#include "scheduler/model/Problem.h"
#include "scheduler/model/Schedule.h"

#include "llvm/Support/Error.h"

#include <map>
#include <vector>

namespace stagecraft::pipe::sched {

/// One compute as a runtime measured it.
struct MeasuredCompute {
  int rank = 0;
  /// The training step it belongs to (any numbering; equal within a step).
  int step = 0;
  /// Forward, BackwardInput, BackwardWeight or Backward.
  Action action;
  /// Milliseconds, on one time axis for all ranks.
  double start = 0.0, end = 0.0;
  /// Milliseconds of the runtime's own work this compute brought with it
  /// (after it, until the rank's next compute or wait: the loss, posting
  /// its sends), when the runtime attributes its overhead per compute;
  /// its mean per stage and kind (which keeps the whole of it: it comes in
  /// bursts) joins that cost.
  double overhead = 0.0;
  /// This compute and its rank's next one ran as one action of the plan,
  /// an overlapped F&B (torch runs its halves one after the other): the
  /// replay of the step (FitOptions::reproduce) runs them as that action.
  bool overlapsNext = false;
};

struct CostFit {
  /// Per stage, in milliseconds: the median (FitOptions::statistic)
  /// measured forward, backward-input, backward-weight and fused backward,
  /// each with its rank's per-compute overhead and the mean of its
  /// computes' own overhead added, before the stretch; 0 where the run had
  /// no such compute.
  std::vector<double> forward, backwardInput, backwardWeight, backward;
  /// Computes measured per stage.
  std::vector<int> samples;
  /// The median delay, in milliseconds, from the end of a compute to the
  /// start of its consumer on another rank, over the consumers whose rank
  /// was idle waiting for it; 0 when none was.
  double latency = 0.0;
  /// Milliseconds of a compute's own overhead per message it sends to
  /// another rank: the mean own overhead of the computes that send such
  /// messages, less that of those that send none, per message; 0 when
  /// the computes carry no own overhead or one of the groups is empty.
  /// The costs above hold the rest.
  double messageOverhead = 0.0;
  /// Milliseconds a compute fed from another rank waits before it starts
  /// even when its input was there before its rank was free (the median
  /// of those waits, less the median wait of the computes fed on their own
  /// rank); 0 when none was, or they wait no longer.
  double receiveOverhead = 0.0;
  /// The factor every compute's cost above is multiplied by (in
  /// withFittedCosts) so that the simulated makespans of the measured
  /// steps, each replayed in the order its ranks ran it, meet the times
  /// those steps took (their median ratio is 1): what the parts above miss
  /// (stalls a median leaves out, work before the first compute and after
  /// the last) spread over the computes. Where the computes alone cannot
  /// meet the steps (the latency and the overheads above already exceed
  /// them), those are multiplied by it too, in this fit. 1 when not asked
  /// for or when no step could be replayed.
  double stretch = 1.0;
  /// Steps replayed to fit the stretch, and the median of their simulated
  /// makespan over their measured time before it.
  int replayed = 0;
  double unstretchedRatio = 1.0;
  /// Per rank: milliseconds per compute spent neither computing nor
  /// waiting (as given).
  std::vector<double> overhead;
  /// Steps measured.
  int steps = 0;
};

/// How a stage's measured computes of one kind make its cost.
enum class CostStatistic {
  /// Their median: the typical compute, deaf to the stalls that hit a few.
  Median,
  /// Their mean: the stalls that hit a few computes spread over all, so
  /// that the costs add up to the measured work.
  Mean,
};

/// How the costs are fitted.
struct FitOptions {
  CostStatistic statistic = CostStatistic::Median;
  /// Stretch the costs so that the simulator reproduces the measured steps
  /// (CostFit::stretch).
  bool reproduce = true;
  /// Milliseconds each step took as the runtime saw it (its step() call,
  /// by step number); a step not listed took its compute window, from its
  /// first compute's start to its last one's end.
  std::map<int, double> stepTimes;
};

/// Fits the costs of \p problem's stages (its shape: stages, their inputs,
/// microbatches) to \p computes, which may come from runs of different
/// plans and placements (give each its own step numbers); \p overhead is
/// each rank's milliseconds per compute outside computes and waits.
/// Fails naming the stage when one has no measured forward, or neither a
/// fused backward nor both halves.
llvm::Expected<CostFit> fitCosts(const Problem &problem,
                                 const std::vector<MeasuredCompute> &computes,
                                 const std::vector<double> &overhead,
                                 const FitOptions &options = FitOptions());

/// \p fit with its stretch applied to every per-stage cost (forward,
/// backward-input, backward-weight, fused backward), and a stretch of 1.
CostFit stretched(CostFit fit);

/// \p problem with \p fit's costs, stretched: each stage's F, I and W (a stage
/// measured only fused splits its B in the ratio of \p problem's own I and
/// W), its fused backward where one was measured (else one \p problem
/// already has, scaled as its I + W were), the fitted latency (with links:
/// each link's latency, the fitted delay less the stages' mean output over
/// its bandwidth, which it keeps), message overhead and receive overhead.
Problem withFittedCosts(Problem problem, const CostFit &fit);

/// A fused backward \p backward split into (I, W) in the ratio of \p
/// backwardInput to \p backwardWeight (halves when both are 0).
std::pair<double, double> splitBackward(double backward, double backwardInput,
                                        double backwardWeight);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_COSTFIT_H
