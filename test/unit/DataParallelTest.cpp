//===- DataParallelTest.cpp - Pipelines inside data parallelism -----------===//
//
// Over grids of kinds x ranks x microbatches x sharding: every reduction
// after its stage's gradient, every gather before the stage's first
// forward, one collective at a time per rank, the step within its bound and
// above the pipeline's makespan; 1F1B's last rank hides its reduction where
// its first cannot; the plan that chooses schedule, placement and buckets
// is never slower than a kind under torch's rule or Megatron's buckets; and
// bad specifications fail naming what is wrong.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/DataParallel.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/DataParallelSearch.h"

#include "TestUtil.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

DataParallel ddp(const Problem &problem, int degree, double bytes) {
  DataParallel dp;
  dp.degree = degree;
  dp.latency = 0.01;
  dp.bandwidth = 10.0;
  dp.gradBytes.assign(problem.numStages(), bytes);
  dp.optimizerPerByte = 0.001;
  return dp;
}

} // namespace

TEST(DataParallel, CollectivesOnARing) {
  EXPECT_DOUBLE_EQ(allReduceTime(80.0, 8, 0.5, 10.0),
                   2.0 * 7 * (0.5 + 80.0 / 8 / 10.0));
  EXPECT_DOUBLE_EQ(reduceScatterTime(80.0, 8, 0.5, 10.0),
                   7 * (0.5 + 80.0 / 8 / 10.0));
  EXPECT_EQ(allReduceTime(80.0, 1, 0.5, 10.0), 0.0);
}

TEST(DataParallel, OneReplicaIsThePipelineAndItsOptimizer) {
  Problem problem = uniformProblem(4, 8, 4);
  Schedule s =
      llvm::cantFail(generateSchedule(problem, {ScheduleKind::OneFOneB}));
  Timeline t = llvm::cantFail(simulate(problem, s));
  DataParallel dp = ddp(problem, 1, 100.0);
  DataParallelTimeline step =
      llvm::cantFail(simulateDataParallel(problem, s, t, dp, {}));
  EXPECT_EQ(step.maxExposed(), 0.0);
  EXPECT_NEAR(step.step, t.makespan + 0.1, 1e-9);
}

TEST(DataParallel, PlacementPropertiesOverAGrid) {
  const ScheduleKind kinds[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                ScheduleKind::ZBH1, ScheduleKind::ZBV,
                                ScheduleKind::Interleaved1F1B};
  int checked = 0;
  for (ScheduleKind kind : kinds)
    for (int p : {2, 3, 4})
      for (int m : {p, 2 * p, 3 * p})
        for (auto sharding :
             {DataParallel::Sharding::None, DataParallel::Sharding::Full,
              DataParallel::Sharding::Hybrid})
          for (auto placement : {ReducePlacement::AfterLastBackward,
                                 ReducePlacement::Bucketed}) {
            const bool two = kind == ScheduleKind::ZBV ||
                             kind == ScheduleKind::Interleaved1F1B;
            Problem problem =
                uniformProblem(p, m, two ? 2 * p : p, {1.0, 1.1, 0.9}, 0.05);
            Schedule s = llvm::cantFail(generateSchedule(problem, {kind}));
            Timeline t = llvm::cantFail(simulate(problem, s));
            DataParallel dp = ddp(problem, 4, 40.0);
            dp.sharding = sharding;
            dp.shardGroup = 2;
            dp.interBandwidth = 5.0;
            DataParallelOptions options{placement, 15.0};
            DataParallelTimeline step = llvm::cantFail(
                simulateDataParallel(problem, s, t, dp, options));
            const std::string where =
                fmt::format("{} p={} m={} {} {}", scheduleKindName(kind).str(),
                            p, m, shardingName(sharding).str(),
                            placement == ReducePlacement::Bucketed);
            // The stage's gradient actions, shifted as the compute is.
            std::vector<double> lastGradEnd(problem.numStages(), 0.0),
                lastGradStart(problem.numStages(), 0.0),
                firstForward(problem.numStages(), 1e300);
            for (const auto &rank : t.ranks)
              for (const TimedAction &a : rank) {
                if (a.action.kind == ActionKind::Forward)
                  firstForward[a.action.stage] =
                      std::min(firstForward[a.action.stage], a.start);
                if ((a.action.kind == ActionKind::BackwardWeight ||
                     a.action.kind == ActionKind::Backward) &&
                    a.end > lastGradEnd[a.action.stage]) {
                  lastGradEnd[a.action.stage] = a.end;
                  lastGradStart[a.action.stage] = a.start;
                }
              }
            for (int r = 0; r < p; ++r) {
              double free = 0.0;
              int reductions = 0;
              for (const DataParallelOp &op : step.ops[r]) {
                EXPECT_GE(op.start, free - 1e-9) << where;
                EXPECT_GE(op.start, op.release - 1e-9) << where;
                EXPECT_GE(op.end, op.start) << where;
                if (op.kind != DataParallelOp::Kind::Optimizer)
                  free = op.end;
                EXPECT_EQ(s.placement[op.stage < 0 ? 0 : op.stage] == r ||
                              op.stage < 0,
                          true)
                    << where;
                if (op.kind == DataParallelOp::Kind::Reduce) {
                  ++reductions;
                  const double from = placement == ReducePlacement::Bucketed
                                          ? lastGradStart[op.stage]
                                          : lastGradEnd[op.stage];
                  EXPECT_GE(op.start, from + step.shift - 1e-9) << where;
                  EXPECT_LE(op.release,
                            lastGradEnd[op.stage] + step.shift + 1e-9)
                      << where;
                }
                if (op.kind == DataParallelOp::Kind::Gather) {
                  EXPECT_LE(op.end, firstForward[op.stage] + step.shift + 1e-9)
                      << where;
                }
                if (op.kind == DataParallelOp::Kind::Optimizer) {
                  EXPECT_GE(op.start, step.computeEnd[r] - 1e-9) << where;
                  EXPECT_GE(op.start, step.commEnd[r] - 1e-9) << where;
                }
              }
              EXPECT_GE(reductions, 1) << where;
              const double pipelineEnd = *std::max_element(
                  step.computeEnd.begin(), step.computeEnd.end());
              EXPECT_NEAR(step.exposed[r],
                          std::max(0.0, step.commEnd[r] - pipelineEnd) +
                              step.shift,
                          1e-9)
                  << where;
              EXPECT_GT(step.heldBytes[r], 0.0) << where;
            }
            EXPECT_GE(step.step, t.makespan - 1e-9) << where;
            const double bound =
                dataParallelLowerBound(problem, s, lowerBound(problem), dp);
            EXPECT_LE(bound, step.step + 1e-9) << where;
            EXPECT_GE(bound, lowerBound(problem)) << where;
            ++checked;
          }
  EXPECT_EQ(checked, 5 * 3 * 3 * 3 * 2);
}

