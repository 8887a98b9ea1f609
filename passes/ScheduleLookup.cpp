//===- ScheduleLookup.cpp - Schedules with their pipelines ----------------===//
//
// See ScheduleLookup.h.
//
//===----------------------------------------------------------------------===//

#include "passes/ScheduleLookup.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace stagecraft::pipe;

LogicalResult stagecraft::pipe::forEachSchedule(
    ModuleOp module,
    llvm::function_ref<LogicalResult(ScheduleOp, const ScheduleModel &)> fn) {
  SymbolTableCollection symbols;
  for (ScheduleOp op : llvm::make_early_inc_range(module.getOps<ScheduleOp>())) {
    auto pipeline =
        symbols.lookupNearestSymbolFrom<PipelineOp>(op, op.getPipelineAttr());
    if (!pipeline)
      return op.emitOpError() << "refers to unknown pipeline "
                              << op.getPipelineAttr();
    FailureOr<ScheduleModel> model = readSchedule(op, pipeline);
    if (failed(model) || failed(fn(op, *model)))
      return failure();
  }
  return success();
}

FailureOr<sched::Timeline>
stagecraft::pipe::simulateSchedule(ScheduleOp op, const ScheduleModel &model) {
  llvm::Expected<sched::Timeline> timeline =
      sched::simulate(model.problem, model.schedule);
  if (!timeline) {
    (void)emitScheduleError(op, model, timeline.takeError());
    return failure();
  }
  return std::move(*timeline);
}
