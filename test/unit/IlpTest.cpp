//===- IlpTest.cpp - The ILP against the exact search and auto ------------===//
//
// Two independent searches that claim optimality must agree: where both the
// branch-and-bound and the ILP prove their result on a placement, the
// makespans are equal. Every ILP schedule fits the memory limit, is no worse
// than the schedule it started from, and its bound is never above another
// schedule's value on the placement.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/ExactSearch.h"
#include "scheduler/search/IlpSearch.h"
#include "scheduler/search/ScheduleByName.h"

#include <cstdio>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

struct Case {
  int p, m;
  bool twoPerRank;
  Costs costs;
  double latency;
};

/// Sizes the solver settles in well under a second each (with two stages
/// per rank it proves m = 2; at m = 3 its bound stays below the optimum
/// after 5 s, where the branch-and-bound proves it).
std::vector<Case> grid() {
  std::vector<Case> out;
  for (int p : {2, 3})
    for (int m : {2, 3, 4})
      for (bool two : {false, true}) {
        if (two && (p == 3 || m > 2))
          continue;
        out.push_back({p, m, two, {1.0, 1.0, 1.0}, 0.0});
        out.push_back({p, m, two, {1.0, 2.0, 0.5}, 0.1});
        out.push_back({p, m, two, {1.0, 0.9765, 0.5041}, 0.0324});
      }
  return out;
}

Problem problemOf(const Case &c) {
  Problem problem = uniformProblem(c.p, c.m, c.twoPerRank ? 2 * c.p : c.p,
                                   c.costs, c.latency);
  for (size_t s = 0; s < problem.stages.size(); ++s) {
    Stage &st = problem.stages[s];
    // Heavier ends (embedding, head), so that the kinds are not optimal.
    double scale = s == 0 ? 1.3 : s + 1 == problem.stages.size() ? 1.6 : 1.0;
    st.forward *= scale;
    st.backwardInput *= scale;
    st.activation = c.twoPerRank ? 0.5 : 1.0;
    st.weightGrad = st.activation / 2;
  }
  return problem;
}

std::string where(const Case &c) {
  return "p=" + std::to_string(c.p) + " m=" + std::to_string(c.m) +
         (c.twoPerRank ? " two per rank" : "") +
         " I=" + std::to_string(c.costs.backwardInput) +
         " lat=" + std::to_string(c.latency);
}

#define REQUIRE_SOLVER()                                                       \
  if (!ilpAvailable())                                                         \
  GTEST_SKIP() << "built without CBC"

TEST(Ilp, AgreesWithTheExactSearchWhereBothProve) {
  REQUIRE_SOLVER();
  int bothProven = 0, improved = 0;
  for (const Case &c : grid()) {
    Problem problem = problemOf(c);
    double budget = highest(*oneFOneBPeakMemory(problem));
    std::vector<double> limits(c.p, budget);
    std::vector<int> placement = *placeContiguous(problem, true);
    // The ILP starts from 1F1B, the search from zb-h1 (optimal on most of
    // this grid): the ILP has to find the better orders itself.
    Schedule start = *generateSchedule(problem, {ScheduleKind::OneFOneB});
    double startMakespan = simulate(problem, start)->makespan;

    ExactOptions exactOptions;
    exactOptions.memoryLimit = limits;
    exactOptions.timeLimit = 2.0 * kBuildSlowdown;
    exactOptions.initial = *generateSchedule(problem, {ScheduleKind::ZBH1});
    llvm::Expected<ExactResult> exact =
        exactSchedule(problem, placement, exactOptions);
    ASSERT_TRUE(!!exact) << llvm::toString(exact.takeError());

    IlpOptions options;
    options.memoryLimit = limits;
    options.timeLimit = 2.0 * kBuildSlowdown;
    options.initial = start;
    llvm::Expected<IlpResult> ilp = ilpSchedule(problem, placement, options);
    ASSERT_TRUE(!!ilp) << llvm::toString(ilp.takeError());
    std::printf("%s: exact %.4f (%s), ilp %.4f (%s, bound %.4f, %d order "
                "variables), 1f1b %.4f\n",
                where(c).c_str(), exact->makespan,
                exact->optimal ? "proven" : "not proven", ilp->value,
                ilp->optimal ? "proven" : "not proven", ilp->bound,
                ilp->orderVariables, startMakespan);

    // What the ILP returns is what simulating it gives, within the limit.
    llvm::Expected<Timeline> t = simulate(problem, ilp->schedule);
    ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
    EXPECT_NEAR(t->makespan, ilp->value, 1e-9) << where(c);
    EXPECT_LE(highest(t->peakMemory), budget + 1e-9) << where(c);
    EXPECT_LE(ilp->value, startMakespan + 1e-9) << where(c);
    // Each search's bound holds for the other's schedule.
    EXPECT_LE(ilp->bound, exact->makespan + 1e-6) << where(c);
    EXPECT_LE(exact->lowerBound, ilp->value + 1e-9) << where(c);
    if (exact->optimal) {
      EXPECT_GE(ilp->value, exact->makespan - 1e-6) << where(c);
    }
    if (ilp->optimal) {
      EXPECT_GE(exact->makespan, ilp->value - 1e-6) << where(c);
    }
    if (exact->optimal && ilp->optimal) {
      ++bothProven;
      EXPECT_NEAR(ilp->value, exact->makespan, 1e-6) << where(c);
    }
    improved += ilp->value < startMakespan - 1e-6;
  }
  // Most of the grid is settled by both, and the ILP's own solutions beat
  // its start (1F1B) on most of it.
  EXPECT_GE(bothProven, 15);
  EXPECT_GE(improved, 10);
}

