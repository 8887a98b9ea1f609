//===- AutoSchedulerTest.cpp - The auto search ----------------------------===//
//
// `auto` against the fixed kinds over grids of ranks, microbatches and cost
// profiles: never worse than the best fixed kind within the budget, strictly
// better on heterogeneous costs, always within the memory limit, and never
// below the lower bound.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/AutoScheduler.h"

#include <algorithm>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

/// 2p half stages; the first x1.3 and the last x1.6 when \p hetero.
Problem model(int p, int m, bool hetero, double latency) {
  Problem problem = uniformProblem(p, m, 2 * p, {0.5, 0.55, 0.45}, latency);
  if (hetero) {
    for (Stage *s : {&problem.stages.front(), &problem.stages.back()}) {
      double scale = s == &problem.stages.front() ? 1.3 : 1.6;
      s->forward *= scale;
      s->backwardInput *= scale;
      s->backwardWeight *= scale;
    }
  }
  return problem;
}

TEST(Auto, NeverWorseThanTheBestFixedKindWithinBudget) {
  for (int p : {1, 2, 3, 4, 6})
    for (int m : {1, p, 2 * p + 1, 4 * p})
      for (bool hetero : {false, true}) {
        Problem problem = model(p, m, hetero, hetero ? 0.1 : 0.0);
        llvm::Expected<AutoResult> result = autoSchedule(problem, {});
        ASSERT_TRUE(!!result) << llvm::toString(result.takeError());
        Timeline t = *simulate(problem, result->schedule);
        EXPECT_NEAR(t.makespan, result->makespan, 1e-9);
        EXPECT_LE(highest(t.peakMemory), result->memoryLimit * (1 + 1e-9));
        EXPECT_LE(result->lowerBound, t.makespan + 1e-9);
        for (ScheduleKind kind :
             {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
              ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1,
              ScheduleKind::ZBH2, ScheduleKind::ZBV, ScheduleKind::DualPipeV}) {
          llvm::Expected<Schedule> fixed = generateSchedule(problem, {kind});
          ASSERT_TRUE(!!fixed) << llvm::toString(fixed.takeError());
          Timeline f = *simulate(problem, *fixed);
          EXPECT_LE(result->lowerBound, f.makespan + 1e-9);
          if (highest(f.peakMemory) <= result->memoryLimit * (1 + 1e-9)) {
            EXPECT_LE(t.makespan, f.makespan + 1e-9)
                << scheduleKindName(kind).str() << " p=" << p << " m=" << m;
          }
        }
      }
}

TEST(Auto, BeatsEveryFixedKindOnHeterogeneousCosts) {
  for (int p : {4, 8})
    for (int m : {2 * p, 4 * p}) {
      Problem problem = model(p, m, /*hetero=*/true, 0.1);
      llvm::Expected<AutoResult> result = autoSchedule(problem, {});
      ASSERT_TRUE(!!result);
      double bestFixed = 1e300;
      for (ScheduleKind kind :
           {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
            ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1,
            ScheduleKind::ZBH2, ScheduleKind::ZBV}) {
        Timeline f = *simulate(problem, *generateSchedule(problem, {kind}));
        if (highest(f.peakMemory) <= result->memoryLimit * (1 + 1e-9))
          bestFixed = std::min(bestFixed, f.makespan);
      }
      EXPECT_LT(result->makespan, bestFixed - 1e-6) << "p=" << p << " m=" << m;
    }
}

TEST(Auto, WithinTwoPercentOfTheMemoryAwareBoundWithHeavyEndStages) {
  // The benchmark's hardest profile (stagecraft-zb-bench "hetero"): the
  // paper's costs and latency on 2p half stages, the first x1.3 and the
  // last x1.6, at 1F1B's peak. Every V schedule is more than 2 % above the
  // bound there; round-robin holds faster orders, which the local search
  // reaches by moving actions on the critical path. The time limit is
  // lifted so that the (move-bounded) search ends the same way on every
  // machine.
  for (auto [p, m] : {std::pair{4, 8}, std::pair{8, 16}}) {
    Problem problem = heavyEndsProblem(p, m);
    AutoOptions options;
    options.timeLimit = 600.0;
    llvm::Expected<AutoResult> result = autoSchedule(problem, options);
    ASSERT_TRUE(!!result) << llvm::toString(result.takeError());
    EXPECT_NEAR(simulate(problem, result->schedule)->makespan, result->makespan,
                1e-9);
    EXPECT_LE(result->makespan, 1.02 * result->memoryAwareBound)
        << "p=" << p << " m=" << m;
  }
}

