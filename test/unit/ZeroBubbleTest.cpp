//===- ZeroBubbleTest.cpp - Properties of the zero-bubble kinds -----------===//
//
// Closed forms of ZB-H1 and ZB-H2, ZB-V's steady state, the memory bounds
// against 1F1B, and validity for every ranks x microbatches on the grid.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/kinds/ListScheduler.h"
#include "scheduler/kinds/ZeroBubbleHeuristic.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/LowerBound.h"

#include <algorithm>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

Timeline run(const Problem &problem, ScheduleKind kind) {
  return generateAndSimulate(problem, {kind});
}

double oneFOneBHighestPeak(const Problem &problem) {
  llvm::Expected<std::vector<double>> peaks = oneFOneBPeakMemory(problem);
  EXPECT_TRUE(!!peaks);
  return peaks ? highest(*peaks) : 0.0;
}

TEST(ZBH1, ClosedFormAndMemoryOverGrid) {
  // The paper's closed form, for F = I = W and for W no larger than F or I.
  const Costs costs[] = {
      {1.0, 1.0, 1.0}, {1.0, 1.0, 0.5}, {1.0, 2.0, 1.0}, {2.0, 1.0, 1.0}};
  for (int p : rankGrid())
    for (int m = 1; m <= 4 * p; ++m)
      for (Costs c : costs) {
        Problem problem = uniformProblem(p, m, p, c);
        Timeline t = run(problem, ScheduleKind::ZBH1);
        double work = c.forward + c.backwardInput + c.backwardWeight;
        if (m >= p) {
          EXPECT_NEAR(t.makespan,
                      (p - 1) *
                              (c.forward + c.backwardInput - c.backwardWeight) +
                          m * work,
                      1e-9)
              << "p=" << p << " m=" << m;
        }
      }
}

TEST(ZBH1, NeverWorseThanOneFOneBAndWithinItsPeak) {
  for (int p : rankGrid())
    for (int m = 1; m <= 4 * p; ++m)
      for (Costs c : costGrid()) {
        Problem problem = uniformProblem(p, m, p, c);
        Timeline t = run(problem, ScheduleKind::ZBH1);
        Timeline one = run(problem, ScheduleKind::OneFOneB);
        EXPECT_LE(t.makespan, one.makespan + 1e-9) << "p=" << p << " m=" << m;
        EXPECT_LE(highest(t.peakMemory), highest(one.peakMemory) + 1e-9)
            << "p=" << p << " m=" << m;
      }
}

TEST(ZBH2, ParallelogramBoundForUniformCosts) {
  for (int p : rankGrid())
    for (int m = p; m <= 4 * p; ++m)
      for (double unit : {1.0, 2.5}) {
        Problem problem = uniformProblem(p, m, p, {unit, unit, unit});
        Timeline t = run(problem, ScheduleKind::ZBH2);
        EXPECT_NEAR(t.makespan, (p - 1) * unit + m * 3 * unit, 1e-9)
            << "p=" << p << " m=" << m;
        // At most 2p - 1 microbatches' activations on any rank.
        EXPECT_LE(highest(t.peakMemory), 2 * p - 1 + 1e-9);
      }
}

TEST(ZBH2, NeverSlowerThanZBH1) {
  for (int p : rankGrid())
    for (int m = 1; m <= 4 * p; ++m)
      for (Costs c : costGrid()) {
        Problem problem = uniformProblem(p, m, p, c);
        EXPECT_LE(run(problem, ScheduleKind::ZBH2).makespan,
                  run(problem, ScheduleKind::ZBH1).makespan + 1e-9)
            << "p=" << p << " m=" << m;
      }
}

TEST(ZBV, NoSteadyStateBubbleForUniformCosts) {
  for (int p : {1, 2, 3, 4, 5, 6, 7, 8})
    for (double unit : {1.0, 0.5}) {
      double previous = -1.0;
      for (int m = 1; m <= 4 * p; ++m) {
        Problem problem = uniformProblem(p, m, 2 * p, {unit, unit, unit});
        Timeline t = run(problem, ScheduleKind::ZBV);
        // One more microbatch adds exactly its work (2 chunks x 3 actions).
        if (m > 2 * p) {
          EXPECT_NEAR(t.makespan - previous, 6 * unit, 1e-9)
              << "p=" << p << " m=" << m;
        }
        previous = t.makespan;
        EXPECT_LE(highest(t.peakMemory), oneFOneBHighestPeak(problem) + 1e-9)
            << "p=" << p << " m=" << m;
      }
    }
}

TEST(ZBV, BeatsOneFOneBOnTheSameModel) {
  for (int p : {2, 4, 8})
    for (int m : {2 * p, 4 * p}) {
      Problem problem = uniformProblem(p, m, 2 * p);
      EXPECT_LT(run(problem, ScheduleKind::ZBV).makespan,
                run(problem, ScheduleKind::OneFOneB).makespan)
          << "p=" << p << " m=" << m;
    }
}

