//===- CostFit.cpp - Costs fitted to measured computes --------------------===//
//
// Medians of the measured computes per stage and kind, plus the rank's
// overhead; the link latency from receivers that waited.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/CostFit.h"

#include "scheduler/model/ScheduleError.h"

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

llvm::Expected<CostFit>
stagecraft::pipe::sched::fitCosts(const Problem &problem,
                                  const std::vector<MeasuredCompute> &computes,
                                  const std::vector<double> &overhead) {
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
  // Each rank's computes in the order they ran: a consumer that waited is
  // one whose previous compute ended before its input was ready.
  std::vector<const MeasuredCompute *> order;
  for (const MeasuredCompute &c : computes)
    order.push_back(&c);
  std::stable_sort(order.begin(), order.end(),
                   [](const MeasuredCompute *a, const MeasuredCompute *b) {
                     return std::tie(a->rank, a->start) <
                            std::tie(b->rank, b->start);
                   });
  // (step, kind, stage, microbatch) -> when it ran.
  std::map<std::tuple<int, int, int, int>, Timed> when;
  std::set<int> steps;
  double previousEnd = -std::numeric_limits<double>::infinity();
  double previousOverhead = 0.0;
  int previousRank = -1;
  for (const MeasuredCompute *c : order) {
    if (c->rank != previousRank) {
      previousEnd = -std::numeric_limits<double>::infinity();
      previousOverhead = 0.0;
    }
    previousRank = c->rank;
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
      return durations[s][kind].empty() ? 0.0
                                        : median(durations[s][kind]) +
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
            if (to->previousEnd < from->end && to->start >= from->end)
              gaps.push_back(to->start - from->end);
            else if (to->previousEnd >= from->end)
              readyWaits.push_back(waitBefore(*to));
          }
        }
      }
  fit.latency = median(gaps);
  for (const auto &[key, t] : when)
    if (std::isfinite(t.previousEnd) && !fedFromElsewhere.count(&t))
      localWaits.push_back(waitBefore(t));
  if (!readyWaits.empty() && !localWaits.empty())
    fit.receiveOverhead =
        std::max(0.0, median(readyWaits) - median(localWaits));
  return fit;
}

Problem stagecraft::pipe::sched::withFittedCosts(Problem problem,
                                                 const CostFit &fit) {
  for (int s = 0;
       s < problem.numStages() && s < static_cast<int>(fit.forward.size());
       ++s) {
    Stage &stage = problem.stages[s];
    double in = fit.backwardInput[s], weight = fit.backwardWeight[s];
    if (in <= 0.0 && weight <= 0.0 && fit.backward[s] > 0.0)
      std::tie(in, weight) = splitBackward(fit.backward[s], stage.backwardInput,
                                           stage.backwardWeight);
    else if (fit.backward[s] <= 0.0 && stage.fusedBackward &&
             stage.backwardInput + stage.backwardWeight > 0.0)
      // Measured split only: a fused backward known beforehand keeps its
      // ratio to I + W.
      stage.fusedBackward = *stage.fusedBackward * (in + weight) /
                            (stage.backwardInput + stage.backwardWeight);
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
