//===- ProgramTest.cpp - Communication lowering, buffers and plans --------===//
//
// Lowering every kind over a grid gives programs the verifier accepts, with
// exactly the cross-rank transfers the dependencies need; buffer planning uses
// the peak live count of slots; plans round-trip through their file format;
// and the verifier rejects hangs, mismatched channels and bad plans.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/kinds/Kinds.h"
#include "scheduler/lower/Plan.h"
#include "scheduler/lower/Program.h"
#include "scheduler/model/ScheduleError.h"

#include <fmt/format.h>

#include <map>
#include <tuple>

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

constexpr ActionKind F = ActionKind::Forward;
constexpr ActionKind B = ActionKind::Backward;

CommOp send(int peer, MessageKind kind, int stage, int mb) {
  return {true, peer, {kind, stage, mb}};
}
CommOp recv(int peer, MessageKind kind, int stage, int mb) {
  return {false, peer, {kind, stage, mb}};
}
constexpr MessageKind Act = MessageKind::Activation;
constexpr MessageKind Grad = MessageKind::Gradient;

TEST(Lowering, EveryKindLowersToAVerifiedProgramAndPlan) {
  for (int p : {1, 2, 3, 4})
    for (int m : {1, 2, p + 1, 2 * p})
      for (ScheduleKind kind :
           {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
            ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1,
            ScheduleKind::ZBH2, ScheduleKind::ZBV, ScheduleKind::DualPipeV}) {
        Problem problem = uniformProblem(p, m, 2 * p, {1.0, 1.0, 1.0}, 0.1);
        llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
        ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
        Program program = lowerCommunication(problem, *s);
        ASSERT_FALSE(verifyProgram(problem, program))
            << scheduleKindName(kind).str() << " p=" << p << " m=" << m;
        // One transfer each way per microbatch and cross-rank stage boundary.
        int crossings = 0;
        for (int st = 0; st + 1 < 2 * p; ++st)
          crossings += s->placement[st] != s->placement[st + 1];
        size_t sends = 0;
        for (const auto &rank : program.ranks)
          for (const Instruction &instr : rank)
            for (const CommOp &op : instr.ops)
              sends += op.isSend;
        EXPECT_EQ(sends, static_cast<size_t>(2 * crossings * m));
        BufferStats stats;
        Plan plan = buildPlan(problem, program, "s", 1024, &stats);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(stats.slots[r], stats.peakLive[r]);
          EXPECT_LE(stats.slotBytes[r], stats.naiveBytes[r]);
        }
        llvm::Expected<Plan> back = readPlan(writePlan(plan));
        ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
        ASSERT_EQ(back->numRanks(), p);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(back->ranks[r].ops.size(), plan.ranks[r].ops.size());
          EXPECT_EQ(back->ranks[r].slotBytes, plan.ranks[r].slotBytes);
        }
      }
}

/// Per rank, the instruction index of each receive (by message).
std::map<std::tuple<int, int, int>, int>
receivePositions(const Program &program, int rank) {
  std::map<std::tuple<int, int, int>, int> at;
  int computes = 0;
  for (const Instruction &instr : program.ranks[rank]) {
    if (instr.kind == Instruction::Kind::Compute) {
      ++computes;
      continue;
    }
    for (const CommOp &op : instr.ops)
      if (!op.isSend)
        at[{static_cast<int>(op.message.kind), op.message.stage,
            op.message.microbatch}] = computes;
  }
  return at;
}

TEST(Lowering, EarlyReceivesAreVerifiedNeverLaterAndMoveUp) {
  int movedSomewhere = 0;
  for (int p : {2, 3, 4})
    for (int m : {1, p, 2 * p + 1})
      for (double latency : {0.0, 0.3})
        for (ScheduleKind kind :
             {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
              ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1,
              ScheduleKind::ZBH2, ScheduleKind::ZBV, ScheduleKind::DualPipeV}) {
          Problem problem =
              uniformProblem(p, m, 2 * p, {1.0, 1.0, 0.5}, latency);
          llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
          ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
          Program standard = lowerCommunication(problem, *s);
          Program early = lowerCommunicationEarlyReceives(problem, *s);
          std::string what = scheduleKindName(kind).str() +
                             " p=" + std::to_string(p) +
                             " m=" + std::to_string(m);
          ASSERT_FALSE(verifyProgram(problem, early)) << what;
          // The same computes in the same order, the same transfers.
          EXPECT_EQ(early.computeSchedule().ranks, s->ranks) << what;
          for (int r = 0; r < p; ++r) {
            auto before = receivePositions(standard, r);
            auto after = receivePositions(early, r);
            ASSERT_EQ(before.size(), after.size()) << what;
            for (auto &[msg, at] : after) {
              EXPECT_LE(at, before[msg]) << what;
              movedSomewhere += at < before[msg];
            }
          }
        }
  EXPECT_GT(movedSomewhere, 0);
}

