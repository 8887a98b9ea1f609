//===- PipeModel.cpp - pipe IR <-> scheduler model ------------------------===//
//
// Reading pipelines and schedules into the scheduler model, building schedule
// ops from it, and mapping scheduler errors back onto ops; see PipeModel.h.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeModel.h"

#include "scheduler/ScheduleError.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace stagecraft::pipe;
namespace sched = stagecraft::pipe::sched;

sched::Problem stagecraft::pipe::problemFromPipeline(PipelineOp pipeline) {
  sched::Problem problem;
  problem.name = pipeline.getSymName().str();
  problem.ranks = static_cast<int>(pipeline.getRanks());
  problem.microbatches = static_cast<int>(pipeline.getMicrobatches());
  problem.latency = pipeline.getLatency().convertToDouble();
  for (StageOp op : pipeline.getStages()) {
    sched::Stage stage;
    stage.name = op.getSymName().str();
    stage.forward = op.getForward().convertToDouble();
    stage.backwardInput = op.getBackwardInput().convertToDouble();
    stage.backwardWeight = op.getBackwardWeight().convertToDouble();
    stage.activation = op.getActivation().convertToDouble();
    stage.weightGrad = op.getWeightGrad().convertToDouble();
    if (FloatAttr fb = op.getForwardBackwardAttr())
      stage.forwardBackward = fb.getValueAsDouble();
    if (IntegerAttr rank = op.getRankAttr())
      stage.rank = static_cast<int>(rank.getInt());
    problem.stages.push_back(std::move(stage));
  }
  return problem;
}

std::optional<sched::ActionKind>
stagecraft::pipe::getActionKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<sched::ActionKind>>(op)
      .Case([](ForwardOp) { return sched::ActionKind::Forward; })
      .Case([](BackwardInputOp) { return sched::ActionKind::BackwardInput; })
      .Case([](BackwardWeightOp) { return sched::ActionKind::BackwardWeight; })
      .Case([](BackwardOp) { return sched::ActionKind::Backward; })
      .Case([](ForwardBackwardOp) {
        return sched::ActionKind::ForwardBackward;
      })
      .Default([](Operation *) { return std::nullopt; });
}

FailureOr<ScheduleModel> stagecraft::pipe::readSchedule(ScheduleOp op,
                                                        PipelineOp pipeline) {
  ScheduleModel model;
  model.problem = problemFromPipeline(pipeline);
  const int numRanks = model.problem.ranks;
  const int numStages = model.problem.numStages();
  llvm::DenseMap<StringAttr, int> stageIndex;
  for (int s = 0; s < numStages; ++s)
    stageIndex[StringAttr::get(op.getContext(), model.problem.stages[s].name)] =
        s;

  model.schedule.ranks.resize(numRanks);
  model.schedule.placement.assign(numStages, -1);
  model.actionOps.resize(numRanks);
  model.rankOps.resize(numRanks);
  for (Operation &child : op.getBody().front()) {
    auto rankOp = dyn_cast<RankOp>(child);
    if (!rankOp)
      return child.emitOpError() << "is not allowed in a pipe.schedule; only "
                                    "pipe.rank ops are";
    int64_t id = static_cast<int64_t>(rankOp.getId());
    if (id >= numRanks)
      return rankOp.emitOpError()
             << "rank " << id << " is out of range: pipeline @"
             << model.problem.name << " has " << numRanks << " ranks";
    if (RankOp first = model.rankOps[id]) {
      InFlightDiagnostic diag = rankOp.emitOpError()
                                << "rank " << id << " appears twice";
      diag.attachNote(first.getLoc()) << "first occurrence here";
      return diag;
    }
    model.rankOps[id] = rankOp;
    for (Attribute attr : rankOp.getStages()) {
      StringAttr name = cast<FlatSymbolRefAttr>(attr).getAttr();
      auto it = stageIndex.find(name);
      if (it == stageIndex.end())
        return rankOp.emitOpError() << "lists unknown stage @" << name.getValue()
                                    << " of pipeline @" << model.problem.name;
      int s = it->second;
      if (model.schedule.placement[s] >= 0)
        return rankOp.emitOpError()
               << "lists stage @" << name.getValue()
               << ", which rank " << model.schedule.placement[s]
               << " already hosts";
      const std::optional<int> &pin = model.problem.stages[s].rank;
      if (pin && *pin != id)
        return rankOp.emitOpError()
               << "lists stage @" << name.getValue()
               << ", which the pipeline pins to rank " << *pin;
      model.schedule.placement[s] = static_cast<int>(id);
    }
    for (Operation &action : rankOp.getBody().front()) {
      std::optional<sched::ActionKind> kind = getActionKind(&action);
      if (!kind)
        return action.emitOpError() << "is not allowed in a pipe.rank; only "
                                       "action ops are";
      bool overlapped = *kind == sched::ActionKind::ForwardBackward;
      auto stageOf = [&](StringRef attr) -> FailureOr<int> {
        auto stage = action.getAttrOfType<FlatSymbolRefAttr>(attr);
        auto it = stageIndex.find(stage.getAttr());
        if (it == stageIndex.end())
          return action.emitOpError()
                 << "refers to unknown stage " << stage << " of pipeline @"
                 << model.problem.name;
        return it->second;
      };
      auto mbOf = [&](StringRef attr) {
        return static_cast<int>(action.getAttrOfType<IntegerAttr>(attr).getInt());
      };
      FailureOr<int> stage =
          stageOf(overlapped ? "forward_stage" : "stage");
      if (failed(stage))
        return failure();
      sched::Action a{*kind, *stage,
                      mbOf(overlapped ? "forward_microbatch" : "microbatch")};
      if (overlapped) {
        FailureOr<int> back = stageOf("backward_stage");
        if (failed(back))
          return failure();
        a.backwardStage = *back;
        a.backwardMicrobatch = mbOf("backward_microbatch");
      }
      model.schedule.ranks[id].push_back(a);
      model.actionOps[id].push_back(&action);
    }
  }
  for (int r = 0; r < numRanks; ++r)
    if (!model.rankOps[r])
      return op.emitOpError() << "has no pipe.rank " << r << " (pipeline @"
                              << model.problem.name << " has " << numRanks
                              << " ranks)";
  for (int s = 0; s < numStages; ++s)
    if (model.schedule.placement[s] < 0)
      return op.emitOpError() << "hosts stage @" << model.problem.stages[s].name
                              << " on no rank";
  return model;
}

