//===- ScheduleLookup.h - Schedules with their pipelines --------*- C++ -*-===//
//
// Shared by the passes and the translations that read schedules: finds each
// `pipe.schedule` of a module with its pipeline and reads both into the
// scheduler model (the op verifier has already checked them).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_PASSES_SCHEDULELOOKUP_H
#define STAGECRAFT_PASSES_SCHEDULELOOKUP_H

#include "dialect/PipeModel.h"

#include "scheduler/lower/Plan.h"
#include "scheduler/model/Simulator.h"

#include "mlir/IR/BuiltinOps.h"

namespace stagecraft::pipe {

/// Calls \p fn with every schedule op of \p module and its model; stops at
/// the first failure.
mlir::LogicalResult forEachSchedule(
    mlir::ModuleOp module,
    llvm::function_ref<mlir::LogicalResult(ScheduleOp, const ScheduleModel &)>
        fn);

/// Simulates \p model; emits the scheduler's error at \p op on failure.
mlir::FailureOr<sched::Timeline> simulateSchedule(ScheduleOp op,
                                                  const ScheduleModel &model);

/// A schedule's step inside its pipeline's data parallelism.
struct DataParallelStep {
  sched::DataParallelTimeline timeline;
  /// sched::dataParallelLowerBound at the pipeline's compute bound.
  double bound = 0.0;
};

/// The step of \p model (simulated as \p timeline) with its collectives,
/// the reductions released where the schedule's dp_placement says; nullopt
/// when the pipeline has no data_parallel(...). Errors are emitted at
/// \p op.
mlir::FailureOr<std::optional<DataParallelStep>>
simulateDataParallelOf(ScheduleOp op, const ScheduleModel &model,
                       const sched::Timeline &timeline);

/// The communication program of \p model: the one written in the IR, or
/// else the lowering of its actions. Verified (channels, deadlock freedom);
/// errors are emitted at \p op's ops.
mlir::FailureOr<sched::Program> programOf(ScheduleOp op,
                                          const ScheduleModel &model);

/// The runtime plan of \p op (see `sched::buildPlan`).
mlir::FailureOr<sched::Plan>
planFromSchedule(ScheduleOp op, const ScheduleModel &model, int64_t unitBytes,
                 sched::BufferStats *stats = nullptr,
                 int64_t minMessageBytes = 64);

} // namespace stagecraft::pipe

#endif // STAGECRAFT_PASSES_SCHEDULELOOKUP_H
