//===- HeteroBench.cpp - Heterogeneous models and clusters ----------------===//
//
// Stagecraft's kind=auto on a layer pipeline (device order x stages per
// rank x exact cut x kind, scheduler/search/LayerSearch.h) against what a
// Megatron-LM user gets: transformer blocks split evenly over the stages
// (the embedding on the first, the LM head on the last), devices in the
// order given, interleaved 1F1B with v = 1 (1F1B) or v = 2, the faster.
// Both get the same recomputation planner under each rank's capacity.
// 8 ranks, 32 microbatches; times in units of one dense block's forward.
//
// Cost model, per microbatch of one sequence (hidden h = 4096, sequence
// s = 4096, vocabulary V = 128k): a dense block's forward ~ 24 h^2 + 4 s h
// FLOPs per token = 1 unit; I = F and W = F (the backward is twice the
// forward, split evenly); activation 1 unit (34 s h bytes ~ 0.5 GB), params
// 1 unit (12 h^2 parameters x 16 bytes ~ 3.2 GB). Embedding: a lookup,
// F = I = W = 0.05, params 2.6 (h V / 12 h^2), activation 0.1. LM head:
// 2 h V per token = 2.2 units of F, I and W, params 2.6, activation 4 (the
// logits, s V fp32 ~ 2 GB).
// - dense: embedding, 32 blocks, head.
// - moe (DeepSeek-like): embedding, 3 dense blocks, 29 MoE blocks at twice
//   the cost, params and activation, head.
// - hybrid: embedding, 4 x (6 Mamba-like blocks at 0.6 of the cost, 0.5 of
//   the activation and 0.8 of the params, then 1 attention block), head.
// - vlm: 24 vision-encoder layers at a quarter of a block's cost,
//   activation and params, then embedding, 32 blocks, head.
// Clusters (memory in the units above):
// - 8 equal: speed 1, memory 80.
// - 4 + 4: four at speed 1, memory 80, then four at speed 0.5, memory 40.
// - 2 x 4: 8 equal devices in 2 nodes of 4; a layer's output (s h bf16 =
//   32 MB = 0.0625 memory units) crosses NVLink at 300 GB/s inside a node
//   (7.2 units per time unit, a time unit being one block's forward, about
//   12 ms at 156 TFLOP/s) and an inter-node link at 1/8 of that (0.9), each
//   with 0.001 of latency. A directed link carries one transfer at a time
//   (the simulator queues them), for both the baseline and auto.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/LayerSearch.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>

using namespace stagecraft::pipe::sched;

