//===- PipeModel.cpp - pipe IR <-> scheduler model ------------------------===//
//
// Reading pipelines and schedules into the scheduler model, building schedule
// ops from it, and mapping scheduler errors back onto ops; see PipeModel.h.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeModel.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/search/ScheduleByName.h"

#include "scheduler/model/ScheduleError.h"

#include "mlir/IR/SymbolTable.h"

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
  if (FloatAttr capacity = pipeline.getCapacityAttr())
    problem.capacity = capacity.getValueAsDouble();
  if (ArrayAttr devices = pipeline.getDevicesAttr())
    for (Attribute a : devices) {
      auto ref = cast<FlatSymbolRefAttr>(a);
      sched::Problem::Device device;
      device.name = ref.getValue().str();
      if (auto op = dyn_cast_or_null<DeviceOp>(
              mlir::SymbolTable::lookupSymbolIn(pipeline, ref.getAttr()))) {
        device.speed = op.getSpeed().convertToDouble();
        if (FloatAttr memory = op.getMemoryAttr())
          device.memory = memory.getValueAsDouble();
      }
      problem.devices.push_back(std::move(device));
    }
  if (IntegerAttr node = pipeline.getLinksNodeAttr()) {
    sched::Problem::Links links;
    links.node = static_cast<int>(node.getInt());
    auto get = [](FloatAttr a) { return a ? a.getValueAsDouble() : 0.0; };
    links.intra = {get(pipeline.getIntraLatencyAttr()),
                   get(pipeline.getIntraBandwidthAttr())};
    links.inter = {get(pipeline.getInterLatencyAttr()),
                   get(pipeline.getInterBandwidthAttr())};
    problem.links = links;
  }
  if (std::optional<ArrayRef<double>> lengths = pipeline.getLengths()) {
    problem.lengths.assign(lengths->begin(), lengths->end());
    double sum = 0.0;
    for (double l : problem.lengths)
      sum += l;
    problem.referenceLength =
        pipeline.getReferenceLengthAttr()
            ? pipeline.getReferenceLengthAttr().getValueAsDouble()
            : sum / static_cast<double>(problem.lengths.size());
  }
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
    if (IntegerAttr layers = op.getLayersAttr())
      stage.layers = static_cast<int>(layers.getInt());
    if (FloatAttr r = op.getRecomputedAttr())
      stage.recomputed = r.getValueAsDouble();
    if (FloatAttr sel = op.getSelectiveAttr())
      stage.selective = sel.getValueAsDouble();
    if (FloatAttr c = op.getSelectiveCostAttr())
      stage.selectiveCost = c.getValueAsDouble();
    if (FloatAttr params = op.getParamsAttr())
      stage.params = params.getValueAsDouble();
    if (FloatAttr output = op.getOutputAttr())
      stage.output = output.getValueAsDouble();
    if (FloatAttr linear = op.getScalingLinearAttr())
      stage.scalingLinear = linear.getValueAsDouble();
    if (FloatAttr quadratic = op.getScalingQuadraticAttr())
      stage.scalingQuadratic = quadratic.getValueAsDouble();
    if (FloatAttr af = op.getAttentionForwardAttr())
      stage.attention = sched::Stage::Attention{
          af.getValueAsDouble(),
          op.getAttentionBackwardAttr().getValueAsDouble(),
          op.getAttentionMemoryAttr()
              ? op.getAttentionMemoryAttr().getValueAsDouble()
              : 0.0};
    problem.stages.push_back(std::move(stage));
  }
  // inputs(...) by position (names the verifier found; an unknown one
  // stays out and the problem's validation reports the graph).
  llvm::StringMap<int> position;
  for (auto [k, stage] : llvm::enumerate(problem.stages))
    position[stage.name] = static_cast<int>(k);
  int k = 0;
  for (StageOp op : pipeline.getStages()) {
    if (ArrayAttr inputs = op.getInputsAttr()) {
      std::vector<int> ids;
      for (Attribute a : inputs) {
        auto it = position.find(cast<FlatSymbolRefAttr>(a).getValue());
        ids.push_back(it == position.end() ? -1 : it->second);
      }
      problem.stages[k].inputs = std::move(ids);
    }
    ++k;
  }
  return problem;
}