TEST(Lowering, EarlyReceivesPostTheNextForwardInputDuringTheCurrentCompute) {
  // 1F1B on 2 ranks: rank 1 receives microbatch 1's activation while it
  // computes microbatch 0, not right before microbatch 1's forward.
  Problem problem = uniformProblem(2, 4, 2);
  Schedule s = *generateSchedule(problem, {ScheduleKind::OneFOneB});
  Program early = lowerCommunicationEarlyReceives(problem, s);
  auto at = receivePositions(early, 1);
  auto standard = receivePositions(lowerCommunication(problem, s), 1);
  std::tuple<int, int, int> act1{static_cast<int>(Act), 0, 1};
  EXPECT_LT(at[act1], standard[act1]);
}

TEST(Lowering, OneFOneBPairsSendAndReceiveInGroups) {
  Problem problem = uniformProblem(2, 2, 2);
  Program program = lowerCommunication(
      problem, *generateSchedule(problem, {ScheduleKind::OneFOneB}));
  // Rank 0: F0 send, F1 {send act1, recv grad0}, B0, recv grad1, B1.
  const auto &r0 = program.ranks[0];
  ASSERT_EQ(r0.size(), 7u);
  EXPECT_EQ(r0[3].kind, Instruction::Kind::Group);
  EXPECT_EQ(r0[3].ops.size(), 2u);
}

TEST(ProgramVerifier, NamesTheCycleOfAHang) {
  Problem problem = uniformProblem(2, 1, 2);
  Program program;
  program.placement = {0, 1};
  // Rank 0 waits for the gradient before it sends the activation that the
  // gradient needs. (In one group the two would be posted together and run.)
  program.ranks = {
      {Instruction::compute({F, 0, 0}), Instruction::comm(recv(1, Grad, 1, 0)),
       Instruction::comm(send(1, Act, 0, 0)), Instruction::compute({B, 0, 0})},
      {Instruction::comm(recv(0, Act, 0, 0)), Instruction::compute({F, 1, 0}),
       Instruction::compute({B, 1, 0}),
       Instruction::comm(send(0, Grad, 1, 0))}};
  llvm::Error err = verifyProgram(problem, program);
  ASSERT_TRUE(!!err);
  llvm::handleAllErrors(std::move(err), [](const ScheduleError &e) {
    EXPECT_EQ(e.message, "communication deadlocks: ranks 0, 1 wait forever; "
                         "cycle 0 -> 1 -> 0");
    ASSERT_EQ(e.notes.size(), 2u);
    EXPECT_EQ(e.notes[0].message,
              "rank 0 waits at recv grad(@s1, mb 0) from rank 1 (instruction "
              "1), matched by instruction 3 of rank 1, which is at instruction "
              "0");
  });
  // The same exchange as one group is posted at once and completes.
  program.ranks[0] = {
      Instruction::compute({F, 0, 0}),
      Instruction::group({recv(1, Grad, 1, 0), send(1, Act, 0, 0)}),
      Instruction::compute({B, 0, 0})};
  EXPECT_FALSE(verifyProgram(problem, program));
}

TEST(ProgramVerifier, RejectsMismatchedChannelOrder) {
  Problem problem = uniformProblem(2, 2, 2);
  Program program;
  program.placement = {0, 1};
  program.ranks = {
      {Instruction::compute({F, 0, 0}), Instruction::compute({F, 0, 1}),
       Instruction::comm(send(1, Act, 0, 1)),
       Instruction::comm(send(1, Act, 0, 0)),
       Instruction::comm(recv(1, Grad, 1, 0)), Instruction::compute({B, 0, 0}),
       Instruction::comm(recv(1, Grad, 1, 1)), Instruction::compute({B, 0, 1})},
      {Instruction::comm(recv(0, Act, 0, 0)), Instruction::compute({F, 1, 0}),
       Instruction::compute({B, 1, 0}), Instruction::comm(send(0, Grad, 1, 0)),
       Instruction::comm(recv(0, Act, 0, 1)), Instruction::compute({F, 1, 1}),
       Instruction::compute({B, 1, 1}),
       Instruction::comm(send(0, Grad, 1, 1))}};
  EXPECT_EQ(errorMessage(verifyProgram(problem, program)),
            "channel 0 -> 1: send #0 carries act(@s0, mb 1) but the receive it "
            "is matched with expects act(@s0, mb 0)\n  the matched receive");
}

