//===- PlanBuffers.cpp - --pipe-plan-buffers ------------------------------===//
//
// Plans each schedule's buffers with the scheduler library and records slots
// and bytes per rank against the naive one buffer per microbatch.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ScheduleLookup.h"

#include "mlir/IR/Builders.h"

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPEPLANBUFFERSPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

namespace {
struct PlanBuffersPass
    : public stagecraft::pipe::impl::PipePlanBuffersPassBase<PlanBuffersPass> {
  using PipePlanBuffersPassBase::PipePlanBuffersPassBase;

  void runOnOperation() override {
    auto plan = [&](ScheduleOp op,
                    const ScheduleModel &model) -> LogicalResult {
      if (unitBytes < 1)
        return op.emitError() << "unit-bytes must be at least 1, got "
                              << static_cast<int64_t>(unitBytes);
      sched::BufferStats stats;
      if (failed(planFromSchedule(op, model, unitBytes, &stats)))
        return failure();
      Builder b(op.getContext());
      std::vector<int64_t> slots(stats.slots.begin(), stats.slots.end());
      op->setAttr("buffer_slots", b.getDenseI64ArrayAttr(slots));
      op->setAttr("buffer_bytes", b.getDenseI64ArrayAttr(stats.slotBytes));
      op->setAttr("naive_buffer_bytes",
                  b.getDenseI64ArrayAttr(stats.naiveBytes));
      return success();
    };
    if (failed(forEachSchedule(getOperation(), plan)))
      signalPassFailure();
  }
};
} // namespace
