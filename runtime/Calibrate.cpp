//===- Calibrate.cpp - Costs fitted to a measured run ---------------------===//
//
// Medians of the measured computes per stage and kind, the link latency
// from receivers that waited, and each rank's per-compute overhead.
//
//===----------------------------------------------------------------------===//

#include "runtime/Calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <tuple>

using namespace stagecraft::runtime;
namespace sched = stagecraft::pipe::sched;

static double median(std::vector<double> v) {
  if (v.empty())
    return 0.0;
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

llvm::Expected<Calibration>
stagecraft::runtime::calibrate(const sched::Plan &plan,
                               const RunReport &report) {
  const int n = static_cast<int>(plan.stageNames.size());
  const int p = plan.numRanks();
  auto fail = [](const std::string &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "--calibrate: " + what);
  };
  // Each rank's computes in plan order: a measured action's index.
  std::vector<std::vector<const sched::PlanOp *>> computes(p);
  for (int r = 0; r < p; ++r)
    for (const sched::PlanOp &op : plan.ranks[r].ops)
      if (op.kind == sched::PlanOp::Kind::Compute) {
        using AK = sched::ActionKind;
        if (op.action.kind != AK::Forward &&
            op.action.kind != AK::BackwardInput &&
            op.action.kind != AK::BackwardWeight &&
            op.action.kind != AK::Backward)
          return fail(fmt::format(
              "rank {} runs {}, whose parts are not measured apart; "
              "calibrate from a run of a kind without overlapped F&B or "
              "attention tasks",
              r, describePlanAction(plan, op.action)));
        computes[r].push_back(&op);
      }
  struct Timed {
    int rank;
    double start, end, previousEnd;
  };
  // (step, kind, stage, microbatch) -> when it ran.
  std::map<std::tuple<int, int, int, int>, Timed> when;
  Calibration c;
  c.overhead.assign(p, 0.0);
  int lastStep = 0;
  for (const RankResult &rr : report.ranks) {
    if (rr.rank < 0 || rr.rank >= p)
      continue;
    int step = 0, previous = -1;
    double previousEnd = -std::numeric_limits<double>::infinity();
    for (const MeasuredAction &a : rr.actions) {
      // The index restarts with each step.
      if (a.index <= previous)
        ++step;
      previous = a.index;
      if (a.index < 0 || a.index >= static_cast<int>(computes[rr.rank].size()))
        continue;
      const sched::Action &action = computes[rr.rank][a.index]->action;
      when[{step, static_cast<int>(action.kind), action.stage,
            action.microbatch}] = {rr.rank, a.start, a.end, previousEnd};
      previousEnd = a.end;
      lastStep = std::max(lastStep, step);
    }
    if (!rr.actions.empty())
      c.overhead[rr.rank] =
          1e3 * rr.overhead / static_cast<double>(rr.actions.size());
  }
  // The first step warms up (allocation, caches) when there are others.
  const int first = lastStep >= 1 ? 1 : 0;
  c.steps = lastStep + 1 - first;
  std::vector<std::array<std::vector<double>, 4>> durations(n);
  for (const auto &[key, t] : when) {
    auto [step, kind, stage, mb] = key;
    if (step < first || stage < 0 || stage >= n || kind > 3)
      continue;
    durations[stage][kind].push_back(1e3 * (t.end - t.start));
  }
  c.forward.assign(n, 0.0);
  c.backwardInput.assign(n, 0.0);
  c.backwardWeight.assign(n, 0.0);
  c.backward.assign(n, 0.0);
  c.samples.assign(n, 0);
  for (int s = 0; s < n; ++s) {
    const int r = plan.placement[s];
    const double extra = c.overhead[r];
    int count = 0;
    for (const std::vector<double> &d : durations[s])
      count += static_cast<int>(d.size());
    if (durations[s][0].empty() ||
        (durations[s][3].empty() &&
         (durations[s][1].empty() || durations[s][2].empty())))
      return fail(fmt::format("stage @{} has no measured forward and "
                              "backward; run with --train and more steps",
                              plan.stageNames[s]));
    c.samples[s] = count;
    c.forward[s] = median(durations[s][0]) + extra;
    if (!durations[s][1].empty())
      c.backwardInput[s] = median(durations[s][1]) + extra;
    if (!durations[s][2].empty())
      c.backwardWeight[s] = median(durations[s][2]) + extra;
    if (!durations[s][3].empty())
      c.backward[s] = median(durations[s][3]) + extra;
  }
  // Link latency: a consumer on another rank that had nothing else to run
  // (its previous compute ended before the producer's) starts one transfer
  // after the producer ends.
  const sched::Problem::Edges edges = [&] {
    sched::Problem shape;
    shape.ranks = p;
    shape.microbatches = plan.microbatches;
    shape.stages.resize(n);
    for (int s = 0; s < n && s < static_cast<int>(plan.stageInputs.size()); ++s)
      shape.stages[s].inputs = plan.stageInputs[s];
    return shape.edges();
  }();
  std::vector<double> gaps;
  using AK = sched::ActionKind;
  auto find = [&](int step, AK kind, int stage, int mb) -> const Timed * {
    auto it = when.find({step, static_cast<int>(kind), stage, mb});
    return it == when.end() ? nullptr : &it->second;
  };
  auto backwardOf = [&](int step, int stage, int mb) {
    if (const Timed *t = find(step, AK::BackwardInput, stage, mb))
      return t;
    return find(step, AK::Backward, stage, mb);
  };
  for (int step = first; step <= lastStep; ++step)
    for (int s = 0; s < n; ++s)
      for (int consumer : edges.consumers[s]) {
        if (plan.placement[s] == plan.placement[consumer])
          continue;
        for (int mb = 0; mb < plan.microbatches; ++mb) {
          // Forward: F(s) feeds F(consumer); backward: the consumer's I or
          // B feeds s's.
          const Timed *pairs[2][2] = {
              {find(step, AK::Forward, s, mb),
               find(step, AK::Forward, consumer, mb)},
              {backwardOf(step, consumer, mb), backwardOf(step, s, mb)}};
          for (auto &[from, to] : pairs)
            if (from && to && to->previousEnd < from->end &&
                to->start >= from->end)
              gaps.push_back(1e3 * (to->start - from->end));
        }
      }
  c.latency = median(gaps);
  return c;
}

std::string stagecraft::runtime::describeCalibration(const sched::Plan &plan,
                                                     const Calibration &c) {
  std::string out = fmt::format(
      "calibrated from {} measured step(s): link latency {:.4g} ms; per "
      "rank overhead per compute (ms):",
      c.steps, c.latency);
  for (double o : c.overhead)
    out += fmt::format(" {:.4g}", o);
  out += "\n";
  for (size_t s = 0; s < c.forward.size(); ++s) {
    out += fmt::format("  stage @{}: F {:.4g} ms", plan.stageNames[s],
                       c.forward[s]);
    if (c.backward[s] > 0.0)
      out += fmt::format(", B {:.4g} ms", c.backward[s]);
    if (c.backwardInput[s] > 0.0)
      out += fmt::format(", I {:.4g} ms, W {:.4g} ms", c.backwardInput[s],
                         c.backwardWeight[s]);
    out += fmt::format(" ({} actions)\n", c.samples[s]);
  }
  return out;
}
