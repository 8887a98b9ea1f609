//===- ExactSearchTest.cpp - Heuristics against the exact optimum ---------===//
//
// On problems small enough for the branch-and-bound to finish, the optimum
// over the placements `auto` considers is the reference: it is never below
// the memory-aware lower bound of its placement (which checks the bound),
// never above any kind at the same memory, and `auto` stays within a stated
// gap of it.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/AutoScheduler.h"
#include "scheduler/ExactSearch.h"
#include "scheduler/LowerBound.h"

#include <cstdio>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

/// `auto` is held to this gap over the proven optimum on the grid below
/// (measured: 0 on every point the search proves; see the printed lines).
constexpr double kAutoGap = 0.02;

struct Profile {
  Costs costs;
  double latency;
};

std::vector<Profile> profiles() {
  return {{{1.0, 1.0, 1.0}, 0.0},
          {{1.0, 1.0, 1.0}, 0.1},
          {{1.0, 0.9765, 0.5041}, 0.0324},
          {{1.0, 2.0, 0.5}, 0.0}};
}

TEST(ExactSearch, SingleRankIsItsWork) {
  for (int m = 1; m <= 4; ++m) {
    Problem problem = uniformProblem(1, m, 1, {1.0, 2.0, 0.5});
    llvm::Expected<ExactResult> r = exactSchedule(problem, {0}, {});
    ASSERT_TRUE(!!r) << llvm::toString(r.takeError());
    EXPECT_TRUE(r->optimal);
    EXPECT_NEAR(r->makespan, 3.5 * m, 1e-9);
  }
}

TEST(ExactSearch, OptimumBracketsBoundKindsAndAuto) {
  int proven = 0;
  for (int p : {2, 3})
    for (int m : {p, p + 1})
      for (bool twoPerRank : {false, true})
        for (const Profile &prof : profiles()) {
          int stages = twoPerRank ? 2 * p : p;
          Problem problem =
              uniformProblem(p, m, stages, prof.costs, prof.latency);
          for (Stage &s : problem.stages) {
            s.activation = twoPerRank ? 0.5 : 1.0;
            s.weightGrad = s.activation / 2;
          }
          double budget = highest(*oneFOneBPeakMemory(problem));
          std::vector<double> limits(p, budget);
          AutoOptions autoOptions;
          autoOptions.memoryLimit = budget;
          llvm::Expected<AutoResult> a = autoSchedule(problem, autoOptions);
          ASSERT_TRUE(!!a) << llvm::toString(a.takeError());
          double autoMakespan = simulate(problem, a->schedule)->makespan;
          std::string where = "p=" + std::to_string(p) +
                              " m=" + std::to_string(m) +
                              " stages=" + std::to_string(stages) +
                              " lat=" + std::to_string(prof.latency) +
                              " I=" + std::to_string(prof.costs.backwardInput);
          // The placements auto searches, with the kind that uses each.
          std::vector<std::pair<std::vector<int>, ScheduleKind>> placements = {
              {*placeContiguous(problem, true), ScheduleKind::ZBH1}};
          if (twoPerRank) {
            placements.push_back({*placeVShape(problem), ScheduleKind::ZBV});
            placements.push_back({*placeRoundRobin(problem, 2),
                                  ScheduleKind::Interleaved1F1B});
          }
          double optimum = std::numeric_limits<double>::infinity();
          bool allProven = true;
          for (auto &[placement, kind] : placements) {
            ExactOptions options;
            options.memoryLimit = limits;
            options.timeLimit = 0.5;
            // Seeded with the kind on this placement, or auto's schedule
            // when it is on this placement (the search ignores others).
            options.initial = *generateSchedule(problem, {kind});
            if (a->schedule.placement == placement)
              options.initial = a->schedule;
            llvm::Expected<ExactResult> exact =
                exactSchedule(problem, placement, options);
            ASSERT_TRUE(!!exact) << llvm::toString(exact.takeError());
            // The bound is a bound.
            EXPECT_GE(exact->makespan + 1e-9,
                      memoryAwareLowerBound(problem, placement, limits))
                << where;
            Timeline t = generateAndSimulate(problem, {kind});
            if (highest(t.peakMemory) <= budget + 1e-9) {
              EXPECT_LE(exact->makespan, t.makespan + 1e-9) << where;
            }
            optimum = std::min(optimum, exact->makespan);
            allProven &= exact->optimal;
          }
          std::printf("%s: optimum %.4f (%s), auto %.4f, memory-aware bound "
                      "%.4f\n",
                      where.c_str(), optimum,
                      allProven ? "proven" : "not proven", autoMakespan,
                      a->memoryAwareBound);
          EXPECT_GE(optimum + 1e-9, a->memoryAwareBound) << where;
          if (!allProven)
            continue;
          ++proven;
          EXPECT_LE(autoMakespan, optimum * (1 + kAutoGap) + 1e-9) << where;
        }
  // Most of the grid is proven within the time limit.
  EXPECT_GE(proven, 20);
}

} // namespace
