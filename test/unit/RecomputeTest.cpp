//===- RecomputeTest.cpp - Recomputation chosen with the schedule ---------===//
//
// The accounting of re-run time and re-materialized memory on hand-computed
// cases, and properties of recompute=auto over grids of kinds, ranks,
// microbatches, stage profiles and capacities.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/Recompute.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/search/ScheduleByName.h"

#include "TestUtil.h"

#include <cmath>
#include <limits>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

/// One rank, one stage (F = 1, I = 2, W = 1; activation 4, weight_grad 1,
/// recomputed 1, selective 2 at cost 0.5), two microbatches.
Problem oneStage() {
  Problem problem = uniformProblem(1, 2, 1, {1.0, 2.0, 1.0});
  Stage &s = problem.stages[0];
  s.activation = 4.0;
  s.weightGrad = 1.0;
  s.recomputed = 1.0;
  s.selective = 2.0;
  s.selectiveCost = 0.5;
  return problem;
}

Schedule order(std::vector<Action> actions) {
  Schedule schedule;
  schedule.placement = {0};
  schedule.ranks = {std::move(actions)};
  return schedule;
}

Timeline simulated(const Problem &problem, const Schedule &schedule) {
  llvm::Expected<Timeline> t = simulate(problem, schedule);
  if (!t) {
    ADD_FAILURE() << llvm::toString(t.takeError());
    return {};
  }
  return *t;
}

constexpr ActionKind F = ActionKind::Forward, B = ActionKind::Backward,
                     I = ActionKind::BackwardInput,
                     W = ActionKind::BackwardWeight;

} // namespace

TEST(Recompute, FullRecomputationKeepsLessAndReRunsTheForward) {
  Problem problem = oneStage();
  Schedule s = order({{F, 0, 0}, {F, 0, 1}, {B, 0, 1}, {B, 0, 0}});
  // Without recomputation: 4 + 4 live after both forwards.
  Timeline plain = simulated(problem, s);
  EXPECT_DOUBLE_EQ(plain.peak(0), 8.0);
  EXPECT_DOUBLE_EQ(plain.makespan, 1 + 1 + 3 + 3);
  // mb 0 recomputed in full: F0 keeps 1, F1 keeps 4 (5); B1 frees 4; B0
  // re-materializes 3 (back to 4) and costs F + B.
  s.recompute.set(0, 0, Recompute::Full, 1, 2);
  Timeline full = simulated(problem, s);
  EXPECT_DOUBLE_EQ(full.peak(0), 5.0);
  EXPECT_DOUBLE_EQ(full.makespan, 1 + 1 + 3 + (3 + 1));
  // Selective: keeps 2, re-runs 0.5.
  s.recompute.set(0, 0, Recompute::Selective, 1, 2);
  Timeline selective = simulated(problem, s);
  EXPECT_DOUBLE_EQ(selective.peak(0), 6.0);
  EXPECT_DOUBLE_EQ(selective.makespan, 1 + 1 + 3 + (3 + 0.5));
}

TEST(Recompute, TheReMaterializedActivationIsLiveUntilIAndWFreeIt) {
  Problem problem = oneStage();
  problem.microbatches = 1;
  problem.stages[0].params = 10.0;
  Schedule s = order({{F, 0, 0}, {I, 0, 0}, {W, 0, 0}});
  s.recompute.set(0, 0, Recompute::Full, 1, 1);
  Timeline t = simulated(problem, s);
  // F keeps 1; I starts by re-materializing 3 (4 live), frees 3; W frees 1.
  EXPECT_DOUBLE_EQ(t.peakMemory[0], 4.0);
  EXPECT_DOUBLE_EQ(t.staticMemory[0], 10.0);
  EXPECT_DOUBLE_EQ(t.peak(0), 14.0);
  EXPECT_DOUBLE_EQ(t.makespan, 1 + (2 + 1) + 1);
  std::vector<double> byOrder = peakMemoryByOrder(problem, s);
  EXPECT_DOUBLE_EQ(byOrder[0], 14.0);
}

TEST(Recompute, SelectiveNeedsTheStageToOfferIt) {
  Problem problem = oneStage();
  problem.stages[0].selective.reset();
  problem.stages[0].selectiveCost.reset();
  Schedule s = order({{F, 0, 0}, {F, 0, 1}, {B, 0, 1}, {B, 0, 0}});
  s.recompute.set(0, 1, Recompute::Selective, 1, 2);
  EXPECT_NE(errorMessage(verifySchedule(problem, s))
                .find("forward @s0 mb 1 recomputes selectively, but @s0 "
                      "declares no selective recomputation"),
            std::string::npos);
  problem.stages[0].selective = 1.0;
  EXPECT_NE(errorMessage(validateProblem(problem))
                .find("needs both memory(selective = S) and cost(selective = "
                      "C); only the memory is given"),
            std::string::npos);
}