TEST(DataParallel, OneFOneBHidesTheLastRanksReductionNotTheFirsts) {
  Problem problem = uniformProblem(4, 8, 4);
  Schedule s =
      llvm::cantFail(generateSchedule(problem, {ScheduleKind::OneFOneB}));
  Timeline t = llvm::cantFail(simulate(problem, s));
  // A reduction of 3 time units: shorter than the last rank's drain.
  DataParallel dp = ddp(problem, 2, 0.0);
  for (double &b : dp.gradBytes)
    b = 3.0 * dp.bandwidth;
  dp.latency = 0.0;
  DataParallelTimeline step =
      llvm::cantFail(simulateDataParallel(problem, s, t, dp, {}));
  EXPECT_NEAR(step.exposed[0], 3.0, 1e-9);
  EXPECT_EQ(step.exposed[3], 0.0);
}

TEST(DataParallel, PlanNeverSlowerThanAKindUnderEitherRule) {
  for (int p : {2, 4})
    for (int m : {p, 2 * p, 4 * p})
      for (auto sharding :
           {DataParallel::Sharding::None, DataParallel::Sharding::Full}) {
        Problem problem = uniformProblem(p, m, p, {1.0, 1.0, 1.0}, 0.02);
        for (Stage &st : problem.stages)
          st.weightGrad = 0.5;
        DataParallel dp = ddp(problem, 8, 60.0);
        dp.sharding = sharding;
        KindRequest request;
        request.timeLimit = 0.2;
        std::vector<DataParallelPlan> tried;
        llvm::Expected<DataParallelPlan> best =
            planDataParallel(problem, dp, request, &tried);
        ASSERT_TRUE(!!best) << llvm::toString(best.takeError());
        const std::string where =
            fmt::format("p={} m={} {}", p, m, shardingName(sharding).str());
        EXPECT_GE(best->dp.step, best->bound - 1e-9) << where;
        const std::vector<double> peaks =
            llvm::cantFail(oneFOneBPeakMemory(problem));
        const double limit = *std::max_element(peaks.begin(), peaks.end());
        for (ScheduleKind kind : allScheduleKinds()) {
          llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
          if (!s) {
            llvm::consumeError(s.takeError());
            continue;
          }
          for (DataParallelOptions options :
               {DataParallelOptions{ReducePlacement::AfterLastBackward, 0.0},
                DataParallelOptions{ReducePlacement::Bucketed,
                                    kMegatronBucketBytes}}) {
            DataParallelPlan rule = llvm::cantFail(evaluateDataParallel(
                problem, *s, dp, options, scheduleKindName(kind).str()));
            double peak = *std::max_element(rule.timeline.peakMemory.begin(),
                                            rule.timeline.peakMemory.end());
            if (peak > limit * (1 + 1e-9))
              continue;
            EXPECT_LE(best->dp.step, rule.dp.step + 1e-9)
                << where << " " << rule.schedule << " " << rule.placement;
          }
        }
        EXPECT_FALSE(tried.empty());
      }
}