TEST(ZeroBubble, ValidForEveryGridPointWithLatencyAndSplitMemory) {
  for (int p : {1, 2, 3, 5, 8})
    for (int m = 1; m <= 3 * p; ++m)
      for (ScheduleKind kind :
           {ScheduleKind::ZBH1, ScheduleKind::ZBH2, ScheduleKind::ZBV}) {
        int stages = kind == ScheduleKind::ZBV ? 2 * p : p;
        Problem problem = uniformProblem(p, m, stages, {1.0, 1.2, 0.7}, 0.1);
        for (Stage &s : problem.stages) {
          s.activation = 2.0;
          s.weightGrad = 0.5;
        }
        llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
        ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
        EXPECT_FALSE(verifySchedule(problem, *s));
        // Every (stage, microbatch) got a split backward.
        size_t actions = 0;
        for (const auto &rank : s->ranks)
          for (const Action &a : rank) {
            EXPECT_NE(a.kind, ActionKind::Backward);
            ++actions;
          }
        EXPECT_EQ(actions, static_cast<size_t>(3 * stages * m));
      }
}

TEST(DualPipeV, ReadmeBubbleAndMemoryForUniformChunks) {
  // DualPipe's README: bubble (PP/2 - 1)(F&B + B - 3W) and PP + 1 chunk
  // activations per rank, with PP = 2p stages on p ranks. Without an overlap
  // gain F&B = F + B, so the step is 6m chunk units plus that bubble.
  for (int p : {1, 2, 3, 4, 5, 6, 7, 8, 16})
    for (int m = 2 * p - 1; m <= 4 * p; ++m) {
      Problem problem = uniformProblem(p, m, 2 * p);
      Timeline t = run(problem, ScheduleKind::DualPipeV);
      double f = 1, b = 2, w = 1, fb = f + b;
      EXPECT_NEAR(t.makespan, 6.0 * m + (p - 1) * (fb + b - 3 * w), 1e-9)
          << "p=" << p << " m=" << m;
      for (double peak : t.peakMemory)
        EXPECT_LE(peak, 2 * p + 1 + 1e-9) << "p=" << p << " m=" << m;
      EXPECT_NEAR(highest(t.peakMemory), std::min(2 * p + 1, 2 * m), 1e-9);
    }
}

TEST(DualPipeV, OverlapGainShortensTheStep) {
  for (int p : {2, 4, 8})
    for (int m : {2 * p, 4 * p}) {
      Problem plain = uniformProblem(p, m, 2 * p);
      Problem overlapped = plain;
      for (Stage &s : overlapped.stages)
        s.forwardBackward = 2.4; // F + B = 3
      Timeline a = run(plain, ScheduleKind::DualPipeV);
      Timeline b = run(overlapped, ScheduleKind::DualPipeV);
      EXPECT_LT(b.makespan, a.makespan) << "p=" << p << " m=" << m;
      // The steady state runs 2 overlapped actions per microbatch and rank.
      size_t overlaps = 0;
      llvm::Expected<Schedule> s =
          generateSchedule(overlapped, {ScheduleKind::DualPipeV});
      for (const Action &act : s->ranks[0])
        overlaps += act.kind == ActionKind::ForwardBackward;
      EXPECT_EQ(overlaps, static_cast<size_t>(2 * (m - 2 * p + 1) + p - 1));
    }
}

TEST(DualPipeV, ValidForFewMicrobatchesAndWithLatency) {
  for (int p : {1, 2, 3, 5, 8})
    for (int m = 1; m <= 3 * p; ++m) {
      Problem problem = uniformProblem(p, m, 2 * p, {1.0, 1.2, 0.7}, 0.1);
      llvm::Expected<Schedule> s =
          generateSchedule(problem, {ScheduleKind::DualPipeV});
      ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
      EXPECT_FALSE(verifySchedule(problem, *s)) << "p=" << p << " m=" << m;
    }
}

TEST(ZBV, NeedsTwoStagesPerRank) {
  Problem problem = uniformProblem(4, 8, 4);
  EXPECT_EQ(
      errorMessage(generateSchedule(problem, {ScheduleKind::ZBV}).takeError()),
      "V placement needs 2 stages per rank: pipeline @p has 4 stages for "
      "4 ranks (needs 8)");
}

} // namespace

