//===- SimulatorTest.cpp - Event simulator and deadlock check -------------===//
//
// Timing, memory and bubble semantics of DESIGN.md on schedules written by
// hand, and the report of a schedule that cannot run.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/Generators.h"
#include "scheduler/Simulator.h"

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

constexpr ActionKind F = ActionKind::Forward;
constexpr ActionKind I = ActionKind::BackwardInput;
constexpr ActionKind W = ActionKind::BackwardWeight;
constexpr ActionKind B = ActionKind::Backward;

TEST(Simulator, SplitBackwardTimingAndMemory) {
  // Two stages on two ranks, two microbatches, W deferred on rank 0.
  Problem problem = uniformProblem(2, 2, 2, {1.0, 2.0, 3.0}, 0.5);
  for (Stage &s : problem.stages) {
    s.activation = 4.0;
    s.weightGrad = 1.0;
  }
  Schedule schedule;
  schedule.placement = {0, 1};
  schedule.ranks = {
      {{F, 0, 0}, {F, 0, 1}, {I, 0, 0}, {I, 0, 1}, {W, 0, 0}, {W, 0, 1}},
      {{F, 1, 0}, {I, 1, 0}, {F, 1, 1}, {W, 1, 0}, {I, 1, 1}, {W, 1, 1}}};
  llvm::Expected<Timeline> t = simulate(problem, schedule);
  ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
  // Rank 1: F0 [1.5,2.5] I0 [2.5,4.5] F1 [4.5,5.5] W0 [5.5,8.5]
  //         I1 [8.5,10.5] W1 [10.5,13.5].
  // Rank 0: F0 [0,1] F1 [1,2] I0 waits for rank 1's I0 (4.5) + 0.5 -> [5,7],
  //         I1 waits for 10.5 + 0.5 -> [11,13], W0 [13,16], W1 [16,19].
  EXPECT_DOUBLE_EQ(t->makespan, 19.0);
  EXPECT_DOUBLE_EQ(t->ranks[0][2].start, 5.0);
  EXPECT_DOUBLE_EQ(t->ranks[0][3].start, 11.0);
  EXPECT_DOUBLE_EQ(t->ranks[1][0].start, 1.5);
  EXPECT_DOUBLE_EQ(t->busy[0], 12.0);
  EXPECT_DOUBLE_EQ(t->busy[1], 12.0);
  EXPECT_DOUBLE_EQ(t->bubbleRatio, 1.0 - 24.0 / (2 * 19.0));
  // Rank 0 holds both activations (8); rank 1 holds at most the weight_grad
  // of mb 0 plus the activation of mb 1 (1 + 4).
  EXPECT_DOUBLE_EQ(t->peakMemory[0], 8.0);
  EXPECT_DOUBLE_EQ(t->peakMemory[1], 5.0);
}

TEST(Simulator, SameRankDependenciesHaveNoLatency) {
  Problem problem = uniformProblem(1, 1, 2, {1.0, 1.0, 1.0}, 10.0);
  Schedule schedule;
  schedule.placement = {0, 0};
  schedule.ranks = {{{F, 0, 0}, {F, 1, 0}, {B, 1, 0}, {B, 0, 0}}};
  llvm::Expected<Timeline> t = simulate(problem, schedule);
  ASSERT_TRUE(!!t);
  EXPECT_DOUBLE_EQ(t->makespan, 6.0);
  EXPECT_DOUBLE_EQ(t->bubbleRatio, 0.0);
}

TEST(Simulator, DeadlockNamesEveryStuckRankAndWhatItWaitsFor) {
  Problem problem = uniformProblem(2, 2, 2);
  Schedule schedule;
  schedule.placement = {0, 1};
  // Rank 1 wants microbatch 1 first; rank 0 waits for the gradient of mb 0
  // before it sends mb 1.
  schedule.ranks = {{{F, 0, 0}, {B, 0, 0}, {F, 0, 1}, {B, 0, 1}},
                    {{F, 1, 1}, {B, 1, 1}, {F, 1, 0}, {B, 1, 0}}};
  llvm::Error err = verifySchedule(problem, schedule);
  ASSERT_TRUE(!!err);
  std::string message;
  llvm::handleAllErrors(std::move(err), [&](const ScheduleError &e) {
    message = e.message;
    ASSERT_EQ(e.notes.size(), 2u);
    EXPECT_EQ(e.notes[0].site.rank, 0);
    EXPECT_EQ(e.notes[0].site.index, 1);
    EXPECT_EQ(e.notes[0].message, "rank 0 is stuck at 0B0, which waits for 1B0 "
                                  "on rank 1 (position 3 there)");
    EXPECT_EQ(e.notes[1].site.rank, 1);
    EXPECT_EQ(e.notes[1].site.index, 0);
    EXPECT_EQ(e.notes[1].message, "rank 1 is stuck at 1F1, which waits for 0F1 "
                                  "on rank 0 (position 2 there)");
  });
  EXPECT_EQ(message, "schedule deadlocks: no execution order satisfies the "
                     "dependencies; stuck ranks: 0, 1");
}

TEST(Simulator, EveryKindRunsOnEveryGridPoint) {
  // Validity and the bubble identity for all kinds, with latency.
  for (int p : {1, 2, 3, 5, 8})
    for (int m = 1; m <= 3 * p; ++m) {
      Problem one = uniformProblem(p, m, p, {1.0, 1.5, 0.5}, 0.1);
      Problem two = uniformProblem(p, m, 2 * p, {1.0, 1.5, 0.5}, 0.1);
      std::pair<Problem *, ScheduleKind> cases[] = {
          {&one, ScheduleKind::GPipe},
          {&one, ScheduleKind::OneFOneB},
          {&two, ScheduleKind::Interleaved1F1B}};
      for (auto [problem, kind] : cases) {
        llvm::Expected<Schedule> s = generateSchedule(*problem, {kind});
        ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
        llvm::Expected<Timeline> t = simulate(*problem, *s);
        ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
        double busy = 0;
        for (double b : t->busy)
          busy += b;
        EXPECT_NEAR(busy, problem->numStages() * m * 3.0, 1e-9);
        EXPECT_NEAR(t->bubbleRatio, 1.0 - busy / (p * t->makespan), 1e-12);
        EXPECT_GE(t->bubbleRatio, -1e-12);
      }
    }
}

} // namespace
