//===- ProblemJsonTest.cpp - A problem through JSON and back --------------===//

#include "scheduler/formats/ProblemJson.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <random>

using namespace stagecraft::pipe::sched;

namespace {

std::string toJson(const Problem &p) {
  std::string text;
  llvm::raw_string_ostream os(text);
  writeProblemJson(os, p);
  return os.str();
}

/// A valid problem with every optional field set or not at random: devices,
/// links, lengths, a microbatch order, branching inputs, pinned ranks,
/// attention and recomputation figures, a fused backward cost, the
/// runtime's per-message overheads. Costs are arbitrary doubles, so the
/// round trip must keep every bit.
Problem randomProblem(std::mt19937 &rng, int ranks, int microbatches,
                      int stages) {
  std::uniform_real_distribution<double> u(0.1, 3.0);
  std::bernoulli_distribution coin(0.5);
  Problem p;
  p.name = "p" + std::to_string(rng() % 1000);
  p.ranks = ranks;
  p.microbatches = microbatches;
  p.latency = coin(rng) ? u(rng) : 0.0;
  p.messageOverhead = coin(rng) ? u(rng) * 0.01 : 0.0;
  p.receiveOverhead = coin(rng) ? u(rng) * 0.01 : 0.0;
  // Attention tasks (helix) need a chain: one or the other.
  const bool helix = coin(rng);
  for (int s = 0; s < stages; ++s) {
    Stage st;
    st.name = "s" + std::to_string(s);
    st.forward = u(rng);
    st.backwardInput = u(rng);
    st.backwardWeight = u(rng);
    st.activation = u(rng) + 1.0;
    st.weightGrad = st.activation * 0.5;
    if (coin(rng))
      st.recomputed = st.activation * 0.25;
    if (coin(rng)) {
      st.selective = st.activation * 0.5;
      st.selectiveCost = u(rng);
    }
    st.params = coin(rng) ? u(rng) : 0.0;
    if (coin(rng))
      st.fusedBackward = u(rng) + 0.2;
    if (coin(rng))
      st.forwardBackward = st.forward + st.backward() - 0.1;
    st.output = coin(rng) ? u(rng) : 0.0;
    st.scalingLinear = u(rng);
    st.scalingQuadratic = coin(rng) ? u(rng) : 0.0;
    if (!helix && s > 0 && coin(rng))
      st.inputs = std::vector<int>{s - 1};
    st.layers = static_cast<int>(rng() % 4);
    if (helix && s + 1 < stages && coin(rng))
      st.attention = Stage::Attention{u(rng), u(rng), u(rng)};
    p.stages.push_back(st);
  }
  if (coin(rng))
    for (int s = 0; s < stages; ++s)
      p.stages[s].rank = s % ranks;
  if (coin(rng))
    p.capacity = 1000.0 + u(rng);
  if (coin(rng))
    for (int r = 0; r < ranks; ++r)
      p.devices.push_back(
          {"d" + std::to_string(r), u(rng),
           coin(rng) ? std::optional<double>(2000.0 + u(rng)) : std::nullopt});
  if (coin(rng))
    p.links = Problem::Links{
        1 + static_cast<int>(rng() % 2), {u(rng), u(rng)}, {u(rng), u(rng)}};
  if (coin(rng)) {
    for (int m = 0; m < microbatches; ++m)
      p.lengths.push_back(u(rng));
    p.referenceLength = u(rng);
  }
  if (coin(rng)) {
    for (int m = microbatches - 1; m >= 0; --m)
      p.microbatchOrder.push_back(m);
  }
  return p;
}

} // namespace

// Over a grid of shapes, every field of a random valid problem survives the
// round trip bit for bit: the JSON written again is the same text, and the
// problem schedules and simulates to the same makespan.
TEST(ProblemJson, RoundTripsEveryFieldOverAGrid) {
  std::mt19937 rng(7);
  for (int ranks : {1, 2, 4})
    for (int microbatches : {1, 3, 8})
      for (int perRank : {1, 2}) {
        Problem p = randomProblem(rng, ranks, microbatches, ranks * perRank);
        if (llvm::Error invalid = validateProblem(p))
          FAIL() << llvm::toString(std::move(invalid));
        std::string text = toJson(p);
        llvm::Expected<Problem> back = readProblemJson(text);
        ASSERT_TRUE(bool(back)) << llvm::toString(back.takeError()) << "\n"
                                << text;
        EXPECT_EQ(toJson(*back), text);
        ScheduleOptions options;
        options.kind = ScheduleKind::OneFOneB;
        llvm::Expected<Schedule> a = generateSchedule(p, options);
        llvm::Expected<Schedule> b = generateSchedule(*back, options);
        ASSERT_EQ(bool(a), bool(b));
        if (!a) {
          llvm::consumeError(a.takeError());
          llvm::consumeError(b.takeError());
          continue;
        }
        llvm::Expected<Timeline> ta = simulate(p, *a);
        llvm::Expected<Timeline> tb = simulate(*back, *b);
        ASSERT_TRUE(bool(ta) && bool(tb));
        EXPECT_EQ(ta->makespan, tb->makespan);
      }
}

