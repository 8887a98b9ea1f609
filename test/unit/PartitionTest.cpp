//===- PartitionTest.cpp - Cutting layers into stages ---------------------===//
//
// The exact partitioner against brute force over every cut, on random
// layer chains of up to 12 layers with random device speeds and memory
// budgets; and the messages when nothing fits.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/search/Partition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

std::vector<Layer> randomLayers(std::mt19937 &rng, int n) {
  std::uniform_real_distribution<double> cost(0.2, 3.0), mem(0.1, 2.0);
  std::vector<Layer> layers(n);
  for (int l = 0; l < n; ++l) {
    layers[l].name = "l" + std::to_string(l);
    layers[l].forward = cost(rng);
    layers[l].backwardInput = cost(rng);
    layers[l].backwardWeight = cost(rng);
    layers[l].activation = mem(rng);
    layers[l].weightGrad = layers[l].activation / 2;
    layers[l].params = mem(rng);
  }
  return layers;
}

TEST(Partition, ExactEqualsBruteForceOverEveryCut) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> speed(0.25, 2.0), slack(0.3, 1.5);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    int n = 1 + trial % 12;
    std::vector<Layer> layers = randomLayers(rng, n);
    PartitionTarget target;
    target.stages = 1 + static_cast<int>(rng() % n);
    double total = 0.0;
    for (const Layer &l : layers)
      total += l.params + l.activation;
    for (int s = 0; s < target.stages; ++s) {
      target.speed.push_back(trial % 3 ? speed(rng) : 1.0);
      target.inFlight.push_back(1 + static_cast<int>(rng() % 3));
      // Budgets from tight to roomy (every third unbounded).
      target.budget.push_back(trial % 3 == 2
                                  ? std::numeric_limits<double>::infinity()
                                  : slack(rng) * 3 * total / target.stages);
    }
    llvm::Expected<Partition> exact = partitionLayers(layers, target);
    llvm::Expected<Partition> brute = partitionLayersBruteForce(layers, target);
    ASSERT_EQ(bool(exact), bool(brute)) << "trial " << trial;
    if (!exact) {
      ++infeasible;
      llvm::consumeError(exact.takeError());
      llvm::consumeError(brute.takeError());
      continue;
    }
    ++feasible;
    EXPECT_NEAR(exact->slowest, brute->slowest, 1e-9) << "trial " << trial;
    // The exact answer is a valid partition that attains its own figure.
    ASSERT_EQ(exact->numStages(), target.stages);
    EXPECT_EQ(exact->first.front(), 0);
    EXPECT_EQ(exact->first.back(), n);
    double slowest = 0.0;
    for (int s = 0; s < target.stages; ++s) {
      ASSERT_LT(exact->first[s], exact->first[s + 1]);
      double work = 0.0;
      for (int l = exact->first[s]; l < exact->first[s + 1]; ++l)
        work += layers[l].work();
      slowest = std::max(slowest, work / target.speed[s]);
      EXPECT_LE(stageMemory(layers, exact->first[s], exact->first[s + 1],
                            target.inFlight[s]),
                target.budget[s] * (1 + 1e-9));
    }
    EXPECT_NEAR(slowest, exact->slowest, 1e-9);
  }
  // The grid covers both outcomes.
  EXPECT_GT(feasible, 100);
  EXPECT_GT(infeasible, 10);
}

TEST(Partition, FasterDevicesTakeMoreLayers) {
  // 12 equal layers on 4 stages whose devices run at 1, 1, 0.5, 0.5: the
  // fast ones take 4 layers, the slow ones 2 (each 4 units of time).
  std::vector<Layer> layers(12);
  PartitionTarget target;
  target.stages = 4;
  target.speed = {1.0, 1.0, 0.5, 0.5};
  llvm::Expected<Partition> p = partitionLayers(layers, target);
  ASSERT_TRUE(!!p) << llvm::toString(p.takeError());
  EXPECT_EQ(p->first, (std::vector<int>{0, 4, 8, 10, 12}));
  EXPECT_DOUBLE_EQ(p->slowest, 12.0);
  std::vector<Stage> stages = stagesFromPartition(layers, *p);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0].layers, 4);
  EXPECT_DOUBLE_EQ(stages[2].forward, 2.0);
}

TEST(Partition, SaysWhichStageCannotHoldEvenOneLayer) {
  std::vector<Layer> layers(4);
  for (Layer &l : layers) {
    l.name = "block";
    l.params = 3.0;
  }
  PartitionTarget target;
  target.stages = 2;
  target.budget = {100.0, 2.0};
  target.inFlight = {1, 1};
  EXPECT_EQ(errorMessage(partitionLayers(layers, target).takeError()),
            "stage 1 cannot fit even one layer: the smallest it can hold, "
            "layer 1 (@block), needs 4 (params plus 1 forwards' activations), "
            "above its 2");
  target.budget = {7.5, 7.5};
  EXPECT_EQ(errorMessage(partitionLayers(layers, target).takeError()),
            "no cut of the 4 layers into 2 stages fits every stage's memory: "
            "the layers need more than the stages hold together");
  target.stages = 5;
  EXPECT_EQ(errorMessage(partitionLayers(layers, target).takeError()),
            "cannot cut 4 layers into 5 stages: each stage needs at least one "
            "layer");
}

} // namespace
