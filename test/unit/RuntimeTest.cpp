//===- RuntimeTest.cpp - The executor on the local backend ----------------===//
//
// Plans of every kind run to completion on threads with each compute
// executed once and the measured busy time at least the simulated one; a plan
// that reuses a live slot is caught; a plan that cannot finish is stopped by
// the watchdog with every waiting rank named.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "runtime/DataParallel.h"
#include "runtime/Runtime.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"

#include <limits>
#include <thread>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;
using namespace stagecraft::runtime;

namespace {

Plan planFor(ScheduleKind kind, int p, int m) {
  Problem problem = uniformProblem(p, m, 2 * p, {1.0, 1.0, 1.0}, 0.0);
  llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
  EXPECT_TRUE(!!s);
  return buildPlan(problem, lowerCommunication(problem, *s), "t", 256);
}

RunOptions fast() {
  RunOptions options;
  options.exec.timeUnit = 20e-6;
  options.timeout = 10.0;
  return options;
}

TEST(Runtime, EveryKindRunsOnThreads) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
        ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1, ScheduleKind::ZBH2,
        ScheduleKind::ZBV, ScheduleKind::DualPipeV})
    for (int p : {1, 2, 3})
      for (int m : {1, 2 * p}) {
        Plan plan = planFor(kind, p, m);
        llvm::Expected<RunReport> report = runLocal(plan, fast());
        ASSERT_TRUE(!!report) << llvm::toString(report.takeError());
        ASSERT_EQ(report->ranks.size(), static_cast<size_t>(p));
        for (const RankResult &r : report->ranks) {
          size_t computes = 0;
          for (const PlanOp &op : plan.ranks[r.rank].ops)
            computes += op.kind == PlanOp::Kind::Compute;
          EXPECT_EQ(r.actions.size(), computes);
          EXPECT_EQ(r.instructions, plan.ranks[r.rank].ops.size());
          // Sleeping never ends early.
          EXPECT_GE(r.busy, plan.simulatedBusy[r.rank] * 20e-6 * 0.999);
        }
        EXPECT_GE(report->wall, plan.simulatedMakespan * 20e-6 * 0.999);
      }
}

TEST(Runtime, CatchesAWrongSlotReuse) {
  Plan plan = planFor(ScheduleKind::OneFOneB, 2, 4);
  // Rank 1's second compute writes its output over the first one's slot.
  std::vector<PlanOp> &ops = plan.ranks[1].ops;
  std::vector<PlanOp *> computes;
  for (PlanOp &op : ops)
    if (op.kind == PlanOp::Kind::Compute && !op.reads.empty())
      computes.push_back(&op);
  ASSERT_GE(computes.size(), 2u);
  computes[1]->reads[0].slot = (computes[1]->reads[0].slot + 1) %
                               static_cast<int>(plan.ranks[1].slotBytes.size());
  llvm::Expected<RunReport> report = runLocal(plan, fast());
  ASSERT_FALSE(!!report);
  std::string message = llvm::toString(report.takeError());
  EXPECT_NE(message.find("rank 1: instruction"), std::string::npos) << message;
  EXPECT_NE(message.find("reads slot"), std::string::npos) << message;
}

TEST(Runtime, WatchdogStopsAHang) {
  Plan plan = planFor(ScheduleKind::GPipe, 2, 2);
  // Rank 0 never sends: rank 1 waits for it, rank 0 for rank 1's gradients.
  std::vector<PlanOp> &ops = plan.ranks[0].ops;
  std::vector<PlanOp> kept;
  for (PlanOp &op : ops) {
    if (op.kind == PlanOp::Kind::Send)
      continue;
    if (op.kind == PlanOp::Kind::Group) {
      std::vector<PlanOp> recvs;
      for (PlanOp &sub : op.ops)
        if (sub.kind != PlanOp::Kind::Send)
          recvs.push_back(sub);
      if (recvs.empty())
        continue;
      op.ops = recvs;
    }
    kept.push_back(op);
  }
  ops = kept;
  RunOptions options = fast();
  options.timeout = 0.3;
  llvm::Expected<RunReport> report = runLocal(plan, options);
  ASSERT_FALSE(!!report);
  std::string message = llvm::toString(report.takeError());
  EXPECT_NE(message.find("rank 0: instruction"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1: instruction 0: no rank progressed for 0.3 s; "
                         "waiting for recv act("),
            std::string::npos)
      << message;
}

} // namespace