namespace {

constexpr int kRanks = 8, kMicrobatches = 32;

Layer layer(const char *name, double cost, double activation, double params) {
  Layer l;
  l.name = name;
  l.forward = l.backwardInput = l.backwardWeight = cost;
  l.activation = l.weightGrad = activation;
  l.params = params;
  l.output = 0.0625;
  return l;
}

struct Model {
  const char *name;
  std::vector<Layer> layers;
  /// Which layers are transformer blocks (split evenly by the baseline).
  std::vector<bool> block;
};

Model makeModel(const char *name) {
  Model m{name, {}, {}};
  auto add = [&](Layer l, bool isBlock) {
    m.layers.push_back(l);
    m.block.push_back(isBlock);
  };
  std::string n = name;
  Layer embed = layer("embed", 0.05, 0.1, 2.6);
  Layer head = layer("head", 2.2, 4.0, 2.6);
  Layer dense = layer("block", 1.0, 1.0, 1.0);
  if (n == "vlm")
    for (int k = 0; k < 24; ++k)
      add(layer("vit", 0.25, 0.25, 0.25), true);
  add(embed, false);
  if (n == "dense" || n == "vlm")
    for (int k = 0; k < 32; ++k)
      add(dense, true);
  if (n == "moe") {
    for (int k = 0; k < 3; ++k)
      add(dense, true);
    for (int k = 0; k < 29; ++k)
      add(layer("moe", 2.0, 2.0, 2.0), true);
  }
  if (n == "hybrid")
    for (int g = 0; g < 4; ++g) {
      for (int k = 0; k < 6; ++k)
        add(layer("mamba", 0.6, 0.5, 0.8), true);
      add(dense, true);
    }
  add(head, false);
  return m;
}

Problem cluster(const char *name) {
  Problem p;
  p.ranks = kRanks;
  p.microbatches = kMicrobatches;
  p.name = name;
  if (std::string(name) == "2 x 4") {
    Problem::Links links;
    links.node = 4;
    links.intra = {0.001, 7.2};
    links.inter = {0.001, 0.9};
    p.links = links;
  }
  for (int r = 0; r < kRanks; ++r) {
    Problem::Device d;
    bool slow = std::string(name) == "4 + 4" && r >= 4;
    d.name = slow ? "half" : "full";
    d.speed = slow ? 0.5 : 1.0;
    d.memory = slow ? 40.0 : 80.0;
    p.devices.push_back(d);
  }
  return p;
}

/// Megatron's even split of the blocks over S stages (the first stages
/// take the remainder); the embedding joins the stage of the block after
/// it, the head the stage of the block before it.
Partition evenSplit(const Model &m, int stages) {
  int blocks = std::count(m.block.begin(), m.block.end(), true);
  std::vector<int> blockIndex;
  for (size_t l = 0; l < m.layers.size(); ++l)
    if (m.block[l])
      blockIndex.push_back(static_cast<int>(l));
  Partition p;
  p.first.push_back(0);
  int done = 0;
  for (int s = 1; s < stages; ++s) {
    done += blocks / stages + (s - 1 < blocks % stages ? 1 : 0);
    p.first.push_back(blockIndex[done]);
  }
  p.first.push_back(static_cast<int>(m.layers.size()));
  return p;
}

struct Outcome {
  double makespan = std::numeric_limits<double>::infinity();
  double peakOverCapacity = 0.0;
  std::string what;
};

Outcome measure(const KindResult &r, const Problem &problem) {
  Outcome o;
  o.makespan = r.timeline.makespan;
  for (int k = 0; k < problem.ranks; ++k)
    o.peakOverCapacity = std::max(o.peakOverCapacity,
                                  r.timeline.peak(k) / problem.capacityOf(k));
  return o;
}

Outcome baseline(const Model &m, const Problem &shell) {
  Outcome best;
  for (int v : {1, 2}) {
    Partition cut = evenSplit(m, v * kRanks);
    Problem staged = stagedProblem(shell, m.layers, cut);
    KindRequest request;
    request.kind = v == 1 ? "1f1b" : "interleaved-1f1b";
    llvm::Expected<KindResult> r = scheduleByName(staged, request);
    if (!r) {
      llvm::consumeError(r.takeError());
      continue;
    }
    Outcome o = measure(*r, staged);
    o.what = fmt::format(
        "{} (v = {}){}", request.kind, v,
        r->recompute == "none" ? "" : ", recompute " + r->recompute);
    if (o.makespan < best.makespan)
      best = o;
  }
  return best;
}

} // namespace

int main() {
  fmt::print("| model | cluster | baseline step | baseline | auto step | "
             "baseline / auto | auto's peak / capacity | auto's choice | "
             "auto s |\n|---|---|---|---|---|---|---|---|---|\n");
  double sum = 0.0, worst = std::numeric_limits<double>::infinity();
  int count = 0;
  for (const char *clusterName : {"8 equal", "4 + 4", "2 x 4"})
    for (const char *modelName : {"dense", "moe", "hybrid", "vlm"}) {
      Model m = makeModel(modelName);
      Problem shell = cluster(clusterName);
      Outcome base = baseline(m, shell);
      KindRequest request;
      request.kind = "auto";
      request.timeLimit = 2.0;
      auto t0 = std::chrono::steady_clock::now();
      llvm::Expected<LayerSearchResult> found =
          searchLayerPipeline(shell, m.layers, request);
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      if (!found) {
        fmt::print("| {} | {} | {:.1f} | {} | - | - | - | {} | {:.2f} |\n",
                   modelName, clusterName, base.makespan, base.what,
                   llvm::toString(found.takeError()), seconds);
        continue;
      }
      Outcome mine = measure(found->result, found->problem);
      double ratio = base.makespan / mine.makespan;
      sum += ratio;
      worst = std::min(worst, ratio);
      ++count;
      fmt::print("| {} | {} | {:.1f} | {} | {:.1f} | {:.3f} | {:.2f} | {} | "
                 "{:.2f} |\n",
                 modelName, clusterName, base.makespan, base.what,
                 mine.makespan, ratio, mine.peakOverCapacity, found->choice,
                 seconds);
    }
  fmt::print("\nbaseline / auto over the {} combinations: mean {:.3f}, lowest "
             "{:.3f}\n",
             count, count ? sum / count : 0.0, worst);
  return 0;
}
