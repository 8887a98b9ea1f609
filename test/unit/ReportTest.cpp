//===- ReportTest.cpp - Summary, ASCII timeline and Chrome trace ----------===//
//
// What a person reads: the summary numbers, the timeline rows, and a trace
// that parses as JSON with one event per action.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "scheduler/formats/ChromeTrace.h"
#include "scheduler/formats/Report.h"
#include "scheduler/kinds/Kinds.h"

#include <fmt/format.h>

#include "llvm/ADT/StringRef.h"

using namespace stagecraft::pipe::sched;
using namespace stagecraft::pipe::sched::test;

namespace {

TEST(Report, AsciiTimelineDrawsEveryRankToScale) {
  Problem problem = uniformProblem(2, 2, 2);
  Schedule s = *generateSchedule(problem, {ScheduleKind::OneFOneB});
  Timeline t = *simulate(problem, s);
  // makespan 9, 18 columns: 2 columns per unit.
  std::string text = renderAsciiTimeline(s, t, 18);
  EXPECT_EQ(text, "timeline: 1 column = 0.5 time units\n"
                  "rank 0 |F0F1....B0  ..B1  |\n"
                  "rank 1 |..F0B0  F1B1  ....|\n"
                  "legend: F forward, B whole backward, . idle; the number "
                  "after a letter is the microbatch\n");
}

TEST(Report, AsciiTimelineMarksChunksAndNeverCutsNumbers) {
  Problem problem = uniformProblem(2, 12, 4);
  Schedule s = *generateSchedule(problem, {ScheduleKind::Interleaved1F1B, 2});
  Timeline t = *simulate(problem, s);
  std::string text =
      renderAsciiTimeline(s, t, 2 * static_cast<int>(t.makespan));
  EXPECT_NE(text.find("lowercase: the rank's 2nd, 4th, ... stage"),
            std::string::npos);
  // Rank 0 starts with chunk 0 (stage 0) then chunk 1 (stage 2).
  EXPECT_NE(text.find("rank 0 |F0F1f0f1"), std::string::npos) << text;
  // Microbatch 10 does not fit in two columns: drawn as letters only.
  EXPECT_EQ(text.find("F1 "), std::string::npos) << text;
  EXPECT_NE(text.find("FF"), std::string::npos) << text;
  // ... and said so, with the width that shows every number.
  int wide = timelineWidthForLabels(t);
  EXPECT_NE(
      text.find(fmt::format("--timeline-width={} shows every number", wide)),
      std::string::npos)
      << text;
  std::string widened = renderAsciiTimeline(s, t, wide);
  EXPECT_EQ(widened.find("note:"), std::string::npos) << widened;
  EXPECT_NE(widened.find("F10"), std::string::npos) << widened;
}

TEST(Report, SummaryListsMakespanBubbleAndPeakPerRank) {
  Problem problem = uniformProblem(4, 8, 4);
  Schedule s = *generateSchedule(problem, {ScheduleKind::OneFOneB});
  Timeline t = *simulate(problem, s);
  std::string text = formatSummary(problem, s, t, "p_1f1b");
  EXPECT_NE(text.find("makespan 33, bubble ratio 0.2727, lower bound 27 "
                      "(makespan / bound 1.2222)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    0          24          33             4  @s0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    3          24          24             1  @s3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 3 |"), std::string::npos);
}

TEST(ChromeTrace, OneCompleteEventPerActionOnRankTracks) {
  Problem problem = uniformProblem(3, 4, 3);
  Schedule s = *generateSchedule(problem, {ScheduleKind::GPipe});
  Timeline t = *simulate(problem, s);
  ChromeTraceWriter writer;
  writer.addTimeline("simulated", problem, t);
  llvm::Expected<llvm::json::Value> doc = llvm::json::parse(writer.str());
  ASSERT_TRUE(!!doc) << llvm::toString(doc.takeError());
  const llvm::json::Array *events = doc->getAsObject()->getArray("traceEvents");
  ASSERT_TRUE(events);
  int complete = 0;
  for (const llvm::json::Value &e : *events) {
    const llvm::json::Object *o = e.getAsObject();
    if (o->getString("ph") != "X")
      continue;
    ++complete;
    EXPECT_GE(*o->getNumber("dur"), 0.0);
    EXPECT_LT(*o->getInteger("tid"), 3);
  }
  EXPECT_EQ(complete, 3 * 4 * 2);
}

} // namespace
