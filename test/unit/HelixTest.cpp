//===- HelixTest.cpp - HelixPipe task graphs ------------------------------===//
//
// The HelixPipe graph runs to completion for any microbatch count, spreads a
// layer's attentions of one group over all ranks, does all the work the model
// needs, refuses layer counts that do not divide over the ranks, and gains on
// the layer pipelines as sequences grow.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Helix.h"
#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"

#include <set>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

TransformerShape small(int sequence) {
  TransformerShape shape;
  shape.layers = 8;
  shape.hidden = 1024;
  shape.heads = 8;
  shape.sequence = sequence;
  shape.vocab = 1000;
  return shape;
}

TEST(Helix, RunsForEveryMicrobatchCountAndDoesAllTheWork) {
  for (int p : {1, 2, 4, 8})
    for (int m = 1; m <= 3 * p; ++m)
      for (int folds : {1, 2}) {
        TransformerShape shape = small(4096);
        LayerCosts c = layerCosts(shape);
        llvm::Expected<TaskGraph> g =
            helixTaskGraph(shape, c, Link{}, p, m, {folds, true});
        ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
        llvm::Expected<Timeline> t = simulate(*g);
        ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
        double busy = 0;
        for (double b : t->busy)
          busy += b;
        // Per microbatch: every layer's linear work forward, backward and
        // recomputed, attention forward and backward; the head likewise.
        double expected =
            m * (shape.layers * (4 * c.blockForward + c.attentionForward +
                                 c.attentionBackward) +
                 4 * c.headForward);
        EXPECT_NEAR(busy, expected, 1e-9 * expected) << "p=" << p << " m=" << m;
        // Everything kept is released.
        for (int r = 0; r < p; ++r)
          EXPECT_GT(t->peakMemory[r], 0.0);
      }
}

TEST(Helix, AGroupsAttentionsOfALayerRunOnEveryRank) {
  const int p = 4;
  TransformerShape shape = small(2048);
  llvm::Expected<TaskGraph> g =
      helixTaskGraph(shape, layerCosts(shape), Link{}, p, p, {1, true});
  ASSERT_TRUE(!!g);
  const int blocks = shape.layers + 1;
  for (int layer = 0; layer < shape.layers; ++layer) {
    std::set<int> ranks;
    for (size_t t = 0; t < g->numTasks(); ++t) {
      const Task &task = g->task(static_cast<TaskId>(t));
      if (task.kind == ActionKind::Forward && task.stage == blocks + layer)
        ranks.insert(task.rank);
    }
    EXPECT_EQ(ranks.size(), static_cast<size_t>(p)) << "layer " << layer;
  }
}

TEST(Helix, LayersMustDivideOverRanks) {
  TransformerShape shape = small(1024);
  shape.layers = 6;
  EXPECT_EQ(
      errorMessage(helixTaskGraph(shape, layerCosts(shape), Link{}, 4, 8, {})
                       .takeError()),
      "helix places the blocks of layers k*p + r on rank r: 6 layers do "
      "not divide over 4 ranks");
}

TEST(Helix, AdvantageGrowsWithSequenceLength) {
  const int p = 4, m = 16;
  double previous = 0;
  for (int seq : {4096, 16384, 65536}) {
    TransformerShape shape = small(seq);
    LayerCosts c = layerCosts(shape);
    Link link;
    Timeline helix = *simulate(*helixTaskGraph(shape, c, link, p, m, {}));
    Problem problem = *layerPipelineProblem(shape, c, link, p, p, m);
    Timeline onefoneb = generateAndSimulate(problem, {ScheduleKind::OneFOneB});
    double ratio = onefoneb.makespan / helix.makespan;
    EXPECT_GT(ratio, previous) << "seq=" << seq;
    previous = ratio;
  }
  EXPECT_GT(previous, 1.0);
}

} // namespace

