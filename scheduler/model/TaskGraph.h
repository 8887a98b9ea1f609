//===- TaskGraph.h - Tasks, dependencies and per-rank orders ----*- C++ -*-===//
//
// The representation every verifier and simulator works on: tasks (a kind, a
// stage, a microbatch, the rank that runs it, its cost and memory effect),
// dependency edges with a latency, and the order in which each rank runs its
// tasks. The linear F/I/W/B chain of DESIGN.md is one way to fill it
// (`buildTaskGraph`); tasks that run off their stage's rank or that fuse
// actions only need other tasks and edges, not another representation.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_TASKGRAPH_H
#define STAGECRAFT_SCHEDULER_MODEL_TASKGRAPH_H

#include "scheduler/model/Schedule.h"
#include "scheduler/model/ScheduleError.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace stagecraft::pipe::sched {

using TaskId = int32_t;

struct Task {
  ActionKind kind;
  int stage;
  int microbatch;
  /// The rank that runs the task.
  int rank;
  double cost;
  /// Memory that becomes live when the task starts.
  double allocAtStart;
  /// Memory released when the task ends.
  double freeAtEnd;
  /// The backward half of an overlapped task.
  int backwardStage = -1;
  int backwardMicrobatch = -1;
  /// The rank's own work just before the task (receiving its inputs from
  /// other ranks, `Problem::receiveOverhead`), which overlaps with waiting
  /// for them: the task starts no sooner than the rank's previous task's
  /// end plus this.
  double setup = 0.0;

  Action action() const {
    return {kind, stage, microbatch, backwardStage, backwardMicrobatch};
  }
};

struct Dependency {
  TaskId task;
  /// Delay between the end of `task` and the start of the dependent task.
  double latency;
};

class TaskGraph {
public:
  explicit TaskGraph(int numRanks) : order(numRanks) {}

  int numRanks() const { return static_cast<int>(order.size()); }
  size_t numTasks() const { return tasks.size(); }

  /// Appends \p task to the end of its rank's order.
  TaskId addTask(const Task &task);
  /// Adds the edges of \p task; all edges of task t must be added before
  /// those of task t+1 (they are stored compressed, in task order).
  void addDependencies(TaskId task, llvm::ArrayRef<Dependency> deps);

  const Task &task(TaskId id) const { return tasks[id]; }
  llvm::ArrayRef<Dependency> dependencies(TaskId id) const;
  llvm::ArrayRef<TaskId> rankOrder(int rank) const { return order[rank]; }
  /// Position of \p id in its rank's order.
  int positionOf(TaskId id) const { return position[id]; }

  /// Memory live on each rank for the whole step (its stages' `params`);
  /// empty: none.
  std::vector<double> staticMemory;
  /// Whether a directed link (an ordered pair of ranks) carries one
  /// transfer at a time (`links(...)`). A dependency across ranks is then a
  /// transfer that holds the link from rank `from` to the consumer's rank
  /// for its whole latency: one per producer and receiving rank, queued on
  /// the link in the producer's rank order. Otherwise links carry any
  /// number of transfers at once.
  bool linkContention = false;

private:
  std::vector<Task> tasks;
  std::vector<int> position;
  std::vector<std::vector<TaskId>> order;
  std::vector<uint32_t> depOffsets = {0};
  std::vector<Dependency> depList;
};

/// What an action costs and does to its rank's memory.
struct ActionEffect {
  double cost = 0.0;
  /// Live from the action's start (a forward's kept activation, or what a
  /// recomputing backward re-materializes).
  double allocAtStart = 0.0;
  /// Released at its end.
  double freeAtEnd = 0.0;
};

/// What the forward of \p stage keeps under \p mode.
double keptActivation(const Stage &stage, Recompute mode);
/// What a backward of \p stage spends first to re-derive what its forward
/// did not keep under \p mode.
double recomputeCost(const Stage &stage, Recompute mode);

/// The effect of \p action under DESIGN.md's accounting with the
/// recomputation of \p recompute: F allocates what it keeps; I (or B)
/// re-runs what was not kept and re-materializes the activation, then frees
/// all but weight_grad (B: all); W frees weight_grad. Assumes the action's
/// stages and microbatches are in range. The cost is the time on rank
/// \p rank: divided by its device's speed.
ActionEffect actionEffect(const Problem &problem,
                          const RecomputeTable &recompute, const Action &action,
                          int rank);

/// Per rank: the `params` of the stages \p placement puts there.
std::vector<double> staticMemory(const Problem &problem,
                                 llvm::ArrayRef<int> placement, int numRanks);

/// Builds the F/I/W/B task graph of \p schedule: one task per action, with the
/// dependencies and memory effects of DESIGN.md. It checks that the schedule
/// covers the problem: placement in range, every action on the rank hosting
/// its stage, and for every (stage, microbatch) exactly one F and either one B
/// or one I and one W. Fails with a ScheduleError located at the offending
/// action. Assumes `validateProblem(problem)` succeeded.
llvm::Expected<TaskGraph> buildTaskGraph(const Problem &problem,
                                         const Schedule &schedule);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_TASKGRAPH_H