// Stragglers: over rank counts, step windows and slow-rank sets, a rank is
// flagged exactly when its time per unit exceeds the lower median's by more
// than the threshold in every step of the window (noise below it on the
// other ranks), and its speed factor is the inverse of its median ratio.
TEST(Stragglers, FlaggedExactlyWhenSlowInEveryStep) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int p = 2; p <= 9; ++p)
    for (int k = 1; k <= 4; ++k)
      for (int slow = 0; slow < p; ++slow)
        for (double factor : {1.2, 3.0}) {
          // Every rank at 1 +- 10 %, the slow one at `factor` in each step
          // but, in the second case, one.
          for (bool everyStep : {true, false}) {
            std::vector<std::vector<double>> rates(p);
            for (int r = 0; r < p; ++r)
              for (int i = 0; i < k; ++i)
                rates[r].push_back(1.0 + 0.1 * (((r + i) % 3) - 1));
            for (int i = 0; i < k; ++i)
              if (everyStep || i != k - 1)
                rates[slow][i] *= factor;
            std::vector<Straggler> found = findStragglers(rates, 1.5, 10);
            // 1.2 x 1.1 / 0.9 stays below 1.5; 3 x 0.9 / 1.1 stays above.
            bool expected = factor == 3.0 && everyStep;
            ASSERT_EQ(found.size(), expected ? 1u : 0u)
                << "p=" << p << " k=" << k << " slow=" << slow
                << " factor=" << factor << " every=" << everyStep;
            if (!expected)
              continue;
            EXPECT_EQ(found[0].rank, slow);
            EXPECT_EQ(found[0].firstStep, 10 - k);
            EXPECT_EQ(found[0].lastStep, 9);
            EXPECT_NEAR(found[0].speedFactor * found[0].ratio, 1.0, 1e-12);
            EXPECT_GT(found[0].ratio, 2.4);
            EXPECT_LT(found[0].ratio, 3.7);
          }
        }
  // A step not judged on one rank (an attempt's first): nobody is flagged.
  std::vector<std::vector<double>> rates = {{1.0, 1.0}, {nan, 5.0}, {1.0, 1.0}};
  EXPECT_TRUE(findStragglers(rates, 1.5, 2).empty());
  // The lower median is the reference: with 2 of 4 ranks slow, both are
  // flagged; with 3 of 4 the reference is a slow one and none is.
  std::vector<std::vector<double>> half = {{1.0}, {3.0}, {1.0}, {3.0}};
  EXPECT_EQ(findStragglers(half, 1.5, 1).size(), 2u);
  std::vector<std::vector<double>> most = {{1.0}, {3.0}, {3.0}, {3.0}};
  EXPECT_TRUE(findStragglers(most, 1.5, 1).empty());
  // One rank: no other to compare with.
  EXPECT_TRUE(findStragglers({{9.0}}, 1.5, 1).empty());
}

