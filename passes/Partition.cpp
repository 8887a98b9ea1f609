//===- Partition.cpp - --pipe-partition -----------------------------------===//
//
// Cuts every layer pipeline into stages with the scheduler library's exact
// partitioner and rewrites its pipe.layer ops as pipe.stage ops.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/PipeModel.h"

#include "scheduler/search/Partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace stagecraft::pipe {
#define GEN_PASS_DEF_PIPEPARTITIONPASS
#include "passes/Passes.h.inc"
} // namespace stagecraft::pipe

using namespace mlir;
using namespace stagecraft::pipe;

namespace {
struct PartitionPass
    : public stagecraft::pipe::impl::PipePartitionPassBase<PartitionPass> {
  using PipePartitionPassBase::PipePartitionPassBase;

  LogicalResult partition(PipelineOp pipeline) {
    std::vector<sched::Layer> layers = layersFromPipeline(pipeline);
    // The devices and capacities of the ranks (no stages yet).
    sched::Problem ranks = problemFromPipeline(pipeline);
    const int p = ranks.ranks, m = ranks.microbatches;
    int count = p;
    if (stages != "auto") {
      if (llvm::StringRef(stages).getAsInteger(10, count) || count < 1)
        return pipeline.emitError() << "--pipe-partition: stages=" << stages
                                    << " must be a positive integer or auto";
    }
    if (count > static_cast<int>(layers.size()))
      return pipeline.emitError() << fmt::format(
                 "cannot cut pipeline @{}'s {} layers into {} stages: each "
                 "stage needs at least one layer",
                 pipeline.getSymName().str(), layers.size(), count);
    if (count < p)
      return pipeline.emitError() << fmt::format(
                 "stages={} leaves ranks without a stage: pipeline @{} has {} "
                 "ranks",
                 count, pipeline.getSymName().str(), p);
    if (placement != "contiguous" && placement != "loop" && placement != "v")
      return pipeline.emitError() << "--pipe-partition: placement=" << placement
                                  << " is not one of contiguous, loop, v";
    if (placement == "v" && count != 2 * p)
      return pipeline.emitError() << fmt::format(
                 "placement=v puts two stages on each rank: stages={} on {} "
                 "ranks needs stages={}",
                 count, p, 2 * p);
    auto rankOf = [&](int s) {
      if (placement == "loop")
        return s % p;
      if (placement == "v")
        return s < p ? s : 2 * p - 1 - s;
      return static_cast<int>(int64_t(s) * p / count);
    };
    sched::PartitionTarget target;
    target.stages = count;
    std::vector<int> perRank(p, 0);
    for (int s = 0; s < count; ++s)
      ++perRank[rankOf(s)];
    for (int s = 0; s < count; ++s) {
      int r = rankOf(s);
      target.speed.push_back(ranks.speedOf(r));
      target.budget.push_back(ranks.capacityOf(r) / perRank[r]);
      target.inFlight.push_back(std::min(m, p - r));
      target.rank.push_back(r);
    }
    llvm::Expected<sched::Partition> cut =
        sched::partitionLayers(layers, target);
    if (!cut) {
      std::string strict = llvm::toString(cut.takeError());
      target.inFlight.assign(count, 1);
      cut = sched::partitionLayers(layers, target);
      if (!cut)
        return pipeline.emitError()
               << "cannot cut pipeline @" << pipeline.getSymName() << " into "
               << count << " stages within the ranks' memory: "
               << llvm::toString(cut.takeError());
      pipeline.emitRemark()
          << "no cut keeps 1F1B's in-flight activations within the "
             "capacities ("
          << strict
          << "); this one fits one forward's per stage, and recomputation "
             "must fit the rest";
    }
    replaceLayersWithStages(pipeline, layers, *cut);
    return success();
  }

  void runOnOperation() override {
    for (PipelineOp pipeline : getOperation().getOps<PipelineOp>())
      if (pipeline.isLayerPipeline() && failed(partition(pipeline)))
        return signalPassFailure();
  }
};
} // namespace