std::optional<sched::DataParallel>
stagecraft::pipe::dataParallelFromPipeline(PipelineOp pipeline) {
  if (!pipeline.hasDataParallel())
    return std::nullopt;
  sched::DataParallel dp;
  dp.degree = static_cast<int>(pipeline.getDpDegreeAttr().getInt());
  if (StringAttr sharding = pipeline.getDpShardingAttr())
    dp.sharding = llvm::cantFail(sched::parseSharding(sharding.getValue()));
  if (IntegerAttr group = pipeline.getDpShardGroupAttr())
    dp.shardGroup = static_cast<int>(group.getInt());
  auto value = [](FloatAttr attr, double otherwise) {
    return attr ? attr.getValueAsDouble() : otherwise;
  };
  dp.latency = value(pipeline.getDpLatencyAttr(), 0.0);
  dp.bandwidth = value(pipeline.getDpBandwidthAttr(), 1.0);
  dp.interLatency = value(pipeline.getDpInterLatencyAttr(), dp.latency);
  dp.interBandwidth = value(pipeline.getDpInterBandwidthAttr(), dp.bandwidth);
  dp.optimizerPerByte = value(pipeline.getDpOptimizerAttr(), 0.0);
  for (StageOp stage : pipeline.getStages())
    dp.gradBytes.push_back(value(stage.getGradientAttr(), 0.0));
  return dp;
}

sched::DataParallelOptions
stagecraft::pipe::dataParallelOptionsOf(ScheduleOp op) {
  sched::DataParallelOptions options;
  if (StringAttr placement = op.getDpPlacementAttr();
      placement && placement.getValue() == "bucketed") {
    options.placement = sched::ReducePlacement::Bucketed;
    if (FloatAttr bucket = op.getDpBucketAttr())
      options.bucketBytes = bucket.getValueAsDouble();
  }
  return options;
}

void stagecraft::pipe::setDataParallelOptions(
    ScheduleOp op, const sched::DataParallelOptions &options) {
  Builder b(op.getContext());
  const bool bucketed = options.placement == sched::ReducePlacement::Bucketed;
  op.setDpPlacementAttr(b.getStringAttr(bucketed ? "bucketed" : "torch"));
  if (bucketed)
    op.setDpBucketAttr(b.getF64FloatAttr(options.bucketBytes));
  else
    op.removeDpBucketAttr();
}

std::optional<sched::ActionKind>
stagecraft::pipe::getActionKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<sched::ActionKind>>(op)
      .Case([](ForwardOp) { return sched::ActionKind::Forward; })
      .Case([](BackwardInputOp) { return sched::ActionKind::BackwardInput; })
      .Case([](BackwardWeightOp) { return sched::ActionKind::BackwardWeight; })
      .Case([](BackwardOp) { return sched::ActionKind::Backward; })
      .Case(
          [](ForwardBackwardOp) { return sched::ActionKind::ForwardBackward; })
      .Case([](AttentionForwardOp) {
        return sched::ActionKind::AttentionForward;
      })
      .Case([](AttentionBackwardOp) {
        return sched::ActionKind::AttentionBackward;
      })
      .Default([](Operation *) { return std::nullopt; });
}

