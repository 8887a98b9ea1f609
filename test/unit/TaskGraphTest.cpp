//===- TaskGraphTest.cpp - Coverage checks of buildTaskGraph --------------===//
//
// Every structural error a schedule can have, each with its message and the
// site the passes attach the diagnostic to.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/TaskGraph.h"

#include <cmath>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

constexpr ActionKind F = ActionKind::Forward;
constexpr ActionKind I = ActionKind::BackwardInput;
constexpr ActionKind W = ActionKind::BackwardWeight;
constexpr ActionKind B = ActionKind::Backward;

struct Failure {
  std::string message;
  ScheduleSite site;
  std::vector<ScheduleNote> notes;
};

Failure buildFailure(const Problem &problem, const Schedule &schedule) {
  Failure failure;
  llvm::Expected<TaskGraph> graph = buildTaskGraph(problem, schedule);
  if (graph) {
    ADD_FAILURE() << "schedule was accepted";
    return failure;
  }
  llvm::handleAllErrors(graph.takeError(), [&](const ScheduleError &e) {
    failure = {e.message, e.site, e.notes};
  });
  return failure;
}

Schedule twoStageSchedule() {
  Schedule schedule;
  schedule.placement = {0, 1};
  schedule.ranks = {{{F, 0, 0}, {B, 0, 0}}, {{F, 1, 0}, {B, 1, 0}}};
  return schedule;
}

TEST(TaskGraph, AcceptsCompleteSchedule) {
  Problem problem = uniformProblem(2, 1, 2);
  llvm::Expected<TaskGraph> graph = buildTaskGraph(problem, twoStageSchedule());
  ASSERT_TRUE(!!graph);
  EXPECT_EQ(graph->numTasks(), 4u);
  // B(0,0) depends on F(0,0) and B(1,0) across the link.
  ASSERT_EQ(graph->dependencies(1).size(), 2u);
}

TEST(TaskGraph, ActionOnWrongRank) {
  Problem problem = uniformProblem(2, 1, 2);
  Schedule schedule = twoStageSchedule();
  schedule.ranks[0].push_back({F, 1, 0});
  Failure f = buildFailure(problem, schedule);
  EXPECT_EQ(f.message, "forward @s1 mb 0 is on rank 0, but @s1 is hosted by "
                       "rank 1");
  EXPECT_EQ(f.site.rank, 0);
  EXPECT_EQ(f.site.index, 2);
}

TEST(TaskGraph, DuplicateActionPointsAtBoth) {
  Problem problem = uniformProblem(2, 1, 2);
  Schedule schedule = twoStageSchedule();
  schedule.ranks[1].push_back({B, 1, 0});
  Failure f = buildFailure(problem, schedule);
  EXPECT_EQ(f.message, "duplicate backward @s1 mb 0");
  EXPECT_EQ(f.site.rank, 1);
  EXPECT_EQ(f.site.index, 2);
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_EQ(f.notes[0].site.index, 1);
  EXPECT_EQ(f.notes[0].message, "first occurrence here");
}

TEST(TaskGraph, MissingActionsAreCounted) {
  Problem problem = uniformProblem(2, 2, 2);
  Schedule schedule = twoStageSchedule();
  Failure f = buildFailure(problem, schedule);
  EXPECT_EQ(f.message, "missing forward @s0 mb 1 (and 3 more actions)");
  schedule.ranks[0].push_back({F, 0, 1});
  schedule.ranks[0].push_back({I, 0, 1});
  schedule.ranks[1].push_back({F, 1, 1});
  schedule.ranks[1].push_back({B, 1, 1});
  EXPECT_EQ(buildFailure(problem, schedule).message,
            "missing backward_weight @s0 mb 1");
}

TEST(TaskGraph, MixedBackwardForms) {
  Problem problem = uniformProblem(2, 1, 2);
  Schedule schedule = twoStageSchedule();
  schedule.ranks[0].push_back({W, 0, 0});
  Failure f = buildFailure(problem, schedule);
  EXPECT_EQ(f.message, "backward_weight @s0 mb 0 splits a backward that "
                       "backward @s0 mb 0 already runs in full");
  EXPECT_EQ(f.site.index, 2);
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_EQ(f.notes[0].site.index, 1);
}

TEST(TaskGraph, MicrobatchOutOfRange) {
  Problem problem = uniformProblem(2, 1, 2);
  Schedule schedule = twoStageSchedule();
  schedule.ranks[1].push_back({F, 1, 5});
  EXPECT_EQ(buildFailure(problem, schedule).message,
            "forward @s1 mb 5: microbatch 5 is out of range, pipeline @p has 1 "
            "microbatches");
}

TEST(TaskGraph, RankCountMismatch) {
  Problem problem = uniformProblem(3, 1, 3);
  EXPECT_EQ(buildFailure(problem, twoStageSchedule()).message,
            "schedule has 2 ranks, pipeline @p has 3");
}

TEST(ValidateProblem, RejectsEachBadField) {
  auto check = [](auto mutate, const char *expected) {
    Problem problem = uniformProblem(2, 2, 2);
    mutate(problem);
    EXPECT_EQ(errorMessage(validateProblem(problem)), expected);
  };
  check([](Problem &p) { p.ranks = 0; }, "ranks must be at least 1, got 0");
  check([](Problem &p) { p.microbatches = 0; },
        "microbatches must be at least 1, got 0");
  check([](Problem &p) { p.latency = -0.5; },
        "latency must be finite and non-negative, got -0.5");
  check([](Problem &p) { p.stages[0].forward = INFINITY; },
        "stage @s0: 'forward' must be finite and non-negative, got inf");
  check([](Problem &p) { p.stages[1].weightGrad = 2.0; },
        "stage @s1: weight_grad (2) exceeds activation (1)");
  check([](Problem &p) { p.stages[1].rank = 2; },
        "stage @s1: rank(2) is out of range for 2 ranks");
  check([](Problem &p) { p.stages[1].rank = 1; },
        "pin every stage with rank(K) or none of them");
  check(
      [](Problem &p) {
        p.stages[0].rank = 1;
        p.stages[1].rank = 1;
      },
      "rank 0 hosts no stage");
}

} // namespace