TEST(DataParallel, WholeReductionsOnlyWhenBucketsAreOff) {
  // Whole-stage reductions (torch's runtime): every plan tried places them
  // after the last backward, and the best is never slower than a kind
  // within the memory limit under that rule.
  for (int p : {2, 4})
    for (int m : {p, 4 * p}) {
      Problem problem = uniformProblem(p, m, p, {1.0, 1.0, 1.0}, 0.02);
      DataParallel dp = ddp(problem, 8, 60.0);
      KindRequest request;
      request.timeLimit = 0.2;
      std::vector<DataParallelPlan> tried;
      DataParallelPlan whole = llvm::cantFail(
          planDataParallel(problem, dp, request, &tried, /*buckets=*/false));
      ASSERT_FALSE(tried.empty());
      for (const DataParallelPlan &plan : tried)
        EXPECT_EQ(plan.options.placement, ReducePlacement::AfterLastBackward)
            << plan.placement;
      EXPECT_EQ(whole.placement, "torch");
      const std::vector<double> peaks =
          llvm::cantFail(oneFOneBPeakMemory(problem));
      const double limit = *std::max_element(peaks.begin(), peaks.end());
      for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::ZBH1}) {
        DataParallelPlan rule = llvm::cantFail(evaluateDataParallel(
            problem, llvm::cantFail(generateSchedule(problem, {kind})), dp,
            {ReducePlacement::AfterLastBackward, 0.0},
            scheduleKindName(kind).str()));
        if (*std::max_element(rule.timeline.peakMemory.begin(),
                              rule.timeline.peakMemory.end()) >
            limit * (1 + 1e-9))
          continue;
        EXPECT_LE(whole.dp.step, rule.dp.step + 1e-9)
            << "p=" << p << " m=" << m << " " << rule.schedule;
      }
    }
}

TEST(DataParallel, TheBoundHoldsForEveryPlanTriedOverCostsAndBytes) {
  // Lopsided costs, heavy ends, one microbatch to more than 2p, uneven
  // gradient bytes, every sharding: every schedule auto's data-parallel
  // search tries (kinds, auto's, W after I; torch's rule and buckets) ends
  // no sooner than the bound, which is at least the pipeline's own bound.
  int plans = 0, aboveCompute = 0;
  for (int p : {2, 3})
    for (int m : {1, p, 2 * p + 1})
      for (size_t c = 0; c <= costGrid().size(); ++c)
        for (auto sharding :
             {DataParallel::Sharding::None, DataParallel::Sharding::Full,
              DataParallel::Sharding::Hybrid}) {
          Problem problem = c < costGrid().size()
                                ? uniformProblem(p, m, p, costGrid()[c], 0.05)
                                : heavyEndsProblem(p, m);
          DataParallel dp = ddp(problem, 4, 0.0);
          for (int s = 0; s < problem.numStages(); ++s)
            dp.gradBytes[s] = 10.0 + 15.0 * (s % 3);
          dp.sharding = sharding;
          dp.shardGroup = 2;
          KindRequest request;
          request.timeLimit = 0.02;
          std::vector<DataParallelPlan> tried;
          llvm::Expected<DataParallelPlan> best =
              planDataParallel(problem, dp, request, &tried);
          ASSERT_TRUE(!!best) << llvm::toString(best.takeError());
          for (const DataParallelPlan &plan : tried) {
            const std::string where = fmt::format(
                "p={} m={} costs #{} {}: {} {}", p, m, c,
                shardingName(sharding).str(), plan.schedule, plan.placement);
            EXPECT_LE(plan.bound, plan.dp.step + 1e-9) << where;
            EXPECT_GE(plan.bound, lowerBound(problem) - 1e-9) << where;
            aboveCompute += plan.bound > lowerBound(problem) + 1e-9;
            ++plans;
          }
        }
  EXPECT_GT(plans, 1000);
  // The collectives and the optimizer raise it above the compute bound.
  EXPECT_GT(aboveCompute, plans / 2);
}

