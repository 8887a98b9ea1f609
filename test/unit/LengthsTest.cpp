//===- LengthsTest.cpp - Microbatches of different lengths ----------------===//
//
// `lengths(...)` and `scaling(...)`: the cost and memory factors, the
// effects every consumer reads through actionEffect (simulator, verifier,
// bounds, buffer plans), over every kind.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/LowerBound.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <random>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

constexpr ActionKind F = ActionKind::Forward;
constexpr ActionKind B = ActionKind::Backward;

TEST(Lengths, CostAndMemoryFactors) {
  Problem problem = uniformProblem(1, 3, 2);
  problem.lengths = {1.0, 2.0, 4.0};
  problem.referenceLength = 2.0;
  problem.stages[1].scalingLinear = 1.0;
  problem.stages[1].scalingQuadratic = 1.0;
  // Linear (the default): l / l0.
  EXPECT_DOUBLE_EQ(problem.costScale(0, 0), 0.5);
  EXPECT_DOUBLE_EQ(problem.costScale(0, 2), 2.0);
  // (l + l^2) / (l0 + l0^2) = (4 + 16) / (2 + 4).
  EXPECT_DOUBLE_EQ(problem.costScale(1, 2), 20.0 / 6.0);
  EXPECT_DOUBLE_EQ(problem.costScale(1, 1), 1.0);
  // Memory always per token.
  EXPECT_DOUBLE_EQ(problem.memoryScale(2), 2.0);
  Problem plain = uniformProblem(1, 3, 2);
  EXPECT_DOUBLE_EQ(plain.costScale(1, 2), 1.0);
  EXPECT_DOUBLE_EQ(plain.memoryScale(2), 1.0);
}

TEST(Lengths, GPipeByHand) {
  // 2 stages on 2 ranks, F = 1, B = 2 at the reference length 2; lengths
  // 1 and 3: microbatch 0 costs half, microbatch 1 one and a half.
  Problem problem = uniformProblem(2, 2, 2, {1.0, 1.0, 1.0});
  problem.lengths = {1.0, 3.0};
  problem.referenceLength = 2.0;
  for (Stage &s : problem.stages)
    s.activation = s.weightGrad = 2.0;
  Schedule schedule;
  schedule.placement = {0, 1};
  schedule.ranks = {{{F, 0, 0}, {F, 0, 1}, {B, 0, 0}, {B, 0, 1}},
                    {{F, 1, 0}, {F, 1, 1}, {B, 1, 0}, {B, 1, 1}}};
  llvm::Expected<Timeline> t = simulate(problem, schedule);
  ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
  // Rank 0: F0 [0,0.5] F1 [0.5,2]. Rank 1: F0 [0.5,1] F1 [2,3.5]
  // B0 [3.5,4.5] B1 [4.5,7.5]. Rank 0: B0 [4.5,5.5] B1 [7.5,10.5].
  EXPECT_DOUBLE_EQ(t->ranks[1][1].start, 2.0);
  EXPECT_DOUBLE_EQ(t->ranks[1][3].end, 7.5);
  EXPECT_DOUBLE_EQ(t->makespan, 10.5);
  EXPECT_DOUBLE_EQ(t->busy[0], 6.0);
  // Both forwards live on rank 0: 2 x 0.5 + 2 x 1.5.
  EXPECT_DOUBLE_EQ(t->peakMemory[0], 4.0);
}

/// Lengths drawn from a long tail (log-normal), one per microbatch.
std::vector<double> longTail(int m, unsigned seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<double> dist(7.0, 0.8);
  std::vector<double> lengths;
  for (int k = 0; k < m; ++k)
    lengths.push_back(std::max(64.0, std::round(dist(rng))));
  return lengths;
}

