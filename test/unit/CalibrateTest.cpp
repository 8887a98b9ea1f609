//===- CalibrateTest.cpp - Costs fitted to a measured run ----------------===//
//
// A run whose every action took exactly its simulated time (the plan's own
// timeline, replayed as measurements) calibrates back to the plan's costs
// and link latency.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "runtime/Calibrate.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"

#include "gtest/gtest.h"

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;
using namespace stagecraft::runtime;

namespace {

/// \p plan's simulated timeline as a measured run of \p steps steps, one
/// unit = 1 ms, each step after the last one's end.
RunReport replay(const Plan &plan, int steps) {
  RunReport report;
  for (int r = 0; r < plan.numRanks(); ++r) {
    RankResult rr;
    rr.rank = r;
    for (int step = 0; step < steps; ++step) {
      const double offset = step * (plan.simulatedMakespan + 1.0);
      int k = 0;
      for (const PlanOp &op : plan.ranks[r].ops) {
        if (op.kind != PlanOp::Kind::Compute)
          continue;
        const double start = offset + plan.simulatedStart[r][k];
        rr.actions.push_back({k, 1e-3 * start, 1e-3 * (start + op.cost)});
        ++k;
      }
    }
    report.ranks.push_back(std::move(rr));
  }
  return report;
}

Plan planOf(ScheduleKind kind, const Problem &problem) {
  ScheduleOptions options;
  options.kind = kind;
  Schedule s = llvm::cantFail(generateSchedule(problem, options));
  return buildPlan(problem, lowerCommunication(problem, s), "t", 256);
}

TEST(Calibrate, AReplayedTimelineGivesBackItsCostsAndLatency) {
  for (int p : {2, 4}) {
    Problem problem = uniformProblem(p, 2 * p, p, {1.5, 2.0, 0.5}, 0.25);
    // Uneven stages: each its own costs.
    for (int s = 0; s < p; ++s)
      problem.stages[s].forward = 1.0 + 0.25 * s;
    for (ScheduleKind kind : {ScheduleKind::ZBH1, ScheduleKind::OneFOneB}) {
      Plan plan = planOf(kind, problem);
      llvm::Expected<Calibration> c = calibrate(plan, replay(plan, 3));
      ASSERT_TRUE(!!c) << errorMessage(c.takeError());
      EXPECT_EQ(c->steps, 2); // the first step is left out
      EXPECT_NEAR(c->latency, 0.25, 1e-9) << scheduleKindName(kind).str();
      for (int s = 0; s < p; ++s) {
        EXPECT_NEAR(c->forward[s], 1.0 + 0.25 * s, 1e-9);
        if (kind == ScheduleKind::ZBH1) {
          EXPECT_NEAR(c->backwardInput[s], 2.0, 1e-9);
          EXPECT_NEAR(c->backwardWeight[s], 0.5, 1e-9);
          EXPECT_EQ(c->backward[s], 0.0);
        } else {
          EXPECT_NEAR(c->backward[s], 2.5, 1e-9);
          EXPECT_EQ(c->backwardInput[s], 0.0);
        }
        EXPECT_EQ(c->samples[s], (kind == ScheduleKind::ZBH1 ? 3 : 2) * 2 *
                                     problem.microbatches);
      }
    }
  }
}

TEST(Calibrate, TheRuntimesOverheadIsAddedToEachCompute) {
  Problem problem = uniformProblem(2, 4, 2, {1.0, 1.0, 1.0}, 0.0);
  Plan plan = planOf(ScheduleKind::ZBH1, problem);
  RunReport report = replay(plan, 2);
  // 24 computes on each rank; 12 ms outside computes and waits on rank 1.
  report.ranks[1].overhead = 12e-3;
  Calibration c = llvm::cantFail(calibrate(plan, report));
  EXPECT_NEAR(c.overhead[0], 0.0, 1e-9);
  EXPECT_NEAR(c.overhead[1], 0.5, 1e-9);
  EXPECT_NEAR(c.forward[0], 1.0, 1e-9);
  EXPECT_NEAR(c.forward[1], 1.5, 1e-9);
  EXPECT_NEAR(c.backwardWeight[1], 1.5, 1e-9);
}

TEST(Calibrate, AStageWithoutMeasurementsIsNamed) {
  Problem problem = uniformProblem(2, 4, 2, {1.0, 1.0, 1.0}, 0.0);
  Plan plan = planOf(ScheduleKind::ZBH1, problem);
  RunReport report = replay(plan, 2);
  report.ranks[1].actions.clear();
  llvm::Expected<Calibration> c = calibrate(plan, report);
  ASSERT_FALSE(!!c);
  EXPECT_EQ(errorMessage(c.takeError()),
            "--calibrate: stage @s1 has no measured forward and backward; "
            "run with --train and more steps");
}

} // namespace