TEST(DataParallel, AutosMicrobatchOrderTravelsWithItsPlan) {
  // Long-tailed lengths: where auto reorders the microbatches, its plan
  // carries the order, and the schedule read with that order simulates to
  // the step reported (read as given, the lengths would land on other
  // microbatches).
  int reordered = 0;
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    Problem problem = uniformProblem(4, 8, 4, {1.0, 1.0, 0.5}, 0.02);
    std::mt19937 rng(seed);
    std::lognormal_distribution<double> length(7.0, 0.8);
    for (int k = 0; k < 8; ++k)
      problem.lengths.push_back(std::max(64.0, std::round(length(rng))));
    problem.referenceLength = 1024.0;
    DataParallel dp = ddp(problem, 8, 20.0);
    KindRequest request;
    request.timeLimit = 0.2;
    std::vector<DataParallelPlan> tried;
    llvm::Expected<DataParallelPlan> best =
        planDataParallel(problem, dp, request, &tried);
    ASSERT_TRUE(!!best) << llvm::toString(best.takeError());
    for (const DataParallelPlan &plan : tried) {
      const std::string where =
          fmt::format("seed {}: {} {}", seed, plan.schedule, plan.placement);
      const Problem seen =
          plan.microbatchOrder.empty()
              ? problem
              : reorderedMicrobatches(problem, plan.microbatchOrder);
      Timeline back = llvm::cantFail(simulate(seen, plan.plan));
      EXPECT_NEAR(back.makespan, plan.timeline.makespan, 1e-9) << where;
      DataParallelTimeline step = llvm::cantFail(
          simulateDataParallel(seen, plan.plan, back, dp, plan.options));
      EXPECT_NEAR(step.step, plan.dp.step, 1e-9) << where;
      reordered += !plan.microbatchOrder.empty();
    }
  }
  EXPECT_GT(reordered, 0);
}

TEST(DataParallel, WeightsAfterInputsKeepsTheWork) {
  Problem problem = uniformProblem(4, 8, 4);
  Schedule zb = llvm::cantFail(generateSchedule(problem, {ScheduleKind::ZBH1}));
  Schedule moved = weightsAfterInputs(zb);
  for (size_t r = 0; r < zb.ranks.size(); ++r) {
    EXPECT_EQ(zb.ranks[r].size(), moved.ranks[r].size());
    for (size_t i = 0; i + 1 < moved.ranks[r].size(); ++i)
      if (moved.ranks[r][i].kind == ActionKind::BackwardInput) {
        EXPECT_EQ(moved.ranks[r][i + 1].kind, ActionKind::BackwardWeight);
        EXPECT_EQ(moved.ranks[r][i + 1].microbatch,
                  moved.ranks[r][i].microbatch);
      }
  }
  EXPECT_FALSE(!!verifySchedule(problem, moved));
}

TEST(DataParallel, BadSpecificationsFailNamingWhatIsWrong) {
  Problem problem = uniformProblem(2, 2, 2);
  Schedule s =
      llvm::cantFail(generateSchedule(problem, {ScheduleKind::OneFOneB}));
  Timeline t = llvm::cantFail(simulate(problem, s));
  auto error = [&](DataParallel dp) {
    llvm::Expected<DataParallelTimeline> r =
        simulateDataParallel(problem, s, t, dp, {});
    return r ? std::string("no error") : llvm::toString(r.takeError());
  };
  DataParallel dp = ddp(problem, 0, 1.0);
  EXPECT_EQ(error(dp), "data-parallel degree 0 must be at least 1");
  dp = ddp(problem, 6, 1.0);
  dp.sharding = DataParallel::Sharding::Hybrid;
  dp.shardGroup = 4;
  EXPECT_EQ(error(dp), "hybrid sharding: a shard group of 4 does not divide "
                       "the data-parallel degree 6");
  dp = ddp(problem, 2, 1.0);
  dp.gradBytes.pop_back();
  EXPECT_EQ(error(dp), "data parallelism gives gradient bytes for 1 stages; "
                       "the pipeline has 2");
  dp = ddp(problem, 2, 1.0);
  dp.bandwidth = 0.0;
  EXPECT_EQ(error(dp), "data-parallel bandwidth 0 must be finite and > 0");
  EXPECT_EQ(llvm::toString(parseSharding("zero").takeError()),
            "sharding 'zero' is not one of none, full, hybrid");
}