TEST(Lengths, EveryKindOverGrid) {
  // Every kind, p in {2, 4}, m in {p, 2p}, linear and quadratic scaling:
  // the schedule verifies, each rank is busy exactly the sum of its
  // scaled costs, the step is no shorter than either bound, and with every
  // length at the reference the step is the one without lengths.
  for (const char *kind : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                           "zb-h2", "zb-v", "dualpipev", "auto"})
    for (int p : {2, 4})
      for (int m : {p, 2 * p})
        for (double quadratic : {0.0, 0.001}) {
          bool twoPerRank = std::string(kind) == "zb-v" ||
                            std::string(kind) == "dualpipev" ||
                            std::string(kind) == "interleaved-1f1b";
          Problem problem = uniformProblem(p, m, twoPerRank ? 2 * p : p,
                                           {1.0, 1.1, 0.6}, 0.05);
          for (Stage &s : problem.stages) {
            s.scalingQuadratic = quadratic;
            s.output = 0.5;
          }
          problem.lengths = longTail(m, 7 * p + m);
          double sum = 0.0;
          for (double l : problem.lengths)
            sum += l;
          problem.referenceLength = sum / m;
          std::string where =
              fmt::format("{} p={} m={} q={}", kind, p, m, quadratic);
          KindRequest request;
          request.kind = kind;
          request.timeLimit = 0.2;
          llvm::Expected<KindResult> r = scheduleByName(problem, request);
          ASSERT_TRUE(!!r) << where << ": " << llvm::toString(r.takeError());
          ASSERT_FALSE(!!verifySchedule(problem, r->schedule)) << where;
          const Timeline &t = r->timeline;
          std::vector<double> busy(p, 0.0);
          for (int s = 0; s < problem.numStages(); ++s)
            for (int k = 0; k < m; ++k) {
              const Stage &st = problem.stages[s];
              busy[r->schedule.placement[s]] +=
                  problem.costScale(s, k) *
                  (st.forward + st.backwardInput + st.backwardWeight);
            }
          for (int q = 0; q < p; ++q) {
            if (std::string(kind) == "dualpipev")
              EXPECT_LE(t.busy[q], busy[q] + 1e-9) << where;
            else
              EXPECT_NEAR(t.busy[q], busy[q], 1e-9) << where << " rank " << q;
          }
          EXPECT_GE(t.makespan,
                    lowerBound(problem, r->schedule.placement) - 1e-9)
              << where;
          EXPECT_GE(t.makespan,
                    memoryAwareLowerBound(problem, r->schedule.placement, {}) -
                        1e-9)
              << where;

          if (std::string(kind) == "auto")
            continue;
          Problem alike = problem;
          alike.lengths.assign(m, alike.referenceLength);
          Problem plain = problem;
          plain.lengths.clear();
          llvm::Expected<Timeline> a = simulate(alike, r->schedule);
          llvm::Expected<Timeline> b = simulate(plain, r->schedule);
          ASSERT_TRUE(a && b) << where;
          EXPECT_NEAR(a->makespan, b->makespan, 1e-9) << where;
        }
}

TEST(Lengths, BuffersAreSizedPerMicrobatch) {
  // Message and stash buffers follow each microbatch's length: 1F1B on 2
  // ranks with lengths 1 and 3 (reference 2) and 1000 bytes per unit.
  Problem problem = uniformProblem(2, 2, 2);
  problem.lengths = {1.0, 3.0};
  problem.referenceLength = 2.0;
  for (Stage &s : problem.stages)
    s.output = 1.0;
  Schedule schedule = *generateSchedule(problem, {ScheduleKind::OneFOneB});
  Plan plan =
      buildPlan(problem, lowerCommunication(problem, schedule), "s", 1000);
  std::map<int, std::set<int64_t>> bytes; // microbatch -> message sizes
  for (const PlanRank &rank : plan.ranks)
    for (const PlanOp &op : rank.ops)
      if (op.kind == PlanOp::Kind::Send || op.kind == PlanOp::Kind::Recv)
        bytes[decodeTag(op.buffer.tag).microbatch].insert(op.buffer.bytes);
  EXPECT_EQ(bytes[0], (std::set<int64_t>{500}));
  EXPECT_EQ(bytes[1], (std::set<int64_t>{1500}));

  // The plan file carries the lengths; the reader checks them.
  std::string text = writePlan(plan);
  llvm::Expected<Plan> back = readPlan(text);
  ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
  EXPECT_EQ(back->lengths, (std::vector<double>{1.0, 3.0}));
  EXPECT_EQ(back->referenceLength, 2.0);
  std::string bad = text;
  bad.replace(bad.find("\"lengths\":[1,3]"), 15, "\"lengths\":[1,0]");
  llvm::Expected<Plan> refused = readPlan(bad);
  ASSERT_FALSE(!!refused);
  EXPECT_EQ(llvm::toString(refused.takeError()),
            "invalid plan: lengths: every length must be finite and > 0");
}

