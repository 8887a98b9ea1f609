//===- LengthsBench.cpp - Per-batch schedules for unequal lengths ---------===//
//
// Microbatches of different sequence lengths: one schedule planned once for
// the mean length and reused for every batch, against auto re-planned for
// each batch under a per-batch time limit, and how long re-planning takes.
//
// Cost model (stated in the README):
// - 8 ranks, 8 stages of 4 transformer blocks (hidden 4096), 32
//   microbatches per batch. At the reference length l0 = 4096 a stage's
//   F = I = W = 1 time unit and it keeps 1 memory unit of activation
//   (weight_grad 0.5); costs grow as l + l^2 / 16384 (attention's
//   quadratic term is a quarter of the linear one at l0), memory and
//   messages as l. Latency 0.02.
// - Lengths: log-normal, median 2048 tokens, sigma 1.0, clipped to
//   [256, 32768] and rounded to a multiple of 64; batch b draws its 32
//   lengths with seed b. The planned-once schedules see the distribution's
//   mean length for every microbatch (E = 2048 e^{1/2}, about 3377).
// - Planned once: zb-h1 and auto (10 s search), both generated for the
//   mean length. Per batch: auto with the batch's lengths and a 15 ms
//   search in all (the first argument changes it; the four microbatch
//   orders share it), starting from the two planned-once schedules. Every
//   schedule's memory is reported against the highest 1F1B peak of the
//   same batch (lengths as drawn), auto's default limit.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <random>

using namespace stagecraft::pipe::sched;

namespace {

constexpr int kRanks = 8, kStages = 8, kMicrobatches = 32, kBatches = 12;
constexpr double kReference = 4096.0;

Problem baseProblem() {
  Problem problem;
  problem.name = "lengths";
  problem.ranks = kRanks;
  problem.microbatches = kMicrobatches;
  problem.latency = 0.02;
  for (int s = 0; s < kStages; ++s) {
    Stage st;
    st.name = fmt::format("s{}", s);
    st.forward = st.backwardInput = st.backwardWeight = 1.0;
    st.activation = 1.0;
    st.weightGrad = 0.5;
    st.output = 0.05;
    st.scalingLinear = 1.0;
    st.scalingQuadratic = 1.0 / 16384.0;
    problem.stages.push_back(st);
  }
  problem.referenceLength = kReference;
  return problem;
}

std::vector<double> drawLengths(unsigned seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> dist(std::log(2048.0), 1.0);
  std::vector<double> lengths;
  for (int m = 0; m < kMicrobatches; ++m) {
    double l = std::clamp(dist(rng), 256.0, 32768.0);
    lengths.push_back(std::max(64.0, std::round(l / 64.0) * 64.0));
  }
  return lengths;
}

double peakOf(const Timeline &t) {
  return *std::max_element(t.peakMemory.begin(), t.peakMemory.end());
}

} // namespace

int main(int argc, char **argv) {
  // The per-batch budget in ms (default 15).
  const double budgetMs = argc > 1 ? std::atof(argv[1]) : 15.0;
  if (!(budgetMs > 0.0)) {
    fmt::print(stderr, "usage: stagecraft-lengths-bench [budget-ms > 0]\n");
    return 1;
  }
  const double mean = 2048.0 * std::exp(0.5);
  Problem planned = baseProblem();
  planned.lengths.assign(kMicrobatches, mean);
  KindRequest zb;
  zb.kind = "zb-h1";
  llvm::Expected<KindResult> fixedZb = scheduleByName(planned, zb);
  KindRequest autoOnce;
  autoOnce.kind = "auto";
  llvm::Expected<KindResult> fixedAuto = scheduleByName(planned, autoOnce);
  if (!fixedZb || !fixedAuto) {
    fmt::print(stderr, "planning for the mean failed\n");
    return 1;
  }
  fmt::print("| batch | lengths (min / median / max) | zb-h1 planned once | "
             "auto planned once | auto per batch | planned once (best) / per "
             "batch | re-planning ms | peak / 1F1B peak (once, per batch) | "
             "auto's choice |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");
  double ratioSum = 0.0, worstMs = 0.0, msSum = 0.0;
  int overOnce = 0, overPer = 0;
  for (int b = 1; b <= kBatches; ++b) {
    Problem batch = baseProblem();
    batch.lengths = drawLengths(b);
    std::vector<double> sorted = batch.lengths;
    std::sort(sorted.begin(), sorted.end());
    llvm::Expected<std::vector<double>> peaks = oneFOneBPeakMemory(batch);
    llvm::Expected<Timeline> onceZb = simulate(batch, fixedZb->schedule);
    llvm::Expected<Timeline> onceAuto = simulate(batch, fixedAuto->schedule);
    KindRequest perBatch;
    perBatch.kind = "auto";
    perBatch.timeLimit = budgetMs / 1000.0;
    perBatch.starts = {fixedZb->schedule, fixedAuto->schedule};
    auto t0 = std::chrono::steady_clock::now();
    llvm::Expected<KindResult> replanned = scheduleByName(batch, perBatch);
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - t0)
                    .count();
    if (!peaks || !onceZb || !onceAuto || !replanned) {
      fmt::print(stderr, "batch {} failed\n", b);
      return 1;
    }
    double limit = *std::max_element(peaks->begin(), peaks->end());
    // The planned-once schedule that fits this batch's 1F1B memory, else
    // the faster one.
    bool zbFits = peakOf(*onceZb) <= limit + 1e-9,
         autoFits = peakOf(*onceAuto) <= limit + 1e-9;
    const Timeline &best =
        zbFits && autoFits
            ? (onceZb->makespan <= onceAuto->makespan ? *onceZb : *onceAuto)
        : autoFits ? *onceAuto
                   : *onceZb;
    double ratio = best.makespan / replanned->timeline.makespan;
    ratioSum += ratio;
    msSum += ms;
    worstMs = std::max(worstMs, ms);
    overOnce += peakOf(best) > limit + 1e-9;
    overPer += peakOf(replanned->timeline) > limit + 1e-9;
    fmt::print("| {} | {:.0f} / {:.0f} / {:.0f} | {:.1f} | {:.1f} | {:.1f} | "
               "{:.3f} | {:.1f} | {:.2f}, {:.2f} | {} |\n",
               b, sorted.front(), sorted[kMicrobatches / 2], sorted.back(),
               onceZb->makespan, onceAuto->makespan,
               replanned->timeline.makespan, ratio, ms, peakOf(best) / limit,
               peakOf(replanned->timeline) / limit, replanned->choice);
  }
  fmt::print("\nplanned once (the faster that fits, else zb-h1) / auto per "
             "batch over {} batches: mean {:.3f}; re-planning {:.1f} ms on "
             "average, {:.1f} ms at most (goal < 20 ms); batches over the "
             "1F1B peak: planned once {}, per batch {}; budget {} ms\n",
             kBatches, ratioSum / kBatches, msSum / kBatches, worstMs, overOnce,
             overPer, budgetMs);
  return 0;
}
