//===- LowerBound.h - Memory-aware makespan lower bound ---------*- C++ -*-===//
//
// A lower bound on the makespan of every schedule of a problem on a given
// placement whose live memory stays within a per-rank limit. Per stage, the
// k-th forward (I, W) to start cannot start before an earliest time (head),
// and the i-th from last cannot end later than a latest time before the end
// (tail): the chain of F through the stages, the chain of I back, one action
// at a time per rank, and memory: with a limit M on rank r, at most
// floor(M / A) microbatches can be between F and I of a stage s of r, A
// being the activation of s and of the stages of r before it (all live then),
// so the k-th F of s starts after the (k - K)-th I of s ends; counting also
// the weight_grad that microbatches between I and W keep, the k-th F waits
// for enough I and W to have ended that all of it fits. Each rank is
// then a one-machine problem with heads and tails whose preemptive optimum
// (Jackson's schedule) is a lower bound; the bound is the largest over ranks.
// Besides, with a limit: until its first I, a rank runs only forwards, all
// of whose activations are live together then, so it is busy for at most
// the forward work that fits the limit between its first forward's head
// and its first I's head; the idle this forces is added to its work.
// Overlapped F&B gains (DualPipe) are not modelled: schedules using them may
// end sooner.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_LOWERBOUND_H
#define STAGECRAFT_SCHEDULER_SEARCH_LOWERBOUND_H

#include "scheduler/model/Problem.h"

#include "llvm/ADT/ArrayRef.h"

#include <array>
#include <vector>

namespace stagecraft::pipe::sched {

/// The memory-aware lower bound of \p problem on \p placement with per-rank
/// limits \p memoryLimit (empty: no limit). Infinity when a limit is below
/// what one microbatch needs on its rank.
double memoryAwareLowerBound(const Problem &problem,
                             llvm::ArrayRef<int> placement,
                             llvm::ArrayRef<double> memoryLimit);

/// The round-trip span bound: a rank's span holds, from its first action
/// (at the latest the start of a forward of one of its stages u), the
/// forwards and links from u to any stage v that consumes u's output
/// (directly or not), all of v's forwards and input gradients (v runs one
/// action at a time, and the last of them cannot start before v's first
/// input arrives), the input gradients and links back from v to u, and u's
/// own backward of that microbatch (I and W). The largest over ranks and
/// pairs (u, v). With few microbatches per rank this is above every rank's
/// own work: the last stage's F and I alone then outlast the first rank's
/// work. It holds for every schedule, whatever its memory, and with
/// overlapped F&B (v's F and I count less their overlap gain); 0 with
/// lengths.
double roundTripSpanBound(const Problem &problem,
                          llvm::ArrayRef<int> placement);

/// The span bound with per-rank limits \p memoryLimit on activation memory
/// (empty: none): each rank's work plus the idle time no schedule within
/// the limits avoids before the rank's first I. Until then a rank can only
/// run forwards (a W needs its I), and only as many as its memory holds
/// with none freed; its first I waits at least for one of its forwards and
/// the round trip below it (the downstream F and I, and the links). So
/// rank r's span is at least work_r + max(0, gap_r - fits_r), fits_r being
/// the forward time its memory holds (a fractional knapsack over its
/// stages). Never above the largest per-rank span of any schedule within
/// the limits that does not recompute (a recomputed forward keeps less, as
/// auto's candidates never do); without limits, or with devices of different
/// speeds, lengths or overlapped F&B, it is the plain span bound (the rank's
/// work). Never below roundTripSpanBound.
double memoryAwareSpanBound(const Problem &problem,
                            llvm::ArrayRef<int> placement,
                            llvm::ArrayRef<double> memoryLimit);

/// The order statistics the bound is built from, for a problem without
/// devices or lengths: per stage and action type (0 F, 1 I, 2 W), the
/// earliest start of the k-th action of that type to start (head) and the
/// least time between the end of the i-th from last and the makespan
/// (tail). They hold for every schedule within the limits, so also for the
/// actions a partial schedule has left: the branch-and-bound cuts with them.
struct OrderStatistics {
  /// False when a limit is below what one microbatch needs on its rank.
  bool feasible = true;
  int microbatches = 0;
  /// [type][s * microbatches + k]
  std::array<std::vector<double>, 3> heads, tails;
  /// [type * stages + s]
  std::vector<double> costs;

  double head(int type, int s, int k) const {
    return heads[type][static_cast<size_t>(s) * microbatches + k];
  }
  double tail(int type, int s, int i) const {
    return tails[type][static_cast<size_t>(s) * microbatches + i];
  }
  double cost(int type, int s) const {
    return costs[static_cast<size_t>(type) * (costs.size() / 3) + s];
  }
};

OrderStatistics orderStatistics(const Problem &problem,
                                llvm::ArrayRef<int> placement,
                                llvm::ArrayRef<double> memoryLimit);

/// One job of a one-machine problem: released at `head`, runs `cost`, then
/// needs `tail` more before the end.
struct OneMachineJob {
  double head, cost, tail;
};

/// The makespan (largest completion plus tail) of Jackson's preemptive
/// schedule of \p jobs, optimal for the preemptive relaxation and so a lower
/// bound for every non-preemptive order.
double jacksonBound(std::vector<OneMachineJob> jobs);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_LOWERBOUND_H