FailureOr<ScheduleModel> stagecraft::pipe::readSchedule(ScheduleOp op,
                                                        PipelineOp pipeline) {
  ScheduleModel model;
  model.problem = problemFromPipeline(pipeline);
  model.dataParallel = dataParallelFromPipeline(pipeline);
  model.dataParallelOptions = dataParallelOptionsOf(op);
  // auto's choice of microbatch order (lengths): position k runs the
  // pipeline's microbatch order[k].
  if (auto order = op->getAttrOfType<DenseI64ArrayAttr>("microbatch_order")) {
    const int m = model.problem.microbatches;
    std::vector<int> perm(order.asArrayRef().begin(), order.asArrayRef().end());
    std::vector<int> sorted = perm;
    llvm::sort(sorted);
    bool permutation = static_cast<int>(perm.size()) == m;
    for (int k = 0; permutation && k < m; ++k)
      permutation = sorted[k] == k;
    if (!permutation)
      return op.emitOpError() << "microbatch_order must be a permutation of "
                                 "the "
                              << m << " microbatches 0.." << m - 1;
    if (!model.problem.hasLengths())
      return op.emitOpError()
             << "microbatch_order needs the pipeline's lengths(...)";
    model.problem = sched::reorderedMicrobatches(model.problem, perm);
  }
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
  model.instructionOps.resize(numRanks);
  std::vector<std::vector<sched::Instruction>> instructions(numRanks);
  bool hasComm = false;
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
        return rankOp.emitOpError()
               << "lists unknown stage @" << name.getValue() << " of pipeline @"
               << model.problem.name;
      int s = it->second;
      if (model.schedule.placement[s] >= 0)
        return rankOp.emitOpError()
               << "lists stage @" << name.getValue() << ", which rank "
               << model.schedule.placement[s] << " already hosts";
      const std::optional<int> &pin = model.problem.stages[s].rank;
      if (pin && *pin != id)
        return rankOp.emitOpError()
               << "lists stage @" << name.getValue()
               << ", which the pipeline pins to rank " << *pin;
      model.schedule.placement[s] = static_cast<int>(id);
    }
    auto stageOf = [&](Operation &action, StringRef attr) -> FailureOr<int> {
      auto stage = action.getAttrOfType<FlatSymbolRefAttr>(attr);
      auto it = stageIndex.find(stage.getAttr());
      if (it == stageIndex.end())
        return action.emitOpError() << "refers to unknown stage " << stage
                                    << " of pipeline @" << model.problem.name;
      return it->second;
    };
    auto mbOf = [&](Operation &action, StringRef attr) {
      return static_cast<int>(action.getAttrOfType<IntegerAttr>(attr).getInt());
    };
    auto commOf = [&](Operation &c) -> FailureOr<sched::CommOp> {
      bool send = isa<SendActivationOp, SendGradientOp, SendAttentionOp>(c);
      bool activation = isa<SendActivationOp, RecvActivationOp>(c);
      if (!send && !isa<RecvActivationOp, RecvGradientOp, RecvAttentionOp>(c))
        return c.emitOpError() << "is not allowed in a pipe.group; only "
                                  "sends and receives are";
      sched::MessageKind kind = activation ? sched::MessageKind::Activation
                                           : sched::MessageKind::Gradient;
      if (auto m = c.getAttrOfType<AttentionMessageAttr>("message")) {
        switch (m.getValue()) {
        case AttentionMessage::qkv:
          kind = sched::MessageKind::Qkv;
          break;
        case AttentionMessage::output:
          kind = sched::MessageKind::AttentionOutput;
          break;
        case AttentionMessage::output_grad:
          kind = sched::MessageKind::AttentionOutputGrad;
          break;
        case AttentionMessage::qkv_grad:
          kind = sched::MessageKind::QkvGrad;
          break;
        }
      }
      FailureOr<int> stage = stageOf(c, "stage");
      if (failed(stage))
        return failure();
      int64_t peer = c.getAttrOfType<IntegerAttr>("peer").getInt();
      if (peer >= numRanks)
        return c.emitOpError()
               << "names rank " << peer << ", but pipeline @"
               << model.problem.name << " has " << numRanks << " ranks";
      return sched::CommOp{
          send, static_cast<int>(peer), {kind, *stage, mbOf(c, "microbatch")}};
    };
    std::vector<sched::Instruction> &instrs = instructions[id];
    for (Operation &action : rankOp.getBody().front()) {
      if (auto group = dyn_cast<GroupOp>(action)) {
        std::vector<sched::CommOp> ops;
        for (Operation &c : group.getBody().front()) {
          FailureOr<sched::CommOp> comm = commOf(c);
          if (failed(comm))
            return failure();
          ops.push_back(*comm);
        }
        if (ops.empty())
          return group.emitOpError() << "is empty";
        instrs.push_back(sched::Instruction::group(std::move(ops)));
        model.instructionOps[id].push_back(&action);
        hasComm = true;
        continue;
      }
      std::optional<sched::ActionKind> kind = getActionKind(&action);
      if (!kind) {
        FailureOr<sched::CommOp> comm = commOf(action);
        if (failed(comm))
          return failure();
        instrs.push_back(sched::Instruction::comm(*comm));
        model.instructionOps[id].push_back(&action);
        hasComm = true;
        continue;
      }
      bool overlapped = *kind == sched::ActionKind::ForwardBackward;
      FailureOr<int> stage =
          stageOf(action, overlapped ? "forward_stage" : "stage");
      if (failed(stage))
        return failure();
      sched::Action a{
          *kind, *stage,
          mbOf(action, overlapped ? "forward_microbatch" : "microbatch")};
      if (overlapped) {
        FailureOr<int> back = stageOf(action, "backward_stage");
        if (failed(back))
          return failure();
        a.backwardStage = *back;
        a.backwardMicrobatch = mbOf(action, "backward_microbatch");
      }
      // An out-of-range microbatch is reported by the coverage check.
      auto mode = action.getAttrOfType<RecomputeModeAttr>("recompute");
      if (mode && a.microbatch < model.problem.microbatches)
        model.schedule.recompute.set(a.stage, a.microbatch,
                                     mode.getValue() == RecomputeMode::full
                                         ? sched::Recompute::Full
                                         : sched::Recompute::Selective,
                                     numStages, model.problem.microbatches);
      model.schedule.ranks[id].push_back(a);
      model.actionOps[id].push_back(&action);
      instrs.push_back(sched::Instruction::compute(a));
      model.instructionOps[id].push_back(&action);
    }
  }
  for (int r = 0; r < numRanks; ++r)
    if (!model.rankOps[r])
      return op.emitOpError()
             << "has no pipe.rank " << r << " (pipeline @" << model.problem.name
             << " has " << numRanks << " ranks)";
  for (int s = 0; s < numStages; ++s)
    if (model.schedule.placement[s] < 0)
      return op.emitOpError() << "hosts stage @" << model.problem.stages[s].name
                              << " on no rank";
  if (hasComm)
    model.program =
        sched::Program{model.schedule.placement, std::move(instructions),
                       model.schedule.recompute};
  return model;
}

