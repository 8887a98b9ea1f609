//===- HelixBench.cpp - HelixPipe against the layer pipelines, on devices
//--===//
//
// Simulated step time of HelixPipe against 1f1b, interleaved-1f1b, zb-h1,
// zb-v and auto for a 7B-like model (32 layers, hidden 4096, 32 heads,
// vocab 32000) at the paper's scale, every kind held to a device capacity.
//
// The cluster: 64 GPUs = 8 pipeline ranks x 8-way tensor + sequence
// parallelism inside a node. Each figure is per GPU: a pipeline rank's work
// and activations divided by 8, plus the tensor-parallel collectives (per
// layer, 2 all-gathers and 2 reduce-scatters of b S h bf16 values forward
// and as many backward, each moving 7/8 of them) at NVLink bandwidth.
// Pipeline transfers move a GPU's shard over its own inter-node link.
// Devices: H20 (96 GB, 148 TFLOP/s bf16 dense) and H200 (141 GB, 989
// TFLOP/s), both at 50 % of peak; NVLink 400 GB/s; inter-node 25 GB/s and
// 10 us per GPU. 16 microbatches of one sequence.
//
// The baselines keep 34 b S h bytes per layer and microbatch (FlashAttention)
// and recompute with `recompute=auto` (the least that fits: per microbatch,
// full or selective). HelixPipe runs with 2 folds, recomputation without
// attention and a 4-chunk MLP. `auto` may choose HelixPipe (the stages
// declare attention): its column is the best of the library's auto over the
// layer kinds and HelixPipe. Times in seconds; "-" where nothing fits.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Helix.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/search/Recompute.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

using namespace stagecraft::pipe::sched;

namespace {

struct Device {
  const char *name;
  double memory; // bytes
  double flops;  // sustained FLOP/s
};

constexpr int kRanks = 8, kTensor = 8, kMicrobatches = 16;
constexpr double kNvlink = 4e11;

struct Result {
  double makespan = std::numeric_limits<double>::infinity();
  double peak = 0.0;
  int recomputed = 0;
  /// The busiest rank's compute, and the part of it spent recomputing.
  double busy = 0.0, recomputeTime = 0.0;
  /// Makespan of the same order without a capacity (unfitted), for "-".
  double unfitted = 0.0;
  std::string note;
  bool fits() const { return std::isfinite(makespan); }
};

Result layerKind(const Problem &problem, const char *kind, double timeLimit) {
  KindRequest request;
  request.kind = kind;
  request.timeLimit = timeLimit;
  llvm::Expected<KindResult> r = scheduleByName(problem, request);
  Result out;
  if (!r) {
    out.note = llvm::toString(r.takeError());
    return out;
  }
  out.makespan = r->timeline.makespan;
  for (int k = 0; k < problem.ranks; ++k)
    out.peak = std::max(out.peak, r->timeline.peak(k));
  for (int k = 0; k < problem.ranks; ++k) {
    double rerun = 0.0;
    for (int st : r->schedule.stagesOf(k))
      for (int m = 0; m < problem.microbatches; ++m)
        rerun +=
            recomputeCost(problem.stages[st], r->schedule.recompute.at(st, m));
    if (r->timeline.busy[k] > out.busy) {
      out.busy = r->timeline.busy[k];
      out.recomputeTime = rerun;
    }
  }
  out.recomputed = r->schedule.recompute.count(Recompute::Full) +
                   r->schedule.recompute.count(Recompute::Selective);
  out.note = r->choice.empty() ? r->recompute : r->choice;
  return out;
}

Result helix(const TransformerShape &shape, const LayerCosts &c,
             const Link &link, double capacity) {
  HelixOptions options;
  options.folds = 2;
  options.recompute = true;
  options.mlpChunks = 4;
  Result out;
  llvm::Expected<TaskGraph> graph =
      helixTaskGraph(shape, c, link, kRanks, kMicrobatches, options);
  if (!graph) {
    out.note = llvm::toString(graph.takeError());
    return out;
  }
  llvm::Expected<Timeline> t = simulate(*graph);
  if (!t) {
    out.note = llvm::toString(t.takeError());
    return out;
  }
  for (int k = 0; k < kRanks; ++k)
    out.peak = std::max(out.peak, t->peak(k));
  out.unfitted = t->makespan;
  if (out.peak <= capacity)
    out.makespan = t->makespan;
  // The re-runs: the same graph's busy time without recomputation.
  options.recompute = false;
  llvm::Expected<TaskGraph> plain =
      helixTaskGraph(shape, c, link, kRanks, kMicrobatches, options);
  llvm::Expected<Timeline> tp =
      plain ? simulate(*plain) : llvm::Expected<Timeline>(plain.takeError());
  for (int k = 0; k < kRanks; ++k)
    if (t->busy[k] > out.busy) {
      out.busy = t->busy[k];
      out.recomputeTime = tp ? t->busy[k] - tp->busy[k] : 0.0;
    }
  if (!tp)
    llvm::consumeError(tp.takeError());
  return out;
}

std::string cell(const Result &r) {
  return r.fits() ? fmt::format("{:.2f}", r.makespan) : "-";
}

} // namespace

