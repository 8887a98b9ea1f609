//===- DriverTest.cpp - stagecraft-run's driver as a library -------------===//
//
// The driver runs what the tool runs: a plan file, or a spec compiled
// through the front end's PlanSource, with the same checks and exit
// statuses.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "runtime/Driver.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;
using namespace stagecraft::runtime;

namespace {

Plan smallPlan(ScheduleKind kind, int p, int m, int64_t messageBytes = 64) {
  Problem problem = uniformProblem(p, m, p, {1.0, 1.0, 1.0}, 0.0);
  llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
  EXPECT_TRUE(!!s);
  return buildPlan(problem, lowerCommunication(problem, *s),
                   std::string(scheduleKindName(kind)), 256, nullptr,
                   messageBytes);
}

DriverOptions quick(const std::string &input) {
  DriverOptions o;
  o.input = input;
  o.timeUnit = "20us";
  o.timeout = "20s";
  return o;
}

TEST(Driver, RunsAPlanFile) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("driver", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << writePlan(smallPlan(ScheduleKind::OneFOneB, 2, 4));
  }
  EXPECT_EQ(runDriver(quick(path.str().str()), PlanSource(), 0), 0);
  llvm::sys::fs::remove(path);
}

TEST(Driver, CompilesASpecThroughTheSource) {
  std::vector<PlanRequest> asked;
  PlanSource source;
  source.compile = [&](const PlanRequest &request) -> llvm::Expected<Plan> {
    asked.push_back(request);
    return smallPlan(ScheduleKind::ZBH1, 2, 4);
  };
  DriverOptions o = quick("spec.mlir");
  o.scheduleKind = "zb-h1";
  o.ranks = 2;
  EXPECT_EQ(runDriver(o, source, 0), 0);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].kind, "zb-h1");
  EXPECT_EQ(asked[0].ranks, 2);
  EXPECT_EQ(asked[0].minMessageBytes, 64);
  EXPECT_FALSE(asked[0].quiet);
}

TEST(Driver, TrainingAsksForMessagesThatHoldTheModel) {
  std::vector<PlanRequest> asked;
  PlanSource source;
  source.compile = [&](const PlanRequest &request) -> llvm::Expected<Plan> {
    asked.push_back(request);
    Plan plan =
        smallPlan(ScheduleKind::OneFOneB, 2, 2, request.minMessageBytes);
    plan.stageLayers.assign(plan.placement.size(), 1);
    return plan;
  };
  DriverOptions o = quick("spec.mlir");
  o.scheduleKind = "1f1b";
  o.train = true;
  EXPECT_EQ(runDriver(o, source, 0), 0);
  ASSERT_EQ(asked.size(), 1u);
  stagecraft::kernels::ModelConfig model;
  model.hidden = o.hidden;
  model.heads = o.heads;
  model.sequence = o.sequence;
  model.vocab = o.vocab;
  model.batch = o.batch;
  EXPECT_EQ(asked[0].minMessageBytes, trainingMessageBytes(model));
}

TEST(Driver, ASpecWithoutACompilerFailsWithAnError) {
  DriverOptions o = quick("spec.mlir");
  o.scheduleKind = "1f1b";
  EXPECT_EQ(runDriver(o, PlanSource(), 0), 1);
  llvm::Expected<Plan> plan = loadPlan(o, PlanSource(), 64);
  ASSERT_FALSE(!!plan);
  EXPECT_EQ(errorMessage(plan.takeError()),
            "spec.mlir: this front end runs plan files only; it compiles "
            "no spec");
}

TEST(Driver, BadOptionsFailBeforeRunning) {
  bool compiled = false;
  PlanSource source;
  source.compile = [&](const PlanRequest &) -> llvm::Expected<Plan> {
    compiled = true;
    return smallPlan(ScheduleKind::OneFOneB, 2, 2);
  };
  DriverOptions o = quick("spec.mlir");
  o.scheduleKind = "1f1b";
  o.train = true;
  o.optimizer = "lion";
  EXPECT_EQ(runDriver(o, source, 0), 1);
  o = quick("spec.mlir");
  o.timeUnit = "fast";
  EXPECT_EQ(runDriver(o, source, 0), 1);
  EXPECT_FALSE(compiled);
}

TEST(Driver, MemoryAboveTheLimitIsRefused) {
  Plan plan = smallPlan(ScheduleKind::OneFOneB, 2, 4);
  EXPECT_FALSE(!!checkMemory(plan, -1, nullptr, "1G"));
  llvm::Error err = checkMemory(plan, -1, nullptr, "100");
  ASSERT_TRUE(!!err);
  std::string message = errorMessage(std::move(err));
  EXPECT_NE(message.find("above --max-memory=100 (100 bytes)"),
            std::string::npos)
      << message;
  DriverOptions o = quick("plan.json");
  o.maxMemory = "100";
  PlanSource source;
  source.compile = [&](const PlanRequest &) -> llvm::Expected<Plan> {
    return plan;
  };
  o.scheduleKind = "1f1b";
  EXPECT_EQ(runDriver(o, source, 0), 1);
}

TEST(Driver, AMissingPlanFileIsNamed) {
  llvm::Expected<Plan> plan =
      loadPlan(quick("/nonexistent/plan.json"), PlanSource(), 64);
  ASSERT_FALSE(!!plan);
  EXPECT_EQ(errorMessage(plan.takeError())
                .rfind("cannot read /nonexistent/plan.json: ", 0),
            0u);
}

TEST(Elastic, NeedsTrainingAndACheckpointFolder) {
  DriverOptions o = quick("spec.mlir");
  o.scheduleKind = "1f1b";
  EXPECT_EQ(superviseElastic(o, PlanSource(), "stagecraft-run", {}), 1);
}

} // namespace
