//===- TaskGraph.cpp - Tasks, dependencies and per-rank orders ------------===//
//
// The task graph container and its construction from an F/I/W/B schedule,
// including the coverage check (each action exactly once, on its host rank).
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/TaskGraph.h"

#include <fmt/format.h>

#include <cassert>

using namespace stagecraft::pipe::sched;

TaskId TaskGraph::addTask(const Task &task) {
  assert(task.rank >= 0 && task.rank < numRanks() && "rank out of range");
  TaskId id = static_cast<TaskId>(tasks.size());
  tasks.push_back(task);
  position.push_back(static_cast<int>(order[task.rank].size()));
  order[task.rank].push_back(id);
  return id;
}

void TaskGraph::addDependencies(TaskId task, llvm::ArrayRef<Dependency> deps) {
  assert(static_cast<size_t>(task) + 1 == depOffsets.size() &&
         "dependencies must be added in task order");
  depList.insert(depList.end(), deps.begin(), deps.end());
  depOffsets.push_back(static_cast<uint32_t>(depList.size()));
}

llvm::ArrayRef<Dependency> TaskGraph::dependencies(TaskId id) const {
  assert(static_cast<size_t>(id) + 1 < depOffsets.size() &&
         "dependencies of this task were not added");
  return llvm::ArrayRef<Dependency>(depList.data() + depOffsets[id],
                                    depList.data() + depOffsets[id + 1]);
}

namespace {
/// Dense (stage, microbatch, kind) -> task lookup. An overlapped action has
/// no slot of its own: it fills one F and one B slot.
class TaskIndex {
public:
  static constexpr int kSlots = 7;
  TaskIndex(int stages, int microbatches)
      : microbatches(microbatches),
        ids(static_cast<size_t>(stages) * microbatches * kSlots, -1) {}

  TaskId &operator()(int stage, int mb, ActionKind kind) {
    return ids[(static_cast<size_t>(stage) * microbatches + mb) * kSlots +
               static_cast<int>(kind)];
  }

private:
  int microbatches;
  std::vector<TaskId> ids;
};
} // namespace

double stagecraft::pipe::sched::keptActivation(const Stage &stage,
                                               Recompute mode) {
  switch (mode) {
  case Recompute::None:
    return stage.activation;
  case Recompute::Full:
    return stage.recomputed.value_or(stage.activation);
  case Recompute::Selective:
    return stage.selective.value_or(stage.activation);
  }
  llvm_unreachable("unknown recompute mode");
}

double stagecraft::pipe::sched::recomputeCost(const Stage &stage,
                                              Recompute mode) {
  switch (mode) {
  case Recompute::None:
    return 0.0;
  case Recompute::Full:
    return stage.forward;
  case Recompute::Selective:
    return stage.selectiveCost.value_or(0.0);
  }
  llvm_unreachable("unknown recompute mode");
}

