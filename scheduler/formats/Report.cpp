//===- Report.cpp - Human-readable schedule reports -----------------------===//
//
// Summary table and ASCII timeline; see Report.h.
//
//===----------------------------------------------------------------------===//

#include "scheduler/formats/Report.h"
#include "scheduler/search/AutoScheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

using namespace stagecraft::pipe::sched;

/// What each timeline letter stands for.
static const char *letterMeaning(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return "forward";
  case ActionKind::BackwardInput:
    return "backward for the input gradient";
  case ActionKind::BackwardWeight:
    return "backward for the weight gradient";
  case ActionKind::Backward:
    return "whole backward";
  case ActionKind::ForwardBackward:
    return "forward of one microbatch overlapped with a backward of another";
  case ActionKind::AttentionForward:
    return "attention forward";
  case ActionKind::AttentionBackward:
    return "attention backward";
  }
  llvm_unreachable("unknown action kind");
}

int stagecraft::pipe::sched::timelineWidthForLabels(const Timeline &timeline) {
  if (timeline.makespan <= 0.0)
    return 1;
  // The scale at which every action is at least as many columns wide as its
  // letter and microbatch number.
  double scale = 0.0;
  for (const auto &rank : timeline.ranks)
    for (const TimedAction &ta : rank) {
      double duration = ta.end - ta.start;
      if (duration <= 0.0)
        continue;
      double label = 1.0 + std::to_string(ta.action.microbatch).size();
      scale = std::max(scale, std::ceil(label / duration));
    }
  double columns = std::ceil(timeline.makespan * scale);
  return static_cast<int>(std::clamp(columns, 1.0, 1e9));
}

std::string stagecraft::pipe::sched::renderAsciiTimeline(
    const Schedule &schedule, const Timeline &timeline, int width) {
  std::string out;
  if (timeline.makespan <= 0.0 || width < 1)
    return out;
  // Whole columns per time unit when they fit keep equal costs equally wide.
  double scale = width / timeline.makespan;
  if (scale >= 1.0)
    scale = std::floor(scale);
  const int columns = std::max(
      1, static_cast<int>(std::ceil(timeline.makespan * scale - 1e-9)));
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
  out += "\n";
  const int labelWidth =
      static_cast<int>(std::to_string(timeline.ranks.size() - 1).size());
  int64_t hidden = 0;
  std::vector<bool> seen(static_cast<size_t>(ActionKind::AttentionBackward) + 1,
                         false);
  for (size_t r = 0; r < timeline.ranks.size(); ++r) {
    std::string row(columns, '.');
    for (const TimedAction &ta : timeline.ranks[r]) {
      int begin = static_cast<int>(std::lround(ta.start * scale));
      int end = static_cast<int>(std::lround(ta.end * scale));
      begin = std::min(begin, columns - 1);
      end = std::clamp(end, begin + 1, columns);
      seen[static_cast<size_t>(ta.action.kind)] = true;
      char letter = actionLetter(ta.action.kind);
      if (chunk[ta.action.stage] % 2 == 1)
        letter = static_cast<char>(std::tolower(letter));
      std::string label = fmt::format("{}{}", letter, ta.action.microbatch);
      int span = end - begin;
      // Too narrow for the microbatch: the letter alone, never a cut number,
      // and counted so that the legend says so.
      if (static_cast<int>(label.size()) > span) {
        label = std::string(span, letter);
        ++hidden;
      }
      for (int c = begin; c < end; ++c)
        row[c] =
            c - begin < static_cast<int>(label.size()) ? label[c - begin] : ' ';
    }
    out += fmt::format("rank {:>{}} |{}|\n", r, labelWidth, row);
  }
  // The legend: every letter drawn, then what the numbers are.
  out += "legend:";
  const char *sep = " ";
  for (size_t k = 0; k < seen.size(); ++k)
    if (seen[k]) {
      auto kind = static_cast<ActionKind>(k);
      out +=
          fmt::format("{}{} {}", sep, actionLetter(kind), letterMeaning(kind));
      sep = ", ";
    }
  out += ", . idle; the number after a letter is the microbatch";
  if (multiChunk)
    out += "; lowercase: the rank's 2nd, 4th, ... stage";
  out += "\n";
  if (hidden > 0)
    out += fmt::format("note: {} actions are too narrow here to show their "
                       "microbatch number (drawn as letters only); "
                       "--timeline-width={} shows every number\n",
                       hidden, timelineWidthForLabels(timeline));
  return out;
}

