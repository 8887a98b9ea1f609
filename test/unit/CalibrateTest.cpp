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
#include "scheduler/model/CostFit.h"
#include "scheduler/model/Simulator.h"

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

namespace {

/// Every kind's simulated timeline, replayed as computes measured in
/// milliseconds over two steps, fits back to the problem's costs, whatever
/// runtime reports them (the scheduler's fit, which torch's traces use).
TEST(CostFit, EveryKindsReplayedTimelineFitsBackToItsCosts) {
  for (int p : {2, 3, 4})
    for (ScheduleKind kind :
         {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::ZBH1,
          ScheduleKind::ZBH2, ScheduleKind::Interleaved1F1B,
          ScheduleKind::ZBV}) {
      const bool two =
          kind == ScheduleKind::Interleaved1F1B || kind == ScheduleKind::ZBV;
      const int n = two ? 2 * p : p;
      Problem problem = uniformProblem(p, 2 * p, n, {1.0, 1.5, 0.75}, 0.125);
      for (int s = 0; s < n; ++s)
        problem.stages[s].forward = 1.0 + 0.125 * s;
      ScheduleOptions options;
      options.kind = kind;
      Schedule schedule = llvm::cantFail(generateSchedule(problem, options));
      Timeline timeline = llvm::cantFail(simulate(problem, schedule));
      // Steps on one time axis (stagecraft-run), or each on its own
      // (torch's traces, each from its own barrier).
      for (double apart : {1000.0, 0.0}) {
        std::vector<MeasuredCompute> computes;
        for (int step = 0; step < 2; ++step)
          for (int r = 0; r < p; ++r)
            for (const TimedAction &a : timeline.ranks[r])
              computes.push_back({r, step, a.action, step * apart + a.start,
                                  step * apart + a.end});
        CostFit fit = llvm::cantFail(
            fitCosts(problem, computes, std::vector<double>(p, 0.0)));
        SCOPED_TRACE(scheduleKindName(kind).str() + " p=" + std::to_string(p) +
                     " apart=" + std::to_string(apart));
        EXPECT_EQ(fit.steps, 2);
        EXPECT_NEAR(fit.latency, 0.125, 1e-9);
        // No receive overhead where none was spent: a consumer that waited
        // out part of its input's latency is no consumer whose input was
        // there (before, 1F1B on 2 ranks fitted 0.0625 ms).
        EXPECT_NEAR(fit.receiveOverhead, 0.0, 1e-9);
        // The replayed steps are the simulation: nothing to stretch.
        EXPECT_EQ(fit.replayed, 2);
        EXPECT_NEAR(fit.stretch, 1.0, 1e-9);
        Problem fitted = withFittedCosts(problem, fit);
        for (int s = 0; s < n; ++s) {
          EXPECT_NEAR(fitted.stages[s].forward, 1.0 + 0.125 * s, 1e-9);
          EXPECT_NEAR(fitted.stages[s].backwardInput, 1.5, 1e-9);
          EXPECT_NEAR(fitted.stages[s].backwardWeight, 0.75, 1e-9);
        }
      }
    }
}

TEST(CostFit, AFusedBackwardSplitsInTheProblemsOwnRatio) {
  EXPECT_EQ(splitBackward(3.0, 2.0, 1.0), std::make_pair(2.0, 1.0));
  EXPECT_EQ(splitBackward(3.0, 0.0, 0.0), std::make_pair(1.5, 1.5));
  Problem problem = uniformProblem(2, 2, 2, {1.0, 3.0, 1.0}, 0.0);
  problem.stages[1].name = "head";
  std::vector<MeasuredCompute> computes = {
      {0, 0, {ActionKind::Forward, 0, 0}, 0.0, 1.0},
      {0, 0, {ActionKind::Backward, 0, 0}, 9.0, 11.0},
      {1, 0, {ActionKind::Forward, 1, 0}, 2.0, 3.0}};
  llvm::Expected<CostFit> missing = fitCosts(problem, computes, {0.0, 0.0});
  ASSERT_FALSE(!!missing);
  EXPECT_EQ(errorMessage(missing.takeError()),
            "stage @head has no measured forward and backward");
  computes.push_back({1, 0, {ActionKind::Backward, 1, 0}, 4.0, 8.0});
  CostFit fit = llvm::cantFail(fitCosts(problem, computes, {0.5, 0.0}));
  Problem fitted = withFittedCosts(problem, fit);
  EXPECT_NEAR(fitted.stages[0].forward, 1.5, 1e-9);
  EXPECT_NEAR(fitted.stages[0].backwardInput, 1.875, 1e-9); // 2.5 x 3/4
  EXPECT_NEAR(fitted.stages[0].backwardWeight, 0.625, 1e-9);
  EXPECT_NEAR(fitted.stages[1].backwardInput, 3.0, 1e-9);
  // F(0) ends at 1, F(1) starts at 2 on an idle rank; B(1) ends at 8 and
  // B(0) starts at 9 after rank 0's previous compute ended at 1.
  EXPECT_NEAR(fitted.latency, 1.0, 1e-9);
}

} // namespace