// A field the reader does not know, a missing one, a wrong type, another
// format or version: each is refused with a message naming it.
TEST(ProblemJson, RefusesWhatItDoesNotKnow) {
  std::mt19937 rng(3);
  std::string text = toJson(randomProblem(rng, 2, 4, 2));
  auto refused = [](const std::string &t, const std::string &expected) {
    llvm::Expected<Problem> p = readProblemJson(t);
    ASSERT_FALSE(bool(p)) << t;
    std::string message = llvm::toString(p.takeError());
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string t = text;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  refused(replaced("\"ranks\"", "\"colour\": 1, \"ranks\""),
          "top level key \"colour\": unknown");
  refused(replaced("\"ranks\"", "\"rankz\""), "key \"ranks\": missing");
  refused(replaced("\"forward\":", "\"forwards\":"),
          "stage 0 key \"forward\": missing");
  refused(replaced("\"microbatches\": 4", "\"microbatches\": \"4\""),
          "key \"microbatches\": not an integer");
  refused(replaced("stagecraft-problem", "stagecraft-plan"),
          "is not \"stagecraft-problem\"");
  refused(replaced("\"version\": 1", "\"version\": 2"), "2 is not 1");
  refused(replaced("\"ranks\": 2", "\"ranks\": 0"), "ranks must be at least 1");
  refused("[1, 2]", "not an object");
  refused("{", "problem JSON:");
}

// The data parallelism around the pipeline travels with it: every field
// round-trips, a file without it reads as none, and a bad one is refused
// naming what is wrong.
TEST(ProblemJson, DataParallelRoundTripsAndIsValidated) {
  std::mt19937 rng(11);
  Problem p = randomProblem(rng, 2, 4, 4);
  DataParallel dp;
  dp.degree = 8;
  dp.sharding = DataParallel::Sharding::Hybrid;
  dp.shardGroup = 4;
  dp.latency = 1e-5;
  dp.bandwidth = 5e10;
  dp.interLatency = 2e-5;
  dp.interBandwidth = 1.25e10;
  dp.optimizerPerByte = 5e-12;
  dp.gradBytes = {2.75e9, 1.7e9, 1.7e9, 2.75e9};
  std::string text;
  llvm::raw_string_ostream os(text);
  writeProblemJson(os, p, &dp);
  std::optional<DataParallel> back;
  llvm::Expected<Problem> read = readProblemJson(text, &back);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->degree, 8);
  EXPECT_EQ(back->sharding, DataParallel::Sharding::Hybrid);
  EXPECT_EQ(back->shardGroup, 4);
  EXPECT_EQ(back->latency, dp.latency);
  EXPECT_EQ(back->bandwidth, dp.bandwidth);
  EXPECT_EQ(back->interLatency, dp.interLatency);
  EXPECT_EQ(back->interBandwidth, dp.interBandwidth);
  EXPECT_EQ(back->optimizerPerByte, dp.optimizerPerByte);
  EXPECT_EQ(back->gradBytes, dp.gradBytes);
  EXPECT_EQ(toJson(*read), toJson(p));

  std::optional<DataParallel> none = dp;
  ASSERT_TRUE(bool(readProblemJson(toJson(p), &none)));
  EXPECT_FALSE(none.has_value());

  auto refused = [&](const std::string &from, const std::string &to,
                     const std::string &expected) {
    std::string t = text;
    size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    llvm::Expected<Problem> bad = readProblemJson(t);
    ASSERT_FALSE(bool(bad)) << t;
    std::string message = llvm::toString(bad.takeError());
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  refused("\"shard_group\": 4", "\"shard_group\": 3",
          "problem JSON: data_parallel: hybrid sharding: a shard group of 3 "
          "does not divide the data-parallel degree 8");
  refused("\"sharding\": \"hybrid\"", "\"sharding\": \"zero2\"",
          "problem JSON: data_parallel key \"sharding\": sharding 'zero2' is "
          "not one of none, full, hybrid");
  refused("\"degree\": 8", "\"degree\": 8, \"colour\": 1",
          "problem JSON: data_parallel key \"colour\": unknown");
  refused("2750000000,", "",
          "data parallelism gives gradient bytes for 3 stages; the pipeline "
          "has 4");
}
