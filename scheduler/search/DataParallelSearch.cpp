//===- DataParallelSearch.cpp - Schedules chosen with their reductions ----===//

#include "scheduler/search/DataParallelSearch.h"

#include "scheduler/search/AutoScheduler.h"

#include <fmt/format.h>

#include <algorithm>

using namespace stagecraft::pipe::sched;

/// The plan of \p schedule with its simulated \p timeline.
static llvm::Expected<DataParallelPlan>
planOf(const Problem &problem, const Schedule &schedule,
       const Timeline &timeline, const DataParallel &dp,
       const DataParallelOptions &options, std::string name) {
  llvm::Expected<DataParallelTimeline> step =
      simulateDataParallel(problem, schedule, timeline, dp, options);
  if (!step)
    return step.takeError();
  DataParallelPlan plan;
  plan.schedule = std::move(name);
  plan.placement =
      options.placement == ReducePlacement::AfterLastBackward
          ? std::string("torch")
      : options.bucketBytes >= 1e6
          ? fmt::format("bucketed {:g} MB", options.bucketBytes / 1e6)
          : fmt::format("bucketed {:g} bytes", options.bucketBytes);
  plan.plan = schedule;
  plan.timeline = timeline;
  plan.options = options;
  plan.dp = std::move(*step);
  plan.bound =
      dataParallelLowerBound(problem, schedule, lowerBound(problem), dp);
  return plan;
}

llvm::Expected<DataParallelPlan> stagecraft::pipe::sched::evaluateDataParallel(
    const Problem &problem, const Schedule &schedule, const DataParallel &dp,
    const DataParallelOptions &options, std::string name) {
  llvm::Expected<Timeline> timeline = simulate(problem, schedule);
  if (!timeline)
    return timeline.takeError();
  return planOf(problem, schedule, *timeline, dp, options, std::move(name));
}

Schedule stagecraft::pipe::sched::weightsAfterInputs(const Schedule &schedule) {
  Schedule out = schedule;
  for (auto &rank : out.ranks) {
    std::vector<Action> order;
    std::vector<Action> weights;
    for (const Action &a : rank)
      if (a.kind == ActionKind::BackwardWeight)
        weights.push_back(a);
    for (const Action &a : rank) {
      if (a.kind == ActionKind::BackwardWeight)
        continue;
      order.push_back(a);
      if (a.kind != ActionKind::BackwardInput)
        continue;
      for (const Action &w : weights)
        if (w.stage == a.stage && w.microbatch == a.microbatch)
          order.push_back(w);
    }
    rank = std::move(order);
  }
  return out;
}

llvm::Expected<DataParallelPlan> stagecraft::pipe::sched::planDataParallel(
    const Problem &problem, const DataParallel &dp, const KindRequest &request,
    std::vector<DataParallelPlan> *tried, bool buckets) {
  double limit = request.memoryLimit;
  if (limit <= 0.0) {
    llvm::Expected<std::vector<double>> peaks = oneFOneBPeakMemory(problem);
    if (!peaks)
      return peaks.takeError();
    limit = *std::max_element(peaks->begin(), peaks->end());
  }
  // Each candidate with the microbatch order it runs (auto may reorder
  // microbatches of different lengths; empty: as given).
  struct Candidate {
    std::string name;
    Schedule schedule;
    std::vector<int> order;
  };
  std::vector<Candidate> schedules;
  for (ScheduleKind kind : allScheduleKinds()) {
    llvm::Expected<Schedule> s = generateSchedule(problem, {kind});
    if (!s) {
      llvm::consumeError(s.takeError());
      continue;
    }
    schedules.push_back({scheduleKindName(kind).str(), std::move(*s), {}});
  }
  KindRequest autoRequest = request;
  autoRequest.kind = "auto";
  autoRequest.memoryLimit = limit;
  if (llvm::Expected<KindResult> found = scheduleByName(problem, autoRequest))
    schedules.push_back({fmt::format("auto ({})", found->choice),
                         std::move(found->schedule),
                         std::move(found->microbatchOrder)});
  else
    llvm::consumeError(found.takeError());
  const size_t given = schedules.size();
  for (size_t i = 0; i < given; ++i) {
    Schedule moved = weightsAfterInputs(schedules[i].schedule);
    if (!(moved.ranks == schedules[i].schedule.ranks))
      schedules.push_back(
          {schedules[i].name + ", W after I", moved, schedules[i].order});
  }
  std::vector<DataParallelOptions> placements = {
      {ReducePlacement::AfterLastBackward, 0.0}};
  double largest = 0.0;
  for (double b : dp.gradBytes)
    largest = std::max(largest, b);
  if (buckets) {
    placements.push_back({ReducePlacement::Bucketed, kMegatronBucketBytes});
    for (int parts : {2, 4, 8, 16})
      if (largest > 0.0)
        placements.push_back({ReducePlacement::Bucketed, largest / parts});
  }
  std::optional<DataParallelPlan> best;
  std::optional<llvm::Error> firstError;
  for (const auto &[name, schedule, order] : schedules) {
    const Problem ordered =
        order.empty() ? problem : reorderedMicrobatches(problem, order);
    llvm::Expected<Timeline> timeline = simulate(ordered, schedule);
    if (!timeline) {
      if (!firstError)
        firstError = timeline.takeError();
      else
        llvm::consumeError(timeline.takeError());
      continue;
    }
    const double peak = *std::max_element(timeline->peakMemory.begin(),
                                          timeline->peakMemory.end());
    if (peak > limit * (1 + 1e-9))
      continue;
    for (const DataParallelOptions &options : placements) {
      llvm::Expected<DataParallelPlan> plan =
          planOf(ordered, schedule, *timeline, dp, options, name);
      if (plan)
        plan->microbatchOrder = order;
      if (!plan) {
        if (!firstError)
          firstError = plan.takeError();
        else
          llvm::consumeError(plan.takeError());
        continue;
      }
      if (!best || plan->dp.step < best->dp.step - 1e-12)
        best = *plan;
      if (tried)
        tried->push_back(std::move(*plan));
    }
  }
  if (!best) {
    if (firstError)
      return std::move(*firstError);
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("no schedule fits the memory limit {}", limit));
  }
  if (firstError)
    llvm::consumeError(std::move(*firstError));
  return std::move(*best);
}