namespace {

TEST(CostFit, AFusedBackwardKnownBeforeKeepsItsRatioToTheMeasuredSplit) {
  Problem problem = uniformProblem(2, 1, 2, {1.0, 1.0, 1.0}, 0.0);
  problem.stages[0].fusedBackward = 1.5; // 3/4 of I + W
  std::vector<MeasuredCompute> computes;
  for (int s = 0; s < 2; ++s) {
    const double t = 10.0 * s;
    computes.push_back({s, 0, {ActionKind::Forward, s, 0}, t, t + 1.0});
    computes.push_back({s, 0, {ActionKind::BackwardInput, s, 0}, t + 2, t + 5});
    computes.push_back(
        {s, 0, {ActionKind::BackwardWeight, s, 0}, t + 5, t + 6});
  }
  // The parts alone: these computes are no step to replay (rank 0's
  // backward ends before rank 1's forward starts).
  FitOptions parts;
  parts.reproduce = false;
  Problem fitted = withFittedCosts(
      problem, llvm::cantFail(fitCosts(problem, computes, {0, 0}, parts)));
  ASSERT_TRUE(fitted.stages[0].fusedBackward.has_value());
  EXPECT_NEAR(*fitted.stages[0].fusedBackward, 3.0, 1e-9); // 3/4 of 3 + 1
  EXPECT_FALSE(fitted.stages[1].fusedBackward.has_value());
}

} // namespace

namespace {

/// \p kind's schedule of \p problem, its simulated timeline, and that
/// timeline's computes as a runtime would measure them (step 0, no own
/// overhead).
struct Replay {
  Schedule schedule;
  Timeline timeline;
  std::vector<MeasuredCompute> computes;
};

Replay replay(const Problem &problem, ScheduleKind kind) {
  ScheduleOptions options;
  options.kind = kind;
  Replay out;
  out.schedule = llvm::cantFail(generateSchedule(problem, options));
  out.timeline = llvm::cantFail(simulate(problem, out.schedule));
  for (int r = 0; r < problem.ranks; ++r)
    for (const TimedAction &a : out.timeline.ranks[r])
      out.computes.push_back({r, 0, a.action, a.start, a.end});
  return out;
}

/// \p computes (one step) measured \p steps times, step k \p apart * k ms
/// later.
std::vector<MeasuredCompute>
repeated(const std::vector<MeasuredCompute> &computes, int steps,
         double apart) {
  std::vector<MeasuredCompute> out;
  for (int step = 0; step < steps; ++step)
    for (MeasuredCompute c : computes) {
      c.step = step;
      c.start += apart * step;
      c.end += apart * step;
      out.push_back(c);
    }
  return out;
}

} // namespace