namespace {

Problem helixProblem(int p, int m, int layers) {
  Problem problem = uniformProblem(p, m, layers + 1, {1.0, 2.0, 0.0}, 0.1);
  for (int s = 0; s < layers; ++s)
    problem.stages[s].attention = Stage::Attention{1.5, 3.0, 0.5};
  return problem;
}

TEST(HelixKind, ValidForAnyLayersAndMicrobatches) {
  for (int p : {1, 2, 3, 4})
    for (int layers : {p, 2 * p, 2 * p + 1})
      for (int m = 1; m <= 3 * p; ++m)
        for (int folds : {1, 2}) {
          Problem problem = helixProblem(p, m, layers);
          ScheduleOptions options{ScheduleKind::Helix};
          options.folds = folds;
          llvm::Expected<Schedule> s = generateSchedule(problem, options);
          ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
          llvm::Expected<Timeline> t = simulate(problem, *s);
          ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
          // All work, the recomputed forwards included.
          double busy = 0;
          for (double b : t->busy)
            busy += b;
          double expected =
              m * ((layers + 1) * (1.0 + 2.0 + 1.0) + layers * (1.5 + 3.0));
          EXPECT_NEAR(busy, expected, 1e-9);
          for (int r = 0; r < p; ++r)
            EXPECT_GE(t->busy[r], 0.0);
        }
}

TEST(HelixKind, AttentionsOfAGroupSpreadOverTheRanks) {
  const int p = 4;
  Problem problem = helixProblem(p, p, 2 * p);
  Schedule s = *generateSchedule(problem, {ScheduleKind::Helix});
  for (int layer = 0; layer < 2 * p; ++layer) {
    std::set<int> ranks;
    for (int r = 0; r < p; ++r)
      for (const Action &a : s.ranks[r])
        if (a.kind == ActionKind::AttentionForward && a.stage == layer)
          ranks.insert(r);
    EXPECT_EQ(ranks.size(), static_cast<size_t>(p)) << "layer " << layer;
  }
}

TEST(HelixKind, LowersToAVerifiedProgramWithAttentionTransfers) {
  for (int p : {1, 2, 3, 4})
    for (int m : {1, p, 2 * p + 1}) {
      Problem problem = helixProblem(p, m, 2 * p);
      Schedule s = *generateSchedule(problem, {ScheduleKind::Helix});
      Program program = lowerCommunication(problem, s);
      ASSERT_FALSE(verifyProgram(problem, program)) << "p=" << p << " m=" << m;
      size_t qkv = 0;
      for (const auto &rank : program.ranks)
        for (const Instruction &instr : rank)
          for (const CommOp &op : instr.ops)
            qkv += op.isSend && op.message.kind == MessageKind::Qkv;
      // Offset d = p - 1 keeps its attention on the block's rank.
      if (p > 1) {
        EXPECT_GT(qkv, 0u);
      }
      BufferStats stats;
      Plan plan = buildPlan(problem, program, "h", 256, &stats);
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(stats.slots[r], stats.peakLive[r]);
      EXPECT_TRUE(!!readPlan(writePlan(plan)));
    }
}

TEST(HelixKind, NeedsAttentionOnEveryStageButTheLast) {
  Problem problem = helixProblem(2, 2, 2);
  problem.stages[1].attention.reset();
  EXPECT_EQ(errorMessage(
                generateSchedule(problem, {ScheduleKind::Helix}).takeError()),
            "helix cuts every layer at its attention: stage @s1 needs "
            "attention(...) (every stage but the last does)");
}

} // namespace

TEST(HelixCosts, TensorParallelDividesWorkAndMemoryAndAddsCollectives) {
  TransformerShape shape;
  LayerCosts c = layerCosts(shape);
  LayerCosts one = tensorParallelCosts(c, 1, 4e11);
  EXPECT_DOUBLE_EQ(one.blockForward, c.blockForward);
  EXPECT_DOUBLE_EQ(one.storedBytes, c.storedBytes);
  LayerCosts eight = tensorParallelCosts(c, 8, 4e11);
  // 4 collectives of 7/8 of a hidden state each, on each linear part.
  double collectives = 4 * 7.0 / 8 * c.hiddenBytes / 4e11;
  EXPECT_DOUBLE_EQ(eight.blockForward, c.blockForward / 8 + collectives);
  EXPECT_DOUBLE_EQ(eight.blockBackward, c.blockBackward / 8 + collectives);
  EXPECT_DOUBLE_EQ(eight.attentionForward, c.attentionForward / 8);
  EXPECT_DOUBLE_EQ(eight.storedBytes, c.storedBytes / 8);
  EXPECT_DOUBLE_EQ(eight.layerParamBytes, c.layerParamBytes / 8);
}
