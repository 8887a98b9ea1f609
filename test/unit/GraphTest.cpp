//===- GraphTest.cpp - Branching pipelines --------------------------------===//
//
// Stage graphs (inputs(...)): over random acyclic graphs, rank counts and
// microbatch counts, every kind that has a meaning on a graph produces a
// schedule that verifies, whose simulated timeline keeps every edge (F after
// the F of each input, the backward after the backward of each consumer),
// whose comm lowering verifies (fan-out sends, fan-in receives) and builds a
// plan, and whose makespan is at least the lower bounds; the chain kinds
// refuse a graph; the graph rules are checked.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/LowerBound.h"

#include <map>
#include <random>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

/// A random graph of \p n stages: each stage after the first takes one or
/// two earlier stages (or, now and then, none: a second source); every
/// stage but the last feeds a later one.
Problem randomGraph(std::mt19937 &rng, int n, int ranks, int microbatches,
                    double latency) {
  std::uniform_real_distribution<double> cost(0.5, 2.0);
  Problem problem = uniformProblem(ranks, microbatches, n, {1, 1, 1}, latency);
  for (int s = 0; s < n; ++s) {
    Stage &st = problem.stages[s];
    st.forward = cost(rng);
    st.backwardInput = cost(rng);
    st.backwardWeight = cost(rng);
    st.weightGrad = 0.5;
    if (s == 0)
      continue;
    std::vector<int> in;
    if (s > 1 && s + 1 < n && rng() % 5 == 0) {
      st.inputs = in; // a source
      continue;
    }
    in.push_back(static_cast<int>(rng() % s));
    if (s > 1 && rng() % 2 == 0) {
      int other = static_cast<int>(rng() % s);
      if (other != in[0])
        in.push_back(other);
    }
    std::sort(in.begin(), in.end());
    st.inputs = in;
  }
  // Stages nobody consumes feed the last stage.
  std::vector<bool> consumed(n, false);
  for (int s = 1; s < n; ++s)
    for (int i : problem.inputsOf(s))
      consumed[i] = true;
  std::vector<int> last = problem.inputsOf(n - 1);
  for (int s = 0; s + 1 < n; ++s)
    if (!consumed[s])
      last.push_back(s);
  std::sort(last.begin(), last.end());
  problem.stages[n - 1].inputs = last;
  return problem;
}

/// Checks every edge of the graph in \p t.
void expectEdgesKept(const Problem &problem, const Schedule &schedule,
                     const Timeline &t, const std::string &what) {
  std::map<std::tuple<int, int, int>, TimedAction> timed;
  auto at = [&](int kind, int s, int m) { return timed[{kind, s, m}]; };
  for (size_t r = 0; r < t.ranks.size(); ++r)
    for (const TimedAction &ta : t.ranks[r]) {
      int kind = ta.action.kind == ActionKind::Forward          ? 0
                 : ta.action.kind == ActionKind::BackwardWeight ? 2
                                                                : 1;
      timed[{kind, ta.action.stage, ta.action.microbatch}] = ta;
    }
  auto lat = [&](int a, int b) {
    return schedule.placement[a] == schedule.placement[b] ? 0.0
                                                          : problem.latency;
  };
  for (int s = 0; s < problem.numStages(); ++s)
    for (int m = 0; m < problem.microbatches; ++m) {
      for (int i : problem.inputsOf(s))
        EXPECT_GE(at(0, s, m).start + 1e-9, at(0, i, m).end + lat(i, s))
            << what << ": F(" << s << "," << m << ") before F(" << i << ")";
      for (int c : problem.consumersOf(s))
        EXPECT_GE(at(1, s, m).start + 1e-9, at(1, c, m).end + lat(c, s))
            << what << ": backward(" << s << "," << m << ") before (" << c
            << ")";
    }
}

