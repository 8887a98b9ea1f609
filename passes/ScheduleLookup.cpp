//===- ScheduleLookup.cpp - Schedules with their pipelines ----------------===//
//
// See ScheduleLookup.h.
//
//===----------------------------------------------------------------------===//

#include "passes/ScheduleLookup.h"

#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/Recompute.h"

#include <fmt/format.h>

#include <algorithm>

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace stagecraft::pipe;

LogicalResult stagecraft::pipe::forEachSchedule(
    ModuleOp module,
    llvm::function_ref<LogicalResult(ScheduleOp, const ScheduleModel &)> fn) {
  SymbolTableCollection symbols;
  for (ScheduleOp op :
       llvm::make_early_inc_range(module.getOps<ScheduleOp>())) {
    auto pipeline =
        symbols.lookupNearestSymbolFrom<PipelineOp>(op, op.getPipelineAttr());
    if (!pipeline)
      return op.emitOpError()
             << "refers to unknown pipeline " << op.getPipelineAttr();
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
  if (llvm::Error err = sched::checkCapacity(model.problem, *timeline)) {
    InFlightDiagnostic diag = op.emitOpError()
                              << llvm::toString(std::move(err));
    if (auto pipeline = SymbolTable::lookupNearestSymbolFrom<PipelineOp>(
            op, op.getPipelineAttr()))
      diag.attachNote(pipeline.getLoc()) << "capacity declared here";
    return failure();
  }
  return std::move(*timeline);
}

FailureOr<std::optional<DataParallelStep>>
stagecraft::pipe::simulateDataParallelOf(ScheduleOp op,
                                         const ScheduleModel &model,
                                         const sched::Timeline &timeline) {
  if (!model.dataParallel)
    return std::optional<DataParallelStep>();
  llvm::Expected<sched::DataParallelTimeline> step =
      sched::simulateDataParallel(model.problem, model.schedule, timeline,
                                  *model.dataParallel,
                                  model.dataParallelOptions);
  if (!step)
    return op.emitOpError()
           << "data parallelism: " << llvm::toString(step.takeError());
  DataParallelStep out;
  out.timeline = std::move(*step);
  out.bound = sched::dataParallelLowerBound(model.problem, model.schedule,
                                            sched::lowerBound(model.problem),
                                            *model.dataParallel);
  return std::optional<DataParallelStep>(std::move(out));
}

FailureOr<sched::Program>
stagecraft::pipe::programOf(ScheduleOp op, const ScheduleModel &model) {
  if (failed(simulateSchedule(op, model)))
    return failure();
  sched::Program program =
      model.program ? *model.program
                    : sched::lowerCommunication(model.problem, model.schedule);
  if (llvm::Error err = sched::verifyProgram(model.problem, program)) {
    (void)emitScheduleError(op, model, std::move(err),
                            model.program ? SiteSpace::Instructions
                                          : SiteSpace::Actions);
    return failure();
  }
  return program;
}

FailureOr<sched::Plan>
stagecraft::pipe::planFromSchedule(ScheduleOp op, const ScheduleModel &model,
                                   int64_t unitBytes, sched::BufferStats *stats,
                                   int64_t minMessageBytes) {
  FailureOr<sched::Program> program = programOf(op, model);
  if (failed(program))
    return failure();
  // Buffer sizes are memory units x unit-bytes, summed over a rank's slots
  // in int64: bound the whole step's bytes (every buffer of every stage and
  // microbatch, a few kinds each) well inside 64 bits before building.
  double units = 0.0, largest = 0.0;
  for (const sched::Stage &s : model.problem.stages) {
    double perMb = s.activation + (s.attention ? s.attention->memory : 0.0);
    units += perMb;
    largest = std::max(largest, perMb);
  }
  double bytes = 8.0 * (units * model.problem.microbatches * double(unitBytes) +
                        double(minMessageBytes) * model.problem.numStages() *
                            model.problem.microbatches);
  if (!(bytes < 0x1p62))
    return op.emitError() << fmt::format(
               "unit-bytes={} makes buffers of up to {:.4g} bytes ({} units), "
               "and all of them together overflow 64-bit sizes",
               unitBytes, largest * double(unitBytes), largest);
  sched::Plan plan = sched::buildPlan(model.problem, *program, op.getSymName(),
                                      unitBytes, stats, minMessageBytes);
  if (auto objective = op->getAttrOfType<StringAttr>("objective"))
    plan.objective = objective.getValue().str();
  if (model.dataParallel && model.dataParallel->degree > 1) {
    // Each stage reduces where torch's rule puts it; a bucketed placement
    // releases its buckets during that same last gradient action, which
    // the runtime runs as one kernel (docs/data-parallel.md).
    plan.dataParallel = model.dataParallel->degree;
    plan.sharding = sched::shardingName(model.dataParallel->sharding).str();
    sched::placeReductions(plan);
  }
  return plan;
}
