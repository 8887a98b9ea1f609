//===- VerifySchedule.cpp - --pipe-verify-schedule ------------------------===//
//
// Checks that every schedule can run: the simulator's walk either completes
// or reports the stuck ranks, which become notes at the stuck actions.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/ScheduleLookup.h"

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPEVERIFYSCHEDULEPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

namespace {
struct VerifySchedulePass
    : public stagecraft::pipe::impl::PipeVerifySchedulePassBase<
          VerifySchedulePass> {
  void runOnOperation() override {
    auto check = [](ScheduleOp op, const ScheduleModel &model) {
      if (!model.program)
        return success(succeeded(simulateSchedule(op, model)));
      return success(succeeded(programOf(op, model)));
    };
    if (failed(forEachSchedule(getOperation(), check)))
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
