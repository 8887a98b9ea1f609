//===- QualityBench.cpp - Schedule quality of every kind vs auto ----------===//
//
// For ranks in {4, 8, 16, 32}, microbatches in {p, 2p, 4p, 8p} and three cost
// profiles, prints per kind: makespan / lower bound, bubble ratio, highest
// peak memory / 1F1B's highest peak, and generation time. The model has 2p
// stages (each a half of a 1F1B stage), so every placement applies: blocks
// of two for gpipe/1f1b/zb-h1/zb-h2, round-robin for interleaved, V for
// zb-v. `auto` runs at the default budget (1F1B's highest peak).
//   stagecraft-quality-bench [max-ranks]
//
//===----------------------------------------------------------------------===//

#include "bench/HalfStageModel.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/AutoScheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::bench;

int main(int argc, char **argv) {
  int maxRanks = argc > 1 ? std::atoi(argv[1]) : 32;
  const Profile profiles[] = {
      {"uniform", 1.0, 1.0, 1.0, 0.0, 1.0, 1.0},
      {"measured", 1.0, 1.1, 0.9, 0.05, 1.0, 1.0},
      {"hetero", 1.0, 1.0, 1.0, 0.1, 1.3, 1.6},
  };
  const ScheduleKind kinds[] = {ScheduleKind::GPipe,
                                ScheduleKind::OneFOneB,
                                ScheduleKind::Interleaved1F1B,
                                ScheduleKind::ZBH1,
                                ScheduleKind::ZBH2,
                                ScheduleKind::ZBV,
                                ScheduleKind::DualPipeV};
  // The detailed rows are kept and printed after the summary matrix.
  std::string details =
      "| profile | p | m | kind | makespan/LB | bubble | "
      "peak/1F1B | gen ms |\n|---|---|---|---|---|---|---|---|\n";
  std::string matrix = "| profile | p | m |";
  for (ScheduleKind kind : kinds)
    matrix += fmt::format(" {} |", scheduleKindName(kind).str());
  matrix += " auto | auto gen ms |\n|---|---|---|";
  for (size_t i = 0; i < std::size(kinds) + 2; ++i)
    matrix += "---|";
  matrix += "\n";
  int autoWorse = 0;
  for (const Profile &profile : profiles)
    for (int p : {4, 8, 16, 32}) {
      if (p > maxRanks)
        continue;
      for (int m : {p, 2 * p, 4 * p, 8 * p}) {
        Problem problem = halfStageProblem(profile, p, m, /*weightGrad=*/0.5);
        double bound = lowerBound(problem);
        double budget = highest(*oneFOneBPeakMemory(problem));
        double bestFixed = 1e300;
        matrix += fmt::format("| {} | {} | {} |", profile.name, p, m);
        auto row = [&](const std::string &kind, const Schedule &s, double ms) {
          Timeline t = *simulate(problem, s);
          details +=
              fmt::format("| {} | {} | {} | {} | {:.4f} | {:.4f} | "
                          "{:.3f} | {:.1f} |\n",
                          profile.name, p, m, kind, t.makespan / bound,
                          t.bubbleRatio, highest(t.peakMemory) / budget, ms);
          // Over-budget results are marked: auto may not pick them.
          bool over = highest(t.peakMemory) > budget * (1 + 1e-9);
          matrix +=
              fmt::format(" {:.3f}{} |", t.makespan / bound, over ? "*" : "");
          return t;
        };
        for (ScheduleKind kind : kinds) {
          auto t0 = std::chrono::steady_clock::now();
          llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
          double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
          if (!s) {
            fmt::print(stderr, "{}: {}\n", scheduleKindName(kind).str(),
                       llvm::toString(s.takeError()));
            continue;
          }
          Timeline t = row(scheduleKindName(kind).str(), *s, ms);
          if (highest(t.peakMemory) <= budget * (1 + 1e-9))
            bestFixed = std::min(bestFixed, t.makespan);
        }
        auto t0 = std::chrono::steady_clock::now();
        llvm::Expected<AutoResult> a = autoSchedule(problem, {});
        double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
        if (!a) {
          fmt::print(stderr, "auto: {}\n", llvm::toString(a.takeError()));
          return 1;
        }
        Timeline t = row("auto (" + a->name + ")", a->schedule, ms);
        matrix += fmt::format(" {:.0f} |\n", ms);
        if (t.makespan > bestFixed + 1e-9)
          ++autoWorse;
      }
    }
  fmt::print(
      "makespan / lower bound (* = peak memory above the 1F1B budget)\n\n"
      "{}\n{}\nauto worse than the best fixed kind within budget: {} "
      "cases\n",
      matrix, details, autoWorse);
  return autoWorse ? 1 : 0;
}