TEST(Recompute, AutoRecomputesTheForwardsInFlightLongest) {
  // GPipe on one rank: F0..F3 then B3..B0. mb 0 stays in flight longest.
  Problem problem = oneStage();
  problem.microbatches = 4;
  problem.stages[0].selective.reset();
  problem.stages[0].selectiveCost.reset();
  Schedule s = order({{F, 0, 0},
                      {F, 0, 1},
                      {F, 0, 2},
                      {F, 0, 3},
                      {B, 0, 3},
                      {B, 0, 2},
                      {B, 0, 1},
                      {B, 0, 0}});
  // 16 live without recomputation; 13 fits with one forward recomputed.
  problem.capacity = 13.0;
  llvm::Expected<RecomputeOutcome> out =
      planRecomputation(problem, s, RecomputePolicy::Auto);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(s.recompute.at(0, 0), Recompute::Full);
  EXPECT_EQ(s.recompute.count(Recompute::Full), 1);
  EXPECT_DOUBLE_EQ(out->timeline.peak(0), 13.0);
  // 10 needs two: mb 0 and mb 1.
  problem.capacity = 10.0;
  out = planRecomputation(problem, s, RecomputePolicy::Auto);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(s.recompute.at(0, 1), Recompute::Full);
  EXPECT_EQ(s.recompute.count(Recompute::Full), 2);
  // Below 4 x 1 + 3 (the last backward re-materializes) nothing fits.
  problem.capacity = 6.5;
  out = planRecomputation(problem, s, RecomputePolicy::Auto);
  ASSERT_FALSE(bool(out));
  EXPECT_EQ(errorMessage(out.takeError()),
            "nothing fits: even recomputing every forward, rank 0 peaks at 7 "
            "(params 0 + activations 7), above its capacity 6.5; it needs a "
            "capacity of at least 7 (0.5 more), fewer microbatches in flight "
            "(another kind) or less memory per stage");
  // recompute=none over the capacity says that auto would fit.
  problem.capacity = 10.0;
  out = planRecomputation(problem, s, RecomputePolicy::None);
  ASSERT_FALSE(bool(out));
  EXPECT_EQ(errorMessage(out.takeError()),
            "with recompute=none, rank 0 peaks at 16 (params 0 + activations "
            "16), above its capacity 10; recompute=auto fits (2 of 4 forwards "
            "recompute in full)");
}

TEST(Recompute, AutoPrefersTheCheaperLevelPerUnitSaved) {
  // Selective saves 2 for 0.5 (0.25 per unit), full 3 for 1 (0.33).
  Problem problem = oneStage();
  problem.microbatches = 4;
  Schedule s = order({{F, 0, 0},
                      {F, 0, 1},
                      {F, 0, 2},
                      {F, 0, 3},
                      {B, 0, 3},
                      {B, 0, 2},
                      {B, 0, 1},
                      {B, 0, 0}});
  problem.capacity = 14.0;
  llvm::Expected<RecomputeOutcome> out =
      planRecomputation(problem, s, RecomputePolicy::Auto);
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  EXPECT_EQ(s.recompute.at(0, 0), Recompute::Selective);
  EXPECT_EQ(s.recompute.count(Recompute::Selective), 1);
  EXPECT_EQ(s.recompute.count(Recompute::Full), 0);
}

namespace {
struct Profile {
  double activation, weightGrad, recomputed, params;
  std::optional<double> selective, selectiveCost;
};

Problem gridProblem(int p, int m, int stages, const Profile &profile) {
  Problem problem = uniformProblem(p, m, stages, {1.0, 1.0, 0.6}, 0.05);
  for (Stage &s : problem.stages) {
    s.activation = profile.activation;
    s.weightGrad = profile.weightGrad;
    s.recomputed = profile.recomputed;
    s.params = profile.params;
    s.selective = profile.selective;
    s.selectiveCost = profile.selectiveCost;
  }
  return problem;
}

double highestPeak(const Timeline &t) {
  double peak = 0.0;
  for (int r = 0, e = t.peakMemory.size(); r < e; ++r)
    peak = std::max(peak, t.peak(r));
  return peak;
}
} // namespace

