//===- Simulator.cpp - Event simulation of a schedule ---------------------===//
//
// One walk over the per-rank orders. A rank advances while its next task has
// all dependencies finished; otherwise it parks on the first unfinished one
// and is woken when that task ends. Start times depend only on dependency end
// times and the rank's previous task, so the walk order does not change them.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/Simulator.h"

#include "llvm/ADT/STLExtras.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

using namespace stagecraft::pipe::sched;

llvm::Expected<Timeline>
stagecraft::pipe::sched::simulate(const TaskGraph &graph) {
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

  // Contended links: one transfer per (producer, receiving rank), holding
  // the link for the longest latency of its edges. `outgoing` lists them
  // per producer (CSR), `arrival` is when each has crossed.
  struct Outgoing {
    TaskId producer;
    int to;
    double time;
  };
  std::vector<Outgoing> outgoing;
  std::vector<uint32_t> outStart;
  std::vector<double> arrival, linkFree;
  if (graph.linkContention) {
    for (TaskId t = 0, e = static_cast<TaskId>(numTasks); t < e; ++t)
      for (const Dependency &dep : graph.dependencies(t))
        if (graph.task(dep.task).rank != graph.task(t).rank)
          outgoing.push_back({dep.task, graph.task(t).rank, dep.latency});
    llvm::sort(outgoing, [](const Outgoing &a, const Outgoing &b) {
      return std::tie(a.producer, a.to) < std::tie(b.producer, b.to);
    });
    size_t kept = 0;
    for (const Outgoing &o : outgoing) {
      if (kept > 0 && outgoing[kept - 1].producer == o.producer &&
          outgoing[kept - 1].to == o.to) {
        outgoing[kept - 1].time = std::max(outgoing[kept - 1].time, o.time);
        continue;
      }
      outgoing[kept++] = o;
    }
    outgoing.resize(kept);
    outStart.assign(numTasks + 1, 0);
    for (const Outgoing &o : outgoing)
      ++outStart[o.producer + 1];
    for (size_t t = 0; t < numTasks; ++t)
      outStart[t + 1] += outStart[t];
    arrival.assign(outgoing.size(), 0.0);
    linkFree.assign(static_cast<size_t>(numRanks) * numRanks, 0.0);
  }
  // When what \p dep carries is available to a task on rank \p r.
  auto readyAt = [&](const Dependency &dep, int r) {
    if (graph.linkContention && graph.task(dep.task).rank != r)
      for (uint32_t i = outStart[dep.task]; i < outStart[dep.task + 1]; ++i)
        if (outgoing[i].to == r)
          return arrival[i];
    return finish[dep.task] + dep.latency;
  };

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
      double start = clock[r] + graph.task(t).setup;
      TaskId blocker = -1;
      for (const Dependency &dep : graph.dependencies(t)) {
        if (!done[dep.task]) {
          blocker = dep.task;
          break;
        }
        start = std::max(start, readyAt(dep, r));
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
      // Its transfers take their links in this rank's order.
      if (graph.linkContention)
        for (uint32_t i = outStart[t]; i < outStart[t + 1]; ++i) {
          double &free =
              linkFree[static_cast<size_t>(r) * numRanks + outgoing[i].to];
          double from = std::max(end, free);
          free = arrival[i] = from + outgoing[i].time;
          timeline.transfers.push_back(
              {r, outgoing[i].to, task.action(), from, arrival[i]});
        }
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
    notes.push_back(
        {{r, static_cast<int>(next[r])},
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

  llvm::stable_sort(timeline.transfers,
                    [](const TimedTransfer &a, const TimedTransfer &b) {
                      return a.start < b.start;
                    });
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

llvm::StringRef stagecraft::pipe::sched::objectiveName(Objective objective) {
  return objective == Objective::Span ? "span" : "makespan";
}

llvm::Expected<Objective>
stagecraft::pipe::sched::parseObjective(llvm::StringRef name) {
  if (name == "makespan")
    return Objective::Makespan;
  if (name == "span")
    return Objective::Span;
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "unknown objective '" + name +
                                     "'; expected makespan or span");
}

double Timeline::maxSpan() const {
  return span.empty() ? 0.0 : *std::max_element(span.begin(), span.end());
}

llvm::Expected<Timeline>
stagecraft::pipe::sched::simulate(const Problem &problem,
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