namespace {

/// The profiles of the schedule-quality issue: uniform, uniform with
/// latency, the Zero Bubble paper's measured profile, and an I-heavy one.
struct LatencyProfile {
  Costs costs;
  double latency;
};
const LatencyProfile kProfiles[] = {{{1.0, 1.0, 1.0}, 0.0},
                                    {{1.0, 1.0, 1.0}, 0.1},
                                    {{1.0, 0.9765, 0.5041}, 0.0324},
                                    {{1.0, 2.0, 0.5}, 0.05}};

TEST(ZBH1, PaperClosedFormWithLatencyOverGrid) {
  // (p - 1)(F + I - W) + m(F + I + W) plus 4(p - 1) latencies (the first F
  // and I chains, and the last microbatch's), within 1F1B's peak.
  for (int p : {2, 3, 4, 6, 8, 12, 16})
    for (int m : {p, 2 * p, 4 * p, 8 * p})
      for (const LatencyProfile &prof : kProfiles) {
        Costs c = prof.costs;
        Problem problem = uniformProblem(p, m, p, c, prof.latency);
        for (Stage &s : problem.stages)
          s.weightGrad = 0.5;
        Timeline t = run(problem, ScheduleKind::ZBH1);
        double closed = (p - 1) * (c.forward + c.backwardInput -
                                   c.backwardWeight + 4 * prof.latency) +
                        m * (c.forward + c.backwardInput + c.backwardWeight);
        EXPECT_LE(t.makespan, closed + 1e-9) << "p=" << p << " m=" << m;
        EXPECT_LE(highest(t.peakMemory), oneFOneBHighestPeak(problem) + 1e-9);
        Timeline h2 = run(problem, ScheduleKind::ZBH2);
        EXPECT_LE(h2.makespan, t.makespan + 1e-9) << "p=" << p << " m=" << m;
        EXPECT_LE(highest(h2.peakMemory),
                  2 * oneFOneBHighestPeak(problem) + 1e-9);
      }
}

TEST(ZBV, WithinThreePercentOfTheBoundAtOneFOneBMemory) {
  // 2p half stages; the V heuristic at 1F1B's highest peak stays within 3 %
  // of the memory-aware bound of its placement for m >= 2p on the uniform
  // and the paper's profile, and within 1F1B's peak everywhere.
  for (int p : {2, 3, 4, 6, 8, 12, 16})
    for (int m : {p, 2 * p, 4 * p, 8 * p})
      for (const LatencyProfile &prof : kProfiles) {
        Costs half = {prof.costs.forward / 2, prof.costs.backwardInput / 2,
                      prof.costs.backwardWeight / 2};
        Problem problem = uniformProblem(p, m, 2 * p, half, prof.latency);
        for (Stage &s : problem.stages) {
          s.activation = 0.5;
          s.weightGrad = 0.25;
        }
        Timeline t = run(problem, ScheduleKind::ZBV);
        double budget = oneFOneBHighestPeak(problem);
        EXPECT_LE(highest(t.peakMemory), budget + 1e-9);
        EXPECT_LE(t.makespan, run(problem, ScheduleKind::OneFOneB).makespan);
        // The I-heavy profile is left out of the 3 % check: there even the
        // proven optimum is up to 7 % above the bound (ExactSearchTest).
        if (m < 2 * p || prof.latency > 0.05 || prof.costs.backwardInput > 1.0)
          continue;
        double bound = memoryAwareLowerBound(problem, *placeVShape(problem),
                                             std::vector<double>(p, budget));
        EXPECT_LE(t.makespan, 1.03 * bound) << "p=" << p << " m=" << m;
      }
}

TEST(ZBV, HeavyEndStagesReachTheirPlacementsBound) {
  // The first stage x1.3 and the last x1.6 (embedding, LM head): the V puts
  // both on rank 0, which then carries 1.45 times another rank's work. With
  // the paper's costs and latency, zb-v (planning for up to 8 times the
  // latency) stays within 0.5 % of the memory-aware bound of the V
  // placement at 1F1B's peak (the plain heuristic was up to 9 % above).
  for (int p : {4, 8})
    for (int m : {2 * p, 4 * p}) {
      Problem problem = heavyEndsProblem(p, m);
      Timeline t = run(problem, ScheduleKind::ZBV);
      double budget = oneFOneBHighestPeak(problem);
      EXPECT_LE(highest(t.peakMemory), budget + 1e-9);
      double bound = memoryAwareLowerBound(problem, *placeVShape(problem),
                                           std::vector<double>(p, budget));
      EXPECT_LE(t.makespan, 1.005 * bound) << "p=" << p << " m=" << m;
    }
}

TEST(ZBV, LargeProblemsKeepTheFirstFastestCandidate) {
  // At this size (57,600 actions) the candidates are generated in parallel
  // threads; the result must be what generating them one after the other
  // gives: the fastest, the heuristic's where they tie.
  Problem problem = uniformProblem(16, 600, 32, {0.5, 0.5, 0.5});
  for (Stage &s : problem.stages) {
    s.activation = 0.5;
    s.weightGrad = 0.25;
  }
  std::vector<int> v = *placeVShape(problem);
  ListPolicy policy;
  policy.memoryLimit.assign(16, oneFOneBHighestPeak(problem));
  policy.backwardFirst = false;
  policy.laterStageFirst = false;
  Schedule heuristic = *zeroBubbleV(problem, v, policy.memoryLimit);
  Schedule list = *listSchedule(problem, v, policy);
  double h = simulate(problem, heuristic)->makespan;
  double l = simulate(problem, list)->makespan;
  for (int run = 0; run < 2; ++run) {
    Schedule got = *generateSchedule(problem, {ScheduleKind::ZBV});
    EXPECT_EQ(got.ranks, l < h - 1e-9 ? list.ranks : heuristic.ranks);
  }
}

} // namespace
