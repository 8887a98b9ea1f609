//===- ZeroBubbleBench.cpp - Zero-bubble kinds against their bounds -------===//
//
// The schedule-quality table: for each cost profile and (p, m), every kind's
// makespan, the zero-bubble papers' per-rank span, peak memory against
// 1F1B's highest peak, `auto` at the default budget (1F1B's highest peak),
// and the two lower bounds (chain delay plus work; the memory-aware bound at
// that budget). The model has 2p stages of half a rank's costs, placed in
// blocks of two for gpipe/1f1b/zb-h1/zb-h2, round-robin for interleaved and
// V-shaped for zb-v and dualpipev. zb-v is also given against the
// memory-aware bound of its own (V) placement, which the kind cannot leave.
//   stagecraft-zb-bench [auto-seconds]
//
//===----------------------------------------------------------------------===//

#include "bench/HalfStageModel.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/LowerBound.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::bench;

int main(int argc, char **argv) {
  double autoSeconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const std::vector<Profile> profiles = zeroBubbleProfiles();
  const ScheduleKind kinds[] = {ScheduleKind::OneFOneB, ScheduleKind::ZBH1,
                                ScheduleKind::ZBH2, ScheduleKind::ZBV,
                                ScheduleKind::DualPipeV};
  const std::pair<int, int> sizes[] = {{4, 8}, {8, 16}, {8, 32}, {16, 64}};
  std::string header = "| profile | p, m |";
  for (ScheduleKind kind : kinds)
    header += fmt::format(" {} |", scheduleKindName(kind).str());
  header += " auto | bound | memory-aware bound | auto / mem. bound | zb-v / "
            "its V's mem. bound |\n"
            "|---|---|";
  for (size_t i = 0; i < std::size(kinds) + 5; ++i)
    header += "---|";
  std::string detail = "| profile | p, m | kind | makespan | span | peak / "
                       "1F1B | gen ms |\n|---|---|---|---|---|---|---|\n";
  fmt::print("makespan per kind (time units); auto at the 1F1B budget with "
             "time-limit={}s\n\n{}\n",
             autoSeconds, header);
  double worstAuto = 0.0, worstZBV = 0.0, worstZBVOwn = 0.0;
  for (const Profile &profile : profiles)
    for (auto [p, m] : sizes) {
      Problem problem = halfStageProblem(profile, p, m, /*weightGrad=*/0.25);
      double budget = highest(*oneFOneBPeakMemory(problem));
      std::string row = fmt::format("| {} | {}, {} |", profile.name, p, m);
      auto record = [&](const std::string &kind, const Schedule &s, double ms) {
        Timeline t = *simulate(problem, s);
        detail += fmt::format("| {} | {}, {} | {} | {:.2f} | {:.2f} | {:.3f} "
                              "| {:.1f} |\n",
                              profile.name, p, m, kind, t.makespan, t.maxSpan(),
                              highest(t.peakMemory) / budget, ms);
        return t;
      };
      double zbv = 0.0, zbvOwn = 0.0;
      for (ScheduleKind kind : kinds) {
        auto t0 = std::chrono::steady_clock::now();
        llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
        double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
        if (!s) {
          row += " - |";
          llvm::consumeError(s.takeError());
          continue;
        }
        Timeline t = record(scheduleKindName(kind).str(), *s, ms);
        row += fmt::format(" {:.2f} |", t.makespan);
        if (kind == ScheduleKind::ZBV) {
          zbv = t.makespan;
          zbvOwn = t.makespan /
                   memoryAwareLowerBound(problem, s->placement,
                                         std::vector<double>(p, budget));
        }
      }
      AutoOptions options;
      options.timeLimit = autoSeconds;
      auto t0 = std::chrono::steady_clock::now();
      llvm::Expected<AutoResult> a = autoSchedule(problem, options);
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
      if (!a) {
        fmt::print(stderr, "auto: {}\n", llvm::toString(a.takeError()));
        return 1;
      }
      Timeline t = record("auto (" + a->name + ")", a->schedule, ms);
      double memBound = a->memoryAwareBound;
      row += fmt::format(" {:.2f} | {:.2f} | {:.2f} | {:.3f} | {:.3f} |",
                         t.makespan, a->lowerBound, memBound,
                         t.makespan / memBound, zbvOwn);
      worstAuto = std::max(worstAuto, t.makespan / memBound);
      worstZBV = std::max(worstZBV, zbv / memBound);
      worstZBVOwn = std::max(worstZBVOwn, zbvOwn);
      fmt::print("{}\n", row);
    }
  fmt::print("\nworst auto / memory-aware bound: {:.4f}; worst zb-v / "
             "memory-aware bound: {:.4f}; worst zb-v / the memory-aware "
             "bound of its V placement: {:.4f}\n\n{}",
             worstAuto, worstZBV, worstZBVOwn, detail);
  return 0;
}
