//===- PyTorchCsvTest.cpp - PyTorch pipelining CSV import/export ----------===//
//
// Round trips of every kind over a grid and the import errors with their
// positions.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/formats/PyTorchCsv.h"
#include "scheduler/kinds/Kinds.h"

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

TEST(PyTorchCsv, WritesOneRowPerRankWithGlobalStageIndices) {
  Problem problem = uniformProblem(2, 2, 4);
  llvm::Expected<Schedule> s =
      generateSchedule(problem, {ScheduleKind::Interleaved1F1B, 2});
  ASSERT_TRUE(!!s);
  std::string csv = *formatPyTorchCsv(*s);
  EXPECT_EQ(csv, "0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1\n"
                 "1F0,1F1,3F0,3B0,3F1,3B1,1B0,1B1\n");
}

TEST(PyTorchCsv, RoundTripsEveryKind) {
  for (int p : {1, 2, 4})
    for (int m : {1, 3, 8})
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                ScheduleKind::Interleaved1F1B}) {
        Problem problem = uniformProblem(p, m, 2 * p);
        llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
        ASSERT_TRUE(!!s) << llvm::toString(s.takeError());
        llvm::Expected<ImportedSchedule> back =
            parsePyTorchCsv(*formatPyTorchCsv(*s), problem);
        ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
        EXPECT_EQ(back->schedule.placement, s->placement);
        EXPECT_EQ(back->schedule.ranks, s->ranks);
      }
}

TEST(PyTorchCsv, SkipsIdleAndCommunicationCells) {
  Problem problem = uniformProblem(2, 1, 2);
  llvm::Expected<ImportedSchedule> back = parsePyTorchCsv(
      "0F0,0SEND_F0,,0RECV_B0,0B0\r\n1RECV_F0,1F0,1I0,1SEND_B0,1W0\n\n",
      problem);
  ASSERT_TRUE(!!back) << llvm::toString(back.takeError());
  ASSERT_EQ(back->schedule.ranks[0].size(), 2u);
  ASSERT_EQ(back->schedule.ranks[1].size(), 3u);
  EXPECT_EQ(back->schedule.ranks[1][1].kind, ActionKind::BackwardInput);
  EXPECT_EQ(back->positions[1][2].column, 27);
  // The communication cells come back as a program, in PyTorch's naming:
  // RECV_F names the receiving stage, SEND_B the sending one.
  ASSERT_TRUE(back->program.has_value());
  const auto &r1 = back->program->ranks[1];
  ASSERT_EQ(r1.size(), 5u);
  EXPECT_EQ(r1[0].kind, Instruction::Kind::Comm);
  EXPECT_FALSE(r1[0].ops[0].isSend);
  EXPECT_EQ(r1[0].ops[0].peer, 0);
  EXPECT_EQ(r1[0].ops[0].message, (Message{MessageKind::Activation, 0, 0}));
  EXPECT_TRUE(r1[3].ops[0].isSend);
  EXPECT_EQ(r1[3].ops[0].message, (Message{MessageKind::Gradient, 1, 0}));
  EXPECT_FALSE(verifyProgram(problem, *back->program));
}

TEST(PyTorchCsv, ErrorsCarryLineAndColumn) {
  Problem problem = uniformProblem(2, 1, 2);
  auto message = [&](llvm::StringRef text) {
    return errorMessage(parsePyTorchCsv(text, problem).takeError());
  };
  EXPECT_EQ(message("0F0,0X0\n1F0\n"),
            "1:5: bad action '0X0': expected <stage><F|I|W|B><microbatch>, "
            "e.g. 0F3");
  EXPECT_EQ(message("0F0\n1F0,7B0\n"),
            "2:5: action '7B0' names stage 7, pipeline @p has 2 stages");
  EXPECT_EQ(message("0F0\n"), "2:1: CSV has 1 rows, pipeline @p has 2 ranks");
  EXPECT_EQ(message("0F0\n1F0\n1B0\n"),
            "3:1: row 3 is one too many: pipeline @p has 2 ranks");
}

} // namespace
