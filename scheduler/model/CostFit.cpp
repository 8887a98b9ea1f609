//===- CostFit.cpp - Costs fitted to measured computes --------------------===//
//
// Medians of the measured computes per stage and kind, plus the rank's
// overhead; the link latency from receivers that waited; the stretch that
// makes the replayed steps take their measured time.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/CostFit.h"

#include "scheduler/model/ScheduleError.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

using namespace stagecraft::pipe::sched;

static double mean(const std::vector<double> &v) {
  double sum = 0.0;
  for (double x : v)
    sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

static double median(std::vector<double> v) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

std::pair<double, double>
stagecraft::pipe::sched::splitBackward(double backward, double backwardInput,
                                       double backwardWeight) {
  const double share = backwardInput + backwardWeight > 0.0
                           ? backwardInput / (backwardInput + backwardWeight)
                           : 0.5;
  return {backward * share, backward - backward * share};
}

/// Each measured step as the schedule its ranks ran (placement from where
/// each stage ran, each rank's computes in the order they started) beside
/// the time it took; steps whose computes do not make a whole schedule of
/// \p problem (a stage on two ranks, an action missing) are left out.
static std::vector<std::pair<Schedule, double>>
measuredSteps(const Problem &problem,
              const std::vector<const MeasuredCompute *> &order,
              const std::map<int, double> &stepTimes) {
  struct Step {
    std::map<int, std::vector<Action>> ranks;
    std::map<int, int> placement;
    double first = std::numeric_limits<double>::infinity();
    double last = -std::numeric_limits<double>::infinity();
    bool whole = true;
  };
  std::map<int, Step> steps;
  // The first half of an overlapped F&B, waiting for its second.
  const MeasuredCompute *pending = nullptr;
  for (const MeasuredCompute *c : order) {
    Step &step = steps[c->step];
    if (pending && (pending->rank != c->rank || pending->step != c->step)) {
      steps[pending->step].whole = false; // Its second half is missing.
      pending = nullptr;
    }
    if (c->overlapsNext && !pending) {
      pending = c;
    } else if (pending) {
      const Action &a = pending->action, &b = c->action;
      const bool forwardFirst = a.kind == ActionKind::Forward;
      const Action &f = forwardFirst ? a : b, &back = forwardFirst ? b : a;
      step.whole &= !c->overlapsNext && f.kind == ActionKind::Forward &&
                    back.kind == ActionKind::Backward;
      step.ranks[c->rank].push_back(Action::overlapped(
          f.stage, f.microbatch, back.stage, back.microbatch));
      pending = nullptr;
    } else {
      step.ranks[c->rank].push_back(c->action);
    }
    auto [it, inserted] = step.placement.emplace(c->action.stage, c->rank);
    step.whole &= inserted || it->second == c->rank;
    step.first = std::min(step.first, c->start);
    step.last = std::max(step.last, c->end);
  }
  if (pending)
    steps[pending->step].whole = false;
  std::vector<std::pair<Schedule, double>> out;
  const int n = problem.numStages();
  for (auto &[number, step] : steps) {
    if (!step.whole || static_cast<int>(step.placement.size()) != n ||
        step.placement.rbegin()->first != n - 1 ||
        step.ranks.rbegin()->first >= problem.ranks)
      continue;
    Schedule schedule;
    schedule.ranks.resize(problem.ranks);
    for (auto &[rank, actions] : step.ranks)
      schedule.ranks[rank] = std::move(actions);
    for (auto [stage, rank] : step.placement)
      schedule.placement.push_back(rank);
    if (llvm::Error e = verifySchedule(problem, schedule)) {
      llvm::consumeError(std::move(e));
      continue;
    }
    auto time = stepTimes.find(number);
    double took =
        time != stepTimes.end() ? time->second : step.last - step.first;
    if (took > 0.0)
      out.emplace_back(std::move(schedule), took);
  }
  return out;
}

/// Sets \p fit's stretch (1 on entry) so that the median of the measured
/// steps' simulated makespan over their time is 1 (a makespan grows with
/// the stretch, so bisection finds it).
static void fitStretch(const Problem &problem,
                       const std::vector<const MeasuredCompute *> &order,
                       const std::map<int, double> &stepTimes, CostFit &fit) {
  std::vector<std::pair<Schedule, double>> steps =
      measuredSteps(problem, order, stepTimes);
  auto ratio = [&](double stretch) {
    CostFit trial = fit;
    trial.stretch = stretch;
    Problem fitted = withFittedCosts(problem, trial);
    std::vector<double> ratios;
    for (const auto &[schedule, took] : steps)
      if (llvm::Expected<Timeline> t = simulate(fitted, schedule))
        ratios.push_back(t->makespan / took);
      else
        llvm::consumeError(t.takeError());
    return ratios.empty() ? std::nan("") : median(ratios);
  };
  const double at1 = steps.empty() ? std::nan("") : ratio(1.0);
  if (!std::isfinite(at1))
    return;
  fit.replayed = static_cast<int>(steps.size());
  fit.unstretchedRatio = at1;
  if (std::abs(at1 - 1.0) < 1e-9)
    return;
  // The makespan is at most linear in the stretch plus what does not
  // stretch (latency), so [1 / (2 at1), 2 / at1] brackets the answer
  // unless latency alone exceeds the step.
  double lo = at1 > 1.0 ? 0.5 / at1 : 1.0, hi = at1 > 1.0 ? 1.0 : 2.0 / at1;
  if (ratio(lo) > 1.0 || ratio(hi) < 1.0) {
    // What does not stretch with the computes (the latency, the message
    // and receive overheads) alone misses the steps, as when stalls on a
    // loaded machine were taken for latency: it stretches too. Every time
    // of a replay then scales with the one factor, and so does its
    // makespan, so 1 / at1 meets the steps (with links, a transfer's
    // output / bandwidth keeps its time, so it meets them nearly).
    fit.stretch = 1.0 / at1;
    fit.latency *= fit.stretch;
    fit.messageOverhead *= fit.stretch;
    fit.receiveOverhead *= fit.stretch;
    return;
  }
  for (int i = 0; i < 60 && hi - lo > 1e-9 * hi; ++i) {
    double mid = 0.5 * (lo + hi);
    (ratio(mid) < 1.0 ? lo : hi) = mid;
  }
  fit.stretch = 0.5 * (lo + hi);
}

llvm::Expected<CostFit> stagecraft::pipe::sched::fitCosts(
    const Problem &problem, const std::vector<MeasuredCompute> &computes,
    const std::vector<double> &overhead, const FitOptions &options) {
  const CostStatistic statistic = options.statistic;
  const int n = problem.numStages();
  auto stageName = [&](int s) {
    return problem.stages[s].name.empty() ? fmt::format("stage {}", s)
                                          : "stage @" + problem.stages[s].name;
  };
  struct Timed {
    int rank;
    double start, end, previousEnd, overhead;
    /// The overhead of the rank's previous compute (0 for its first).
    double previousOverhead;
  };
  // Each rank's computes in the order they ran, step by step: a consumer
  // that waited is one whose previous compute ended before its input was
  // ready.
  std::vector<const MeasuredCompute *> order;
  for (const MeasuredCompute &c : computes)
    order.push_back(&c);
  std::stable_sort(order.begin(), order.end(),
                   [](const MeasuredCompute *a, const MeasuredCompute *b) {
                     return std::tie(a->rank, a->step, a->start) <
                            std::tie(b->rank, b->step, b->start);
                   });
  // (step, kind, stage, microbatch) -> when it ran.
  std::map<std::tuple<int, int, int, int>, Timed> when;
  std::set<int> steps;
  double previousEnd = -std::numeric_limits<double>::infinity();
  double previousOverhead = 0.0;
  int previousRank = -1, previousStep = 0;
  for (const MeasuredCompute *c : order) {
    // Steps may each have their own time axis (torch's traces).
    if (c->rank != previousRank || c->step != previousStep) {
      previousEnd = -std::numeric_limits<double>::infinity();
      previousOverhead = 0.0;
    }
    previousRank = c->rank;
    previousStep = c->step;
    when[{c->step, static_cast<int>(c->action.kind), c->action.stage,
          c->action.microbatch}] = {c->rank,     c->start,    c->end,
                                    previousEnd, c->overhead, previousOverhead};
    previousEnd = c->end;
    previousOverhead = c->overhead;
    steps.insert(c->step);
  }
  CostFit fit;
  fit.overhead = overhead;
  fit.steps = static_cast<int>(steps.size());
  // Messages each compute sent to another rank: to the consumers of a
  // forward, and to the inputs of a backward (whose I or B takes them),
  // where those ran on another rank.
  const Problem::Edges edges = problem.edges();
  auto ranOn = [&](int step, ActionKind kind, int stage, int mb) {
    auto it = when.find({step, static_cast<int>(kind), stage, mb});
    return it == when.end() ? -1 : it->second.rank;
  };
  auto messages = [&](int step, int kind, int stage, int mb, int rank) {
    int count = 0;
    if (kind == static_cast<int>(ActionKind::Forward)) {
      for (int c : edges.consumers[stage]) {
        int r = ranOn(step, ActionKind::Forward, c, mb);
        count += r >= 0 && r != rank;
      }
    } else if (kind == static_cast<int>(ActionKind::BackwardInput) ||
               kind == static_cast<int>(ActionKind::Backward)) {
      for (int i : edges.inputs[stage]) {
        int r = ranOn(step, ActionKind::BackwardInput, i, mb);
        if (r < 0)
          r = ranOn(step, ActionKind::Backward, i, mb);
        count += r >= 0 && r != rank;
      }
    }
    return count;
  };
  // own = base + messageOverhead x messages, from the two groups.
  {
    double sumWith = 0.0, sumWithout = 0.0, sentWith = 0.0;
    int with = 0, without = 0;
    for (const auto &[key, t] : when) {
      auto [step, kind, stage, mb] = key;
      if (stage < 0 || stage >= n || kind > 3 ||
          kind == static_cast<int>(ActionKind::BackwardWeight))
        continue;
      int sent = messages(step, kind, stage, mb, t.rank);
      if (sent > 0) {
        sumWith += t.overhead;
        sentWith += sent;
        ++with;
      } else {
        sumWithout += t.overhead;
        ++without;
      }
    }
    if (with > 0 && without > 0)
      fit.messageOverhead = std::max(
          0.0, (sumWith / with - sumWithout / without) / (sentWith / with));
  }
  std::vector<std::array<std::vector<double>, 4>> durations(n), own(n);
  for (const auto &[key, t] : when) {
    auto [step, kind, stage, mb] = key;
    if (stage < 0 || stage >= n || kind > 3)
      continue;
    durations[stage][kind].push_back(t.end - t.start);
    // The rank's overhead per compute goes with each compute it ran.
    own[stage][kind].push_back(
        t.overhead -
        fit.messageOverhead * messages(step, kind, stage, mb, t.rank) +
        (t.rank >= 0 && t.rank < static_cast<int>(overhead.size())
             ? overhead[t.rank]
             : 0.0));
  }
  fit.forward.assign(n, 0.0);
  fit.backwardInput.assign(n, 0.0);
  fit.backwardWeight.assign(n, 0.0);
  fit.backward.assign(n, 0.0);
  fit.samples.assign(n, 0);
  for (int s = 0; s < n; ++s) {
    for (const std::vector<double> &d : durations[s])
      fit.samples[s] += static_cast<int>(d.size());
    if (durations[s][0].empty() ||
        (durations[s][3].empty() &&
         (durations[s][1].empty() || durations[s][2].empty())))
      return llvm::make_error<ScheduleError>(
          stageName(s) + " has no measured forward and backward");
    // The runtime's own work is never negative: where the per-message
    // share fitted across all computes exceeds what a kind of compute
    // brought with it, the compute keeps its measured duration.
    auto cost = [&](int kind) {
      if (durations[s][kind].empty())
        return 0.0;
      return (statistic == CostStatistic::Mean ? mean(durations[s][kind])
                                               : median(durations[s][kind])) +
             std::max(0.0, mean(own[s][kind]));
    };
    fit.forward[s] = cost(0);
    fit.backwardInput[s] = cost(1);
    fit.backwardWeight[s] = cost(2);
    fit.backward[s] = cost(3);
  }
  // Link latency: a consumer on another rank that had nothing else to run
  // (its previous compute ended before the producer's) starts one transfer
  // after the producer ends.
  using AK = ActionKind;
  auto find = [&](int step, AK kind, int stage, int mb) -> const Timed * {
    auto it = when.find({step, static_cast<int>(kind), stage, mb});
    return it == when.end() ? nullptr : &it->second;
  };
  auto backwardOf = [&](int step, int stage, int mb) {
    if (const Timed *t = find(step, AK::BackwardInput, stage, mb))
      return t;
    return find(step, AK::Backward, stage, mb);
  };
  std::vector<double> gaps;
  // Receive overhead: a consumer whose input from another rank was there
  // before its rank was free still waits, from the end of the work its
  // previous compute brought with it to its start, longer than a compute
  // fed on its own rank waits (torch's runtime posts each receive just
  // before the compute that needs it).
  std::vector<double> readyWaits, localWaits;
  std::set<const Timed *> fedFromElsewhere;
  std::vector<std::pair<const Timed *, const Timed *>> crossRank;
  auto waitBefore = [](const Timed &t) {
    return t.start - t.previousEnd - t.previousOverhead;
  };
  for (int step : steps)
    for (int s = 0; s < n; ++s)
      for (int consumer : edges.consumers[s]) {
        for (int mb = 0; mb < problem.microbatches; ++mb) {
          // Forward: F(s) feeds F(consumer); backward: the consumer's I or
          // B feeds s's.
          const Timed *pairs[2][2] = {
              {find(step, AK::Forward, s, mb),
               find(step, AK::Forward, consumer, mb)},
              {backwardOf(step, consumer, mb), backwardOf(step, s, mb)}};
          for (auto &[from, to] : pairs) {
            if (!from || !to || from->rank == to->rank)
              continue;
            fedFromElsewhere.insert(to);
            crossRank.emplace_back(from, to);
            if (to->previousEnd < from->end && to->start >= from->end)
              gaps.push_back(to->start - from->end);
          }
        }
      }
  fit.latency = statistic == CostStatistic::Mean ? mean(gaps) : median(gaps);
  // A consumer whose input had arrived (a latency after its producer
  // ended) when its rank was free.
  for (auto [from, to] : crossRank)
    if (to->previousEnd + to->previousOverhead >= from->end + fit.latency)
      readyWaits.push_back(waitBefore(*to));
  for (const auto &[key, t] : when)
    if (std::isfinite(t.previousEnd) && !fedFromElsewhere.count(&t))
      localWaits.push_back(waitBefore(t));
  if (!readyWaits.empty() && !localWaits.empty())
    fit.receiveOverhead =
        std::max(0.0, median(readyWaits) - median(localWaits));
  if (options.reproduce)
    fitStretch(problem, order, options.stepTimes, fit);
  return fit;
}

CostFit stagecraft::pipe::sched::stretched(CostFit fit) {
  for (std::vector<double> *costs :
       {&fit.forward, &fit.backwardInput, &fit.backwardWeight, &fit.backward})
    for (double &cost : *costs)
      cost *= fit.stretch;
  fit.stretch = 1.0;
  return fit;
}

Problem stagecraft::pipe::sched::withFittedCosts(Problem problem,
                                                 const CostFit &measured) {
  const CostFit fit = stretched(measured);
  for (int s = 0;
       s < problem.numStages() && s < static_cast<int>(fit.forward.size());
       ++s) {
    Stage &stage = problem.stages[s];
    double in = fit.backwardInput[s], weight = fit.backwardWeight[s];
    if (in <= 0.0 && weight <= 0.0 && fit.backward[s] > 0.0)
      std::tie(in, weight) = splitBackward(fit.backward[s], stage.backwardInput,
                                           stage.backwardWeight);
    else if (fit.backward[s] <= 0.0 && stage.fusedBackward)
      // Measured split only: a fused backward known beforehand keeps its
      // ratio to I + W (where it has none to keep, it takes the stretch).
      stage.fusedBackward =
          stage.backwardInput + stage.backwardWeight > 0.0
              ? *stage.fusedBackward * (in + weight) /
                    (stage.backwardInput + stage.backwardWeight)
              : *stage.fusedBackward * measured.stretch;
    stage.forward = fit.forward[s];
    stage.backwardInput = in;
    stage.backwardWeight = weight;
    // A measured fused B is what a fused backward costs, split or not.
    if (fit.backward[s] > 0.0)
      stage.fusedBackward = fit.backward[s];
  }
  problem.latency = fit.latency;
  if (problem.links && problem.numStages() > 0) {
    // The fitted delay also holds a message's size over the link's
    // bandwidth: the links keep their (measured) bandwidth, and their
    // latency is what is left of the delay for the stages' mean output.
    double units = 0.0;
    for (const Stage &s : problem.stages)
      units += s.output;
    units /= problem.numStages();
    for (Problem::Link *link : {&problem.links->intra, &problem.links->inter})
      link->latency = std::max(0.0, fit.latency - units / link->bandwidth);
  }
  problem.messageOverhead = fit.messageOverhead;
  problem.receiveOverhead = fit.receiveOverhead;
  return problem;
}