namespace {

/// torch's runtime posts each send on the path of the compute that sends
/// it: the fit separates that per-message work from the rest, and the
/// simulator charges it to each compute that sends to another rank.
TEST(CostFit, AMessageOverheadIsFittedAndChargedPerCrossRankMessage) {
  Problem problem = uniformProblem(2, 4, 4, {1.0, 1.0, 1.0}, 0.1);
  auto [schedule, timeline, computes] = replay(problem, ScheduleKind::ZBV);
  // 0.05 ms of own work after every compute, 0.25 more per message.
  for (MeasuredCompute &c : computes)
    c.overhead =
        0.05 + 0.25 * crossRankMessages(problem, schedule.placement, c.action);
  // The overheads are not in the computes' times: fit the parts alone.
  FitOptions parts;
  parts.reproduce = false;
  CostFit fit = llvm::cantFail(fitCosts(problem, computes, {0.0, 0.0}, parts));
  EXPECT_NEAR(fit.messageOverhead, 0.25, 1e-9);
  EXPECT_EQ(fit.stretch, 1.0);
  Problem fitted = withFittedCosts(problem, fit);
  for (const Stage &s : fitted.stages) {
    EXPECT_NEAR(s.forward, 1.05, 1e-9);
    EXPECT_NEAR(s.backwardWeight, 1.05, 1e-9);
  }
  // zb-v on 2 ranks: stage 0 -> 1 and 2 -> 3 cross ranks, forward and
  // back: each rank sends 2 messages per microbatch.
  Timeline charged = llvm::cantFail(simulate(fitted, schedule));
  for (int r = 0; r < 2; ++r)
    EXPECT_NEAR(charged.busy[r], 4 * 2 * 3 * 1.05 + 4 * 2 * 0.25, 1e-9);
}

} // namespace

namespace {

/// torch's runtime posts each receive just before the compute that needs
/// it: a consumer whose input arrived long before still spends that work
/// first. The simulator charges it between the rank's previous compute and
/// the consumer (overlapping with any wait for the input), and the fit
/// reads it back from the waits of consumers whose input was there.
TEST(CostFit, AReceiveOverheadIsChargedBeforeEachCrossRankInputAndFitted) {
  Problem problem = uniformProblem(2, 4, 2, {1.0, 1.0, 1.0}, 0.1);
  problem.receiveOverhead = 0.3;
  auto [schedule, timeline, computes] = replay(problem, ScheduleKind::GPipe);
  // Rank 1's first forward waits for its input (latency after rank 0's
  // first forward); the next ones find it there and start the receive
  // overhead after the previous forward ends. Rank 0's forwards receive
  // nothing and run back to back.
  const auto &one = timeline.ranks[1];
  ASSERT_EQ(one[0].action.kind, ActionKind::Forward);
  EXPECT_NEAR(one[0].start, 1.0 + 0.1, 1e-9);
  EXPECT_NEAR(one[1].start, one[0].end + 0.3, 1e-9);
  EXPECT_NEAR(timeline.ranks[0][1].start, timeline.ranks[0][0].end, 1e-9);
  CostFit fit = llvm::cantFail(fitCosts(problem, computes, {0.0, 0.0}));
  EXPECT_NEAR(fit.receiveOverhead, 0.3, 1e-9);
  EXPECT_NEAR(fit.latency, 0.1, 1e-9);
  // Fitted into a problem that knew nothing of it, the simulation is the
  // measured one again.
  Problem plain = uniformProblem(2, 4, 2, {1.0, 1.0, 1.0}, 0.0);
  Timeline again =
      llvm::cantFail(simulate(withFittedCosts(plain, fit), schedule));
  EXPECT_NEAR(again.makespan, timeline.makespan, 1e-9);
  problem.receiveOverhead = -1.0;
  std::string refused = llvm::toString(validateProblem(problem));
  EXPECT_NE(refused.find("receive_overhead"), std::string::npos) << refused;
}

} // namespace

namespace {

/// With links, a message takes latency + output / bandwidth: the fit's
/// delay holds both, so the links keep their bandwidth and take the rest
/// as latency.
TEST(CostFit, LinksKeepTheirBandwidthAndTakeTheRestOfTheDelayAsLatency) {
  Problem problem = uniformProblem(2, 4, 2, {1.0, 1.0, 1.0}, 0.0);
  for (Stage &s : problem.stages)
    s.output = 2.0;
  problem.links = Problem::Links{2, {0.05, 20.0}, {0.05, 20.0}};
  auto [schedule, timeline, computes] = replay(problem, ScheduleKind::OneFOneB);
  CostFit fit = llvm::cantFail(fitCosts(problem, computes, {0.0, 0.0}));
  EXPECT_NEAR(fit.latency, 0.05 + 2.0 / 20.0, 1e-9);
  Problem fitted = withFittedCosts(problem, fit);
  ASSERT_TRUE(fitted.links.has_value());
  EXPECT_NEAR(fitted.links->inter.latency, 0.05, 1e-9);
  EXPECT_NEAR(fitted.links->inter.bandwidth, 20.0, 1e-9);
  EXPECT_NEAR(llvm::cantFail(simulate(fitted, schedule)).makespan,
              timeline.makespan, 1e-9);
}

} // namespace