ActionEffect
stagecraft::pipe::sched::actionEffect(const Problem &problem,
                                      const RecomputeTable &recompute,
                                      const Action &a, int rank) {
  const Stage &stage = problem.stages[a.stage];
  ActionEffect e;
  // The start of a backward of (s, m): re-run and re-materialize.
  auto rematerialize = [&](int s, int m) {
    const Stage &st = problem.stages[s];
    Recompute mode = recompute.at(s, m);
    e.cost += recomputeCost(st, mode);
    e.allocAtStart += st.activation - keptActivation(st, mode);
  };
  switch (a.kind) {
  case ActionKind::Forward:
    e.cost = stage.forward;
    e.allocAtStart = keptActivation(stage, recompute.at(a.stage, a.microbatch));
    break;
  case ActionKind::BackwardInput:
    e.cost = stage.backwardInput;
    rematerialize(a.stage, a.microbatch);
    e.freeAtEnd = stage.activation - stage.weightGrad;
    break;
  case ActionKind::BackwardWeight:
    e.cost = stage.backwardWeight;
    e.freeAtEnd = stage.weightGrad;
    break;
  case ActionKind::Backward:
    e.cost = stage.backward();
    rematerialize(a.stage, a.microbatch);
    e.freeAtEnd = stage.activation;
    break;
  case ActionKind::ForwardBackward: {
    const Stage &back = problem.stages[a.backwardStage];
    if (!problem.hasLengths()) {
      e.cost = overlappedCost(stage, back);
      e.allocAtStart =
          keptActivation(stage, recompute.at(a.stage, a.microbatch));
      rematerialize(a.backwardStage, a.backwardMicrobatch);
      e.freeAtEnd = back.activation;
    } else {
      // Two microbatches of their own lengths: each half at its own scale.
      const double cf = problem.costScale(a.stage, a.microbatch),
                   cb =
                       problem.costScale(a.backwardStage, a.backwardMicrobatch),
                   mf = problem.memoryScale(a.microbatch),
                   mb = problem.memoryScale(a.backwardMicrobatch);
      Stage f = stage, b = back;
      for (Stage *st : {&f, &b}) {
        double c = st == &f ? cf : cb;
        st->forward *= c;
        st->backwardInput *= c;
        st->backwardWeight *= c;
        if (st->forwardBackward)
          *st->forwardBackward *= c;
      }
      e.cost = overlappedCost(f, b);
      e.allocAtStart =
          keptActivation(stage, recompute.at(a.stage, a.microbatch)) * mf;
      Recompute mode = recompute.at(a.backwardStage, a.backwardMicrobatch);
      e.cost += recomputeCost(back, mode) * cb;
      e.allocAtStart += (back.activation - keptActivation(back, mode)) * mb;
      e.freeAtEnd = back.activation * mb;
    }
    e.cost /= problem.speedOf(rank);
    return e;
  }
  case ActionKind::AttentionForward:
    e.cost = stage.attention->forward;
    e.allocAtStart = stage.attention->memory;
    break;
  case ActionKind::AttentionBackward:
    e.cost = stage.attention->backward;
    e.freeAtEnd = stage.attention->memory;
    break;
  }
  // One microbatch of its own length (ForwardBackward returned above).
  if (problem.hasLengths()) {
    e.cost *= problem.costScale(a.stage, a.microbatch);
    double m = problem.memoryScale(a.microbatch);
    e.allocAtStart *= m;
    e.freeAtEnd *= m;
  }
  e.cost /= problem.speedOf(rank);
  return e;
}

std::vector<double> stagecraft::pipe::sched::staticMemory(
    const Problem &problem, llvm::ArrayRef<int> placement, int numRanks) {
  std::vector<double> memory(numRanks, 0.0);
  for (int s = 0, e = std::min<int>(placement.size(), problem.numStages());
       s < e; ++s)
    if (placement[s] >= 0 && placement[s] < numRanks)
      memory[placement[s]] += problem.stages[s].params;
  return memory;
}