std::string stagecraft::pipe::sched::formatSummary(const Problem &problem,
                                                   const Schedule &schedule,
                                                   const Timeline &timeline,
                                                   llvm::StringRef scheduleName,
                                                   int width) {
  std::string out;
  std::string transfers =
      problem.links
          ? fmt::format("links: nodes of {}, intra latency {:.4g} bandwidth "
                        "{:.4g}, inter latency {:.4g} bandwidth {:.4g} (time "
                        "units, output units per time unit; one transfer at a "
                        "time per directed link)",
                        problem.links->node, problem.links->intra.latency,
                        problem.links->intra.bandwidth,
                        problem.links->inter.latency,
                        problem.links->inter.bandwidth)
          : fmt::format("latency {:.4g} time units", problem.latency);
  out += fmt::format("schedule @{} for @{}: {} ranks, {} stages, {} "
                     "microbatches, {}\n",
                     scheduleName.str(), problem.name, problem.ranks,
                     problem.numStages(), problem.microbatches, transfers);
  // No rank finishes before its own work either (this also covers tasks the
  // placement bound does not see: attention, recomputation).
  double bound =
      std::max(lowerBound(problem, schedule.placement),
               *std::max_element(timeline.busy.begin(), timeline.busy.end()));
  out += fmt::format("makespan {:.6g}, bubble ratio {:.4f}, lower bound {:.6g} "
                     "(makespan / bound {:.4f})\n",
                     timeline.makespan, timeline.bubbleRatio, bound,
                     bound > 0.0 ? timeline.makespan / bound : 1.0);
  out += "lower bound: no schedule with this placement of stages on ranks "
         "ends sooner (the longest rank's work plus the forward chain it "
         "must wait for; memory ignored)\n";
  out += fmt::format("span {:.6g} (largest per-rank span, first start to "
                     "last end on one rank: the zero-bubble papers' figure)\n",
                     timeline.maxSpan());
  // Capacity, params and recomputation get their columns where they exist.
  bool memoryColumns =
      problem.hasCapacity() || schedule.recompute.any() || problem.hasDevices();
  for (const Stage &st : problem.stages)
    memoryColumns |= st.params > 0.0;
  if (memoryColumns) {
    out += "peak memory = params + live activations (within capacity where "
           "one is given); recomputed F = forwards that recompute in their "
           "backward, of those the rank runs\n";
    out +=
        fmt::format("{:>5}  {:>10}  {:>10}  {:>12}  {:>10}  {:>10}  {:>16}  "
                    "{}{}\n",
                    "rank", "busy", "span", "peak memory", "params", "capacity",
                    "recomputed F",
                    problem.hasDevices() ? "device (speed)  " : "", "stages");
  } else {
    out += fmt::format("{:>5}  {:>10}  {:>10}  {:>12}  {}\n", "rank", "busy",
                       "span", "peak memory", "stages");
  }
  for (int r = 0; r < schedule.numRanks(); ++r) {
    std::string stages;
    for (int s : schedule.stagesOf(r))
      stages += (stages.empty() ? "@" : " @") + problem.stages[s].name;
    if (!memoryColumns) {
      out += fmt::format("{:>5}  {:>10.6g}  {:>10.6g}  {:>12.6g}  {}\n", r,
                         timeline.busy[r], timeline.span[r],
                         timeline.peakMemory[r], stages);
      continue;
    }
    int full = 0, selective = 0, forwards = 0;
    for (int s : schedule.stagesOf(r))
      for (int m = 0; m < problem.microbatches; ++m) {
        ++forwards;
        full += schedule.recompute.at(s, m) == Recompute::Full;
        selective += schedule.recompute.at(s, m) == Recompute::Selective;
      }
    std::string recomputed = fmt::format("{}/{}", full + selective, forwards);
    if (full && selective)
      recomputed += fmt::format(" ({}f {}s)", full, selective);
    else if (selective)
      recomputed += " sel";
    else if (full)
      recomputed += " full";
    std::string capacity = std::isfinite(problem.capacityOf(r))
                               ? fmt::format("{:.6g}", problem.capacityOf(r))
                               : "-";
    std::string device;
    if (problem.hasDevices())
      device = fmt::format("{:<16}",
                           fmt::format("@{} ({:.6g})", problem.devices[r].name,
                                       problem.devices[r].speed));
    out += fmt::format("{:>5}  {:>10.6g}  {:>10.6g}  {:>12.6g}  {:>10.6g}  "
                       "{:>10}  {:>16}  {}{}\n",
                       r, timeline.busy[r], timeline.span[r], timeline.peak(r),
                       timeline.staticMemory.empty() ? 0.0
                                                     : timeline.staticMemory[r],
                       capacity, recomputed, device, stages);
  }
  out += renderAsciiTimeline(schedule, timeline, width);
  return out;
}

std::string stagecraft::pipe::sched::formatDataParallelSummary(
    const DataParallel &dp, const DataParallelOptions &options,
    const DataParallelTimeline &step, double bound) {
  std::string sharding = shardingName(dp.sharding).str();
  if (dp.sharding == DataParallel::Sharding::Hybrid)
    sharding += fmt::format(" (shard groups of {})", dp.shardGroup);
  std::string placement =
      options.placement == ReducePlacement::Bucketed && options.bucketBytes > 0
          ? fmt::format("bucketed, {:.6g} bytes a bucket", options.bucketBytes)
          : std::string("torch's rule (a stage's whole gradient after its "
                        "last backward)");
  std::string out = fmt::format(
      "data parallel: {} replicas, sharding {}, reductions {}; link latency "
      "{:.4g} bandwidth {:.4g}\n",
      dp.degree, sharding, placement, dp.latency, dp.bandwidth);
  out += fmt::format("step {:.6g} (every rank's optimizer step done), lower "
                     "bound {:.6g} (step / bound {:.4f}); the pipeline's "
                     "compute starts {:.6g} late for its weights\n",
                     step.step, bound, bound > 0.0 ? step.step / bound : 1.0,
                     step.shift);
  out +=
      fmt::format("{:>5}  {:>12}  {:>12}  {:>10}  {:>12}  {}\n", "rank",
                  "collectives", "exposed", "optimizer", "held bytes", "ops");
  for (size_t r = 0; r < step.ops.size(); ++r) {
    double busy = 0.0, optimizer = 0.0;
    int gathers = 0, reductions = 0;
    for (const DataParallelOp &op : step.ops[r]) {
      if (op.kind == DataParallelOp::Kind::Optimizer) {
        optimizer += op.end - op.start;
        continue;
      }
      busy += op.end - op.start;
      (op.kind == DataParallelOp::Kind::Gather ? gathers : reductions) += 1;
    }
    out += fmt::format("{:>5}  {:>12.6g}  {:>12.6g}  {:>10.6g}  {:>12.6g}  {} "
                       "gathers, {} reductions\n",
                       r, busy, step.exposed[r], optimizer, step.heldBytes[r],
                       gathers, reductions);
  }
  return out;
}
