//===- Recompute.cpp - Recomputation chosen with the schedule -------------===//
//
// See Recompute.h.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/Recompute.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

using namespace stagecraft::pipe::sched;

static constexpr double kEps = 1e-9;

llvm::StringRef
stagecraft::pipe::sched::recomputePolicyName(RecomputePolicy policy) {
  switch (policy) {
  case RecomputePolicy::None:
    return "none";
  case RecomputePolicy::Full:
    return "full";
  case RecomputePolicy::Selective:
    return "selective";
  case RecomputePolicy::Auto:
    return "auto";
  }
  llvm_unreachable("unknown recompute policy");
}

std::optional<RecomputePolicy>
stagecraft::pipe::sched::parseRecomputePolicy(llvm::StringRef name) {
  for (RecomputePolicy p : {RecomputePolicy::None, RecomputePolicy::Full,
                            RecomputePolicy::Selective, RecomputePolicy::Auto})
    if (name == recomputePolicyName(p))
      return p;
  return std::nullopt;
}

RecomputePolicy stagecraft::pipe::sched::defaultRecomputePolicy(
    const Problem &problem, std::optional<RecomputePolicy> kindDefault) {
  if (problem.hasCapacity())
    return RecomputePolicy::Auto;
  return kindDefault.value_or(RecomputePolicy::None);
}

/// Live memory of rank \p r after each action's allocation (its high point
/// during that action), starting from the rank's static memory.
static std::vector<double> rankProfile(const Problem &problem,
                                       const Schedule &schedule, int r,
                                       double base) {
  const std::vector<Action> &order = schedule.ranks[r];
  std::vector<double> profile(order.size());
  double live = base;
  for (size_t i = 0; i < order.size(); ++i) {
    ActionEffect e = actionEffect(problem, schedule.recompute, order[i], r);
    live += e.allocAtStart;
    profile[i] = live;
    live -= e.freeAtEnd;
  }
  return profile;
}

std::vector<double>
stagecraft::pipe::sched::peakMemoryByOrder(const Problem &problem,
                                           const Schedule &schedule) {
  std::vector<double> base =
      staticMemory(problem, schedule.placement, problem.ranks);
  std::vector<double> peak = base;
  for (int r = 0; r < problem.ranks; ++r)
    for (double v : rankProfile(problem, schedule, r, base[r]))
      peak[r] = std::max(peak[r], v);
  return peak;
}