TEST(Auto, HonoursAGivenMemoryLimit) {
  Problem problem = model(4, 16, false, 0.0);
  for (double limit : {2.0, 3.0, 5.0, 8.0}) {
    AutoOptions options;
    options.memoryLimit = limit;
    llvm::Expected<AutoResult> result = autoSchedule(problem, options);
    ASSERT_TRUE(!!result) << llvm::toString(result.takeError());
    Timeline t = *simulate(problem, result->schedule);
    EXPECT_LE(highest(t.peakMemory), limit + 1e-9);
  }
  // A looser limit never makes the result slower.
  AutoOptions tight, loose;
  tight.memoryLimit = 2.0;
  loose.memoryLimit = 8.0;
  EXPECT_LE(autoSchedule(problem, loose)->makespan,
            autoSchedule(problem, tight)->makespan + 1e-9);
}

TEST(Auto, FailsClearlyWhenNothingFits) {
  Problem problem = model(2, 4, false, 0.0);
  AutoOptions options;
  options.memoryLimit = 0.25;
  EXPECT_EQ(errorMessage(autoSchedule(problem, options).takeError()),
            "memory-limit=0.25 is below 2, what one microbatch needs on the "
            "busiest rank of any placement");
}

TEST(Auto, ReportsProgress) {
  Problem problem = model(4, 8, true, 0.1);
  AutoOptions options;
  options.progressInterval = 0.0;
  int calls = 0;
  AutoProgress last;
  options.progress = [&](const AutoProgress &p) {
    ++calls;
    last = p;
  };
  llvm::Expected<AutoResult> result = autoSchedule(problem, options);
  ASSERT_TRUE(!!result);
  EXPECT_GT(calls, 1);
  EXPECT_EQ(last.candidates, result->candidates);
  EXPECT_DOUBLE_EQ(last.bestMakespan, result->makespan);
  EXPECT_DOUBLE_EQ(last.lowerBound, result->lowerBound);
}

TEST(LowerBound, ChainDelayPlusWork) {
  // Rank 1 of 2: first stage after one forward and one hop, then its work.
  Problem problem = uniformProblem(2, 3, 2, {1.0, 2.0, 0.5}, 0.25);
  EXPECT_DOUBLE_EQ(lowerBound(problem, {0, 1}), 1.0 + 0.25 + 3 * 3.5);
}

} // namespace

namespace {

/// A runtime whose split backward costs more than its fused one (torch's
/// I then W on a retained graph): the fused kinds pay the fused B, the
/// split kinds I + W, the bounds hold for both, and auto does not pick a
/// split plan that loses to a fused one.
TEST(Auto, WeighsTheSplitBackwardAgainstWhatItCosts) {
  for (int p : {2, 4})
    for (int m : {p, 2 * p, 4 * p})
      for (double fused : {1.2, 2.0, 2.6}) {
        Problem problem = uniformProblem(p, m, p, {1.0, 1.0, 1.0}, 0.05);
        for (Stage &s : problem.stages)
          s.fusedBackward = fused;
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " fused=" + std::to_string(fused));
        Schedule oneF = *generateSchedule(problem, {ScheduleKind::OneFOneB});
        Schedule zb = *generateSchedule(problem, {ScheduleKind::ZBH1});
        Timeline t1 = *simulate(problem, oneF), tz = *simulate(problem, zb);
        // Every B pays the fused cost, every I and W its own.
        EXPECT_NEAR(t1.busy[0], m * (1.0 + fused), 1e-9);
        EXPECT_NEAR(tz.busy[0], m * 3.0, 1e-9);
        llvm::Expected<AutoResult> result = autoSchedule(problem, {});
        ASSERT_TRUE(!!result) << llvm::toString(result.takeError());
        EXPECT_LE(result->lowerBound, result->makespan + 1e-9);
        EXPECT_LE(result->lowerBound, t1.makespan + 1e-9);
        EXPECT_LE(result->lowerBound, tz.makespan + 1e-9);
        EXPECT_LE(result->makespan, std::min(t1.makespan, tz.makespan) + 1e-9);
      }
}

} // namespace