namespace {

/// The per-message share is fitted across all computes; a compute that
/// sends a message but brought less work with it than that share keeps its
/// measured duration: no fitted cost is at or below zero.
TEST(CostFit, NoCostFallsBelowTheMeasuredDuration) {
  Problem problem = uniformProblem(2, 1, 2, {1.0, 1.0, 1.0}, 0.0);
  using AK = ActionKind;
  std::vector<MeasuredCompute> computes = {
      {0, 0, {AK::Forward, 0, 0}, 0.0, 0.5, 0.0},
      {1, 0, {AK::Forward, 1, 0}, 1.0, 1.5, 0.0},
      {1, 0, {AK::Backward, 1, 0}, 1.5, 2.0, 2.0},
      {0, 0, {AK::Backward, 0, 0}, 4.5, 5.0, 0.0}};
  FitOptions parts; // The parts alone, unstretched.
  parts.reproduce = false;
  CostFit fit = llvm::cantFail(fitCosts(problem, computes, {0.0, 0.0}, parts));
  EXPECT_NEAR(fit.messageOverhead, 1.0, 1e-9);
  EXPECT_NEAR(fit.forward[0], 0.5, 1e-9); // 0.5 + max(0, 0 - 1)
  EXPECT_NEAR(fit.backward[1], 0.5 + 1.0, 1e-9);
}

} // namespace

