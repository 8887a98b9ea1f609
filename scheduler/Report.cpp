//===- Report.cpp - Human-readable schedule reports -----------------------===//
//
// Summary table and ASCII timeline; see Report.h.
//
//===----------------------------------------------------------------------===//

#include "scheduler/Report.h"
#include "scheduler/AutoScheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

using namespace stagecraft::pipe::sched;

std::string stagecraft::pipe::sched::renderAsciiTimeline(
    const Schedule &schedule, const Timeline &timeline, int width) {
  std::string out;
  if (timeline.makespan <= 0.0 || width < 1)
    return out;
  // Whole columns per time unit when they fit keep equal costs equally wide.
  double scale = width / timeline.makespan;
  if (scale >= 1.0)
    scale = std::floor(scale);
  const int columns =
      std::max(1, static_cast<int>(std::ceil(timeline.makespan * scale - 1e-9)));
  out += fmt::format("timeline: 1 column = {:.3g} time units", 1.0 / scale);
  // Position of each stage among its rank's stages: odd ones are lowercase.
  std::vector<int> chunk(schedule.placement.size(), 0);
  bool multiChunk = false;
  for (int r = 0; r < schedule.numRanks(); ++r) {
    std::vector<int> stages = schedule.stagesOf(r);
    for (size_t k = 0; k < stages.size(); ++k)
      chunk[stages[k]] = static_cast<int>(k);
    multiChunk |= stages.size() > 1;
  }
  if (multiChunk)
    out += "; lowercase: a rank's 2nd, 4th, ... stage";
  out += "\n";
  const int labelWidth =
      static_cast<int>(std::to_string(timeline.ranks.size() - 1).size());
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    std::string row(columns, '.');
    for (const TimedAction &ta : timeline.ranks[r]) {
      int begin = static_cast<int>(std::lround(ta.start * scale));
      int end = static_cast<int>(std::lround(ta.end * scale));
      begin = std::min(begin, columns - 1);
      end = std::clamp(end, begin + 1, columns);
      char letter = actionLetter(ta.action.kind);
      if (chunk[ta.action.stage] % 2 == 1)
        letter = static_cast<char>(std::tolower(letter));
      std::string label = fmt::format("{}{}", letter, ta.action.microbatch);
      int span = end - begin;
      // Too narrow for the microbatch: the letter alone, never a cut number.
      if (static_cast<int>(label.size()) > span)
        label = std::string(span, letter);
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
  // No rank finishes before its own work either (this also covers tasks the
  // placement bound does not see: attention, recomputation).
  double bound = std::max(lowerBound(problem, schedule.placement),
                          *std::max_element(timeline.busy.begin(),
                                            timeline.busy.end()));
  out += fmt::format("makespan {:.6g}, bubble ratio {:.4f}, lower bound {:.6g} "
                     "(makespan / bound {:.4f})\n",
                     timeline.makespan, timeline.bubbleRatio, bound,
                     bound > 0.0 ? timeline.makespan / bound : 1.0);
  out += fmt::format("span {:.6g} (largest per-rank span, first start to "
                     "last end on one rank: the zero-bubble papers' figure)\n",
                     timeline.maxSpan());
  out += fmt::format("{:>5}  {:>10}  {:>10}  {:>12}  {}\n", "rank", "busy",
                     "span", "peak memory", "stages");
  for (int r = 0; r < schedule.numRanks(); ++r) {
    std::string stages;
    for (int s : schedule.stagesOf(r))
      stages += (stages.empty() ? "@" : " @") + problem.stages[s].name;
    out += fmt::format("{:>5}  {:>10.6g}  {:>10.6g}  {:>12.6g}  {}\n", r,
                       timeline.busy[r], timeline.span[r],
                       timeline.peakMemory[r], stages);
  }
  out += renderAsciiTimeline(schedule, timeline, width);
  return out;
}