/// The op of \p site, or the schedule itself.
static Location siteLoc(ScheduleOp op, const ScheduleModel &model,
                        sched::ScheduleSite site, SiteSpace space) {
  if (site.rank < 0 || site.rank >= static_cast<int>(model.rankOps.size()))
    return op.getLoc();
  const auto &ops = space == SiteSpace::Actions
                        ? model.actionOps[site.rank]
                        : model.instructionOps[site.rank];
  if (site.index < 0 || site.index >= static_cast<int>(ops.size()))
    return model.rankOps[site.rank]->getLoc();
  return ops[site.index]->getLoc();
}

LogicalResult stagecraft::pipe::emitScheduleError(ScheduleOp op,
                                                  const ScheduleModel &model,
                                                  llvm::Error error,
                                                  SiteSpace space) {
  LogicalResult result = success();
  llvm::handleAllErrors(
      std::move(error),
      [&](const sched::ScheduleError &e) {
        InFlightDiagnostic diag = emitError(siteLoc(op, model, e.site, space))
                                  << "'pipe.schedule' op " << e.message;
        for (const sched::ScheduleNote &note : e.notes)
          diag.attachNote(siteLoc(op, model, note.site, space)) << note.message;
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
  sched::Program program;
  program.placement = schedule.placement;
  program.recompute = schedule.recompute;
  for (const std::vector<sched::Action> &rank : schedule.ranks) {
    program.ranks.emplace_back();
    for (const sched::Action &a : rank)
      program.ranks.back().push_back(sched::Instruction::compute(a));
  }
  return buildProgram(builder, loc, pipeline, name, kind, program, actionLoc);
}

ScheduleOp stagecraft::pipe::buildProgram(
    OpBuilder &builder, Location loc, PipelineOp pipeline, StringRef name,
    StringRef kind, const sched::Program &program,
    llvm::function_ref<Location(int, int)> instrLoc) {
  std::vector<FlatSymbolRefAttr> stageRefs;
  for (StageOp stage : pipeline.getStages())
    stageRefs.push_back(FlatSymbolRefAttr::get(stage.getSymNameAttr()));

  auto op = builder.create<ScheduleOp>(
      loc, builder.getStringAttr(name),
      FlatSymbolRefAttr::get(pipeline.getSymNameAttr()),
      kind.empty() ? StringAttr() : builder.getStringAttr(kind), FloatAttr(),
      FloatAttr(), DenseF64ArrayAttr(), FloatAttr(), StringAttr(), FloatAttr(),
      FloatAttr(), DenseF64ArrayAttr(), FloatAttr());
  auto recomputeOf = [&](int s, int m) -> RecomputeModeAttr {
    switch (program.recompute.at(s, m)) {
    case sched::Recompute::None:
      return {};
    case sched::Recompute::Full:
      return RecomputeModeAttr::get(builder.getContext(), RecomputeMode::full);
    case sched::Recompute::Selective:
      return RecomputeModeAttr::get(builder.getContext(),
                                    RecomputeMode::selective);
    }
    llvm_unreachable("unknown recompute mode");
  };
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(&op.getBody().emplaceBlock());
  auto comm = [&](Location at, const sched::CommOp &c) {
    FlatSymbolRefAttr stage = stageRefs[c.message.stage];
    IntegerAttr mb = builder.getI64IntegerAttr(c.message.microbatch);
    IntegerAttr peer = builder.getI64IntegerAttr(c.peer);
    bool act = c.message.kind == sched::MessageKind::Activation;
    std::optional<AttentionMessage> attention;
    switch (c.message.kind) {
    case sched::MessageKind::Activation:
    case sched::MessageKind::Gradient:
      break;
    case sched::MessageKind::Qkv:
      attention = AttentionMessage::qkv;
      break;
    case sched::MessageKind::AttentionOutput:
      attention = AttentionMessage::output;
      break;
    case sched::MessageKind::AttentionOutputGrad:
      attention = AttentionMessage::output_grad;
      break;
    case sched::MessageKind::QkvGrad:
      attention = AttentionMessage::qkv_grad;
      break;
    }
    if (attention) {
      auto kind = AttentionMessageAttr::get(builder.getContext(), *attention);
      if (c.isSend)
        builder.create<SendAttentionOp>(at, kind, stage, mb, peer);
      else
        builder.create<RecvAttentionOp>(at, kind, stage, mb, peer);
      return;
    }
    if (c.isSend && act)
      builder.create<SendActivationOp>(at, stage, mb, peer);
    else if (c.isSend)
      builder.create<SendGradientOp>(at, stage, mb, peer);
    else if (act)
      builder.create<RecvActivationOp>(at, stage, mb, peer);
    else
      builder.create<RecvGradientOp>(at, stage, mb, peer);
  };
  for (int r = 0; r < program.numRanks(); ++r) {
    SmallVector<Attribute> hosted;
    for (int s = 0, e = static_cast<int>(program.placement.size()); s < e; ++s)
      if (program.placement[s] == r)
        hosted.push_back(stageRefs[s]);
    auto rankOp = builder.create<RankOp>(loc, builder.getI64IntegerAttr(r),
                                         builder.getArrayAttr(hosted));
    OpBuilder::InsertionGuard rankGuard(builder);
    builder.setInsertionPointToStart(&rankOp.getBody().emplaceBlock());
    const std::vector<sched::Instruction> &instrs = program.ranks[r];
    for (int i = 0, e = static_cast<int>(instrs.size()); i < e; ++i) {
      const sched::Instruction &instr = instrs[i];
      Location at = instrLoc ? instrLoc(r, i) : loc;
      if (instr.kind == sched::Instruction::Kind::Comm) {
        comm(at, instr.ops.front());
        continue;
      }
      if (instr.kind == sched::Instruction::Kind::Group) {
        auto group = builder.create<GroupOp>(at);
        OpBuilder::InsertionGuard groupGuard(builder);
        builder.setInsertionPointToStart(&group.getBody().emplaceBlock());
        for (const sched::CommOp &c : instr.ops)
          comm(at, c);
        continue;
      }
      const sched::Action &a = instr.action;
      FlatSymbolRefAttr stage = stageRefs[a.stage];
      IntegerAttr mb = builder.getI64IntegerAttr(a.microbatch);
      switch (a.kind) {
      case sched::ActionKind::Forward:
        builder.create<ForwardOp>(at, stage, mb,
                                  recomputeOf(a.stage, a.microbatch));
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
            builder.getI64IntegerAttr(a.backwardMicrobatch),
            recomputeOf(a.stage, a.microbatch));
        break;
      case sched::ActionKind::AttentionForward:
        builder.create<AttentionForwardOp>(at, stage, mb);
        break;
      case sched::ActionKind::AttentionBackward:
        builder.create<AttentionBackwardOp>(at, stage, mb);
        break;
      }
    }
  }
  return op;
}

std::vector<sched::Layer>
stagecraft::pipe::layersFromPipeline(PipelineOp pipeline) {
  std::vector<sched::Layer> layers;
  for (LayerOp op : pipeline.getLayers())
    for (int64_t k = 0; k < op.getCount(); ++k) {
      sched::Layer l;
      l.name = op.getSymName().str();
      l.forward = op.getForward().convertToDouble();
      l.backwardInput = op.getBackwardInput().convertToDouble();
      l.backwardWeight = op.getBackwardWeight().convertToDouble();
      l.activation = op.getActivation().convertToDouble();
      l.weightGrad = op.getWeightGrad().convertToDouble();
      if (FloatAttr params = op.getParamsAttr())
        l.params = params.getValueAsDouble();
      if (FloatAttr output = op.getOutputAttr())
        l.output = output.getValueAsDouble();
      if (FloatAttr gradient = op.getGradientAttr())
        l.gradient = gradient.getValueAsDouble();
      layers.push_back(l);
    }
  return layers;
}

void stagecraft::pipe::replaceLayersWithStages(
    PipelineOp pipeline, llvm::ArrayRef<sched::Layer> layers,
    const sched::Partition &partition, llvm::ArrayRef<int> deviceOrder) {
  std::vector<sched::Stage> built =
      sched::stagesFromPartition(layers, partition);
  OpBuilder builder(pipeline.getContext());
  Operation *firstLayer = *pipeline.getLayers().begin();
  builder.setInsertionPoint(firstLayer);
  Location loc = firstLayer->getLoc();
  auto f64 = [&](double v) { return builder.getF64FloatAttr(v); };
  for (int s = 0; s < partition.numStages(); ++s) {
    const sched::Stage &st = built[s];
    OperationState state(loc, StageOp::getOperationName());
    state.addAttribute(StageOp::getSymNameAttrName(state.name),
                       builder.getStringAttr("s" + std::to_string(s)));
    state.addAttribute(StageOp::getLayersAttrName(state.name),
                       builder.getI64IntegerAttr(st.layers));
    state.addAttribute(StageOp::getForwardAttrName(state.name),
                       f64(st.forward));
    state.addAttribute(StageOp::getBackwardInputAttrName(state.name),
                       f64(st.backwardInput));
    state.addAttribute(StageOp::getBackwardWeightAttrName(state.name),
                       f64(st.backwardWeight));
    state.addAttribute(StageOp::getActivationAttrName(state.name),
                       f64(st.activation));
    state.addAttribute(StageOp::getWeightGradAttrName(state.name),
                       f64(st.weightGrad));
    if (st.params > 0.0)
      state.addAttribute(StageOp::getParamsAttrName(state.name),
                         f64(st.params));
    if (st.output > 0.0)
      state.addAttribute(StageOp::getOutputAttrName(state.name),
                         f64(st.output));
    // Inside data parallelism: its layers' gradient bytes.
    if (pipeline.hasDataParallel()) {
      double gradient = 0.0;
      for (int l = partition.first[s]; l < partition.first[s + 1]; ++l)
        gradient += layers[l].gradient;
      state.addAttribute(StageOp::getGradientAttrName(state.name),
                         f64(gradient));
    }
    state.addAttribute("layer_range",
                       builder.getDenseI64ArrayAttr(
                           {partition.first[s], partition.first[s + 1]}));
    builder.create(state);
  }
  for (LayerOp op : llvm::make_early_inc_range(pipeline.getLayers()))
    op.erase();
  if (ArrayAttr devices = pipeline.getDevicesAttr();
      devices && !deviceOrder.empty()) {
    SmallVector<Attribute> reordered;
    for (int r : deviceOrder)
      reordered.push_back(devices[r]);
    pipeline.setDevicesAttr(builder.getArrayAttr(reordered));
  }
}
