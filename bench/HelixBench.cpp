//===- HelixBench.cpp - HelixPipe against the layer pipelines -------------===//
//
// Simulated step time of HelixPipe (2 folds, recomputation without
// attention) against 1f1b, zb-h1, zb-v and auto for a 7B-like model (32
// layers, hidden 4096, 32 heads, vocab 32000) on 8 ranks, 32 microbatches of
// one sequence, for sequence lengths 8k to 128k, with the cost model of
// `layerCosts` (4e14 FLOP/s per device, links of 50 GB/s and 10 us), plus
// the highest peak memory per rank.
//
//===----------------------------------------------------------------------===//

#include "scheduler/AutoScheduler.h"
#include "scheduler/Generators.h"
#include "scheduler/Helix.h"

#include <fmt/format.h>

#include <algorithm>

using namespace stagecraft::pipe::sched;

static double highest(const std::vector<double> &v) {
  return *std::max_element(v.begin(), v.end());
}

int main() {
  const int p = 8, m = 32;
  Link link;
  link.bandwidth = 5e10;
  fmt::print("| sequence | helix s | 1f1b s | zb-h1 s | zb-v s | auto s | "
             "best other / helix | helix peak GB | best other peak GB |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");
  for (int seq : {8192, 16384, 32768, 65536, 131072}) {
    TransformerShape shape;
    shape.sequence = seq;
    LayerCosts costs = layerCosts(shape);
    llvm::Expected<TaskGraph> graph =
        helixTaskGraph(shape, costs, link, p, m, HelixOptions{});
    if (!graph) {
      fmt::print(stderr, "helix: {}\n", llvm::toString(graph.takeError()));
      return 1;
    }
    Timeline helix = *simulate(*graph);
    Problem eight = *layerPipelineProblem(shape, costs, link, p, p, m);
    Problem sixteen = *layerPipelineProblem(shape, costs, link, p, 2 * p, m);
    auto run = [&](const Problem &problem, ScheduleKind kind) {
      return *simulate(problem, *generateSchedule(problem, {kind}));
    };
    Timeline onefoneb = run(eight, ScheduleKind::OneFOneB);
    Timeline zbh1 = run(eight, ScheduleKind::ZBH1);
    Timeline zbv = run(sixteen, ScheduleKind::ZBV);
    AutoOptions options;
    options.timeLimit = 5.0;
    llvm::Expected<AutoResult> a = autoSchedule(sixteen, options);
    if (!a) {
      fmt::print(stderr, "auto: {}\n", llvm::toString(a.takeError()));
      return 1;
    }
    Timeline autoT = *simulate(sixteen, a->schedule);
    const Timeline *best = &onefoneb;
    for (const Timeline *t : {&zbh1, &zbv, &autoT})
      if (t->makespan < best->makespan)
        best = t;
    fmt::print("| {}k | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | {:.3f} | "
               "{:.1f} | {:.1f} |\n",
               seq / 1024, helix.makespan, onefoneb.makespan, zbh1.makespan,
               zbv.makespan, autoT.makespan, best->makespan / helix.makespan,
               highest(helix.peakMemory) / 1e9, highest(best->peakMemory) / 1e9);
  }
  return 0;
}