TEST(Ilp, SpanIsNoWorseThanAutosAndAboveItsBound) {
  REQUIRE_SOLVER();
  for (const Case &c : grid()) {
    if (c.p != 2)
      continue;
    Problem problem = problemOf(c);
    for (double times : {1.0, 2.0}) {
      double budget = times * highest(*oneFOneBPeakMemory(problem));
      AutoOptions autoOptions;
      autoOptions.memoryLimit = budget;
      autoOptions.objective = Objective::Span;
      autoOptions.timeLimit = 0.2;
      llvm::Expected<AutoResult> a = autoSchedule(problem, autoOptions);
      ASSERT_TRUE(!!a) << llvm::toString(a.takeError());
      IlpOptions options;
      options.memoryLimit.assign(c.p, budget);
      options.objective = Objective::Span;
      options.timeLimit = 0.5;
      options.initial = a->schedule;
      llvm::Expected<IlpResult> ilp =
          ilpSchedule(problem, a->schedule.placement, options);
      ASSERT_TRUE(!!ilp) << llvm::toString(ilp.takeError());
      llvm::Expected<Timeline> t = simulate(problem, ilp->schedule);
      ASSERT_TRUE(!!t) << llvm::toString(t.takeError());
      EXPECT_NEAR(t->maxSpan(), ilp->value, 1e-9) << where(c);
      EXPECT_LE(ilp->value, a->span + 1e-9) << where(c);
      EXPECT_LE(ilp->bound, ilp->value + 1e-9) << where(c);
      EXPECT_LE(highest(t->peakMemory), budget + 1e-9) << where(c);
    }
  }
}

TEST(Ilp, KindIlpThroughTheFrontDoor) {
  REQUIRE_SOLVER();
  Problem problem = problemOf({2, 4, true, {1.0, 2.0, 0.5}, 0.1});
  KindRequest request;
  request.kind = "ilp";
  request.timeLimit = 2.0;
  llvm::Expected<KindResult> r = scheduleByName(problem, request);
  ASSERT_TRUE(!!r) << llvm::toString(r.takeError());
  EXPECT_NE(r->choice.find("ilp: makespan"), std::string::npos) << r->choice;
  AutoOptions autoOptions;
  autoOptions.timeLimit = 0.5;
  llvm::Expected<AutoResult> a = autoSchedule(problem, autoOptions);
  ASSERT_TRUE(!!a) << llvm::toString(a.takeError());
  EXPECT_LE(r->timeline.makespan, a->makespan + 1e-9);
  EXPECT_LE(highest(r->timeline.peakMemory),
            highest(*oneFOneBPeakMemory(problem)) + 1e-9);

  request.chunks = 2;
  EXPECT_NE(errorMessage(scheduleByName(problem, request).takeError())
                .find("chunks applies to interleaved-1f1b only"),
            std::string::npos);
}

// Past 20,000 order variables the program is not built: the start stands
// with the memory-aware bound, and without a start that is an error.
TEST(Ilp, LeavesProgramsTooLargeToSolveToItsStart) {
  REQUIRE_SOLVER();
  Problem problem = uniformProblem(8, 32, 8, {1.0, 1.0, 0.5}, 0.03);
  std::vector<int> placement = {0, 1, 2, 3, 4, 5, 6, 7};
  Schedule start = *generateSchedule(problem, {ScheduleKind::ZBH1});
  IlpOptions options;
  options.initial = start;
  llvm::Expected<IlpResult> r = ilpSchedule(problem, placement, options);
  ASSERT_TRUE(!!r) << llvm::toString(r.takeError());
  EXPECT_FALSE(r->solved);
  EXPECT_GT(r->orderVariables, kIlpMaxOrderVariables);
  EXPECT_DOUBLE_EQ(r->value, simulate(problem, start)->makespan);
  EXPECT_LE(r->bound, r->value);
  llvm::Expected<IlpResult> none = ilpSchedule(problem, placement, {});
  ASSERT_FALSE(!!none);
  EXPECT_NE(errorMessage(none.takeError()).find("order variables, more than"),
            std::string::npos);
}

TEST(Ilp, RefusesWhatItDoesNotModel) {
  Problem problem = uniformProblem(2, 4, 2, {1.0, 1.0, 1.0}, 0.0);
  std::vector<int> placement = {0, 1};
  auto message = [&](const Problem &p) {
    llvm::Expected<IlpResult> r = ilpSchedule(p, placement, {});
    return r ? std::string() : errorMessage(r.takeError());
  };
  if (ilpAvailable()) {
    EXPECT_EQ(message(problem), "");
  } else {
    EXPECT_NE(message(problem).find("no ILP solver"), std::string::npos);
    return;
  }
  Problem overhead = problem;
  overhead.receiveOverhead = 0.1;
  EXPECT_NE(message(overhead).find("without a runtime overhead"),
            std::string::npos);
  Problem capacity = problem;
  capacity.capacity = 10.0;
  EXPECT_NE(message(capacity).find("under a capacity"), std::string::npos);
  Problem tight = problem;
  IlpOptions options;
  options.memoryLimit = {0.5, 0.5};
  llvm::Expected<IlpResult> r = ilpSchedule(tight, placement, options);
  ASSERT_FALSE(!!r);
  EXPECT_NE(errorMessage(r.takeError()).find("fits the memory limit"),
            std::string::npos);
}

} // namespace
