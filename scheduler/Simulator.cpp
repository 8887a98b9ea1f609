//===- Simulator.cpp - Event simulation of a schedule ---------------------===//
//
// One walk over the per-rank orders. A rank advances while its next task has
// all dependencies finished; otherwise it parks on the first unfinished one
// and is woken when that task ends. Start times depend only on dependency end
// times and the rank's previous task, so the walk order does not change them.
//
//===----------------------------------------------------------------------===//

#include "scheduler/Simulator.h"

#include <fmt/format.h>

#include <algorithm>

using namespace stagecraft::pipe::sched;

llvm::Expected<Timeline> stagecraft::pipe::sched::simulate(const TaskGraph &graph) {
  const int numRanks = graph.numRanks();
  const size_t numTasks = graph.numTasks();
  std::vector<double> finish(numTasks, 0.0);
  std::vector<char> done(numTasks, 0);
  // Parked ranks form an intrusive list per blocking task.
  std::vector<int> waitHead(numTasks, -1);
  std::vector<int> waitNext(numRanks, -1);
  std::vector<TaskId> waitingOn(numRanks, -1);
  std::vector<size_t> next(numRanks, 0);
  std::vector<double> clock(numRanks, 0.0);

  Timeline timeline;
  timeline.busy.assign(numRanks, 0.0);
  timeline.peakMemory.assign(numRanks, 0.0);
  timeline.staticMemory = graph.staticMemory;
  timeline.staticMemory.resize(numRanks, 0.0);
  timeline.ranks.resize(numRanks);
  std::vector<double> live(numRanks, 0.0);

  std::vector<int> work(numRanks);
  for (int r = 0; r < numRanks; ++r) {
    work[r] = numRanks - 1 - r;
    timeline.ranks[r].reserve(graph.rankOrder(r).size());
  }
  while (!work.empty()) {
    int r = work.back();
    work.pop_back();
    llvm::ArrayRef<TaskId> order = graph.rankOrder(r);
    while (next[r] < order.size()) {
      TaskId t = order[next[r]];
      double start = clock[r];
      TaskId blocker = -1;
      for (const Dependency &dep : graph.dependencies(t)) {
        if (!done[dep.task]) {
          blocker = dep.task;
          break;
        }
        start = std::max(start, finish[dep.task] + dep.latency);
      }
      if (blocker >= 0) {
        waitingOn[r] = blocker;
        waitNext[r] = waitHead[blocker];
        waitHead[blocker] = r;
        break;
      }
      const Task &task = graph.task(t);
      double end = start + task.cost;
      finish[t] = end;
      done[t] = 1;
      clock[r] = end;
      timeline.busy[r] += task.cost;
      // A rank's tasks do not overlap, so their order is also time order.
      live[r] += task.allocAtStart;
      timeline.peakMemory[r] = std::max(timeline.peakMemory[r], live[r]);
      live[r] -= task.freeAtEnd;
      timeline.ranks[r].push_back({task.action(), start, end});
      timeline.makespan = std::max(timeline.makespan, end);
      ++next[r];
      for (int w = waitHead[t]; w != -1;) {
        int following = waitNext[w];
        waitingOn[w] = -1;
        work.push_back(w);
        w = following;
      }
      waitHead[t] = -1;
    }
  }

  std::vector<ScheduleNote> notes;
  std::vector<int> stuck;
  for (int r = 0; r < numRanks; ++r) {
    llvm::ArrayRef<TaskId> order = graph.rankOrder(r);
    if (next[r] == order.size())
      continue;
    stuck.push_back(r);
    const Task &task = graph.task(order[next[r]]);
    const Task &blocker = graph.task(waitingOn[r]);
    auto name = [](const Task &t) { return shortName(t.action()); };
    notes.push_back({{r, static_cast<int>(next[r])},
                     fmt::format("rank {} is stuck at {}, which waits for {} on "
                                 "rank {} (position {} there)",
                                 r, name(task), name(blocker), blocker.rank,
                                 graph.positionOf(waitingOn[r]))});
  }
  if (!stuck.empty()) {
    std::string ranks;
    for (int r : stuck)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return scheduleError(fmt::format("schedule deadlocks: no execution order "
                                     "satisfies the dependencies; stuck ranks: "
                                     "{}",
                                     ranks),
                         {}, std::move(notes));
  }

  double total = 0.0;
  for (double b : timeline.busy)
    total += b;
  timeline.span.assign(numRanks, 0.0);
  for (int r = 0; r < numRanks; ++r)
    if (!timeline.ranks[r].empty())
      timeline.span[r] =
          timeline.ranks[r].back().end - timeline.ranks[r].front().start;
  timeline.bubbleRatio =
      timeline.makespan > 0.0
          ? 1.0 - total / (static_cast<double>(numRanks) * timeline.makespan)
          : 0.0;
  return timeline;
}

double Timeline::maxSpan() const {
  return span.empty() ? 0.0 : *std::max_element(span.begin(), span.end());
}

llvm::Expected<Timeline> stagecraft::pipe::sched::simulate(const Problem &problem,
                                               const Schedule &schedule) {
  llvm::Expected<TaskGraph> graph = buildTaskGraph(problem, schedule);
  if (!graph)
    return graph.takeError();
  return simulate(*graph);
}

llvm::Error stagecraft::pipe::sched::verifySchedule(const Problem &problem,
                                        const Schedule &schedule) {
  llvm::Expected<Timeline> timeline = simulate(problem, schedule);
  return timeline ? llvm::Error::success() : timeline.takeError();
}
