//===- Calibrate.cpp - Costs fitted to a measured run ---------------------===//
//
// A run's measured computes, per step, handed to the scheduler's cost fit
// (scheduler/model/CostFit.h) with each rank's per-compute overhead.
//
//===----------------------------------------------------------------------===//

#include "runtime/Calibrate.h"

#include "llvm/ADT/STLExtras.h"

#include <fmt/format.h>

using namespace stagecraft::runtime;
namespace sched = stagecraft::pipe::sched;

llvm::Expected<Calibration>
stagecraft::runtime::calibrate(const sched::Plan &plan, const RunReport &report,
                               bool stepsOverlap) {
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
  std::vector<sched::MeasuredCompute> measured;
  std::vector<double> overhead(p, 0.0);
  int lastStep = 0;
  for (const RankResult &rr : report.ranks) {
    if (rr.rank < 0 || rr.rank >= p)
      continue;
    int step = 0, previous = -1;
    for (const MeasuredAction &a : rr.actions) {
      // The index restarts with each step.
      if (a.index <= previous)
        ++step;
      previous = a.index;
      if (a.index < 0 || a.index >= static_cast<int>(computes[rr.rank].size()))
        continue;
      measured.push_back({rr.rank, step, computes[rr.rank][a.index]->action,
                          1e3 * a.start, 1e3 * a.end});
      lastStep = std::max(lastStep, step);
    }
    if (!rr.actions.empty())
      overhead[rr.rank] =
          1e3 * rr.overhead / static_cast<double>(rr.actions.size());
  }
  // The first step warms up (allocation, caches) when there are others.
  if (lastStep >= 1)
    llvm::erase_if(measured,
                   [](const sched::MeasuredCompute &c) { return c.step == 0; });
  // The shape of the plan's pipeline: its stages, names and inputs.
  sched::Problem shape;
  shape.ranks = p;
  shape.microbatches = plan.microbatches;
  shape.stages.resize(n);
  for (int s = 0; s < n; ++s) {
    shape.stages[s].name = plan.stageNames[s];
    if (s < static_cast<int>(plan.stageInputs.size()))
      shape.stages[s].inputs = plan.stageInputs[s];
  }
  // Each step's time, barrier to barrier (what the run reports as its
  // steps), for the stretch that makes the simulator reproduce them.
  // Overlapping steps have no such time, and a step's computes wait on its
  // neighbours' there, which a replay of the step alone does not: the
  // parts stand unstretched.
  sched::FitOptions options;
  options.reproduce = !stepsOverlap;
  for (size_t k = 1; k < report.stepEnds.size(); ++k)
    options.stepTimes[static_cast<int>(k)] =
        1e3 * (report.stepEnds[k] - report.stepEnds[k - 1]);
  llvm::Expected<Calibration> fit =
      sched::fitCosts(shape, measured, overhead, options);
  if (!fit)
    return fail(llvm::toString(fit.takeError()) +
                "; run with --train and more steps");
  return fit;
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
  if (c.replayed > 0)
    out += fmt::format("  every cost below stretched by {:.4g} so that the {} "
                       "replayed step(s) take their measured time (without "
                       "it they simulate to {:.4g} of it)\n",
                       c.stretch, c.replayed, c.unstretchedRatio);
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
