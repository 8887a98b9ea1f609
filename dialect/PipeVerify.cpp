//===- PipeVerify.cpp - Verifiers of the pipe dialect's ops ---------------===//
//
// The verifiers of the spec and schedule ops. Schedule coverage is checked
// by the scheduler library through PipeModel, so the verifier, the passes
// and the CSV importer agree on what a valid schedule is.
//
//===----------------------------------------------------------------------===//

#include "dialect/PipeModel.h"
#include "dialect/PipeOps.h"
#include "dialect/PipeOpsDetail.h"

#include "scheduler/model/TaskGraph.h"

#include "mlir/IR/Builders.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

using namespace mlir;
using namespace stagecraft::pipe;
using stagecraft::pipe::detail::formatNumber;

/// The rules a stage's and a layer's costs and memory share: finite and
/// non-negative, weight_grad at most the activation.
static LogicalResult verifyCostsAndMemory(Operation *op, APFloat f, APFloat i,
                                          APFloat w, APFloat activation,
                                          APFloat weightGrad) {
  std::pair<StringRef, double> values[] = {
      {"cost 'forward'", f.convertToDouble()},
      {"cost 'backward_input'", i.convertToDouble()},
      {"cost 'backward_weight'", w.convertToDouble()},
      {"memory 'activation'", activation.convertToDouble()},
      {"memory 'weight_grad'", weightGrad.convertToDouble()}};
  for (auto [what, value] : values)
    if (!std::isfinite(value) || value < 0.0)
      return op->emitOpError()
             << what << " must be finite and non-negative, got "
             << formatNumber(value);
  if (weightGrad.convertToDouble() > activation.convertToDouble())
    return op->emitOpError()
           << "memory 'weight_grad' ("
           << formatNumber(weightGrad.convertToDouble())
           << ") exceeds 'activation' ("
           << formatNumber(activation.convertToDouble()) << ")";
  return success();
}

//===----------------------------------------------------------------------===//
// PipelineOp
//===----------------------------------------------------------------------===//

/// A branching pipeline's inputs: each names a stage written before the
/// one that takes it (so the graph is acyclic), at most once, and every
/// stage but the last feeds another, so that all reach the loss.
LogicalResult PipelineOp::verifyStageGraph() {
  SmallVector<StageOp> stages(getStages().begin(), getStages().end());
  llvm::DenseMap<StringAttr, int> position;
  for (auto [k, stage] : llvm::enumerate(stages))
    position[stage.getSymNameAttr()] = static_cast<int>(k);
  std::vector<bool> consumed(stages.size(), false);
  bool graph = false;
  for (auto [k, stage] : llvm::enumerate(stages)) {
    ArrayAttr inputs = stage.getInputsAttr();
    if (!inputs) {
      if (k > 0)
        consumed[k - 1] = true;
      continue;
    }
    graph = true;
    llvm::SmallDenseSet<StringAttr> seen;
    for (Attribute a : inputs) {
      StringAttr name = cast<FlatSymbolRefAttr>(a).getAttr();
      auto it = position.find(name);
      if (it == position.end())
        return stage.emitOpError()
               << "inputs(...) names @" << name.getValue()
               << ", which is not a stage of pipeline @" << getSymName();
      if (it->second == static_cast<int>(k))
        return stage.emitOpError()
               << "inputs(...) names the stage itself: the stage graph "
                  "must be acyclic";
      if (it->second > static_cast<int>(k))
        return stage.emitOpError()
               << "inputs(...) names @" << name.getValue()
               << ", written after it: a stage takes outputs of stages "
                  "written before it (so the graph is acyclic)";
      if (!seen.insert(name).second)
        return stage.emitOpError()
               << "inputs(...) names @" << name.getValue() << " twice";
      consumed[it->second] = true;
    }
  }
  if (!graph)
    return success();
  for (size_t k = 0; k + 1 < stages.size(); ++k)
    if (!consumed[k])
      return stages[k].emitOpError()
             << "is unreachable from the loss: no stage takes its output, so "
                "it does not feed the last stage @"
             << stages.back().getSymName();
  return success();
}

