//===- Recompute.h - Recomputation chosen with the schedule -----*- C++ -*-===//
//
// Which forwards drop their activation and re-derive it in the backward, so
// that every rank's peak (its stages' `params` plus its live activations)
// fits the pipeline's capacity. A rank's memory over its order depends only
// on that order, not on timing, and recomputing a forward never raises it
// anywhere, so each rank is fitted on its own: while the rank is over its
// capacity, the forwards live at its peak that stay in flight longest are
// recomputed, each at the level (selective, then full) that saves memory
// most cheaply. The mix is then compared with uniform full and selective
// recomputation, and the fastest that fits wins.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_RECOMPUTE_H
#define STAGECRAFT_SCHEDULER_SEARCH_RECOMPUTE_H

#include "scheduler/model/Simulator.h"

#include <optional>
#include <string>

namespace stagecraft::pipe::sched {

/// What `recompute=` asks for. None, Full and Selective apply to every
/// (stage, microbatch) (Selective only where the stage offers it; the
/// others keep everything); Auto chooses per (stage, microbatch) the
/// cheapest mix that fits the capacity (None without a capacity).
enum class RecomputePolicy { None, Full, Selective, Auto };

/// "none", "full", "selective", "auto".
llvm::StringRef recomputePolicyName(RecomputePolicy policy);
std::optional<RecomputePolicy> parseRecomputePolicy(llvm::StringRef name);

/// The policy `recompute=` defaults to: auto when the pipeline has a
/// capacity, else none (\p kindDefault when given: helix's full).
RecomputePolicy defaultRecomputePolicy(
    const Problem &problem,
    std::optional<RecomputePolicy> kindDefault = std::nullopt);

/// Per rank: its peak memory (params + activations), as the simulator
/// counts it, for \p schedule's orders and recomputation. Needs no timing.
std::vector<double> peakMemoryByOrder(const Problem &problem,
                                      const Schedule &schedule);

/// Fails, naming the first rank whose peak in \p timeline (params +
/// activations) is above the pipeline's capacity, its peak and capacity.
llvm::Error checkCapacity(const Problem &problem, const Timeline &timeline);

struct RecomputeOutcome {
  Timeline timeline;
  /// The policy that won for auto ("auto" when the per-microbatch mix did,
  /// or "full"/"selective" when a uniform choice was faster).
  std::string chosen;
};

/// Sets \p schedule.recompute for \p policy and checks every rank's peak
/// against the capacity. Fails, naming the rank, its peak, its capacity and
/// what would be needed, when the result does not fit: for None, Full and
/// Selective the message says whether auto would fit; for Auto, that even
/// full recomputation does not. \p schedule must be valid.
llvm::Expected<RecomputeOutcome> planRecomputation(const Problem &problem,
                                                   Schedule &schedule,
                                                   RecomputePolicy policy);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_RECOMPUTE_H
