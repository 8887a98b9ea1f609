//===- GeneratorsTest.cpp - Properties of the fixed schedule kinds --------===//
//
// Closed forms over grids of ranks x microbatches x costs at zero latency,
// validity everywhere, and the placement rules of each kind.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"

#include <algorithm>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

TEST(GPipe, MakespanClosedFormOverGrid) {
  for (int p : rankGrid())
    for (int m = 1; m <= 4 * p; ++m)
      for (Costs c : costGrid()) {
        Problem problem = uniformProblem(p, m, p, c);
        Timeline t = generateAndSimulate(problem, {ScheduleKind::GPipe});
        double expected =
            (m + p - 1) * (c.forward + c.backwardInput + c.backwardWeight);
        EXPECT_NEAR(t.makespan, expected, 1e-9) << "p=" << p << " m=" << m;
        // GPipe keeps every microbatch alive on rank 0.
        EXPECT_NEAR(t.peakMemory[0], m, 1e-9) << "p=" << p << " m=" << m;
      }
}

TEST(OneFOneB, MakespanAndPeakOverGrid) {
  for (int p : rankGrid())
    for (int m = 1; m <= 4 * p; ++m)
      for (Costs c : costGrid()) {
        Problem problem = uniformProblem(p, m, p, c);
        Timeline t = generateAndSimulate(problem, {ScheduleKind::OneFOneB});
        double expected =
            (m + p - 1) * (c.forward + c.backwardInput + c.backwardWeight);
        EXPECT_NEAR(t.makespan, expected, 1e-9) << "p=" << p << " m=" << m;
        EXPECT_NEAR(t.peakMemory[0], std::min(p, m), 1e-9)
            << "p=" << p << " m=" << m;
        // No rank holds more than rank 0.
        for (int r = 0; r < p; ++r)
          EXPECT_LE(t.peakMemory[r], t.peakMemory[0] + 1e-9);
      }
}

TEST(OneFOneB, BubbleRatioMatchesDefinition) {
  Problem problem = uniformProblem(4, 8, 4);
  Timeline t = generateAndSimulate(problem, {ScheduleKind::OneFOneB});
  // (p - 1) / (m + p - 1) of each rank is idle for uniform stages.
  EXPECT_NEAR(t.bubbleRatio, 3.0 / 11.0, 1e-12);
  double busy = 0;
  for (double b : t.busy)
    busy += b;
  EXPECT_NEAR(t.bubbleRatio, 1.0 - busy / (4 * t.makespan), 1e-12);
}

TEST(OneFOneB, LatencyAddsTwoHopsPerRank) {
  // One microbatch crosses p - 1 links forward and p - 1 back.
  for (int p : rankGrid()) {
    Problem problem = uniformProblem(p, 1, p, {1.0, 1.0, 1.0}, 0.25);
    Timeline t = generateAndSimulate(problem, {ScheduleKind::OneFOneB});
    EXPECT_NEAR(t.makespan, 3.0 * p + 2 * (p - 1) * 0.25, 1e-9) << "p=" << p;
  }
}

TEST(Interleaved1F1B, MegatronBubbleWhenMicrobatchesAreMultiplesOfRanks) {
  for (int p : rankGrid())
    for (int v = 1; v <= 4; ++v)
      for (int k = 1; k <= 4; ++k)
        for (Costs c : costGrid()) {
          int m = k * p;
          Problem problem = uniformProblem(p, m, p * v, c);
          Timeline t =
              generateAndSimulate(problem, {ScheduleKind::Interleaved1F1B, v});
          double chunk = c.forward + c.backwardInput + c.backwardWeight;
          // Work m * v * chunk per rank plus Megatron's (p - 1) chunk bubble.
          EXPECT_NEAR(t.makespan, (m * v + p - 1) * chunk, 1e-9)
              << "p=" << p << " v=" << v << " m=" << m;
        }
}