LogicalResult PipelineOp::verify() {
  if (std::optional<ArrayRef<double>> lengths = getLengths()) {
    if (lengths->size() != getMicrobatches())
      return emitOpError() << "lengths(...) gives " << lengths->size()
                           << " lengths for " << getMicrobatches()
                           << " microbatches; give one per microbatch";
    for (size_t m = 0; m < lengths->size(); ++m) {
      double l = (*lengths)[m];
      if (!std::isfinite(l) || l <= 0.0)
        return emitOpError() << "lengths(...): microbatch " << m
                             << "'s length must be finite and positive, got "
                             << formatNumber(l);
    }
  }
  if (FloatAttr reference = getReferenceLengthAttr()) {
    double value = reference.getValueAsDouble();
    if (!getLengths())
      return emitOpError() << "reference_length(X) needs lengths(...)";
    if (!std::isfinite(value) || value <= 0.0)
      return emitOpError() << "reference_length must be finite and positive, "
                              "got "
                           << formatNumber(value);
  }
  if (getLinksNodeAttr()) {
    if (getLatency().convertToDouble() != 0.0)
      return emitOpError() << "latency(X) and links(...) both give transfer "
                              "times; keep one";
    if (getLinksNodeAttr().getInt() < 1)
      return emitOpError() << "links: node = " << getLinksNodeAttr().getInt()
                           << " must be at least 1";
    std::pair<StringRef, FloatAttr> links[] = {
        {"intra latency", getIntraLatencyAttr()},
        {"intra bandwidth", getIntraBandwidthAttr()},
        {"inter latency", getInterLatencyAttr()},
        {"inter bandwidth", getInterBandwidthAttr()}};
    for (auto [what, attr] : links) {
      double value = attr ? attr.getValueAsDouble() : NAN;
      bool bandwidth = what.ends_with("bandwidth");
      if (!std::isfinite(value) || value < 0.0 || (bandwidth && value == 0.0))
        return emitOpError() << "links: " << what << " must be finite and "
                             << (bandwidth ? "positive" : "non-negative")
                             << ", got " << formatNumber(value);
    }
  }
  double latency = getLatency().convertToDouble();
  if (!std::isfinite(latency) || latency < 0.0)
    return emitOpError() << "latency must be finite and non-negative, got "
                         << formatNumber(latency);
  if (FloatAttr capacity = getCapacityAttr()) {
    double value = capacity.getValueAsDouble();
    if (!std::isfinite(value) || value <= 0.0)
      return emitOpError() << "capacity must be finite and positive, got "
                           << formatNumber(value);
  }
  return verifyDataParallel();
}

LogicalResult PipelineOp::verifyDataParallel() {
  IntegerAttr degree = getDpDegreeAttr();
  if (!degree) {
    for (Attribute a :
         {Attribute(getDpShardingAttr()), Attribute(getDpShardGroupAttr()),
          Attribute(getDpLatencyAttr()), Attribute(getDpBandwidthAttr()),
          Attribute(getDpInterLatencyAttr()),
          Attribute(getDpInterBandwidthAttr()),
          Attribute(getDpOptimizerAttr())})
      if (a)
        return emitOpError() << "data_parallel(...) needs 'degree'";
    return success();
  }
  StringRef sharding =
      getDpShardingAttr() ? getDpShardingAttr().getValue() : "none";
  if (sharding != "none" && sharding != "full" && sharding != "hybrid")
    return emitOpError() << "data_parallel: sharding '" << sharding
                         << "' is not one of none, full, hybrid";
  if (IntegerAttr group = getDpShardGroupAttr()) {
    if (sharding != "hybrid")
      return emitOpError() << "data_parallel: shard_group is for sharding = "
                              "hybrid (shard within groups, all-reduce across "
                              "them); sharding is "
                           << sharding;
    if (group.getInt() < 2 || group.getInt() >= degree.getInt() ||
        degree.getInt() % group.getInt() != 0)
      return emitOpError()
             << "data_parallel: shard_group = " << group.getInt()
             << " must divide degree = " << degree.getInt()
             << " and lie strictly between 1 and it (1 is sharding = none, "
                "the degree is sharding = full)";
  } else if (sharding == "hybrid") {
    return emitOpError() << "data_parallel: sharding = hybrid needs "
                            "shard_group = G (replicas a shard group)";
  }
  if (sharding != "hybrid" &&
      (getDpInterLatencyAttr() || getDpInterBandwidthAttr()))
    return emitOpError() << "data_parallel: inter_latency and "
                            "inter_bandwidth are the link across hybrid's "
                            "shard groups; sharding is "
                         << sharding;
  for (auto [what, attr] : dataParallelNumbers()) {
    if (!attr)
      continue;
    double value = attr.getValueAsDouble();
    bool bandwidth = what.ends_with("bandwidth");
    if (!std::isfinite(value) || value < 0.0 || (bandwidth && value == 0.0))
      return emitOpError() << "data_parallel: " << what
                           << " must be finite and "
                           << (bandwidth ? "positive" : "non-negative")
                           << ", got " << formatNumber(value);
  }
  return success();
}

