//===- SimulatorTest.cpp - Event simulator and deadlock check -------------===//
//
// Timing, memory and bubble semantics of DESIGN.md on schedules written by
// hand, and the report of a schedule that cannot run.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

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

/// 2 stages on 2 ranks, 4 microbatches, forwards first on both ranks; every
/// transfer takes 2 (output 2 over bandwidth 1, latency 0).
Problem linkProblem(bool links) {
  Problem problem = uniformProblem(2, 4, 2, {1.0, 1.0, 1.0}, links ? 0.0 : 2.0);
  for (Stage &s : problem.stages)
    s.output = 2.0;
  if (links)
    problem.links = Problem::Links{1, {0.0, 1.0}, {0.0, 1.0}};
  return problem;
}

Schedule forwardsFirst() {
  Schedule schedule;
  schedule.placement = {0, 1};
  schedule.ranks.resize(2);
  for (int r = 0; r < 2; ++r)
    for (ActionKind k : {F, I, W})
      for (int m = 0; m < 4; ++m)
        schedule.ranks[r].push_back({k, r, m});
  return schedule;
}

TEST(Simulator, ALinkCarriesOneTransferAtATime) {
  llvm::Expected<Timeline> t = simulate(linkProblem(true), forwardsFirst());
  ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
  // Rank 0's forwards end at 1, 2, 3, 4; their transfers queue on link
  // 0 -> 1: [1,3] [3,5] [5,7] [7,9], so rank 1's forwards start at 3, 5, 7,
  // 9. Rank 1's I end at 11, 12, 13, 14; link 1 -> 0: [11,13] [13,15]
  // [15,17] [17,19]; rank 0's I start at 13, 15, 17, 19, its W run
  // [20,24].
  for (int m = 0; m < 4; ++m) {
    EXPECT_DOUBLE_EQ(t->ranks[1][m].start, 3.0 + 2.0 * m) << "F" << m;
    EXPECT_DOUBLE_EQ(t->ranks[0][4 + m].start, 13.0 + 2.0 * m) << "I" << m;
  }
  EXPECT_DOUBLE_EQ(t->makespan, 24.0);
  ASSERT_EQ(t->transfers.size(), 8u);
  const TimedTransfer &last = t->transfers.back();
  EXPECT_EQ(last.from, 1);
  EXPECT_EQ(last.to, 0);
  EXPECT_EQ(last.producer.kind, I);
  EXPECT_EQ(last.producer.microbatch, 3);
  EXPECT_DOUBLE_EQ(last.start, 17.0);
  EXPECT_DOUBLE_EQ(last.end, 19.0);

  // The same transfer time as a plain latency overlaps the transfers:
  // rank 1's forwards start at 3, 4, 5, 6; the makespan is 18.
  llvm::Expected<Timeline> free = simulate(linkProblem(false), forwardsFirst());
  ASSERT_TRUE(!!free);
  EXPECT_DOUBLE_EQ(free->ranks[1][3].start, 6.0);
  EXPECT_DOUBLE_EQ(free->makespan, 18.0);
  EXPECT_TRUE(free->transfers.empty());
}

TEST(Simulator, ContendedLinksOverGrid) {
  // Every kind, p in {2, 4}, m in {p, 2p}, slow and fast links: transfers
  // on one directed link never overlap, each starts after its producer
  // ends and holds its link for its transfer time, and contention never
  // shortens the step against the same transfer times on free links.
  for (const char *kind : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                           "zb-h2", "zb-v", "dualpipev"})
    for (int p : {2, 4})
      for (int m : {p, 2 * p})
        for (double bandwidth : {0.25, 4.0}) {
          bool vShape = std::string(kind) == "zb-v" ||
                        std::string(kind) == "dualpipev" ||
                        std::string(kind) == "interleaved-1f1b";
          Problem problem =
              uniformProblem(p, m, vShape ? 2 * p : p, {1.0, 1.0, 0.5});
          for (Stage &s : problem.stages)
            s.output = 1.0;
          problem.links =
              Problem::Links{2, {0.1, bandwidth}, {0.2, bandwidth / 4}};
          KindRequest request;
          request.kind = kind;
          llvm::Expected<KindResult> r = scheduleByName(problem, request);
          ASSERT_TRUE(!!r) << kind << ": " << llvm::toString(r.takeError());
          const Timeline &t = r->timeline;
          std::string where =
              fmt::format("{} p={} m={} bw={}", kind, p, m, bandwidth);
          ASSERT_FALSE(t.transfers.empty()) << where;
          std::map<std::pair<int, int>, double> linkFree;
          std::map<std::tuple<int, int, int, int>, double> produced;
          for (const auto &rank : t.ranks)
            for (const TimedAction &a : rank)
              produced[{int(a.action.kind), a.action.stage, a.action.microbatch,
                        0}] = a.end;
          for (const TimedTransfer &x : t.transfers) {
            double &free = linkFree[{x.from, x.to}];
            EXPECT_GE(x.start, free - 1e-9) << where << ": link overlap";
            free = x.end;
            auto it = produced.find({int(x.producer.kind), x.producer.stage,
                                     x.producer.microbatch, 0});
            ASSERT_NE(it, produced.end()) << where;
            EXPECT_GE(x.start, it->second - 1e-9) << where;
            EXPECT_NEAR(x.end - x.start,
                        problem.transferTime(x.from, x.to, x.producer.stage),
                        1e-9)
                << where;
          }
          Problem uncontended = problem;
          llvm::Expected<TaskGraph> graph =
              buildTaskGraph(uncontended, r->schedule);
          ASSERT_TRUE(!!graph);
          graph->linkContention = false;
          llvm::Expected<Timeline> free = simulate(*graph);
          ASSERT_TRUE(!!free);
          EXPECT_GE(t.makespan, free->makespan - 1e-9) << where;
          EXPECT_TRUE(free->transfers.empty());
        }
}

} // namespace