/// The op of \p site, or the schedule itself.
static Location siteLoc(ScheduleOp op, const ScheduleModel &model,
                        sched::ScheduleSite site) {
  if (site.rank < 0 || site.rank >= static_cast<int>(model.rankOps.size()))
    return op.getLoc();
  if (site.index < 0 ||
      site.index >= static_cast<int>(model.actionOps[site.rank].size()))
    return model.rankOps[site.rank]->getLoc();
  return model.actionOps[site.rank][site.index]->getLoc();
}

LogicalResult stagecraft::pipe::emitScheduleError(ScheduleOp op,
                                                  const ScheduleModel &model,
                                                  llvm::Error error) {
  LogicalResult result = success();
  llvm::handleAllErrors(
      std::move(error),
      [&](const sched::ScheduleError &e) {
        InFlightDiagnostic diag = emitError(siteLoc(op, model, e.site))
                                  << "'pipe.schedule' op " << e.message;
        for (const sched::ScheduleNote &note : e.notes)
          diag.attachNote(siteLoc(op, model, note.site)) << note.message;
        result = failure();
      },
      [&](const llvm::ErrorInfoBase &e) {
        result = op.emitOpError() << e.message();
      });
  return result;
}

ScheduleOp stagecraft::pipe::buildSchedule(
    OpBuilder &builder, Location loc, PipelineOp pipeline, StringRef name,
    StringRef kind, const sched::Schedule &schedule,
    llvm::function_ref<Location(int, int)> actionLoc) {
  MLIRContext *ctx = builder.getContext();
  std::vector<FlatSymbolRefAttr> stageRefs;
  for (StageOp stage : pipeline.getStages())
    stageRefs.push_back(FlatSymbolRefAttr::get(stage.getSymNameAttr()));

  auto op = builder.create<ScheduleOp>(
      loc, builder.getStringAttr(name),
      FlatSymbolRefAttr::get(pipeline.getSymNameAttr()),
      kind.empty() ? StringAttr() : builder.getStringAttr(kind), FloatAttr(),
      FloatAttr(), DenseF64ArrayAttr());
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&op.getBody().emplaceBlock());
  for (int r = 0; r < schedule.numRanks(); ++r) {
    SmallVector<Attribute> hosted;
    for (int s : schedule.stagesOf(r))
      hosted.push_back(stageRefs[s]);
    auto rankOp = builder.create<RankOp>(loc, builder.getI64IntegerAttr(r),
                                         builder.getArrayAttr(hosted));
    OpBuilder::InsertionGuard rankGuard(builder);
    builder.setInsertionPointToStart(&rankOp.getBody().emplaceBlock());
    const std::vector<sched::Action> &actions = schedule.ranks[r];
    for (int i = 0, e = static_cast<int>(actions.size()); i < e; ++i) {
      const sched::Action &a = actions[i];
      Location at = actionLoc ? actionLoc(r, i) : loc;
      FlatSymbolRefAttr stage = stageRefs[a.stage];
      IntegerAttr mb = builder.getI64IntegerAttr(a.microbatch);
      switch (a.kind) {
      case sched::ActionKind::Forward:
        builder.create<ForwardOp>(at, stage, mb);
        break;
      case sched::ActionKind::BackwardInput:
        builder.create<BackwardInputOp>(at, stage, mb);
        break;
      case sched::ActionKind::BackwardWeight:
        builder.create<BackwardWeightOp>(at, stage, mb);
        break;
      case sched::ActionKind::Backward:
        builder.create<BackwardOp>(at, stage, mb);
        break;
      case sched::ActionKind::ForwardBackward:
        builder.create<ForwardBackwardOp>(
            at, stage, mb, stageRefs[a.backwardStage],
            builder.getI64IntegerAttr(a.backwardMicrobatch));
        break;
      }
    }
  }
  (void)ctx;
  return op;
}