TEST(Graph, EveryGraphKindVerifiesKeepsEdgesAndLowers) {
  std::mt19937 rng(7);
  int cases = 0;
  for (int trial = 0; trial < 40; ++trial) {
    int n = 3 + static_cast<int>(rng() % 8);
    int ranks = 2 + static_cast<int>(rng() % std::min(n - 1, 5));
    int m = 1 + static_cast<int>(rng() % 8);
    double latency = trial % 3 == 0 ? 0.1 : 0.0;
    Problem problem = randomGraph(rng, n, ranks, m, latency);
    ASSERT_FALSE(errorMessage(validateProblem(problem)).size())
        << errorMessage(validateProblem(problem));
    for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                              ScheduleKind::ZBH1, ScheduleKind::ZBH2}) {
      std::string what =
          "trial " + std::to_string(trial) + " " + scheduleKindName(kind).str();
      llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
      ASSERT_TRUE(!!s) << what << ": " << llvm::toString(s.takeError());
      EXPECT_EQ(errorMessage(verifySchedule(problem, *s)), "") << what;
      llvm::Expected<Timeline> t = simulate(problem, *s);
      ASSERT_TRUE(!!t) << what << ": " << llvm::toString(t.takeError());
      expectEdgesKept(problem, *s, *t, what);
      EXPECT_GE(t->makespan + 1e-9, lowerBound(problem, s->placement)) << what;
      EXPECT_GE(t->makespan + 1e-9,
                memoryAwareLowerBound(problem, s->placement, {}))
          << what;
      Program program = lowerCommunication(problem, *s);
      EXPECT_EQ(errorMessage(verifyProgram(problem, program)), "") << what;
      Plan plan = buildPlan(problem, program, "g", 64);
      EXPECT_EQ(plan.stageInputs.size(),
                problem.isChain() ? 0u : static_cast<size_t>(n))
          << what;
      ++cases;
    }
    // auto: never slower than the graph kinds, and it verifies.
    AutoOptions options;
    options.timeLimit = 0.2;
    options.maxLocalSteps = 300;
    llvm::Expected<AutoResult> a = autoSchedule(problem, options);
    ASSERT_TRUE(!!a) << llvm::toString(a.takeError());
    EXPECT_EQ(errorMessage(verifySchedule(problem, a->schedule)), "");
    llvm::Expected<Timeline> t = simulate(problem, a->schedule);
    ASSERT_TRUE(!!t);
    expectEdgesKept(problem, a->schedule, *t, "auto");
  }
  EXPECT_EQ(cases, 160);
}

TEST(Graph, ChainKindsRefuseAGraph) {
  // s0 -> s1 -> s2 -> s3 -> s5, s0 -> s4 -> s5, s5 -> s6 -> s7.
  Problem problem = uniformProblem(4, 8, 8);
  problem.stages[4].inputs = std::vector<int>{0};
  problem.stages[5].inputs = std::vector<int>{3, 4};
  ASSERT_EQ(errorMessage(validateProblem(problem)), "");
  for (ScheduleKind kind : {ScheduleKind::Interleaved1F1B, ScheduleKind::ZBV,
                            ScheduleKind::DualPipeV}) {
    llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
    ASSERT_FALSE(!!s);
    EXPECT_NE(llvm::toString(s.takeError()).find("is built on a chain"),
              std::string::npos);
  }
}

TEST(Graph, TheGraphRulesAreChecked) {
  Problem problem = uniformProblem(2, 2, 4);
  problem.stages[1].inputs = std::vector<int>{2};
  EXPECT_NE(errorMessage(validateProblem(problem))
                .find("stage @s1: input @s2 is not a stage written before it"),
            std::string::npos);
  problem.stages[1].inputs = std::vector<int>{0, 0};
  EXPECT_NE(errorMessage(validateProblem(problem)).find("named twice"),
            std::string::npos);
  // s1 feeds nothing: s2 is a source and s3 takes s2.
  problem.stages[1].inputs = std::vector<int>{0};
  problem.stages[2].inputs = std::vector<int>{};
  EXPECT_NE(errorMessage(validateProblem(problem))
                .find("stage @s1: no stage takes its output"),
            std::string::npos);
  problem.stages[3].inputs = std::vector<int>{1, 2};
  EXPECT_EQ(errorMessage(validateProblem(problem)), "");
  EXPECT_FALSE(problem.isChain());
  EXPECT_EQ(problem.consumersOf(0), std::vector<int>{1});
  EXPECT_EQ(problem.inputsOf(3), (std::vector<int>{1, 2}));
}

// A diamond by hand: src -> a -> join, src -> b (twice as long) -> join, one
// stage per rank, one microbatch, latency 0: GPipe's step is the longest
// path forward and back: F src 1, F b 2, F join 1, B join 2, B b 4, B src 2.
TEST(Graph, ADiamondByHand) {
  Problem problem = uniformProblem(4, 1, 4);
  problem.stages[2].forward = 2.0;
  problem.stages[2].backwardInput = 2.0;
  problem.stages[2].backwardWeight = 2.0;
  problem.stages[2].inputs = std::vector<int>{0};
  problem.stages[3].inputs = std::vector<int>{1, 2};
  Timeline t = generateAndSimulate(problem, {ScheduleKind::GPipe});
  EXPECT_DOUBLE_EQ(t.makespan, 1 + 2 + 1 + 2 + 4 + 2);
  // Both branches' ranks receive src's output; src's backward waits for
  // both gradients.
  llvm::Expected<Schedule> s = generateSchedule(problem, {ScheduleKind::GPipe});
  ASSERT_TRUE(!!s);
  Program program = lowerCommunication(problem, *s);
  int sendsFromSrc = 0, recvsIntoSrc = 0;
  for (const Instruction &instr : program.ranks[s->placement[0]])
    for (const CommOp &op : instr.ops)
      (op.isSend ? sendsFromSrc : recvsIntoSrc) += 1;
  EXPECT_EQ(sendsFromSrc, 2);
  EXPECT_EQ(recvsIntoSrc, 2);
}

} // namespace