TEST(Interleaved1F1B, MegatronBubbleForAnyMicrobatchCountFromRanksOn) {
  // Spreading m mod p over the rounds keeps every round at least p long, so
  // no rank stalls at a chunk boundary: the same closed form holds.
  for (int p : rankGrid())
    for (int v = 2; v <= 3; ++v)
      for (int m = p; m <= 4 * p; ++m) {
        Problem problem = uniformProblem(p, m, p * v);
        Timeline t =
            generateAndSimulate(problem, {ScheduleKind::Interleaved1F1B, v});
        EXPECT_NEAR(t.makespan, (m * v + p - 1) * 3.0, 1e-9)
            << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(Interleaved1F1B, ValidForEveryMicrobatchCount) {
  for (int p : rankGrid())
    for (int v = 2; v <= 3; ++v)
      for (int m = 1; m <= 4 * p; ++m) {
        Problem problem = uniformProblem(p, m, p * v);
        llvm::Expected<Schedule> s =
            generateSchedule(problem, {ScheduleKind::Interleaved1F1B, v});
        ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
        llvm::Expected<Timeline> t = simulate(problem, *s);
        ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
        // Never worse than running the same placement as GPipe.
        Timeline gpipe =
            *simulate(problem, generateGPipe(problem, s->placement));
        EXPECT_LE(t->makespan, gpipe.makespan + 1e-9)
            << "p=" << p << " v=" << v << " m=" << m;
        // Never more in flight than GPipe's m * v chunks.
        EXPECT_LE(t->peakMemory[0], m * v + 1e-9);
      }
}

TEST(Interleaved1F1B, BeatsOneFOneBOnSameModel) {
  // Splitting each rank's work into v chunks shrinks the bubble by v.
  for (int p : {2, 4, 8})
    for (int v : {2, 4}) {
      int m = 2 * p;
      Problem coarse = uniformProblem(p, m, p, {1.0 * v, 1.0 * v, 1.0 * v});
      Problem fine = uniformProblem(p, m, p * v);
      Timeline one = generateAndSimulate(coarse, {ScheduleKind::OneFOneB});
      Timeline inter =
          generateAndSimulate(fine, {ScheduleKind::Interleaved1F1B, v});
      EXPECT_LT(inter.makespan, one.makespan) << "p=" << p << " v=" << v;
      EXPECT_LT(inter.bubbleRatio, one.bubbleRatio);
    }
}

TEST(Interleaved1F1B, RejectsStageCountNotRanksTimesChunks) {
  Problem problem = uniformProblem(4, 8, 6);
  EXPECT_EQ(
      errorMessage(generateSchedule(problem, {ScheduleKind::Interleaved1F1B, 0})
                       .takeError()),
      "interleaved placement needs a stage count divisible by the ranks: "
      "pipeline @p has 6 stages for 4 ranks");
  Problem eight = uniformProblem(4, 8, 8);
  EXPECT_EQ(
      errorMessage(generateSchedule(eight, {ScheduleKind::Interleaved1F1B, 3})
                       .takeError()),
      "interleaved placement with 3 chunks on 4 ranks needs 12 stages, "
      "pipeline @p has 8");
}

TEST(Placement, ContiguousBlocksWhenStagesOutnumberRanks) {
  Problem problem = uniformProblem(4, 4, 6);
  llvm::Expected<std::vector<int>> placement =
      placeContiguous(problem, /*requireContiguous=*/true);
  ASSERT_TRUE(!!placement);
  EXPECT_EQ(*placement, (std::vector<int>{0, 0, 1, 1, 2, 3}));
  for (int p : {2, 3, 4})
    for (int n = p; n <= 3 * p; ++n)
      for (int m = 1; m <= 2 * p; ++m) {
        Problem blocks = uniformProblem(p, m, n);
        for (ScheduleKind kind :
             {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
          llvm::Expected<Schedule> s = generateSchedule(blocks, {kind});
          ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
          EXPECT_FALSE(verifySchedule(blocks, *s));
        }
      }
}

TEST(Placement, PinsAreHonouredOrRejected) {
  Problem problem = uniformProblem(2, 4, 2);
  problem.stages[0].rank = 1;
  problem.stages[1].rank = 0;
  llvm::Expected<Schedule> s =
      generateSchedule(problem, {ScheduleKind::OneFOneB});
  ASSERT_TRUE(!!s);
  EXPECT_EQ(s->placement, (std::vector<int>{1, 0}));
  EXPECT_FALSE(verifySchedule(problem, *s));

  Problem split = uniformProblem(2, 4, 3);
  split.stages[0].rank = 0;
  split.stages[1].rank = 1;
  split.stages[2].rank = 0;
  EXPECT_EQ(
      errorMessage(
          generateSchedule(split, {ScheduleKind::OneFOneB}).takeError()),
      "stages pinned to rank 0 are not contiguous (@s2 follows a stage on "
      "rank 1); this kind needs one block of consecutive stages per "
      "rank, use interleaved-1f1b or gpipe");
  // GPipe runs any placement.
  llvm::Expected<Schedule> g = generateSchedule(split, {ScheduleKind::GPipe});
  ASSERT_TRUE(!!g);
  EXPECT_FALSE(verifySchedule(split, *g));
}

TEST(Generators, KindNamesRoundTripAndUnknownKindsFail) {
  for (ScheduleKind kind : allScheduleKinds()) {
    llvm::Expected<ScheduleKind> parsed =
        parseScheduleKind(scheduleKindName(kind));
    ASSERT_TRUE(!!parsed);
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(errorMessage(parseScheduleKind("2f2b").takeError()),
            "unknown schedule kind '2f2b'; expected one of: gpipe, 1f1b, "
            "interleaved-1f1b, zb-h1, zb-h2, zb-v, dualpipev, helix, auto");
}

// The registry's stage shape is where each kind's generator really puts
// the stages: the layer partition balances for it.
TEST(Generators, StageShapeIsTheGeneratedPlacement) {
  for (ScheduleKind kind : allScheduleKinds()) {
    if (kind == ScheduleKind::Helix)
      continue; // Helix's stages carry attention; HelixTest covers it.
    for (int p : {2, 3, 4}) {
      const int stages = stageShape(kind) == StageShape::Contiguous ? p : 2 * p;
      ScheduleOptions options;
      options.kind = kind;
      llvm::Expected<Schedule> s =
          generateSchedule(uniformProblem(p, 2 * p, stages), options);
      ASSERT_TRUE(!!s) << scheduleKindName(kind).str();
      for (int st = 0; st < stages; ++st) {
        int expected = st;
        if (stageShape(kind) == StageShape::Loop)
          expected = st % p;
        else if (stageShape(kind) == StageShape::V)
          expected = st < p ? st : 2 * p - 1 - st;
        EXPECT_EQ(s->placement[st], expected)
            << scheduleKindName(kind).str() << " p=" << p << " stage " << st;
      }
    }
  }
}

TEST(Generators, InvalidProblemsFail) {
  Problem problem = uniformProblem(4, 8, 3);
  EXPECT_EQ(errorMessage(generateSchedule(problem, {}).takeError()),
            "3 stages cannot occupy 4 ranks: some rank would host no stage");
  Problem negative = uniformProblem(2, 2, 2);
  negative.stages[1].backwardInput = -1;
  EXPECT_EQ(
      errorMessage(generateSchedule(negative, {}).takeError()),
      "stage @s1: 'backward_input' must be finite and non-negative, got -1");
  Problem chunks = uniformProblem(2, 2, 2);
  EXPECT_EQ(
      errorMessage(
          generateSchedule(chunks, {ScheduleKind::OneFOneB, 2}).takeError()),
      "chunks=2 applies to interleaved-1f1b only, not 1f1b");
}

} // namespace
