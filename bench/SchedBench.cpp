//===- SchedBench.cpp - Scheduler library speed and quality ---------------===//
//
// Times generate + verify + simulate in the scheduler library for each fixed
// kind over a range of sizes, up to 64 ranks x 1024 microbatches x 2 chunks
// (zero-bubble kinds: 2 stages per rank),
// and prints a Markdown table with the makespan and bubble of each result.
// Each figure is the best of several repetitions.
//
//===----------------------------------------------------------------------===//

#include "bench/HalfStageModel.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

using namespace stagecraft::pipe::sched;
using stagecraft::pipe::sched::bench::unitProblem;

int main(int argc, char **argv) {
  int repetitions = argc > 1 ? std::atoi(argv[1]) : 3;
  struct Case {
    int ranks, microbatches, chunks;
  };
  const Case cases[] = {{8, 32, 1},   {8, 32, 2},    {32, 256, 1},
                        {32, 256, 2}, {64, 1024, 1}, {64, 1024, 2},
                        {64, 1000, 2}};
  fmt::print("| kind | ranks | microbatches | chunks | actions | makespan | "
             "bubble | generate ms | verify+simulate ms | total ms |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const Case &c : cases) {
    for (ScheduleKind kind :
         {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
          ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1, ScheduleKind::ZBH2,
          ScheduleKind::ZBV, ScheduleKind::DualPipeV}) {
      bool interleaved = kind == ScheduleKind::Interleaved1F1B;
      bool vShape =
          kind == ScheduleKind::ZBV || kind == ScheduleKind::DualPipeV;
      bool zeroBubble =
          kind == ScheduleKind::ZBH1 || kind == ScheduleKind::ZBH2;
      // Zero-bubble kinds on 2 stages per rank (contiguous blocks for
      // zb-h1/zb-h2, the V for zb-v/dualpipev); the others as before.
      if (zeroBubble || vShape ? c.chunks != 2 : interleaved != (c.chunks > 1))
        continue;
      Problem problem =
          unitProblem(c.ranks, c.microbatches, c.ranks * c.chunks);
      double bestGen = 1e30, bestSim = 1e30;
      Timeline timeline;
      size_t actions = 0;
      for (int rep = 0; rep < repetitions; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        llvm::Expected<Schedule> schedule =
            generateSchedule(problem, {kind, interleaved ? c.chunks : 0});
        auto t1 = std::chrono::steady_clock::now();
        if (!schedule) {
          fmt::print(stderr, "error: {}\n",
                     llvm::toString(schedule.takeError()));
          return 1;
        }
        llvm::Expected<Timeline> t = simulate(problem, *schedule);
        auto t2 = std::chrono::steady_clock::now();
        if (!t) {
          fmt::print(stderr, "error: {}\n", llvm::toString(t.takeError()));
          ++failures;
          break;
        }
        timeline = std::move(*t);
        actions = 0;
        for (const auto &rank : schedule->ranks)
          actions += rank.size();
        bestGen = std::min(
            bestGen,
            std::chrono::duration<double, std::milli>(t1 - t0).count());
        bestSim = std::min(
            bestSim,
            std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      fmt::print(
          "| {} | {} | {} | {} | {} | {:.6g} | {:.4f} | {:.1f} | {:.1f} | "
          "{:.1f} |\n",
          scheduleKindName(kind).str(), c.ranks, c.microbatches, c.chunks,
          actions, timeline.makespan, timeline.bubbleRatio, bestGen, bestSim,
          bestGen + bestSim);
    }
  }
  return failures ? 1 : 0;
}
