//===- RecomputeBench.cpp - Recomputation planned with the schedule -------===//
//
// `kind=auto` with a capacity (kind x per-microbatch recomputation, searched
// together) against Megatron-LM's practice: 1F1B or interleaved 1F1B (the
// faster), with uniform recomputation: none where it fits, else selective
// where that fits, else full. 8 pipeline ranks of 80 GB devices (A100 80 GB:
// 312 TFLOP/s bf16 dense at 50 %), 16 microbatches of one sequence,
// sequences 4k to 32k.
//
// - 7B-like (32 layers, hidden 4096, 32 heads): 8 GPUs, one per pipeline
//   rank (no tensor parallelism).
// - 70B-like (80 layers, hidden 8192, 64 heads): 64 GPUs, 8 pipeline ranks
//   x 8-way tensor + sequence parallel; per-GPU work and activations / 8
//   plus the collectives at NVLink 300 GB/s (see HelixBench.cpp).
//
// Costs and memory come from `layerCosts` / `layerPipelineProblem` (34 b S h
// bytes per layer and microbatch; full recomputation keeps each layer's
// input and re-runs the stage's forward; selective re-derives the attention
// output; weights, gradients and Adam state at 16 bytes per parameter).
// Pipeline transfers: 25 GB/s and 10 us per GPU.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Helix.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/search/Recompute.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

using namespace stagecraft::pipe::sched;

namespace {

constexpr int kRanks = 8, kMicrobatches = 16;

struct Model {
  const char *name;
  int layers, hidden, heads, tensor;
};

struct Run {
  std::string what;
  double makespan = std::numeric_limits<double>::infinity();
};

Run schedule(const Problem &problem, const char *kind,
             std::optional<RecomputePolicy> policy, double timeLimit) {
  KindRequest request;
  request.kind = kind;
  request.recompute = policy;
  request.timeLimit = timeLimit;
  llvm::Expected<KindResult> r = scheduleByName(problem, request);
  if (!r) {
    llvm::consumeError(r.takeError());
    return {};
  }
  int recomputed = r->schedule.recompute.count(Recompute::Full) +
                   r->schedule.recompute.count(Recompute::Selective);
  std::string name = r->choice.empty() ? kind : r->choice;
  return {fmt::format("{} ({} of {} F recompute)", name, recomputed,
                      problem.numStages() * problem.microbatches),
          r->timeline.makespan};
}

} // namespace

int main(int argc, char **argv) {
  const double timeLimit = argc > 1 ? std::atof(argv[1]) : 2.0;
  const Model models[] = {{"7B", 32, 4096, 32, 1}, {"70B", 80, 8192, 64, 8}};
  Link link;
  link.bandwidth = 25e9;
  link.latency = 1e-5;
  fmt::print("| model | sequence | Megatron practice | step s | auto | step s "
             "| speedup |\n|---|---|---|---|---|---|---|\n");
  double sum = 0.0;
  int rows = 0;
  for (const Model &model : models)
    for (int seq : {4096, 8192, 16384, 32768}) {
      TransformerShape shape;
      shape.layers = model.layers;
      shape.hidden = model.hidden;
      shape.heads = model.heads;
      shape.sequence = seq;
      shape.flops = 0.5 * 312e12;
      LayerCosts c = tensorParallelCosts(layerCosts(shape), model.tensor, 3e11);
      Problem eight =
          *layerPipelineProblem(shape, c, link, kRanks, kRanks, kMicrobatches);
      Problem sixteen = *layerPipelineProblem(shape, c, link, kRanks,
                                              2 * kRanks, kMicrobatches);
      eight.capacity = sixteen.capacity = 80e9;
      // Megatron: the least uniform recomputation at which 1F1B or
      // interleaved fits, the faster of the two there.
      Run megatron;
      for (RecomputePolicy level :
           {RecomputePolicy::None, RecomputePolicy::Selective,
            RecomputePolicy::Full}) {
        for (auto [problem, kind] :
             {std::pair<const Problem *, const char *>{&eight, "1f1b"},
              {&sixteen, "interleaved-1f1b"}}) {
          Run r = schedule(*problem, kind, level, timeLimit);
          if (r.makespan < megatron.makespan)
            megatron = {fmt::format("{}, {}", kind, recomputePolicyName(level)),
                        r.makespan};
        }
        if (std::isfinite(megatron.makespan))
          break;
      }
      Run best = schedule(sixteen, "auto", std::nullopt, timeLimit);
      Run eightAuto = schedule(eight, "auto", std::nullopt, timeLimit);
      if (eightAuto.makespan < best.makespan)
        best = eightAuto;
      auto cell = [](const Run &r) {
        return std::isfinite(r.makespan) ? fmt::format("{:.3f}", r.makespan)
                                         : std::string("-");
      };
      std::string speedup = "-";
      if (std::isfinite(megatron.makespan) && std::isfinite(best.makespan)) {
        double x = megatron.makespan / best.makespan;
        speedup = fmt::format("{:.3f}", x);
        sum += x;
        ++rows;
      }
      fmt::print("| {} | {}k | {} | {} | {} | {} | {} |\n", model.name,
                 seq / 1024, megatron.what.empty() ? "-" : megatron.what,
                 cell(megatron), best.what.empty() ? "-" : best.what,
                 cell(best), speedup);
    }
  fmt::print("\naverage speedup of auto over Megatron's practice: {:.3f} "
             "({} configurations)\n",
             rows ? sum / rows : 0.0, rows);
  return 0;
}