TEST(Recompute, AutoFitsWheneverFullDoesAndIsNeverSlower) {
  const Profile profiles[] = {
      {1.0, 0.5, 0.1, 0.0, std::nullopt, std::nullopt},
      {1.0, 0.5, 0.1, 3.0, 0.4, 0.1},
      {2.0, 1.0, 0.25, 1.0, 1.0, 0.5},
  };
  struct KindCase {
    const char *kind;
    int stagesPerRank;
  };
  const KindCase kinds[] = {
      {"gpipe", 1}, {"1f1b", 1}, {"interleaved-1f1b", 2}, {"zb-h1", 1},
      {"zb-h2", 1}, {"zb-v", 2}, {"dualpipev", 2}};
  int checked = 0, fitted = 0, refused = 0;
  for (const KindCase &kc : kinds)
    for (int p : {2, 4})
      for (int m : {p, 2 * p, 4 * p})
        for (const Profile &profile : profiles) {
          Problem problem = gridProblem(p, m, kc.stagesPerRank * p, profile);
          KindRequest request;
          request.kind = kc.kind;
          request.recompute = RecomputePolicy::None;
          llvm::Expected<KindResult> none = scheduleByName(problem, request);
          ASSERT_TRUE(bool(none)) << llvm::toString(none.takeError());
          request.recompute = RecomputePolicy::Full;
          llvm::Expected<KindResult> full = scheduleByName(problem, request);
          ASSERT_TRUE(bool(full)) << llvm::toString(full.takeError());
          double nonePeak = highestPeak(none->timeline);
          double fullPeak = highestPeak(full->timeline);
          ASSERT_LE(fullPeak, nonePeak + 1e-9);
          for (double capacity :
               {0.9 * fullPeak, fullPeak, 0.5 * (fullPeak + nonePeak), nonePeak,
                10 * nonePeak}) {
            SCOPED_TRACE(::testing::Message() << kc.kind << " p=" << p << " m="
                                              << m << " capacity=" << capacity);
            ++checked;
            problem.capacity = capacity;
            request.recompute = RecomputePolicy::Full;
            llvm::Expected<KindResult> fullHere =
                scheduleByName(problem, request);
            request.recompute.reset(); // auto, as capacity makes it
            llvm::Expected<KindResult> automatic =
                scheduleByName(problem, request);
            if (!fullHere) {
              llvm::consumeError(fullHere.takeError());
              if (!automatic) {
                ++refused;
                EXPECT_NE(errorMessage(automatic.takeError())
                              .find("above its capacity"),
                          std::string::npos);
              }
              continue;
            }
            ASSERT_TRUE(bool(automatic))
                << "auto fails where full fits: "
                << llvm::toString(automatic.takeError());
            ++fitted;
            for (int r = 0; r < p; ++r)
              EXPECT_LE(automatic->timeline.peak(r), capacity * (1 + 1e-9));
            EXPECT_LE(automatic->timeline.makespan,
                      fullHere->timeline.makespan + 1e-9);
            EXPECT_TRUE(!verifySchedule(problem, automatic->schedule));
            if (capacity >= nonePeak) {
              // Nothing to save: equals recompute=none.
              EXPECT_FALSE(automatic->schedule.recompute.any());
              EXPECT_DOUBLE_EQ(automatic->timeline.makespan,
                               none->timeline.makespan);
            }
          }
        }
  EXPECT_GT(fitted, checked / 2);
  EXPECT_GT(refused, 0);
}

TEST(Recompute, AutoKindSearchesKindAndRecomputationTogether) {
  for (int p : {2, 4}) {
    Problem problem =
        gridProblem(p, 4 * p, 2 * p, {1.0, 0.5, 0.1, 1.0, 0.4, 0.1});
    KindRequest request;
    request.kind = "1f1b";
    request.recompute = RecomputePolicy::None;
    llvm::Expected<KindResult> plain = scheduleByName(problem, request);
    ASSERT_TRUE(bool(plain)) << llvm::toString(plain.takeError());
    // Room for about half of 1F1B's activations.
    problem.capacity = 0.6 * highestPeak(plain->timeline);
    request.kind = "auto";
    request.recompute.reset();
    request.timeLimit = 2.0;
    llvm::Expected<KindResult> automatic = scheduleByName(problem, request);
    ASSERT_TRUE(bool(automatic)) << llvm::toString(automatic.takeError());
    for (int r = 0; r < p; ++r)
      EXPECT_LE(automatic->timeline.peak(r), *problem.capacity * (1 + 1e-9));
    EXPECT_NE(automatic->choice.find(" + recompute "), std::string::npos);
    // Never slower than any fixed kind with its own recomputation planned.
    for (const char *kind : {"1f1b", "zb-h1", "zb-h2", "interleaved-1f1b",
                             "zb-v", "dualpipev", "gpipe"}) {
      request.kind = kind;
      llvm::Expected<KindResult> fixed = scheduleByName(problem, request);
      if (!fixed) {
        llvm::consumeError(fixed.takeError());
        continue;
      }
      EXPECT_LE(automatic->timeline.makespan, fixed->timeline.makespan + 1e-9)
          << kind;
    }
  }
}
