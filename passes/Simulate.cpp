//===- Simulate.cpp - --pipe-simulate -------------------------------------===//
//
// Simulates every schedule and records makespan, bubble ratio, per-rank
// peak memory and the largest per-rank span as attributes of the schedule op;
// inside data parallelism also the step with its collectives, the time they
// expose on each rank and the step's lower bound.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ScheduleLookup.h"

#include "mlir/IR/Builders.h"

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPESIMULATEPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

namespace {
struct SimulatePass
    : public stagecraft::pipe::impl::PipeSimulatePassBase<SimulatePass> {
  void runOnOperation() override {
    auto record = [](ScheduleOp op, const ScheduleModel &model) {
      FailureOr<sched::Timeline> timeline = simulateSchedule(op, model);
      if (failed(timeline))
        return failure();
      Builder b(op.getContext());
      op.setMakespanAttr(b.getF64FloatAttr(timeline->makespan));
      op.setBubbleRatioAttr(b.getF64FloatAttr(timeline->bubbleRatio));
      // The figure a capacity bounds: params + activations.
      std::vector<double> peaks;
      for (int r = 0, e = timeline->peakMemory.size(); r < e; ++r)
        peaks.push_back(timeline->peak(r));
      op.setPeakMemoryAttr(b.getDenseF64ArrayAttr(peaks));
      op.setSpanAttr(b.getF64FloatAttr(timeline->maxSpan()));
      FailureOr<std::optional<DataParallelStep>> step =
          simulateDataParallelOf(op, model, *timeline);
      if (failed(step))
        return failure();
      if (*step) {
        const sched::DataParallelTimeline &dp = (*step)->timeline;
        op.setDpStepAttr(b.getF64FloatAttr(dp.step));
        op.setDpExposedAttr(b.getDenseF64ArrayAttr(dp.exposed));
        op.setDpBoundAttr(b.getF64FloatAttr((*step)->bound));
        if (!op.getDpPlacementAttr())
          setDataParallelOptions(op, model.dataParallelOptions);
      }
      return success();
    };
    if (failed(forEachSchedule(getOperation(), record)))
      signalPassFailure();
  }
};
} // namespace