namespace {
/// The forward and the (first) backward of one (stage, microbatch) on a
/// rank, and how long it stays in flight in the plain schedule.
struct InFlight {
  int stage, microbatch;
  int forwardAt = -1, backwardAt = -1;
  double duration = 0.0;
};

/// The levels a stage offers, each with what its forward keeps.
std::vector<Recompute> levelsOf(const Stage &stage) {
  std::vector<Recompute> levels = {Recompute::None, Recompute::Full};
  if (stage.selective)
    levels.push_back(Recompute::Selective);
  return levels;
}

/// The level that saves memory most cheaply from \p current, if any saves.
std::optional<Recompute> nextLevel(const Stage &stage, Recompute current) {
  double kept = keptActivation(stage, current);
  double cost = recomputeCost(stage, current);
  std::optional<Recompute> best;
  double bestRatio = 0.0;
  for (Recompute level : levelsOf(stage)) {
    double saving = kept - keptActivation(stage, level);
    if (saving <= kEps)
      continue;
    double ratio = (recomputeCost(stage, level) - cost) / saving;
    if (!best || ratio < bestRatio) {
      best = level;
      bestRatio = ratio;
    }
  }
  return best;
}

/// The level whose forward keeps the least (the cheapest among equals).
Recompute leanestLevel(const Stage &stage) {
  Recompute best = Recompute::None;
  for (Recompute level : levelsOf(stage)) {
    double k = keptActivation(stage, level), kb = keptActivation(stage, best);
    if (k < kb - kEps || (k <= kb + kEps && recomputeCost(stage, level) <
                                                recomputeCost(stage, best)))
      best = level;
  }
  return best;
}

/// Every (stage, microbatch) of \p schedule's forwards on rank \p r with its
/// positions and in-flight time in \p plain (the timeline without
/// recomputation).
std::vector<InFlight> inFlightOn(const Schedule &schedule,
                                 const Timeline &plain, int r) {
  std::map<std::pair<int, int>, InFlight> found;
  const std::vector<Action> &order = schedule.ranks[r];
  for (int i = 0, e = static_cast<int>(order.size()); i < e; ++i) {
    const Action &a = order[i];
    const TimedAction &t = plain.ranks[r][i];
    auto entry = [&](int s, int m) -> InFlight & {
      auto [it, inserted] = found.try_emplace({s, m});
      if (inserted) {
        it->second.stage = s;
        it->second.microbatch = m;
      }
      return it->second;
    };
    switch (a.kind) {
    case ActionKind::Forward:
      entry(a.stage, a.microbatch).forwardAt = i;
      entry(a.stage, a.microbatch).duration -= t.end;
      break;
    case ActionKind::ForwardBackward:
      entry(a.stage, a.microbatch).forwardAt = i;
      entry(a.stage, a.microbatch).duration -= t.end;
      entry(a.backwardStage, a.backwardMicrobatch).backwardAt = i;
      entry(a.backwardStage, a.backwardMicrobatch).duration += t.start;
      break;
    case ActionKind::BackwardInput:
    case ActionKind::Backward:
      entry(a.stage, a.microbatch).backwardAt = i;
      entry(a.stage, a.microbatch).duration += t.start;
      break;
    default:
      break;
    }
  }
  std::vector<InFlight> out;
  for (auto &[key, f] : found)
    if (f.forwardAt >= 0 && f.backwardAt > f.forwardAt)
      out.push_back(f);
  return out;
}

std::string describePeak(const Problem &problem, int r, double peak,
                         double base) {
  return fmt::format("rank {} peaks at {:.6g} (params {:.6g} + activations "
                     "{:.6g}), above its capacity {:.6g}",
                     r, peak, base, peak - base, problem.capacityOf(r));
}

llvm::Error fail(std::string message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The first rank over its capacity in \p peaks, or -1.
int firstOver(const Problem &problem, const std::vector<double> &peaks) {
  for (int r = 0; r < problem.ranks; ++r)
    if (peaks[r] > problem.capacityOf(r) * (1 + kEps) + kEps)
      return r;
  return -1;
}

/// The auto mix: fits each rank on its own. Returns the first rank that
/// cannot fit, or -1.
int fitEachRank(const Problem &problem, Schedule &schedule,
                const Timeline &plain) {
  const int nS = problem.numStages(), nM = problem.microbatches;
  std::vector<double> base =
      staticMemory(problem, schedule.placement, problem.ranks);
  for (int r = 0; r < problem.ranks; ++r) {
    const double capacity = problem.capacityOf(r);
    std::vector<InFlight> flights = inFlightOn(schedule, plain, r);
    // Longest in flight first; earlier forward among equals.
    std::stable_sort(flights.begin(), flights.end(),
                     [](const InFlight &a, const InFlight &b) {
                       if (a.duration != b.duration)
                         return a.duration > b.duration;
                       return a.forwardAt < b.forwardAt;
                     });
    for (;;) {
      std::vector<double> profile = rankProfile(problem, schedule, r, base[r]);
      auto high = std::max_element(profile.begin(), profile.end());
      if (high == profile.end() || *high <= capacity * (1 + kEps) + kEps)
        break;
      int at = static_cast<int>(high - profile.begin());
      double excess = *high - capacity, saved = 0.0;
      for (const InFlight &f : flights) {
        if (f.forwardAt > at || f.backwardAt <= at)
          continue;
        const Stage &stage = problem.stages[f.stage];
        Recompute current = schedule.recompute.at(f.stage, f.microbatch);
        std::optional<Recompute> next = nextLevel(stage, current);
        if (!next)
          continue;
        saved += keptActivation(stage, current) - keptActivation(stage, *next);
        schedule.recompute.set(f.stage, f.microbatch, *next, nS, nM);
        if (saved >= excess - kEps)
          break;
      }
      if (saved <= kEps)
        return r;
    }
  }
  return -1;
}

/// Per rank: the peak with every forward at its leanest level (sets
/// \p schedule's table so).
std::vector<double> leanestPeaks(const Problem &problem, Schedule &schedule) {
  const int nS = problem.numStages(), nM = problem.microbatches;
  for (int s = 0; s < nS; ++s)
    for (int m = 0; m < nM; ++m)
      schedule.recompute.set(s, m, leanestLevel(problem.stages[s]), nS, nM);
  return peakMemoryByOrder(problem, schedule);
}

/// Sets \p table for a uniform policy.
void assignUniform(const Problem &problem, RecomputeTable &table,
                   RecomputePolicy policy) {
  const int nS = problem.numStages(), nM = problem.microbatches;
  table = RecomputeTable();
  if (policy == RecomputePolicy::Full)
    table.assignAll(nS, nM, Recompute::Full);
  if (policy == RecomputePolicy::Selective)
    for (int s = 0; s < nS; ++s)
      if (problem.stages[s].selective)
        for (int m = 0; m < nM; ++m)
          table.set(s, m, Recompute::Selective, nS, nM);
}

std::string countText(const Problem &problem, const RecomputeTable &table) {
  int total = problem.numStages() * problem.microbatches;
  int full = table.count(Recompute::Full);
  int selective = table.count(Recompute::Selective);
  if (full && selective)
    return fmt::format("{} of {} forwards recompute in full, {} selectively",
                       full, total, selective);
  if (selective)
    return fmt::format("{} of {} forwards recompute selectively", selective,
                       total);
  return fmt::format("{} of {} forwards recompute in full", full, total);
}
} // namespace

llvm::Error stagecraft::pipe::sched::checkCapacity(const Problem &problem,
                                                   const Timeline &timeline) {
  std::vector<double> peaks(problem.ranks);
  for (int r = 0; r < problem.ranks; ++r)
    peaks[r] = timeline.peak(r);
  int r = firstOver(problem, peaks);
  if (r < 0)
    return llvm::Error::success();
  return fail(describePeak(problem, r, peaks[r], timeline.staticMemory[r]) +
              fmt::format(" ({:.6g} more than fits)",
                          peaks[r] - problem.capacityOf(r)));
}

llvm::Expected<RecomputeOutcome> stagecraft::pipe::sched::planRecomputation(
    const Problem &problem, Schedule &schedule, RecomputePolicy policy) {
  std::vector<double> base =
      staticMemory(problem, schedule.placement, problem.ranks);
  RecomputeOutcome outcome;
  outcome.chosen = recomputePolicyName(policy).str();

  if (policy != RecomputePolicy::Auto || !problem.hasCapacity()) {
    if (policy == RecomputePolicy::Auto)
      policy = RecomputePolicy::None;
    assignUniform(problem, schedule.recompute, policy);
    std::vector<double> peaks = peakMemoryByOrder(problem, schedule);
    int r = firstOver(problem, peaks);
    if (r < 0) {
      llvm::Expected<Timeline> t = simulate(problem, schedule);
      if (!t)
        return t.takeError();
      outcome.timeline = std::move(*t);
      return outcome;
    }
    std::string message =
        fmt::format("with recompute={}, {}", recomputePolicyName(policy),
                    describePeak(problem, r, peaks[r], base[r]));
    Schedule trial = schedule;
    llvm::Expected<RecomputeOutcome> automatic =
        planRecomputation(problem, trial, RecomputePolicy::Auto);
    if (automatic) {
      message += fmt::format("; recompute=auto fits ({})",
                             countText(problem, trial.recompute));
      return fail(message);
    }
    llvm::consumeError(automatic.takeError());
    std::vector<double> leanest = leanestPeaks(problem, trial);
    int worst = firstOver(problem, leanest);
    if (worst < 0)
      worst = r;
    message += fmt::format(
        "; no recomputation fits: recomputing every forward, rank {} still "
        "needs {:.6g}, {:.6g} more than its capacity",
        worst, leanest[worst], leanest[worst] - problem.capacityOf(worst));
    return fail(message);
  }

  // Auto with a capacity.
  assignUniform(problem, schedule.recompute, RecomputePolicy::None);
  llvm::Expected<Timeline> plain = simulate(problem, schedule);
  if (!plain)
    return plain.takeError();
  if (firstOver(problem, peakMemoryByOrder(problem, schedule)) < 0) {
    outcome.timeline = std::move(*plain);
    outcome.chosen = "none";
    return outcome;
  }
  int stuck = fitEachRank(problem, schedule, *plain);
  if (stuck >= 0) {
    // Even the leanest level for every forward does not fit.
    std::vector<double> peaks = leanestPeaks(problem, schedule);
    int r = firstOver(problem, peaks);
    if (r < 0)
      r = stuck;
    double need = peaks[r];
    return fail(fmt::format(
        "nothing fits: even recomputing every forward, {}; it needs a "
        "capacity of at least {:.6g} ({:.6g} more), fewer microbatches in "
        "flight (another kind) or less memory per stage",
        describePeak(problem, r, need, base[r]), need,
        need - problem.capacityOf(r)));
  }
  llvm::Expected<Timeline> best = simulate(problem, schedule);
  if (!best)
    return best.takeError();
  outcome.timeline = std::move(*best);
  outcome.chosen = "auto";
  // A uniform choice can be faster than the mix (it never is slower in
  // memory terms, but the mix recomputes per rank); keep the fastest.
  for (RecomputePolicy uniform :
       {RecomputePolicy::Selective, RecomputePolicy::Full}) {
    Schedule trial = schedule;
    assignUniform(problem, trial.recompute, uniform);
    if (firstOver(problem, peakMemoryByOrder(problem, trial)) >= 0)
      continue;
    llvm::Expected<Timeline> t = simulate(problem, trial);
    if (!t)
      return t.takeError();
    if (t->makespan < outcome.timeline.makespan - kEps) {
      schedule.recompute = std::move(trial.recompute);
      outcome.timeline = std::move(*t);
      outcome.chosen = recomputePolicyName(uniform).str();
    }
  }
  return outcome;
}