TEST(Lengths, AutoChoosesAnOrderAndKeepsItsPromises) {
  // Long-tailed batches on p = 4, m = 8: auto's result, read back with its
  // microbatch order, simulates to what it reports; it is no slower than
  // any fixed kind that fits the same limit (1F1B's peak, lengths as
  // given) or than the schedule it starts from, and it fits that limit.
  for (unsigned seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    Problem problem = uniformProblem(4, 8, 4, {1.0, 1.0, 0.5}, 0.02);
    problem.lengths = longTail(8, seed);
    problem.referenceLength = 1024.0;
    llvm::Expected<std::vector<double>> peaks = oneFOneBPeakMemory(problem);
    ASSERT_TRUE(!!peaks);
    double limit = *std::max_element(peaks->begin(), peaks->end());
    // Two starts: zb-h1's order (which may not fit) and 1F1B's (which
    // does).
    Schedule start = *generateSchedule(problem, {ScheduleKind::ZBH1});
    Schedule oneF = *generateSchedule(problem, {ScheduleKind::OneFOneB});
    KindRequest request;
    request.kind = "auto";
    request.timeLimit = 0.2;
    request.starts = {start, oneF};
    llvm::Expected<KindResult> r = scheduleByName(problem, request);
    ASSERT_TRUE(!!r) << llvm::toString(r.takeError());
    std::string where = fmt::format("seed {}: {}", seed, r->choice);
    std::vector<int> order = r->microbatchOrder;
    if (order.empty())
      for (int k = 0; k < 8; ++k)
        order.push_back(k);
    Problem seen = reorderedMicrobatches(problem, order);
    llvm::Expected<Timeline> back = simulate(seen, r->schedule);
    ASSERT_TRUE(!!back) << where;
    EXPECT_NEAR(back->makespan, r->timeline.makespan, 1e-9) << where;
    EXPECT_LE(
        *std::max_element(back->peakMemory.begin(), back->peakMemory.end()),
        limit + 1e-9)
        << where;
    for (const Schedule &given : {start, oneF}) {
      llvm::Expected<Timeline> t = simulate(problem, given);
      ASSERT_TRUE(!!t);
      if (*std::max_element(t->peakMemory.begin(), t->peakMemory.end()) <=
          limit + 1e-9) {
        EXPECT_LE(r->timeline.makespan, t->makespan + 1e-9) << where;
      }
    }
    for (const char *kind : {"gpipe", "1f1b", "zb-h1", "zb-h2"}) {
      KindRequest fixed;
      fixed.kind = kind;
      llvm::Expected<KindResult> f = scheduleByName(problem, fixed);
      ASSERT_TRUE(!!f) << kind;
      const Timeline &t = f->timeline;
      if (*std::max_element(t.peakMemory.begin(), t.peakMemory.end()) <=
          limit + 1e-9) {
        EXPECT_LE(r->timeline.makespan, t.makespan + 1e-9)
            << where << " vs " << kind;
      }
    }
  }
}

} // namespace
