//===- Report.cpp - Human-readable schedule reports -----------------------===//
//
// Summary table and ASCII timeline; see Report.h.
//
//===----------------------------------------------------------------------===//

#include "scheduler/Report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

using namespace stagecraft::pipe::sched;

std::string stagecraft::pipe::sched::renderAsciiTimeline(const Timeline &timeline,
                                             int width) {
  std::string out;
  if (timeline.makespan <= 0.0 || width < 1)
    return out;
  // Whole columns per time unit when they fit keep equal costs equally wide.
  double scale = width / timeline.makespan;
  if (scale >= 1.0)
    scale = std::floor(scale);
  const int columns =
      std::max(1, static_cast<int>(std::ceil(timeline.makespan * scale - 1e-9)));
  out += fmt::format("timeline: 1 column = {:.3g} time units\n", 1.0 / scale);
  const int labelWidth =
      static_cast<int>(std::to_string(timeline.ranks.size() - 1).size());
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    std::string row(columns, '.');
    for (const TimedAction &ta : timeline.ranks[r]) {
      int begin = static_cast<int>(std::lround(ta.start * scale));
      int end = static_cast<int>(std::lround(ta.end * scale));
      begin = std::min(begin, columns - 1);
      end = std::clamp(end, begin + 1, columns);
      // A later action drawn over a too-short earlier one keeps its letter.
      std::string label = fmt::format("{}{}", actionLetter(ta.action.kind),
                                      ta.action.microbatch);
      int span = end - begin;
      if (static_cast<int>(label.size()) > span)
        label.resize(span);
      for (int c = begin; c < end; ++c)
        row[c] = c - begin < static_cast<int>(label.size()) ? label[c - begin]
                                                            : ' ';
    }
    out += fmt::format("rank {:>{}} |{}|\n", r, labelWidth, row);
  }
  return out;
}

std::string stagecraft::pipe::sched::formatSummary(const Problem &problem,
                                       const Schedule &schedule,
                                       const Timeline &timeline,
                                       llvm::StringRef scheduleName,
                                       int width) {
  std::string out;
  out += fmt::format("schedule @{} for @{}: {} ranks, {} stages, {} "
                     "microbatches, latency {}\n",
                     scheduleName.str(), problem.name, problem.ranks,
                     problem.numStages(), problem.microbatches,
                     problem.latency);
  out += fmt::format("makespan {:.6g}, bubble ratio {:.4f}\n",
                     timeline.makespan, timeline.bubbleRatio);
  out += fmt::format("{:>5}  {:>10}  {:>12}  {}\n", "rank", "busy",
                     "peak memory", "stages");
  for (int r = 0; r < schedule.numRanks(); ++r) {
    std::string stages;
    for (int s : schedule.stagesOf(r))
      stages += (stages.empty() ? "@" : " @") + problem.stages[s].name;
    out += fmt::format("{:>5}  {:>10.6g}  {:>12.6g}  {}\n", r,
                       timeline.busy[r], timeline.peakMemory[r], stages);
  }
  out += renderAsciiTimeline(timeline, width);
  return out;
}
