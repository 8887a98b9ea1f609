//===- DataParallelBench.cpp - Pipelines inside data parallelism ----------===//
//
// Simulated public-scale settings: an 8B-like (32 layers, hidden 4096) and
// a 70B-like model (80 layers, hidden 8192), each layer 12 h^2 parameters,
// an embedding on the first stage and an LM head (vocabulary 128256) on the
// last, cut into 2 x PP stages; PP 4, 8, 16; DP 8, 32, 64 with a global
// batch of 512 sequences of 4096 tokens (m = 512 / DP microbatches a
// replica); 400 TFLOP/s per GPU, I = W = F; bf16 gradients; the
// data-parallel link 400 Gb/s (50 GB/s) with 10 us a ring step; sharded
// rows gather and reduce-scatter over the whole group; Adam at 16 bytes of
// memory traffic per gradient byte at 3.35 TB/s. Times in ms.
//
// Per row: the fastest kind (within 1F1B's peak memory) under torch's rule
// (a stage's reduction after its last backward) and under Megatron's
// bucketed overlap (80 MB buckets), against planDataParallel (schedule,
// placement and bucket size chosen together), with the lower bound and
// the exposed data-parallel time (largest per rank); beside it, auto's
// pipeline schedule under torch's rule, which separates what the schedule
// gains from what the placement does.
//   stagecraft-dp-bench [max-pp, default 16]
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/DataParallel.h"
#include "scheduler/search/DataParallelSearch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

using namespace stagecraft::pipe::sched;

namespace {

struct Model {
  const char *name;
  int layers;
  double hidden;
};

constexpr double kVocab = 128256, kTokens = 4096, kFlopsPerMs = 400e9,
                 kBytesPerMs = 50e6, kStepLatency = 0.01,
                 kAdamPerByte = 16 / 3.35e9;

std::pair<Problem, DataParallel> setting(const Model &model, int pp, int dp,
                                         DataParallel::Sharding sharding) {
  const int stages = 2 * pp;
  const double layerParams = 12 * model.hidden * model.hidden;
  const double layerMs = 2 * layerParams * kTokens / kFlopsPerMs;
  Problem problem;
  problem.name = model.name;
  problem.ranks = pp;
  problem.microbatches = 512 / dp;
  problem.latency = 0.02;
  DataParallel d;
  d.degree = dp;
  d.sharding = sharding;
  d.latency = kStepLatency;
  d.bandwidth = kBytesPerMs;
  d.optimizerPerByte = kAdamPerByte;
  for (int s = 0; s < stages; ++s) {
    // Layers spread as evenly as the count allows, the remainder first.
    const int layers =
        model.layers / stages + (s < model.layers % stages ? 1 : 0);
    double params = layers * layerParams;
    double ms = layers * layerMs;
    if (s == 0)
      params += kVocab * model.hidden;
    if (s == stages - 1) {
      params += kVocab * model.hidden;
      ms += 2 * kVocab * model.hidden * kTokens / kFlopsPerMs;
    }
    Stage st;
    st.name = "s" + std::to_string(s);
    st.forward = st.backwardInput = st.backwardWeight = ms;
    st.activation = 1.0;
    st.weightGrad = 0.5;
    problem.stages.push_back(st);
    d.gradBytes.push_back(2 * params);
  }
  return {problem, d};
}

} // namespace

int main(int argc, char **argv) {
  const int maxPp = argc > 1 ? std::atoi(argv[1]) : 16;
  const Model models[] = {{"8B-like", 32, 4096}, {"70B-like", 80, 8192}};
  fmt::print("| model | PP | DP | m | sharding | torch's rule: step "
             "(kind) | exposed | Megatron buckets: step (kind) | exposed | "
             "auto's schedule, torch's rule | "
             "Stagecraft: step | exposed | its choice | bound | "
             "Stagecraft / best rule |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int worse = 0, rows = 0;
  double worst = 0.0, bestGain = 1.0;
  for (const Model &model : models)
    for (int pp : {4, 8, 16})
      for (int dp : {8, 32, 64})
        for (auto sharding :
             {DataParallel::Sharding::None, DataParallel::Sharding::Full}) {
          if (pp > maxPp)
            continue;
          auto [problem, d] = setting(model, pp, dp, sharding);
          const double limit = [&] {
            std::vector<double> peaks =
                llvm::cantFail(oneFOneBPeakMemory(problem));
            return *std::max_element(peaks.begin(), peaks.end());
          }();
          std::optional<DataParallelPlan> rule[2];
          for (ScheduleKind kind : allScheduleKinds()) {
            llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
            if (!s) {
              llvm::consumeError(s.takeError());
              continue;
            }
            for (int k = 0; k < 2; ++k) {
              DataParallelOptions options{
                  k == 0 ? ReducePlacement::AfterLastBackward
                         : ReducePlacement::Bucketed,
                  kMegatronBucketBytes};
              llvm::Expected<DataParallelPlan> plan = evaluateDataParallel(
                  problem, *s, d, options, scheduleKindName(kind).str());
              if (!plan) {
                llvm::consumeError(plan.takeError());
                continue;
              }
              double peak = *std::max_element(plan->timeline.peakMemory.begin(),
                                              plan->timeline.peakMemory.end());
              if (peak > limit * (1 + 1e-9))
                continue;
              if (!rule[k] || plan->dp.step < rule[k]->dp.step)
                rule[k] = std::move(*plan);
            }
          }
          KindRequest request;
          request.timeLimit = 1.0;
          std::vector<DataParallelPlan> tried;
          llvm::Expected<DataParallelPlan> ours =
              planDataParallel(problem, d, request, &tried);
          // auto's own schedule under torch's rule: what the pipeline
          // schedule gains alone, before the placement.
          double autoTorch = 0.0;
          for (const DataParallelPlan &t : tried)
            if (t.schedule.rfind("auto (", 0) == 0 &&
                t.schedule.find("W after I") == std::string::npos &&
                t.placement == "torch")
              autoTorch = t.dp.step;
          if (!ours || !rule[0] || !rule[1]) {
            fmt::print(
                stderr, "error: {} PP {} DP {}: {}\n", model.name, pp, dp,
                ours ? "no kind fits" : llvm::toString(ours.takeError()));
            return 1;
          }
          const double baseline = std::min(rule[0]->dp.step, rule[1]->dp.step);
          ++rows;
          worse += ours->dp.step > baseline + 1e-9;
          worst = std::max(worst, ours->dp.step / baseline);
          bestGain = std::min(bestGain, ours->dp.step / baseline);
          fmt::print("| {} | {} | {} | {} | {} | {:.0f} ({}) | {:.0f} | {:.0f} "
                     "({}) | {:.0f} | {:.0f} | {:.0f} | {:.0f} | {}; {} | "
                     "{:.0f} | {:.3f} |\n",
                     model.name, pp, dp, problem.microbatches,
                     shardingName(sharding).str(), rule[0]->dp.step,
                     rule[0]->schedule, rule[0]->dp.maxExposed(),
                     rule[1]->dp.step, rule[1]->schedule,
                     rule[1]->dp.maxExposed(), autoTorch, ours->dp.step,
                     ours->dp.maxExposed(), ours->schedule, ours->placement,
                     ours->bound, ours->dp.step / baseline);
        }
  fmt::print("\nStagecraft above the best rule on {} of {} rows; its step / "
             "the best rule's from {:.3f} to {:.3f}\n",
             worse, rows, bestGain, worst);
  return 0;
}