LogicalResult PipelineOp::verifyRegions() {
  Operation *firstStage = nullptr, *firstLayer = nullptr;
  for (Operation &op : getBody().front()) {
    if (!isa<StageOp, LayerOp, DeviceOp>(op))
      return op.emitOpError() << "is not allowed in a pipe.pipeline; only "
                                 "pipe.stage, pipe.layer and pipe.device ops "
                                 "are";
    if (isa<StageOp>(op) && !firstStage)
      firstStage = &op;
    if (isa<LayerOp>(op) && !firstLayer)
      firstLayer = &op;
  }
  if (firstStage && firstLayer)
    return (firstStage->isBeforeInBlock(firstLayer) ? firstLayer : firstStage)
               ->emitOpError()
           << "cannot share a pipeline with pipe."
           << (firstStage->isBeforeInBlock(firstLayer) ? "stage" : "layer")
           << " ops: a pipeline holds stages or layers (cut into stages by "
              "--pipe-partition)";
  if (ArrayAttr devices = getDevicesAttr()) {
    for (Attribute a : devices) {
      auto ref = cast<FlatSymbolRefAttr>(a);
      auto device = dyn_cast_or_null<DeviceOp>(
          mlir::SymbolTable::lookupSymbolIn(*this, ref.getAttr()));
      if (!device)
        return emitOpError() << "devices(...) names " << ref
                             << ", which is not a pipe.device of this "
                                "pipeline";
    }
    if (static_cast<int64_t>(devices.size()) != getRanks())
      return emitOpError() << "devices(...) assigns " << devices.size()
                           << " ranks; the pipeline has " << getRanks();
  }
  if (firstLayer && getDpDegreeAttr())
    for (LayerOp layer : getLayers())
      if (!layer.getGradientAttr())
        return layer.emitOpError()
               << "needs gradient(X), the bytes of one layer's gradient: "
                  "pipeline @"
               << getSymName() << " has data_parallel(...)";
  if (firstLayer)
    return success(); // the stages' rules apply after --pipe-partition
  if (getDpDegreeAttr())
    for (StageOp stage : getStages())
      if (!stage.getGradientAttr())
        return stage.emitOpError()
               << "needs gradient(X), the bytes of its gradient: pipeline @"
               << getSymName() << " has data_parallel(...)";
  if (failed(verifyStageGraph()))
    return failure();
  // Stage-local rules were checked by StageOp::verify; what is left concerns
  // the stages together and is the scheduler library's own validation.
  StageOp firstPinned, firstUnpinned;
  for (StageOp stage : getStages()) {
    if (stage.getRank() && !firstPinned)
      firstPinned = stage;
    if (!stage.getRank() && !firstUnpinned)
      firstUnpinned = stage;
  }
  if (firstPinned && firstUnpinned)
    return firstUnpinned.emitOpError()
           << "has no rank(K) while @" << firstPinned.getSymName()
           << " is pinned: pin every stage or none"
           << "";
  // The scheduler counts ranks and microbatches in int.
  constexpr int64_t kMaxCount = std::numeric_limits<int32_t>::max();
  if (getRanks() > kMaxCount || getMicrobatches() > kMaxCount)
    return emitOpError() << "ranks(" << getRanks() << ") and microbatches("
                         << getMicrobatches() << ") must each be at most "
                         << kMaxCount;
  if (llvm::Error err = sched::validateProblem(problemFromPipeline(*this)))
    return emitOpError() << llvm::toString(std::move(err));
  return success();
}

//===----------------------------------------------------------------------===//
// StageOp
//===----------------------------------------------------------------------===//