// Replicas meet at the end of each step: one that leaves mid-step is out
// of the list at that step's end for every rank (the step runs again
// without it); one that restarts is admitted at the end of the step before
// the one it asked for, and not at a step's end where another left.
TEST(ReplicaSet, EveryRankSeesTheSameReplicasAfterLeavesAndJoins) {
  constexpr int kReplicas = 3, kRanks = 2;
  ReplicaSet set(kReplicas, kRanks);
  ProgressMonitor monitor(kReplicas * kRanks, 10.0);
  // Step 0: everyone; replica 1 leaves before its ranks end step 1.
  std::vector<std::vector<int>> seen(kReplicas * kRanks);
  auto endStep = [&](int step, std::vector<int> replicas) {
    std::vector<std::thread> threads;
    for (int k : replicas)
      for (int r = 0; r < kRanks; ++r)
        threads.emplace_back([&, k, r, step] {
          llvm::Expected<std::vector<int>> after =
              set.endStep(k, step, monitor);
          ASSERT_TRUE(!!after) << llvm::toString(after.takeError());
          seen[k * kRanks + r] = *after;
        });
    return threads;
  };
  for (std::thread &t : endStep(0, {0, 1, 2}))
    t.join();
  for (const std::vector<int> &after : seen)
    EXPECT_EQ(after, (std::vector<int>{0, 1, 2}));
  std::vector<std::thread> waiting = endStep(1, {0, 2});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  set.leave(1);
  for (std::thread &t : waiting)
    t.join();
  for (int k : {0, 2})
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(seen[k * kRanks + r], (std::vector<int>{0, 2}));
  EXPECT_TRUE(set.waitGone(1, 1.0));
  // Replica 1 restarts to train from step 3: step 1 again and step 2 end
  // without it, the end of step 2 waits for both its ranks and admits it.
  std::vector<std::vector<int>> joined(kRanks);
  std::vector<std::thread> joining;
  for (int r = 0; r < kRanks; ++r)
    joining.emplace_back([&, r] {
      llvm::Expected<std::vector<int>> after = set.join(1, 3, monitor);
      ASSERT_TRUE(!!after) << llvm::toString(after.takeError());
      joined[r] = *after;
    });
  for (int step : {1, 2}) {
    for (std::thread &t : endStep(step, {0, 2}))
      t.join();
    const std::vector<int> expected =
        step == 2 ? std::vector<int>{0, 1, 2} : std::vector<int>{0, 2};
    for (int k : {0, 2})
      for (int r = 0; r < kRanks; ++r)
        EXPECT_EQ(seen[k * kRanks + r], expected) << "step " << step;
  }
  for (std::thread &t : joining)
    t.join();
  for (const std::vector<int> &after : joined)
    EXPECT_EQ(after, (std::vector<int>{0, 1, 2}));
}

// The data-parallel mean sums in replica order, so replicas agree to the
// bit, and divides by their number.
TEST(ReplicaSet, TheMeanSumsInReplicaOrder) {
  const float a[] = {1e8f, 1.0f}, b[] = {1.0f, 2.0f}, c[] = {-1e8f, 3.0f};
  float out[2];
  meanOverReplicas({a, b, c}, 2, out);
  // In float, (1e8 + 1) - 1e8 is 0 and (1e8 - 1e8) + 1 is 1: a, b, c.
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(meanOverReplicas({1.0, 2.0, 6.0}), 3.0);
}

TEST(ReplicaSet, ShardGroupsSumWithinThenAcross) {
  // Four replicas in groups of two: (a + b) + (c + d), not ((a + b) + c) + d.
  const float a[] = {1e8f}, b[] = {1.0f}, c[] = {-1e8f}, d[] = {1.0f};
  float grouped, whole;
  meanOverReplicas({a, b, c, d}, 1, &grouped, /*group=*/2);
  meanOverReplicas({a, b, c, d}, 1, &whole);
  // In float, 1e8 + 1 is 1e8: the groups' sums are 1e8 and -1e8 + 1 = -1e8.
  EXPECT_EQ(grouped, 0.0f);
  // Replica order: ((1e8 + 1) - 1e8) + 1 = 1, over 4.
  EXPECT_EQ(whole, 0.25f);
  // One group of all, or groups of one, is replica order.
  float one, each;
  meanOverReplicas({a, b, c, d}, 1, &one, /*group=*/4);
  meanOverReplicas({a, b, c, d}, 1, &each, /*group=*/1);
  EXPECT_EQ(one, whole);
  EXPECT_EQ(each, whole);
}