TEST(ProgramVerifier, RejectsAComputeWithoutItsInput) {
  Problem problem = uniformProblem(2, 1, 2);
  Program program = lowerCommunication(
      problem, *generateSchedule(problem, {ScheduleKind::GPipe}));
  program.ranks[1].erase(program.ranks[1].begin()); // the first receive
  EXPECT_EQ(errorMessage(verifyProgram(problem, program)),
            "forward @s1 mb 0 needs act(@s0, mb 0) from rank 0, which rank 1 "
            "has not received before it");
}

TEST(PlanFile, RejectsBadVersionsTruncationAndBadIndices) {
  Problem problem = uniformProblem(2, 2, 2);
  Program program = lowerCommunication(
      problem, *generateSchedule(problem, {ScheduleKind::OneFOneB}));
  std::string text = writePlan(buildPlan(problem, program, "s", 64));
  auto message = [](llvm::StringRef t) {
    return errorMessage(readPlan(t).takeError());
  };
  std::string bumped = text;
  bumped.replace(bumped.find("\"version\":2"), 11, "\"version\":7");
  EXPECT_EQ(message(bumped), "invalid plan: top level: unsupported version 7; "
                             "this runtime reads version 2");
  EXPECT_NE(message(text.substr(0, text.size() / 2))
                .find("invalid plan: not JSON (truncated?)"),
            std::string::npos);
  std::string badSlot = text;
  size_t at = badSlot.find("\"slot\":");
  badSlot.replace(at, 8, "\"slot\":9");
  EXPECT_NE(message(badSlot).find("is out of range"), std::string::npos);
  EXPECT_EQ(
      message("{\"format\":\"other\"}"),
      "invalid plan: top level: not a stagecraft plan (\"format\" must be "
      "\"stagecraft-plan\")");
}

TEST(PlanFile, FallbacksRoundTripAndMustRunTheSamePipelineOnFewerRanks) {
  // The 4-stage pipeline on 4 ranks, with fallbacks for 3, 2 and 1 ranks.
  auto planOn = [](int ranks) {
    Problem problem = uniformProblem(ranks, 4, 4);
    Program program = lowerCommunication(
        problem, *generateSchedule(problem, {ScheduleKind::OneFOneB}));
    return buildPlan(problem, program, "s", 64);
  };
  Plan plan = planOn(4);
  for (int r = 3; r >= 1; --r)
    plan.fallbacks.push_back(planOn(r));
  llvm::Expected<Plan> back = readPlan(writePlan(plan));
  ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
  ASSERT_EQ(back->fallbacks.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    const Plan &f = back->fallbacks[k];
    EXPECT_EQ(f.numRanks(), 3 - k);
    EXPECT_TRUE(f.fallbacks.empty());
    for (int r = 0; r < f.numRanks(); ++r)
      EXPECT_EQ(f.ranks[r].ops.size(), plan.fallbacks[k].ranks[r].ops.size());
  }
  auto message = [](const Plan &p) {
    return errorMessage(readPlan(writePlan(p)).takeError());
  };
  Plan more = plan;
  more.fallbacks = {planOn(4)};
  EXPECT_EQ(message(more), "invalid plan: fallbacks[0]: runs on 4 ranks; a "
                           "fallback is for fewer than the plan's 4");
  Plan twice = plan;
  twice.fallbacks = {planOn(2), planOn(2)};
  EXPECT_EQ(message(twice),
            "invalid plan: fallbacks[1]: a second fallback for 2 ranks");
  Plan other = plan;
  Problem fewer = uniformProblem(2, 2, 2);
  other.fallbacks = {
      buildPlan(fewer,
                lowerCommunication(
                    fewer, *generateSchedule(fewer, {ScheduleKind::OneFOneB})),
                "s", 64)};
  EXPECT_EQ(message(other),
            "invalid plan: fallbacks[0]: must run the same pipeline (stages, "
            "layers and microbatches) as the plan");
  Plan nested = plan;
  nested.fallbacks = {plan.fallbacks[0]};
  nested.fallbacks[0].fallbacks = {planOn(1)};
  EXPECT_EQ(message(nested), "invalid plan: fallbacks[0]: a fallback plan "
                             "holds no fallbacks of its own");
}

