//===- Kinds.h - The schedule kinds and their registry ----------*- C++ -*-===//
//
// Every fixed schedule kind: its name (`ScheduleKind`, `scheduleKindName`),
// its generator (one file per kind in this folder) and the registry's entry
// point `generateSchedule`, which validates the problem, places the stages
// for the kind and returns a schedule that `verifySchedule` accepts. Each
// kind works for any ranks >= 1 and microbatches >= 1. The searches over
// kinds (auto, exact) sit above this folder, in scheduler/search/.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_KINDS_KINDS_H
#define STAGECRAFT_SCHEDULER_KINDS_KINDS_H

#include "scheduler/model/Schedule.h"
#include "scheduler/model/Simulator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <functional>
#include <string>

namespace stagecraft::pipe::sched {

enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved1F1B,
  ZBH1,
  ZBH2,
  ZBV,
  DualPipeV,
  Helix,
};

/// "gpipe", "1f1b", "interleaved-1f1b".
/// Where a kind puts stages on ranks: in order (each rank holds a contiguous
/// run of stages), looping (stage s on rank s mod ranks) or in a V (down
/// the ranks, then back up). A layer partition balances for this shape.
enum class StageShape { Contiguous, Loop, V };
StageShape stageShape(ScheduleKind kind);

/// Every kind, in the order of `ScheduleKind`.
llvm::ArrayRef<ScheduleKind> allScheduleKinds();
llvm::StringRef scheduleKindName(ScheduleKind kind);
/// Parses a kind name. Fails naming the known kinds.
llvm::Expected<ScheduleKind> parseScheduleKind(llvm::StringRef name);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  /// Stages per rank for interleaved-1f1b; 0 derives it as stages / ranks.
  int chunks = 0;
  /// helix: groups of ranks microbatches interleaved layer by layer, and
  /// whether backwards recompute their stage's forward.
  int folds = 2;
  bool recompute = true;
  /// What the kinds that choose among candidates (the zero-bubble kinds)
  /// minimize.
  Objective objective = Objective::Makespan;
};

/// Places the stages and generates the schedule of \p options.kind. Fails if
/// the problem is invalid or the kind cannot place its stages (for example
/// interleaved-1f1b with a stage count that is not ranks x chunks).
llvm::Expected<Schedule> generateSchedule(const Problem &problem,
                                          const ScheduleOptions &options);

/// Placement for GPipe and 1F1B: the user's pins, or else contiguous blocks
/// of stages, one block per rank in chain order. Fails if pinned stages do
/// not form contiguous blocks (only when \p requireContiguous).
llvm::Expected<std::vector<int>> placeContiguous(const Problem &problem,
                                                 bool requireContiguous);

/// Placement for interleaved schedules: stage s on rank s mod ranks. Fails if
/// the stage count is not ranks x \p chunks or pins disagree.
llvm::Expected<std::vector<int>> placeRoundRobin(const Problem &problem,
                                                 int chunks);

/// All forwards in (microbatch, stage) order, then all backwards. Valid for
/// any placement.
Schedule generateGPipe(const Problem &problem, llvm::ArrayRef<int> placement);

/// 1F1B over contiguous blocks: the rank holding block k warms up with
/// min(ranks - k - 1, microbatches) forwards, then alternates one forward and
/// one backward. Requires the placement of `placeContiguous`.
Schedule generateOneFOneB(const Problem &problem,
                          llvm::ArrayRef<int> placement);

/// The per-rank orders of a 1F1B-shaped schedule over contiguous blocks: the
/// rank holding block k runs \p warmup(k) forwards (clamped to [0, m]), then
/// alternates one forward and one backward of kind \p backwardKind (B, or
/// I when W is added separately), then drains the backwards.
std::vector<std::vector<Action>>
oneFOneBOrders(const Problem &problem, llvm::ArrayRef<int> placement,
               llvm::function_ref<int(int)> warmup, ActionKind backwardKind);

/// Megatron's warm-up depth of rank \p r in interleaved 1F1B (stages on
/// ranks round-robin, `stages / ranks` chunks).
int interleavedWarmup(const Problem &problem, int r);

/// The per-rank orders of an interleaved schedule on the round-robin
/// placement: rank r runs \p warmup(r) forwards (clamped), then one forward
/// and one backward of kind \p backwardKind in turn.
std::vector<std::vector<Action>>
interleavedOrders(const Problem &problem, llvm::function_ref<int(int)> warmup,
                  ActionKind backwardKind);

/// Megatron-LM's interleaved 1F1B with \p chunks stages per rank, extended
/// to any microbatch count: microbatches go in rounds of `ranks` (the last
/// round may be shorter) and a rank whose warm-up is too short to make
/// progress is given more warm-up forwards until the schedule is valid.
llvm::Expected<Schedule> generateInterleaved1F1B(const Problem &problem,
                                                 int chunks);

/// V placement: rank r hosts stages r and 2p - 1 - r. Fails unless there are
/// exactly 2 x ranks stages and pins agree.
llvm::Expected<std::vector<int>> placeVShape(const Problem &problem);

/// Per-rank peak memory of 1F1B on the contiguous placement of \p problem,
/// ignoring pins: the memory budget the zero-bubble kinds and `auto` default
/// to.
llvm::Expected<std::vector<double>> oneFOneBPeakMemory(const Problem &problem);

/// ZB-H1: split backward, W deferred into idle time, each rank's memory
/// limited to its 1F1B peak. Requires the placement of `placeContiguous`.
/// The zero-bubble kinds choose among candidates by \p objective.
llvm::Expected<Schedule>
generateZBH1(const Problem &problem, llvm::ArrayRef<int> placement,
             Objective objective = Objective::Makespan);

/// ZB-H2: as ZB-H1 with up to 2(p - k) - 1 microbatches in flight on the
/// k-th block, which removes the warm-up bubble.
llvm::Expected<Schedule>
generateZBH2(const Problem &problem, llvm::ArrayRef<int> placement,
             Objective objective = Objective::Makespan);

/// ZB-V: V placement, split backward, W deferred, every rank's memory
/// limited to the highest 1F1B peak of the same model.
llvm::Expected<Schedule> generateZBV(const Problem &problem,
                                     Objective objective = Objective::Makespan);

/// DualPipeV: V placement, overlapped forward+backward actions in the steady
/// state, split backward in warm-up and cool-down. Needs m >= 2p - 1 for its
/// shape and falls back to ZB-V's schedule below that.
llvm::Expected<Schedule> generateDualPipeV(const Problem &problem);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_KINDS_KINDS_H
