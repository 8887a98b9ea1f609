//===- Generators.h - Schedule generators -----------------------*- C++ -*-===//
//
// The fixed schedule recipes: GPipe, 1F1B and interleaved 1F1B, all with the
// fused backward B. Each works for any ranks >= 1 and microbatches >= 1. The
// entry point `generateSchedule` validates the problem, places the stages for
// the kind and returns a schedule that `verifySchedule` accepts.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_GENERATORS_H
#define STAGECRAFT_SCHEDULER_GENERATORS_H

#include "scheduler/Schedule.h"

#include "llvm/ADT/ArrayRef.h"

namespace stagecraft::pipe::sched {

enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved1F1B,
};

/// "gpipe", "1f1b", "interleaved-1f1b".
llvm::StringRef scheduleKindName(ScheduleKind kind);
/// Parses a kind name. Fails naming the known kinds.
llvm::Expected<ScheduleKind> parseScheduleKind(llvm::StringRef name);

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  /// Stages per rank for interleaved-1f1b; 0 derives it as stages / ranks.
  int chunks = 0;
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

/// Megatron-LM's interleaved 1F1B with \p chunks stages per rank, extended
/// to any microbatch count: microbatches go in rounds of `ranks` (the last
/// round may be shorter) and a rank whose warm-up is too short to make
/// progress is given more warm-up forwards until the schedule is valid.
llvm::Expected<Schedule> generateInterleaved1F1B(const Problem &problem,
                                                 int chunks);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_GENERATORS_H
