//===- ExactBench.cpp - How far the exact search reaches ------------------===//
//
// The branch-and-bound of scheduler/ExactSearch on the quality benchmark's
// model (2p half stages, the zero-bubble profiles) at the 1F1B budget, on
// every placement `auto` searches, seeded with auto's schedule where auto
// chose that placement, else with the kind built on it (zb-h1, zb-v,
// interleaved-1f1b) if any. Per point: whether optimality was proven within the
// time limit, the nodes searched and the seconds taken, with the
// order-statistic cuts at every node and with only each rank's remaining work
// (before), and the optimum (or best found) against auto and the memory-aware
// bound.
//   stagecraft-exact-bench [seconds-per-search] [auto-seconds]
//
//===----------------------------------------------------------------------===//

#include "bench/HalfStageModel.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/ExactSearch.h"
#include "scheduler/search/LowerBound.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::bench;

int main(int argc, char **argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  double autoSeconds = argc > 2 ? std::atof(argv[2]) : 1.0;
  const std::vector<Profile> profiles = zeroBubbleProfiles();
  const std::pair<int, int> sizes[] = {{2, 4}, {3, 6}, {4, 4}, {4, 8}};
  fmt::print("exact search at the 1F1B budget, {} s per search; auto at "
             "time-limit={}s\n\n"
             "| profile | p, m | placement | proven (cuts) | nodes | s | "
             "proven (before) | nodes | s | best | memory-aware bound |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|\n",
             seconds, autoSeconds);
  int points = 0, provenCuts = 0, provenBefore = 0;
  double worstGap = 0.0;
  std::string summary =
      "| profile | p, m | best over the placements | proven | auto | "
      "memory-aware bound | auto / best |\n|---|---|---|---|---|---|---|\n";
  for (const Profile &profile : profiles)
    for (auto [p, m] : sizes) {
      Problem problem = halfStageProblem(profile, p, m, /*weightGrad=*/0.25);
      double budget = highest(*oneFOneBPeakMemory(problem));
      std::vector<double> limits(p, budget);
      AutoOptions autoOptions;
      autoOptions.timeLimit = autoSeconds;
      llvm::Expected<AutoResult> a = autoSchedule(problem, autoOptions);
      if (!a) {
        fmt::print(stderr, "auto: {}\n", llvm::toString(a.takeError()));
        return 1;
      }
      double autoMakespan = simulate(problem, a->schedule)->makespan;
      double optimum = std::numeric_limits<double>::infinity();
      bool allProven = true;
      struct PlacementResult {
        double best, bound;
        bool proven;
      };
      std::vector<PlacementResult> results;
      for (const NamedPlacement &np : candidatePlacements(problem)) {
        const std::vector<int> &placement = np.placement;
        // Seeded with auto's schedule where it chose this placement, else
        // with the kind built on it when there is one.
        std::optional<Schedule> seed;
        if (a->schedule.placement == placement)
          seed = a->schedule;
        for (ScheduleKind kind : {ScheduleKind::ZBH1, ScheduleKind::ZBV,
                                  ScheduleKind::Interleaved1F1B})
          if (!seed) {
            llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
            if (!s)
              llvm::consumeError(s.takeError());
            else if (s->placement == placement)
              seed = *s;
          }
        std::string row =
            fmt::format("| {} | {}, {} | {} |", profile.name, p, m, np.name);
        double best = std::numeric_limits<double>::infinity(), bound = 0.0;
        bool proven = false;
        for (bool cuts : {true, false}) {
          ExactOptions options;
          options.memoryLimit = limits;
          options.timeLimit = seconds;
          options.initial = seed;
          options.orderStatisticCuts = cuts;
          auto t0 = std::chrono::steady_clock::now();
          llvm::Expected<ExactResult> r =
              exactSchedule(problem, placement, options);
          double s = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
          if (!r) {
            row += fmt::format(" {} | | |", llvm::toString(r.takeError()));
            continue;
          }
          row += fmt::format(" {} | {} | {:.2f} |", r->optimal ? "yes" : "no",
                             r->nodes, s);
          best = std::min(best, r->makespan);
          bound = r->lowerBound;
          proven |= r->optimal;
          (cuts ? provenCuts : provenBefore) += r->optimal;
        }
        ++points;
        results.push_back({best, bound, proven});
        optimum = std::min(optimum, best);
        fmt::print("{} {:.4f} | {:.4f} |\n", row, best, bound);
      }
      // The optimum over the placements is proven when each placement's
      // is, or its bound shows it cannot beat the best.
      for (const PlacementResult &r : results)
        allProven &= r.proven || r.bound >= optimum - 1e-9;
      summary += fmt::format("| {} | {}, {} | {:.4f} | {} | {:.4f} | {:.4f} | "
                             "{:.4f} |\n",
                             profile.name, p, m, optimum,
                             allProven ? "yes" : "no", autoMakespan,
                             a->memoryAwareBound, autoMakespan / optimum);
      worstGap = std::max(worstGap, autoMakespan / optimum);
    }
  fmt::print("\nproven: {} of {} with the order-statistic cuts, {} of {} "
             "before\n\nauto against the best schedule over its placements "
             "(the optimum where proven):\n\n{}\nlargest auto / best: "
             "{:.4f}\n",
             provenCuts, points, provenBefore, points, summary, worstGap);
  return 0;
}