LogicalResult StageOp::verify() {
  if (failed(verifyCostsAndMemory(*this, getForward(), getBackwardInput(),
                                  getBackwardWeight(), getActivation(),
                                  getWeightGrad())))
    return failure();
  std::pair<StringRef, FloatAttr> optional[] = {
      {"cost 'forward_backward'", getForwardBackwardAttr()},
      {"attention 'forward'", getAttentionForwardAttr()},
      {"attention 'backward'", getAttentionBackwardAttr()},
      {"attention 'memory'", getAttentionMemoryAttr()},
      {"memory 'recomputed'", getRecomputedAttr()},
      {"memory 'selective'", getSelectiveAttr()},
      {"cost 'selective'", getSelectiveCostAttr()},
      {"params", getParamsAttr()},
      {"output", getOutputAttr()},
      {"gradient", getGradientAttr()},
      {"scaling 'linear'", getScalingLinearAttr()},
      {"scaling 'quadratic'", getScalingQuadraticAttr()}};
  for (auto [what, attr] : optional) {
    if (!attr)
      continue;
    double value = attr.getValueAsDouble();
    if (!std::isfinite(value) || value < 0.0)
      return emitOpError() << what << " must be finite and non-negative, got "
                           << formatNumber(value);
  }
  if (getScalingLinearAttr() &&
      getScalingLinearAttr().getValueAsDouble() == 0.0 &&
      (!getScalingQuadraticAttr() ||
       getScalingQuadraticAttr().getValueAsDouble() == 0.0))
    return emitOpError() << "scaling(...) needs 'linear' or 'quadratic' above "
                            "0";
  double activation = getActivation().convertToDouble();
  std::pair<StringRef, FloatAttr> kept[] = {{"recomputed", getRecomputedAttr()},
                                            {"selective", getSelectiveAttr()}};
  for (auto [what, attr] : kept)
    if (attr && attr.getValueAsDouble() > activation)
      return emitOpError() << "memory '" << what << "' ("
                           << formatNumber(attr.getValueAsDouble())
                           << ") exceeds 'activation' ("
                           << formatNumber(activation)
                           << "): a forward cannot keep more than it makes";
  if (bool(getSelectiveAttr()) != bool(getSelectiveCostAttr()))
    return emitOpError()
           << "selective recomputation needs both memory(selective = S) and "
              "cost(selective = C); only the "
           << (getSelectiveAttr() ? "memory" : "cost") << " is given";
  if (getRankAttr()) {
    int64_t rank = getRankAttr().getInt();
    int64_t ranks = getParentOp<PipelineOp>().getRanks();
    if (rank < 0 || rank >= ranks)
      return emitOpError() << "rank(" << rank << ") is out of range: pipeline @"
                           << getParentOp<PipelineOp>().getSymName() << " has "
                           << ranks << " ranks";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// DeviceOp
//===----------------------------------------------------------------------===//

LogicalResult DeviceOp::verify() {
  double speed = getSpeed().convertToDouble();
  if (!std::isfinite(speed) || speed <= 0.0)
    return emitOpError() << "speed must be finite and positive, got "
                         << formatNumber(speed);
  if (FloatAttr memory = getMemoryAttr()) {
    double value = memory.getValueAsDouble();
    if (!std::isfinite(value) || value <= 0.0)
      return emitOpError() << "memory must be finite and positive, got "
                           << formatNumber(value);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// LayerOp
//===----------------------------------------------------------------------===//

LogicalResult LayerOp::verify() {
  if (failed(verifyCostsAndMemory(*this, getForward(), getBackwardInput(),
                                  getBackwardWeight(), getActivation(),
                                  getWeightGrad())))
    return failure();
  std::pair<StringRef, FloatAttr> optional[] = {
      {"params", getParamsAttr()},
      {"output", getOutputAttr()},
      {"gradient", getGradientAttr()}};
  for (auto [what, attr] : optional)
    if (attr && (!std::isfinite(attr.getValueAsDouble()) ||
                 attr.getValueAsDouble() < 0.0))
      return emitOpError() << what << " must be finite and non-negative, got "
                           << formatNumber(attr.getValueAsDouble());
  if (getCount() > 1000000)
    return emitOpError() << "count(" << getCount()
                         << ") is above the limit of 1000000 layers";
  return success();
}

//===----------------------------------------------------------------------===//
// ScheduleOp
//===----------------------------------------------------------------------===//

LogicalResult ScheduleOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto pipeline =
      symbolTable.lookupNearestSymbolFrom<PipelineOp>(*this, getPipelineAttr());
  if (!pipeline)
    return emitOpError() << "refers to unknown pipeline " << getPipelineAttr();
  if (StringAttr placement = getDpPlacementAttr()) {
    if (!pipeline.hasDataParallel())
      return emitOpError() << "dp_placement: pipeline @"
                           << pipeline.getSymName()
                           << " has no data_parallel(...)";
    if (placement.getValue() != "torch" && placement.getValue() != "bucketed")
      return emitOpError() << "dp_placement '" << placement.getValue()
                           << "' is not one of torch, bucketed";
  }
  if (FloatAttr bucket = getDpBucketAttr()) {
    double value = bucket.getValueAsDouble();
    if (!getDpPlacementAttr() || getDpPlacementAttr().getValue() != "bucketed")
      return emitOpError() << "dp_bucket is for dp_placement = \"bucketed\"";
    if (!std::isfinite(value) || value <= 0.0)
      return emitOpError() << "dp_bucket must be finite and positive, got "
                           << formatNumber(value);
  }
  FailureOr<ScheduleModel> model = readSchedule(*this, pipeline);
  if (failed(model))
    return failure();
  llvm::Expected<sched::TaskGraph> graph =
      sched::buildTaskGraph(model->problem, model->schedule);
  if (!graph)
    return emitScheduleError(*this, *model, graph.takeError());
  return success();
}
