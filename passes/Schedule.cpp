//===- Schedule.cpp - --pipe-schedule -------------------------------------===//
//
// Generates a schedule for every pipeline with the scheduler library and
// materializes it as a `pipe.schedule` op after the pipeline.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/PipeModel.h"

#include "scheduler/Generators.h"

#include "mlir/IR/SymbolTable.h"

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPESCHEDULEPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

namespace {
struct SchedulePass
    : public stagecraft::pipe::impl::PipeSchedulePassBase<SchedulePass> {
  using PipeSchedulePassBase::PipeSchedulePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (PipelineOp pipeline :
         llvm::make_early_inc_range(module.getOps<PipelineOp>())) {
      llvm::Expected<sched::ScheduleKind> parsed =
          sched::parseScheduleKind(kind);
      if (!parsed) {
        pipeline.emitError() << llvm::toString(parsed.takeError());
        return signalPassFailure();
      }
      sched::Problem problem = problemFromPipeline(pipeline);
      llvm::Expected<sched::Schedule> schedule =
          sched::generateSchedule(problem, {*parsed, chunks});
      if (!schedule) {
        pipeline.emitError() << "cannot schedule pipeline @"
                             << pipeline.getSymName() << " as " << kind
                             << ": " << llvm::toString(schedule.takeError());
        return signalPassFailure();
      }
      OpBuilder builder(module.getContext());
      builder.setInsertionPointAfter(pipeline);
      std::string name = (pipeline.getSymName() + "_" + kind).str();
      for (char &c : name)
        if (c == '-')
          c = '_';
      ScheduleOp op = buildSchedule(builder, pipeline.getLoc(), pipeline, name,
                                    kind, *schedule);
      // Renames on a clash so that rescheduling keeps earlier schedules.
      symbols.insert(op, Block::iterator(op));
    }
  }
};
} // namespace