TEST(PlanFile, DevicesAndLinksRoundTripAndAreChecked) {
  Problem problem = uniformProblem(2, 2, 2);
  problem.devices = {{"fast", 1.0, 40.0}, {"slow", 0.5, std::nullopt}};
  problem.links = Problem::Links{2, {0.0, 4.0}, {0.5, 1.0}};
  for (Stage &s : problem.stages)
    s.output = 3.0;
  Program program = lowerCommunication(
      problem, *generateSchedule(problem, {ScheduleKind::OneFOneB}));
  Plan plan = buildPlan(problem, program, "s", 100);
  std::string text = writePlan(plan);
  llvm::Expected<Plan> back = readPlan(text);
  ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
  EXPECT_EQ(back->ranks[0].device, "fast");
  EXPECT_EQ(back->ranks[0].memory, 40.0);
  EXPECT_EQ(back->ranks[1].device, "slow");
  EXPECT_EQ(back->ranks[1].speed, 0.5);
  EXPECT_FALSE(back->ranks[1].memory.has_value());
  ASSERT_TRUE(back->links.has_value());
  EXPECT_EQ(back->links->node, 2);
  EXPECT_EQ(back->links->inter.latency, 0.5);
  EXPECT_EQ(back->links->intra.bandwidth, 4.0);
  // Messages are output x unit bytes (300), not the activation (100).
  for (const PlanRank &rank : back->ranks)
    for (const PlanOp &op : rank.ops) {
      if (op.kind == PlanOp::Kind::Send || op.kind == PlanOp::Kind::Recv) {
        EXPECT_EQ(op.buffer.bytes, 300);
      }
    }

  auto message = [&](llvm::StringRef from, llvm::StringRef to) {
    std::string bad = text;
    size_t at = bad.find(from.str());
    EXPECT_NE(at, std::string::npos) << from.str();
    bad.replace(at, from.size(), to.str());
    return errorMessage(readPlan(bad).takeError());
  };
  EXPECT_EQ(message("\"speed\":0.5", "\"speed\":0"),
            "invalid plan: rank 1 device: needs a non-empty \"name\", a "
            "finite \"speed\" > 0 and, if given, a finite \"memory\" > 0");
  EXPECT_EQ(message("\"memory\":40", "\"memory\":-1"),
            "invalid plan: rank 0 device: needs a non-empty \"name\", a "
            "finite \"speed\" > 0 and, if given, a finite \"memory\" > 0");
  EXPECT_EQ(message("\"bandwidth\":1", "\"bandwidth\":0"),
            "invalid plan: links: needs \"node\" >= 1 and \"intra\" and "
            "\"inter\" objects with a finite \"latency\" >= 0 and "
            "\"bandwidth\" > 0");
  EXPECT_EQ(message("\"node\":2", "\"node\":0"),
            "invalid plan: links: needs \"node\" >= 1 and \"intra\" and "
            "\"inter\" objects with a finite \"latency\" >= 0 and "
            "\"bandwidth\" > 0");
}

} // namespace