int main(int argc, char **argv) {
  const Device devices[] = {{"H20 96 GB", 96e9, 0.5 * 148e12},
                            {"H200 141 GB", 141e9, 0.5 * 989e12}};
  const int sequences[] = {8192, 16384, 32768, 65536, 131072, 262144};
  Link link;
  link.bandwidth = 25e9;
  link.latency = 1e-5;
  const double timeLimit = argc > 1 ? std::atof(argv[1]) : 2.0;
  const char *kinds[] = {"1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "auto"};
  for (const Device &device : devices) {
    fmt::print("\n### {}\n\n", device.name);
    fmt::print("| sequence | helix s | 1f1b s | interleaved s | zb-h1 s | "
               "zb-v s | auto s (choice) | best layer kind / helix | "
               "helix peak GB | recomputed F (best layer kind) |\n");
    fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
    std::map<std::string, int> longest;
    std::string breakdown;
    for (int seq : sequences) {
      TransformerShape shape;
      shape.sequence = seq;
      shape.flops = device.flops;
      LayerCosts c = tensorParallelCosts(layerCosts(shape), kTensor, kNvlink);
      Problem eight =
          *layerPipelineProblem(shape, c, link, kRanks, kRanks, kMicrobatches);
      Problem sixteen = *layerPipelineProblem(shape, c, link, kRanks,
                                              2 * kRanks, kMicrobatches);
      eight.capacity = sixteen.capacity = device.memory;
      Result h = helix(shape, c, link, device.memory);
      std::map<std::string, Result> layer;
      layer["1f1b"] = layerKind(eight, "1f1b", timeLimit);
      layer["interleaved-1f1b"] =
          layerKind(sixteen, "interleaved-1f1b", timeLimit);
      layer["zb-h1"] = layerKind(eight, "zb-h1", timeLimit);
      layer["zb-v"] = layerKind(sixteen, "zb-v", timeLimit);
      layer["auto"] = layerKind(sixteen, "auto", timeLimit);
      const Result *best = nullptr;
      for (auto &[name, r] : layer)
        if (r.fits() && (!best || r.makespan < best->makespan))
          best = &r;
      // auto may choose HelixPipe.
      Result autoAll = layer["auto"];
      std::string choice = autoAll.fits() ? "layers" : "-";
      if (h.fits() && (!autoAll.fits() || h.makespan < autoAll.makespan)) {
        autoAll = h;
        choice = "helix";
      }
      for (const char *k : kinds)
        if (layer[k].fits())
          longest[k] = seq;
      if (h.fits())
        longest["helix"] = seq;
      std::string ratio =
          best && h.fits() ? fmt::format("{:.3f}", best->makespan / h.makespan)
                           : "-";
      if (seq >= 65536) {
        // Where the time goes: the busiest rank's compute (with its
        // recomputation) and the rest of the step (bubbles, transfers).
        auto row = [&](const char *name, const Result &r) {
          if (!r.fits())
            return fmt::format("| {}k | {} | does not fit | | | | |\n",
                               seq / 1024, name);
          return fmt::format("| {}k | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} "
                             "| {:.1f} |\n",
                             seq / 1024, name, r.makespan,
                             r.busy - r.recomputeTime, r.recomputeTime,
                             r.makespan - r.busy, r.peak / 1e9);
        };
        breakdown += row("helix", h);
        for (const char *k : kinds)
          breakdown += row(k, layer[k]);
      }
      fmt::print("| {}k | {} | {} | {} | {} | {} | {} ({}) | {} | {:.1f} | {} "
                 "|\n",
                 seq / 1024, cell(h), cell(layer["1f1b"]),
                 cell(layer["interleaved-1f1b"]), cell(layer["zb-h1"]),
                 cell(layer["zb-v"]), cell(autoAll), choice, ratio,
                 h.peak / 1e9,
                 best ? fmt::format("{} of {}", best->recomputed,
                                    kMicrobatches * 2 * kRanks)
                      : "-");
    }
    fmt::print("\nlongest sequence that fits at all:");
    for (const char *k :
         {"helix", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "auto"})
      fmt::print(" {} {};", k,
                 longest.count(k) ? fmt::format("{}k", longest[k] / 1024)
                                  : std::string("none"));
    fmt::print("\n\nwhere the time goes (busiest rank, seconds):\n\n");
    fmt::print("| sequence | kind | step | compute | recomputation | idle + "
               "transfers | peak GB |\n|---|---|---|---|---|---|---|\n{}",
               breakdown);
  }
  return 0;
}