llvm::Expected<TaskGraph>
stagecraft::pipe::sched::buildTaskGraph(const Problem &problem,
                                        const Schedule &schedule) {
  const int numStages = problem.numStages();
  const int numMbs = problem.microbatches;
  if (schedule.numRanks() != problem.ranks)
    return scheduleError(
        fmt::format("schedule has {} ranks, pipeline @{} has {}",
                    schedule.numRanks(), problem.name, problem.ranks));
  if (static_cast<int>(schedule.placement.size()) != numStages)
    return scheduleError(fmt::format("placement covers {} stages, pipeline @{} "
                                     "has {}",
                                     schedule.placement.size(), problem.name,
                                     numStages));
  for (int s = 0; s < numStages; ++s) {
    int r = schedule.placement[s];
    if (r < 0 || r >= problem.ranks)
      return scheduleError(fmt::format("stage @{} is placed on rank {}, out of "
                                       "range for {} ranks",
                                       problem.stages[s].name, r,
                                       problem.ranks));
  }

  const RecomputeTable &recompute = schedule.recompute;
  if (recompute.table.size() > static_cast<size_t>(numStages))
    return scheduleError(fmt::format("recomputation is given for {} stages, "
                                     "pipeline @{} has {}",
                                     recompute.table.size(), problem.name,
                                     numStages));
  for (const std::vector<Recompute> &row : recompute.table)
    if (row.size() > static_cast<size_t>(numMbs))
      return scheduleError(fmt::format("recomputation is given for {} "
                                       "microbatches, pipeline @{} has {}",
                                       row.size(), problem.name, numMbs));

  TaskGraph graph(problem.ranks);
  graph.staticMemory = staticMemory(problem, schedule.placement, problem.ranks);
  graph.linkContention = problem.links.has_value();
  TaskIndex index(numStages, numMbs);
  for (int r = 0; r < problem.ranks; ++r) {
    const std::vector<Action> &actions = schedule.ranks[r];
    for (int i = 0, e = static_cast<int>(actions.size()); i < e; ++i) {
      const Action &a = actions[i];
      ScheduleSite site{r, i};
      // An overlapped action is checked as its forward and backward halves.
      bool overlapped = a.kind == ActionKind::ForwardBackward;
      struct Half {
        int stage, mb;
        ActionKind kind;
      };
      llvm::SmallVector<Half, 2> halves;
      halves.push_back(
          {a.stage, a.microbatch, overlapped ? ActionKind::Forward : a.kind});
      if (overlapped)
        halves.push_back(
            {a.backwardStage, a.backwardMicrobatch, ActionKind::Backward});
      for (const Half &h : halves) {
        if (h.stage < 0 || h.stage >= numStages)
          return scheduleError(fmt::format("action refers to stage #{}, "
                                           "pipeline @{} has {} stages",
                                           h.stage, problem.name, numStages),
                               site);
        if (h.mb < 0 || h.mb >= numMbs)
          return scheduleError(
              fmt::format("{}: microbatch {} is out of range, pipeline @{} has "
                          "{} microbatches",
                          describeAction(problem, a), h.mb, problem.name,
                          numMbs),
              site);
        int host = schedule.placement[h.stage];
        if (isAttention(h.kind) && !problem.stages[h.stage].attention)
          return scheduleError(
              fmt::format("{}: @{} has no attention(...) to run",
                          describeAction(problem, a),
                          problem.stages[h.stage].name),
              site);
        // Attention runs on whichever rank the schedule chooses.
        if (host != r && !isAttention(h.kind))
          return scheduleError(fmt::format("{} is on rank {}, but @{} is "
                                           "hosted by rank {}",
                                           describeAction(problem, a), r,
                                           problem.stages[h.stage].name, host),
                               site);
        if (h.kind == ActionKind::Forward &&
            recompute.at(h.stage, h.mb) == Recompute::Selective &&
            !problem.stages[h.stage].selective)
          return scheduleError(
              fmt::format("{} recomputes selectively, but @{} declares no "
                          "selective recomputation (memory(selective = S) "
                          "and cost(selective = C))",
                          describeAction(problem, {h.kind, h.stage, h.mb}),
                          problem.stages[h.stage].name),
              site);
        TaskId slot = index(h.stage, h.mb, h.kind);
        if (slot >= 0) {
          const Task &first = graph.task(slot);
          return scheduleError(
              fmt::format("duplicate {}",
                          describeAction(problem, {h.kind, h.stage, h.mb})),
              site,
              {{{first.rank, graph.positionOf(slot)},
                "first occurrence here"}});
        }
      }
      Task task{a.kind, a.stage,         a.microbatch,        r, 0.0, 0.0,
                0.0,    a.backwardStage, a.backwardMicrobatch};
      ActionEffect effect = actionEffect(problem, schedule.recompute, a, r);
      task.cost = effect.cost;
      if (problem.messageOverhead > 0.0)
        task.cost += problem.messageOverhead *
                     crossRankMessages(problem, schedule.placement, a);
      if (problem.receiveOverhead > 0.0)
        task.setup = problem.receiveOverhead *
                     crossRankInputs(problem, schedule.placement, a);
      task.allocAtStart = effect.allocAtStart;
      task.freeAtEnd = effect.freeAtEnd;
      TaskId id = graph.addTask(task);
      for (const Half &h : halves)
        index(h.stage, h.mb, h.kind) = id;
    }
  }

  // Coverage: report the first gap and how many there are in all.
  auto siteOf = [&](TaskId id) -> ScheduleSite {
    return {graph.task(id).rank, graph.positionOf(id)};
  };
  std::string firstMissing;
  size_t missing = 0;
  for (int s = 0; s < numStages; ++s) {
    for (int m = 0; m < numMbs; ++m) {
      TaskId b = index(s, m, ActionKind::Backward);
      TaskId in = index(s, m, ActionKind::BackwardInput);
      TaskId w = index(s, m, ActionKind::BackwardWeight);
      if (b >= 0 && (in >= 0 || w >= 0)) {
        TaskId split = in >= 0 ? in : w;
        return scheduleError(
            fmt::format("{} splits a backward that {} already runs in full",
                        describeAction(problem, graph.task(split).action()),
                        describeAction(problem, graph.task(b).action())),
            siteOf(split), {{siteOf(b), "full backward here"}});
      }
      auto noteMissing = [&](ActionKind kind) {
        if (missing++ == 0)
          firstMissing = describeAction(problem, {kind, s, m});
      };
      if (index(s, m, ActionKind::Forward) < 0)
        noteMissing(ActionKind::Forward);
      if (problem.stages[s].attention) {
        if (index(s, m, ActionKind::AttentionForward) < 0)
          noteMissing(ActionKind::AttentionForward);
        if (index(s, m, ActionKind::AttentionBackward) < 0)
          noteMissing(ActionKind::AttentionBackward);
      }
      if (b < 0) {
        if (in < 0 && w < 0)
          noteMissing(ActionKind::Backward);
        else if (in < 0)
          noteMissing(ActionKind::BackwardInput);
        else if (w < 0)
          noteMissing(ActionKind::BackwardWeight);
      }
    }
  }
  if (missing == 1)
    return scheduleError(fmt::format("missing {}", firstMissing));
  if (missing > 1)
    return scheduleError(fmt::format("missing {} (and {} more actions)",
                                     firstMissing, missing - 1));

  // The stage graph (a chain unless stages name inputs).
  const Problem::Edges edges = problem.edges();
  const std::vector<std::vector<int>> &inputs = edges.inputs,
                                      &consumers = edges.consumers;
  std::vector<double> gradientUnits(numStages);
  for (int s = 0; s < numStages; ++s)
    gradientUnits[s] = problem.gradientUnits(s);
  // Dependencies, in task order; an overlapped task has both halves' edges.
  for (TaskId t = 0, e = static_cast<TaskId>(graph.numTasks()); t < e; ++t) {
    const Task &task = graph.task(t);
    llvm::SmallVector<Dependency, 4> deps;
    // \p message: the stage whose output (or its gradient) the transfer
    // carries, for microbatch \p mb.
    auto dependOn = [&](TaskId producer, int message, int mb) {
      assert(producer >= 0 && "coverage checked above");
      deps.push_back({producer, problem.transferTime(graph.task(producer).rank,
                                                     task.rank, message, mb)});
    };
    auto hasAttention = [&](int s) {
      return s >= 0 && s < numStages && problem.stages[s].attention.has_value();
    };
    // The gradient a stage's backward starts from: I or B of the next stage.
    auto gradientOf = [&](int s, int m) {
      TaskId grad = index(s, m, ActionKind::BackwardInput);
      return grad >= 0 ? grad : index(s, m, ActionKind::Backward);
    };
    auto forwardDeps = [&](int s, int m) {
      for (int i : inputs[s])
        dependOn(index(i, m, ActionKind::Forward), i, m);
      if (hasAttention(s - 1))
        dependOn(index(s - 1, m, ActionKind::AttentionForward), s - 1, m);
    };
    auto inputGradDeps = [&](int s, int m) {
      dependOn(index(s, m, ActionKind::Forward), s, m);
      // The gradient of s's output: from every consumer's backward, each
      // sending its inputs' gradients in one message.
      for (int c : consumers[s]) {
        TaskId producer = gradientOf(c, m);
        assert(producer >= 0 && "coverage checked above");
        deps.push_back({producer, problem.transferTimeOfUnits(
                                      graph.task(producer).rank, task.rank,
                                      gradientUnits[c], m)});
      }
      if (hasAttention(s))
        dependOn(index(s, m, ActionKind::AttentionBackward), s, m);
    };
    int s = task.stage, m = task.microbatch;
    switch (task.kind) {
    case ActionKind::Forward:
      forwardDeps(s, m);
      break;
    case ActionKind::BackwardInput:
    case ActionKind::Backward:
      inputGradDeps(s, m);
      break;
    case ActionKind::BackwardWeight:
      dependOn(index(s, m, ActionKind::BackwardInput), s, m);
      break;
    case ActionKind::ForwardBackward:
      forwardDeps(s, m);
      inputGradDeps(task.backwardStage, task.backwardMicrobatch);
      break;
    case ActionKind::AttentionForward:
      dependOn(index(s, m, ActionKind::Forward), s, m);
      break;
    case ActionKind::AttentionBackward:
      dependOn(index(s, m, ActionKind::AttentionForward), s, m);
      dependOn(gradientOf(s + 1, m), s, m);
      break;
    }
    graph.addDependencies(t, deps);
  }
  return graph;
}