TEST(PlanReductions, EveryStageReducesRightAfterItsLastGradientOverAGrid) {
  for (int p : {1, 2, 3, 4})
    for (int m : {1, p, 2 * p + 1})
      for (ScheduleKind kind :
           {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
            ScheduleKind::Interleaved1F1B, ScheduleKind::ZBH1,
            ScheduleKind::ZBV, ScheduleKind::DualPipeV}) {
        Problem problem = uniformProblem(p, m, 2 * p, {1.0, 1.0, 1.0}, 0.1);
        llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
        ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
        Plan plan =
            buildPlan(problem, lowerCommunication(problem, *s), "s", 64);
        Plan placed = plan;
        placeReductions(placed);
        placeReductions(placed); // placing again replaces, never doubles
        const std::string where =
            fmt::format("{} p={} m={}", scheduleKindName(kind).str(), p, m);
        ASSERT_FALSE(checkReductions(placed)) << where;
        for (int r = 0; r < p; ++r) {
          const std::vector<PlanOp> &ops = placed.ranks[r].ops;
          std::vector<PlanOp> rest;
          std::map<int, int> reduces, waits;
          for (size_t at = 0; at < ops.size(); ++at) {
            const PlanOp &op = ops[at];
            if (op.kind == PlanOp::Kind::ReduceWait) {
              ++waits[op.stage];
              // Waits close the stream: the step overlaps every reduction.
              for (size_t later = at; later < ops.size(); ++later)
                EXPECT_EQ(ops[later].kind, PlanOp::Kind::ReduceWait) << where;
            }
            if (op.kind != PlanOp::Kind::Reduce) {
              if (op.kind != PlanOp::Kind::ReduceWait)
                rest.push_back(op);
              continue;
            }
            ++reduces[op.stage];
            // Right after the stage's last gradient action: no later
            // compute of the stage's gradient, and the action just before
            // (past other reductions) completes one.
            for (size_t later = at + 1; later < ops.size(); ++later)
              if (ops[later].kind == PlanOp::Kind::Compute) {
                const Action &a = ops[later].action;
                const bool gradient = (a.kind == ActionKind::Backward ||
                                       a.kind == ActionKind::BackwardWeight) &&
                                      a.stage == op.stage;
                EXPECT_FALSE(gradient ||
                             (a.kind == ActionKind::ForwardBackward &&
                              a.backwardStage == op.stage))
                    << where << " rank " << r;
              }
            size_t before = at;
            while (before > 0 && ops[before - 1].kind == PlanOp::Kind::Reduce)
              --before;
            ASSERT_GT(before, 0u) << where;
            EXPECT_EQ(ops[before - 1].kind, PlanOp::Kind::Compute) << where;
          }
          // Every stage of the rank once, and nothing else moved.
          for (int st = 0; st < 2 * p; ++st)
            if (s->placement[st] == r) {
              EXPECT_EQ(reduces[st], 1) << where << " stage " << st;
              EXPECT_EQ(waits[st], 1) << where << " stage " << st;
            }
          ASSERT_EQ(rest.size(), plan.ranks[r].ops.size()) << where;
          for (size_t k = 0; k < rest.size(); ++k)
            EXPECT_EQ(rest[k].kind, plan.ranks[r].ops[k].kind) << where;
        }
        llvm::Expected<Plan> back = readPlan(writePlan(placed));
        ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
        for (int r = 0; r < p; ++r) {
          ASSERT_EQ(back->ranks[r].ops.size(), placed.ranks[r].ops.size());
          for (size_t k = 0; k < placed.ranks[r].ops.size(); ++k) {
            EXPECT_EQ(back->ranks[r].ops[k].kind, placed.ranks[r].ops[k].kind);
            EXPECT_EQ(back->ranks[r].ops[k].stage,
                      placed.ranks[r].ops[k].stage);
          }
        }
      }
}

TEST(PlanReductions, MisplacedReductionsAreRefusedNamingRankAndStage) {
  Problem problem = uniformProblem(2, 2, 2);
  Plan plan = buildPlan(
      problem,
      lowerCommunication(problem,
                         *generateSchedule(problem, {ScheduleKind::OneFOneB})),
      "s", 64);
  placeReductions(plan);
  plan.dataParallel = 4;
  llvm::Expected<Plan> back = readPlan(writePlan(plan));
  ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
  EXPECT_EQ(back->dataParallel, 4);
  EXPECT_EQ(back->sharding, "none");

  // Rank 1's reduction moved to the front: before its stage's backwards.
  Plan early = plan;
  std::vector<PlanOp> &ops = early.ranks[1].ops;
  auto reduce = std::find_if(ops.begin(), ops.end(), [](const PlanOp &op) {
    return op.kind == PlanOp::Kind::Reduce;
  });
  PlanOp moved = *reduce;
  ops.erase(reduce);
  ops.insert(ops.begin(), moved);
  EXPECT_NE(errorMessage(checkReductions(early))
                .find("rank 1, stage @s1: reduced at instruction 0, before "
                      "its last gradient action"),
            std::string::npos)
      << errorMessage(checkReductions(early));

  // Rank 0 never waits for its reduction.
  Plan unwaited = plan;
  std::vector<PlanOp> &zero = unwaited.ranks[0].ops;
  zero.erase(std::remove_if(zero.begin(), zero.end(),
                            [](const PlanOp &op) {
                              return op.kind == PlanOp::Kind::ReduceWait;
                            }),
             zero.end());
  EXPECT_EQ(errorMessage(checkReductions(unwaited)),
            "rank 0, stage @s0: its reduction is never waited for after it "
            "is posted");
  EXPECT_EQ(errorMessage(readPlan(writePlan(unwaited)).takeError()),
            "invalid plan: reductions: rank 0, stage @s0: its reduction is "
            "never waited for after it is posted");
}