namespace {

/// What the parts miss (here: 2 ms of step() work around every step's
/// computes) is spread over the computes by one stretch, so that the
/// simulator reproduces the measured steps; the parts themselves are
/// reported as measured.
TEST(CostFit, TheStretchMakesTheSimulatorReproduceTheMeasuredSteps) {
  Problem problem = uniformProblem(2, 8, 2, {1.0, 1.0, 1.0}, 0.1);
  auto [schedule, timeline, computes] = replay(problem, ScheduleKind::OneFOneB);
  // Three steps: 2, 1 and 3 ms beyond the computes' window.
  std::vector<MeasuredCompute> steps = repeated(computes, 3, 100.0);
  FitOptions options;
  const double beyond[] = {2.0, 1.0, 3.0};
  for (int step = 0; step < 3; ++step)
    options.stepTimes[step] = timeline.makespan + beyond[step];
  CostFit fit = llvm::cantFail(fitCosts(problem, steps, {0.0, 0.0}, options));
  EXPECT_EQ(fit.replayed, 3);
  EXPECT_NEAR(fit.forward[0], 1.0, 1e-9);
  EXPECT_NEAR(fit.unstretchedRatio, timeline.makespan / (timeline.makespan + 2),
              1e-9);
  EXPECT_GT(fit.stretch, 1.0);
  // The median step (2 ms more) is reproduced.
  Timeline fitted =
      llvm::cantFail(simulate(withFittedCosts(problem, fit), schedule));
  EXPECT_NEAR(fitted.makespan, timeline.makespan + 2.0, 1e-6);
  EXPECT_NEAR(withFittedCosts(problem, fit).stages[1].forward, fit.stretch,
              1e-9);
  // Without step times the window is the target: nothing to stretch.
  options.stepTimes.clear();
  EXPECT_NEAR(
      llvm::cantFail(fitCosts(problem, steps, {0.0, 0.0}, options)).stretch,
      1.0, 1e-9);
  // Steps that do not make a whole schedule are not replayed.
  steps.pop_back();
  options.stepTimes[0] = options.stepTimes[1] = timeline.makespan + 2.0;
  CostFit partial =
      llvm::cantFail(fitCosts(problem, steps, {0.0, 0.0}, options));
  EXPECT_EQ(partial.replayed, 2);
}

/// Steps shorter than what does not stretch with the computes (latency,
/// overheads) still replay to their time: then everything stretches.
TEST(CostFit, StepsShorterThanTheLatencyAloneStretchEverything) {
  Problem problem = uniformProblem(2, 8, 2, {1.0, 1.0, 1.0}, 2.0);
  auto [schedule, timeline, computes] = replay(problem, ScheduleKind::OneFOneB);
  std::vector<MeasuredCompute> steps = repeated(computes, 3, 100.0);
  FitOptions options;
  for (int step = 0; step < 3; ++step)
    options.stepTimes[step] = timeline.makespan / 10.0;
  CostFit fit = llvm::cantFail(fitCosts(problem, steps, {0.0, 0.0}, options));
  EXPECT_NEAR(fit.unstretchedRatio, 10.0, 1e-6);
  EXPECT_NEAR(fit.stretch, 0.1, 1e-6);
  EXPECT_NEAR(fit.latency, 0.2, 1e-6);
  Timeline fitted =
      llvm::cantFail(simulate(withFittedCosts(problem, fit), schedule));
  EXPECT_NEAR(fitted.makespan, timeline.makespan / 10.0, 1e-6);
}

/// torch runs an overlapped F&B as its two halves, one after the other:
/// marked, the halves are replayed as the plan's one action, so the step
/// simulates as the plan does.
TEST(CostFit, AnOverlappedForwardAndBackwardIsReplayedAsOneAction) {
  Problem problem = uniformProblem(2, 8, 4, {1.0, 1.0, 1.0}, 0.1);
  auto [schedule, timeline, unused] = replay(problem, ScheduleKind::DualPipeV);
  std::vector<MeasuredCompute> computes;
  int overlapped = 0;
  for (int r = 0; r < 2; ++r)
    for (const TimedAction &a : timeline.ranks[r]) {
      if (a.action.kind != ActionKind::ForwardBackward) {
        computes.push_back({r, 0, a.action, a.start, a.end});
        continue;
      }
      ++overlapped;
      double half = a.start + problem.stages[a.action.stage].forward;
      MeasuredCompute f{
          r,
          0,
          {ActionKind::Forward, a.action.stage, a.action.microbatch},
          a.start,
          half};
      f.overlapsNext = true;
      computes.push_back(f);
      computes.push_back({r,
                          0,
                          {ActionKind::Backward, a.action.backwardStage,
                           a.action.backwardMicrobatch},
                          half,
                          a.end});
    }
  ASSERT_GT(overlapped, 0);
  FitOptions options;
  options.stepTimes[0] = 1.25 * timeline.makespan;
  CostFit fit =
      llvm::cantFail(fitCosts(problem, computes, {0.0, 0.0}, options));
  EXPECT_EQ(fit.replayed, 1);
  EXPECT_NEAR(fit.unstretchedRatio, 0.8, 1e-9);
  Timeline fitted =
      llvm::cantFail(simulate(withFittedCosts(problem, fit), schedule));
  EXPECT_NEAR(fitted.makespan, 1.25 * timeline.makespan, 1e-6);
}

} // namespace

namespace {

/// The median keeps the typical compute, the mean spreads a stall over
/// every compute of its kind.
TEST(CostFit, TheStatisticIsTheMedianOrTheMean) {
  Problem problem = uniformProblem(2, 2, 2, {1.0, 1.0, 1.0}, 0.0);
  auto [schedule, timeline, computes] = replay(problem, ScheduleKind::GPipe);
  // Three steps; stage 0's forward of microbatch 0 stalls 3 ms in one.
  std::vector<MeasuredCompute> steps = repeated(computes, 3, 0.0);
  for (MeasuredCompute &c : steps)
    if (c.step == 0 && c.action.kind == ActionKind::Forward &&
        c.action.stage == 0 && c.action.microbatch == 0)
      c.end += 3.0;
  FitOptions median, mean;
  median.reproduce = mean.reproduce = false;
  mean.statistic = CostStatistic::Mean;
  EXPECT_NEAR(
      llvm::cantFail(fitCosts(problem, steps, {0.0, 0.0}, median)).forward[0],
      1.0, 1e-9);
  // Six forwards of stage 0, one 3 ms longer.
  EXPECT_NEAR(
      llvm::cantFail(fitCosts(problem, steps, {0.0, 0.0}, mean)).forward[0],
      1.5, 1e-9);
}

} // namespace
