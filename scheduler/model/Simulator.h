//===- Simulator.h - Event simulation of a schedule -------------*- C++ -*-===//
//
// Runs a task graph with the semantics of DESIGN.md: each rank runs its tasks
// one at a time in order, a task starts once its rank is free and every
// dependency has ended (plus the link latency across ranks; with contended
// links, once the transfer has had its link to itself). The same walk is
// the deadlock check: when no rank can advance, the schedule is invalid and
// the error names, per rank, the action it is stuck on and what it waits for.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_SIMULATOR_H
#define STAGECRAFT_SCHEDULER_MODEL_SIMULATOR_H

#include "scheduler/model/TaskGraph.h"

namespace stagecraft::pipe::sched {

struct TimedAction {
  Action action;
  double start;
  double end;
};

/// A transfer across ranks on a contended link (TaskGraph::linkContention):
/// the output (or gradient) of `producer`, from rank `from` to rank `to`,
/// holding that directed link from `start` to `end`.
struct TimedTransfer {
  int from, to;
  Action producer;
  double start, end;
};

/// What a schedule search minimizes. `Makespan`: one step from the first
/// start to the last end, the step's cost when a barrier separates steps
/// (torch's runtime). `Span`: the largest per-rank span, the steady-state
/// step when a step's tail may overlap the next one's head (the Zero Bubble
/// paper's runtime); it never exceeds the makespan.
enum class Objective { Makespan, Span };

/// "makespan" / "span".
llvm::StringRef objectiveName(Objective objective);
/// Parses an objective's name; fails naming both.
llvm::Expected<Objective> parseObjective(llvm::StringRef name);

struct Timeline {
  double makespan = 0.0;
  /// 1 - sum(busy) / (ranks * makespan); 0 when the makespan is 0.
  double bubbleRatio = 0.0;
  /// Per rank: total compute time.
  std::vector<double> busy;
  /// Per rank: the maximum live activation memory over time.
  std::vector<double> peakMemory;
  /// Per rank: memory live for the whole step (the `params` of its stages).
  std::vector<double> staticMemory;
  /// Per rank: the actions in run order with their times.
  std::vector<std::vector<TimedAction>> ranks;
  /// Per rank: from the start of its first action to the end of its last
  /// (0 for a rank without actions). The zero-bubble papers quote the
  /// largest of these, not the makespan.
  std::vector<double> span;
  /// With link contention: every transfer, in the order it took its link;
  /// empty otherwise.
  std::vector<TimedTransfer> transfers;

  /// The largest per-rank span.
  double maxSpan() const;
  /// What \p objective minimizes on this timeline.
  double value(Objective objective) const {
    return objective == Objective::Span ? maxSpan() : makespan;
  }
  /// Rank \p r's peak: its static memory plus its activation peak, the
  /// figure a capacity bounds.
  double peak(int r) const {
    return peakMemory[r] + (staticMemory.empty() ? 0.0 : staticMemory[r]);
  }
};

/// Simulates \p graph. Fails with a ScheduleError naming every stuck rank
/// when the per-rank orders admit no execution.
llvm::Expected<Timeline> simulate(const TaskGraph &graph);

/// Builds the task graph of \p schedule and simulates it.
llvm::Expected<Timeline> simulate(const Problem &problem,
                                  const Schedule &schedule);

/// Checks that \p schedule covers \p problem and can run to completion.
llvm::Error verifySchedule(const Problem &problem, const Schedule &schedule);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_SIMULATOR_H
