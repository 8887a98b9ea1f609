//===- AutoScheduler.cpp - Search for the best schedule under memory ------===//
//
// The search evaluates every candidate with the simulator and keeps the
// fastest that fits the memory limit. Candidates, cheapest first:
//   1. every fixed kind that can place the problem;
//   2. on each placement, zero-bubble backbones (1F1B- or interleaved-shaped
//      orders of F and I, W filling the waits) over a family of warm-up
//      depths, and the greedy list policies;
//   3. when a backbone leads, hill climbing on its per-rank warm-up depths,
//      until no step improves or the time limit is reached;
//   4. for m <= 4p on multi-chunk placements, greedy policies with per-rank
//      warm-up depths, and hill climbing (4p steps at most) on the best.
// The list scheduler enforces the memory limit itself, so deeper warm-ups are
// throttled by memory rather than rejected.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/AutoScheduler.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/kinds/ListScheduler.h"
#include "scheduler/kinds/ZeroBubbleHeuristic.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/ExactSearch.h"
#include "scheduler/search/LowerBound.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <random>

using namespace stagecraft::pipe::sched;

namespace {
/// Problems up to this many actions (3 x stages x microbatches) also get
/// the exact search, each placement up to kExactNodes nodes (about 0.1 s).
constexpr int kExactActions = 120;
constexpr long long kExactNodes = 200000;
/// The local search also starts from other placements' best schedules
/// within this fraction of the best.
constexpr double kLocalSearchWindow = 0.1;
/// A local search that keeps finding shorter steps runs on, up to this many
/// times its patience (AutoOptions::maxLocalSteps) in all.
constexpr long long kLocalSearchCap = 5;

/// The block (0..blocks-1) of each of \p work's items when cut into
/// \p blocks contiguous blocks (at most the items) minimizing the largest
/// block's total: a dynamic program over the cuts.
std::vector<int> balancedCut(const std::vector<double> &work, int blocks) {
  const int n = static_cast<int>(work.size()), p = blocks;
  std::vector<double> prefix(n + 1, 0.0);
  for (int s = 0; s < n; ++s)
    prefix[s + 1] = prefix[s] + work[s];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: least max-block cost splitting the first i items in k blocks.
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(p + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0.0;
  for (int k = 1; k <= p; ++k)
    for (int i = k; i <= n - (p - k); ++i)
      for (int j = k - 1; j < i; ++j) {
        double c = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (c < best[k][i]) {
          best[k][i] = c;
          cut[k][i] = j;
        }
      }
  std::vector<int> block(n);
  for (int k = p, i = n; k >= 1; --k) {
    int j = cut[k][i];
    for (int s = j; s < i; ++s)
      block[s] = k - 1;
    i = j;
  }
  return block;
}

/// Contiguous blocks minimizing the most work on one rank (n > p).
std::vector<int> balancedBlocks(const Problem &problem) {
  std::vector<double> work;
  for (const Stage &st : problem.stages)
    work.push_back(st.forward + st.backward());
  return balancedCut(work, problem.ranks);
}

/// A branching pipeline's placement with its branches beside the trunk:
/// the trunk (the chain of stages that ends at the loss, back to where
/// branches join) in balanced contiguous blocks over all ranks, then each
/// stage before it (the encoders and embeddings that feed it), heaviest
/// first, on the least loaded rank, the later one on ties: a later rank's
/// trunk starts later, so a feeder there runs in its warm-up bubble (as
/// Optimus puts encoders into the LLM's bubbles). With \p vTrunk, the
/// trunk's 2p stages go in a V instead (two per rank, as zb-v places
/// them). Empty for a chain or when the trunk does not fit.
std::vector<int> branchesBeside(const Problem &problem, bool vTrunk) {
  const int n = problem.numStages(), p = problem.ranks;
  if (problem.isChain())
    return {};
  int first = n - 1;
  while (first > 0) {
    std::vector<int> in = problem.inputsOf(first);
    if (in.size() != 1 || in[0] != first - 1 ||
        problem.consumersOf(first - 1).size() != 1)
      break;
    --first;
  }
  if (first == 0)
    return {};
  auto work = [&](int s) {
    const Stage &st = problem.stages[s];
    return st.forward + st.backward();
  };
  const int trunk = n - first;
  std::vector<int> placement(n, 0);
  std::vector<double> load(p, 0.0);
  if (vTrunk) {
    // Two trunk stages per rank in a V (stage k on rank k, then back).
    if (trunk != 2 * p)
      return {};
    for (int k = 0; k < trunk; ++k)
      placement[first + k] = k < p ? k : 2 * p - 1 - k;
  } else {
    std::vector<double> trunkWork;
    for (int k = 0; k < trunk; ++k)
      trunkWork.push_back(work(first + k));
    std::vector<int> block = balancedCut(trunkWork, std::min(trunk, p));
    for (int k = 0; k < trunk; ++k)
      placement[first + k] = block[k];
  }
  for (int k = 0; k < trunk; ++k)
    load[placement[first + k]] += work(first + k);
  std::vector<int> feeders(first);
  std::iota(feeders.begin(), feeders.end(), 0);
  std::stable_sort(feeders.begin(), feeders.end(),
                   [&](int a, int b) { return work(a) > work(b); });
  for (int s : feeders) {
    int r = p - 1;
    for (int q = p - 1; q >= 0; --q)
      if (load[q] < load[r] - 1e-12)
        r = q;
    placement[s] = r;
    load[r] += work(s);
  }
  // Every rank must host a stage.
  std::vector<bool> used(p, false);
  for (int r : placement)
    used[r] = true;
  if (std::find(used.begin(), used.end(), false) != used.end())
    return {};
  return placement;
}

} // namespace

std::vector<NamedPlacement>
stagecraft::pipe::sched::candidatePlacements(const Problem &problem) {
  std::vector<NamedPlacement> result;
  if (problem.isPinned()) {
    std::vector<int> pins;
    for (const Stage &s : problem.stages)
      pins.push_back(*s.rank);
    result.push_back({"pinned", pins});
    return result;
  }
  if (auto blocks = placeContiguous(problem, true))
    result.push_back({"contiguous", *blocks});
  else
    llvm::consumeError(blocks.takeError());
  if (problem.numStages() > problem.ranks) {
    std::vector<int> balanced = balancedBlocks(problem);
    if (balanced != result.front().placement)
      result.push_back({"balanced", balanced});
    if (auto rr = placeRoundRobin(problem, 0))
      result.push_back({"round-robin", *rr});
    else
      llvm::consumeError(rr.takeError());
    if (auto v = placeVShape(problem))
      result.push_back({"v", *v});
    else
      llvm::consumeError(v.takeError());
  }
  std::vector<int> beside = branchesBeside(problem, /*vTrunk=*/false);
  if (!beside.empty())
    result.push_back({"branches beside the trunk", beside});
  std::vector<int> besideV = branchesBeside(problem, /*vTrunk=*/true);
  if (!besideV.empty())
    result.push_back({"branches beside a V trunk", besideV});
  return result;
}

namespace {

/// The greedy list policy \p variant (bit 0: later stage first, bit 1:
/// forward first, bit 2: W not deferred) with per-rank warm-up depths.
llvm::Expected<Schedule> greedyWithDepth(const Problem &problem,
                                         llvm::ArrayRef<int> placement,
                                         const std::vector<double> &limits,
                                         int variant,
                                         const std::vector<int> &depth) {
  ListPolicy policy;
  policy.memoryLimit = limits;
  policy.laterStageFirst = variant & 1;
  policy.backwardFirst = !(variant & 2);
  policy.deferWeights = !(variant & 4);
  policy.maxInFlight = depth;
  return listSchedule(problem, placement, policy);
}

bool isContiguous(llvm::ArrayRef<int> placement) {
  std::vector<int> seen;
  for (size_t s = 0; s < placement.size(); ++s) {
    if (s > 0 && placement[s] == placement[s - 1])
      continue;
    if (std::find(seen.begin(), seen.end(), placement[s]) != seen.end())
      return false;
    seen.push_back(placement[s]);
  }
  return true;
}

class Search {
public:
  Search(const Problem &problem, const AutoOptions &options, double limit)
      : problem(problem), options(options), limit(limit),
        start(std::chrono::steady_clock::now()), lastReport(start) {}

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  }
  bool outOfTime() const { return elapsed() > options.timeLimit; }

  /// Evaluates \p schedule; keeps it when it is the best that fits by the
  /// objective. Returns the objective's value (the makespan or the largest
  /// span), or infinity when invalid or over the limit.
  double consider(llvm::Expected<Schedule> schedule, std::string name) {
    ++count;
    report();
    if (!schedule) {
      llvm::consumeError(schedule.takeError());
      return std::numeric_limits<double>::infinity();
    }
    llvm::Expected<Timeline> t = simulate(problem, *schedule);
    if (!t) {
      llvm::consumeError(t.takeError());
      return std::numeric_limits<double>::infinity();
    }
    double peak = *std::max_element(t->peakMemory.begin(), t->peakMemory.end());
    smallestPeak = std::min(smallestPeak, peak);
    if (peak > limit * (1 + 1e-9) + 1e-12)
      return std::numeric_limits<double>::infinity();
    const double value = t->value(options.objective);
    auto keep = [&](AutoResult &into) {
      into.makespan = t->makespan;
      into.span = t->maxSpan();
      into.value = value;
    };
    AutoResult &own = perPlacement[schedule->placement];
    if (own.schedule.placement.empty() || value < own.value - 1e-9) {
      own.schedule = *schedule;
      keep(own);
      own.name = name;
    }
    if (!found || value < best.value - 1e-9) {
      found = true;
      best.schedule = std::move(*schedule);
      keep(best);
      best.name = std::move(name);
    }
    return value;
  }

  void report(bool final = false) {
    if (!options.progress)
      return;
    auto now = std::chrono::steady_clock::now();
    double interval = options.progressInterval;
    bool due =
        std::chrono::duration<double>(now - lastReport).count() >= interval;
    if (!due && !(final && elapsed() > interval))
      return;
    lastReport = now;
    AutoProgress progress;
    progress.candidates = count;
    progress.seconds = elapsed();
    progress.bestMakespan = found ? best.value : 0.0;
    progress.lowerBound = bound;
    progress.bestName = found ? best.name : "";
    options.progress(progress);
  }

  const Problem &problem;
  const AutoOptions &options;
  const double limit;
  double bound = 0.0;
  std::chrono::steady_clock::time_point start, lastReport;
  AutoResult best;
  /// The fastest that fits on each placement.
  std::map<std::vector<int>, AutoResult> perPlacement;
  bool found = false;
  int count = 0;
  double smallestPeak = std::numeric_limits<double>::infinity();
};
} // namespace

/// The objective of the local search: the search's objective first (the
/// makespan or the largest span), then the sum of the ranks' end times
/// (spans, for the span objective), which lets equal moves drift towards
/// schedules whose non-critical ranks finish early, where the next move can
/// help.
struct Score {
  double value = std::numeric_limits<double>::infinity();
  double ends = 0.0;
  bool betterOrEqual(const Score &o) const {
    if (value < o.value - 1e-9)
      return true;
    return value <= o.value + 1e-9 && ends <= o.ends + 1e-9;
  }
};

/// A schedule's task graph and its simulated timeline.
struct Simulated {
  TaskGraph graph;
  Timeline timeline;
};

/// \p schedule's score; \p kept receives its graph and timeline (empty when
/// the schedule is invalid), which the critical path is read from.
static Score score(const Search &search, const Schedule &schedule,
                   std::optional<Simulated> &kept) {
  kept.reset();
  llvm::Expected<TaskGraph> graph = buildTaskGraph(search.problem, schedule);
  if (!graph) {
    llvm::consumeError(graph.takeError());
    return {};
  }
  llvm::Expected<Timeline> t = simulate(*graph);
  if (!t) {
    llvm::consumeError(t.takeError());
    return {};
  }
  for (double peak : t->peakMemory)
    if (peak > search.limit * (1 + 1e-9) + 1e-12)
      return {};
  const Objective objective = search.options.objective;
  Score result{t->value(objective), 0.0};
  for (size_t r = 0; r < t->ranks.size(); ++r)
    if (!t->ranks[r].empty())
      result.ends +=
          objective == Objective::Span ? t->span[r] : t->ranks[r].back().end;
  kept.emplace(Simulated{std::move(*graph), std::move(*t)});
  return result;
}

/// The actions on one critical path of \p schedule's timeline \p sim, as
/// (rank, position in its order): from an action that ends last (for the
/// span objective, the last action of the rank with the largest span), back
/// through what each start waited for (the previous action on the rank, or
/// a dependency's end plus its latency). Only moving one of these, or an
/// action around one, can shorten the step.
static std::vector<std::pair<int, int>>
criticalActions(const Simulated &sim, const Schedule &schedule,
                Objective objective) {
  std::vector<std::pair<int, int>> path;
  const TaskGraph &graph = sim.graph;
  const Timeline &timeline = sim.timeline;
  // An overlapped action is two tasks: positions would not match the
  // schedule's orders (the caller then moves any action).
  for (int r = 0; r < graph.numRanks(); ++r)
    if (graph.rankOrder(r).size() != schedule.ranks[r].size())
      return path;
  const size_t n = graph.numTasks();
  std::vector<double> start(n), end(n);
  TaskId last = -1;
  for (int r = 0; r < graph.numRanks(); ++r) {
    llvm::ArrayRef<TaskId> order = graph.rankOrder(r);
    for (size_t i = 0; i < order.size(); ++i) {
      start[order[i]] = timeline.ranks[r][i].start;
      end[order[i]] = timeline.ranks[r][i].end;
      if (last < 0 || end[order[i]] > end[last])
        last = order[i];
    }
  }
  if (objective == Objective::Span && !timeline.span.empty()) {
    int widest = static_cast<int>(
        std::max_element(timeline.span.begin(), timeline.span.end()) -
        timeline.span.begin());
    if (!graph.rankOrder(widest).empty())
      last = graph.rankOrder(widest).back();
  }
  const double eps = 1e-9 * std::max(1.0, timeline.makespan);
  for (TaskId t = last; t >= 0;) {
    const int r = graph.task(t).rank, at = graph.positionOf(t);
    path.push_back({r, at});
    TaskId next = -1;
    if (at > 0) {
      TaskId prev = graph.rankOrder(r)[at - 1];
      if (std::abs(end[prev] - start[t]) <= eps)
        next = prev;
    }
    if (next < 0)
      for (const Dependency &dep : graph.dependencies(t))
        if (std::abs(end[dep.task] + dep.latency - start[t]) <= eps)
          next = dep.task;
    t = next;
  }
  return path;
}

/// Moves one action of one rank a few positions earlier or later, keeping
/// the move when the order stays valid, within memory and no worse. Every
/// other move takes an action on the current critical path (criticalActions),
/// the others any action of any rank. Stops after \p patience moves without
/// a shorter step, after kLocalSearchCap times that many in all, or at the
/// time limit. Deterministic: the moves come from a fixed-seed generator.
static void improveOrders(Search &search, Schedule current,
                          const std::string &name, int patience) {
  const std::string improved = name.find("local search") == std::string::npos
                                   ? name + " + local search"
                                   : name;
  std::optional<Simulated> nowSim, candidateSim;
  Score now = score(search, current, nowSim);
  if (!std::isfinite(now.value))
    return;
  std::mt19937 rng(12345);
  const int p = current.numRanks();
  std::vector<std::pair<int, int>> critical =
      criticalActions(*nowSim, current, search.options.objective);
  bool stale = false;
  const long long cap = static_cast<long long>(patience) * kLocalSearchCap;
  for (long long step = 0, lastGain = 0;
       step - lastGain < patience && step < cap && !search.outOfTime();
       ++step) {
    int r, from;
    if (step % 2 == 1 && stale) {
      critical = criticalActions(*nowSim, current, search.options.objective);
      stale = false;
    }
    if (step % 2 == 1 && !critical.empty()) {
      std::tie(r, from) = critical[std::uniform_int_distribution<size_t>(
          0, critical.size() - 1)(rng)];
    } else {
      r = std::uniform_int_distribution<int>(0, p - 1)(rng);
      from = std::uniform_int_distribution<int>(
          0, std::max(0, static_cast<int>(current.ranks[r].size()) - 1))(rng);
    }
    std::vector<Action> &order = current.ranks[r];
    if (order.size() < 2)
      continue;
    int shift = std::uniform_int_distribution<int>(-6, 6)(rng);
    int to = std::clamp(from + shift, 0, static_cast<int>(order.size()) - 1);
    if (to == from)
      continue;
    Action moved = order[from];
    order.erase(order.begin() + from);
    order.insert(order.begin() + to, moved);
    Score candidate = score(search, current, candidateSim);
    if (candidate.betterOrEqual(now)) {
      if (candidate.value < now.value - 1e-9) {
        search.consider(current, improved);
        lastGain = step;
      }
      now = candidate;
      nowSim = std::move(candidateSim);
      stale = true;
    } else {
      order.erase(order.begin() + to);
      order.insert(order.begin() + from, moved);
    }
  }
}

llvm::Expected<AutoResult>
stagecraft::pipe::sched::autoSchedule(const Problem &problem,
                                      const AutoOptions &options) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  for (const Stage &s : problem.stages)
    if (s.attention)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("stage @{} has attention(...); auto does not place "
                      "attention tasks, use kind=helix",
                      s.name));
  double limit = options.memoryLimit;
  if (limit <= 0.0) {
    llvm::Expected<std::vector<double>> peaks = oneFOneBPeakMemory(problem);
    if (!peaks)
      return peaks.takeError();
    limit = *std::max_element(peaks->begin(), peaks->end());
  }
  // Computed once: the balanced blocks are a dynamic program over stages.
  const std::vector<NamedPlacement> placements = candidatePlacements(problem);
  // Below what one microbatch needs on some rank, nothing can run.
  double need = std::numeric_limits<double>::infinity();
  for (const NamedPlacement &np : placements) {
    std::vector<double> perRank(problem.ranks, 0.0);
    for (int s = 0; s < problem.numStages(); ++s)
      perRank[np.placement[s]] += problem.stages[s].activation;
    need = std::min(need, *std::max_element(perRank.begin(), perRank.end()));
  }
  if (limit < need * (1 - 1e-9))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("memory-limit={} is below {}, what one microbatch needs on "
                    "the busiest rank of any placement",
                    limit, need));
  Search search(problem, options, limit);
  double makespanLowerBound = std::numeric_limits<double>::infinity();
  for (const NamedPlacement &np : placements)
    makespanLowerBound =
        std::min(makespanLowerBound, lowerBound(problem, np.placement));
  // Part of the time budget: computed before the search, which gets the
  // rest. The bounds the search prunes with are on its objective: the
  // memory-aware makespan bound, or the span bound.
  const Objective objective = options.objective;
  double memoryBound = std::numeric_limits<double>::infinity();
  double spanBound = std::numeric_limits<double>::infinity();
  std::vector<double> placementBounds;
  for (const NamedPlacement &np : placements) {
    double makespanBound = memoryAwareLowerBound(
        problem, np.placement, std::vector<double>(problem.ranks, limit));
    double span = std::max(
        spanLowerBound(problem, np.placement),
        memoryAwareSpanBound(problem, np.placement,
                             std::vector<double>(problem.ranks, limit)));
    placementBounds.push_back(objective == Objective::Span ? span
                                                           : makespanBound);
    memoryBound = std::min(memoryBound, makespanBound);
    spanBound = std::min(spanBound, span);
  }
  // The progress line's bound is on the objective.
  search.bound = objective == Objective::Span ? spanBound : makespanLowerBound;
  auto kindOptions = [&](ScheduleKind kind) {
    ScheduleOptions o;
    o.kind = kind;
    o.objective = objective;
    return o;
  };
  const int p = problem.ranks, mbs = problem.microbatches;

  // 0. The schedules the caller starts from.
  for (const Schedule &start : options.starts)
    search.consider(start, "the given schedule");

  // 1. Every fixed kind, whatever the time limit: each is one generation
  // and one simulation, and auto is never worse than any of them.
  for (ScheduleKind kind :
       {ScheduleKind::OneFOneB, ScheduleKind::ZBV, ScheduleKind::ZBH1,
        ScheduleKind::DualPipeV, ScheduleKind::ZBH2,
        ScheduleKind::Interleaved1F1B, ScheduleKind::GPipe})
    search.consider(generateSchedule(problem, kindOptions(kind)),
                    scheduleKindName(kind).str());
  // A branching pipeline also gets the chain kinds on its stages in the
  // order written: a chain's dependencies imply the graph's (an input is
  // written before its consumer), so their schedules run on the graph,
  // which only loosens them.
  if (!problem.isChain()) {
    Problem chain = problem;
    for (Stage &st : chain.stages)
      st.inputs.reset();
    for (ScheduleKind kind :
         {ScheduleKind::ZBV, ScheduleKind::DualPipeV, ScheduleKind::ZBH1,
          ScheduleKind::Interleaved1F1B})
      search.consider(generateSchedule(chain, kindOptions(kind)),
                      scheduleKindName(kind).str() + " on the stages in order");
  }

  // The zero-bubble paper's own search (ZB-1p at 1F1B's memory, ZB-2p at
  // twice it): its heuristic on a contiguous placement within the memory
  // limit, the variant chosen by the objective; like the fixed kinds,
  // whatever the time limit.
  if (problem.isChain())
    for (const NamedPlacement &np : placements)
      if (isContiguous(np.placement))
        search.consider(zeroBubbleChain(problem, np.placement,
                                        std::vector<double>(p, limit),
                                        objective),
                        "zero-bubble heuristic at the memory limit");

  // The V heuristic planned for more link latency than there is (more
  // slack in its offsets and W fills), then simulated with the real one.
  if (problem.latency > 0.0 && problem.numStages() == 2 * p) {
    if (llvm::Expected<std::vector<int>> v = placeVShape(problem)) {
      for (double factor : {5.0, 8.0, 0.5}) {
        if (search.outOfTime())
          break;
        search.consider(zeroBubbleV(problem, *v, std::vector<double>(p, limit),
                                    problem.latency * factor),
                        fmt::format("zb-v planned for latency x{}", factor));
      }
    } else {
      llvm::consumeError(v.takeError());
    }
  }

  // 2. Backbones and greedy policies on every placement.
  struct Backbone {
    std::string name;
    std::vector<int> placement;
    bool interleaved;
    std::vector<int> warmup;
    double makespan;
  };
  std::vector<Backbone> backbones;
  std::vector<double> limits(p, limit);
  struct DepthCandidate {
    std::vector<int> placement;
    int variant;
    std::vector<int> depth;
    double makespan;
    std::string name;
  };
  std::optional<DepthCandidate> bestDepth;
  auto runBackbone = [&](const std::vector<int> &placement, bool interleaved,
                         const std::vector<int> &warmup) {
    ListPolicy policy;
    policy.memoryLimit = limits;
    auto depth = [&](int i) { return warmup[i]; };
    policy.backbone = interleaved ? interleavedOrders(problem, depth,
                                                      ActionKind::BackwardInput)
                                  : oneFOneBOrders(problem, placement, depth,
                                                   ActionKind::BackwardInput);
    return listSchedule(problem, placement, policy);
  };
  for (const NamedPlacement &np : placements) {
    bool contiguous = isContiguous(np.placement);
    bool roundRobin = np.name == "round-robin";
    if (contiguous || roundRobin) {
      // Warm-up depths: the recipe's, scaled towards twice as deep, plus a
      // constant; memory throttles what does not fit.
      for (double scale : {1.0, 1.5, 2.0})
        for (int extra : {0, 1, 2, 4}) {
          if (search.outOfTime())
            break;
          std::vector<int> warmup(p);
          for (int i = 0; i < p; ++i) {
            // Index i is the block position for contiguous orders and the
            // rank for interleaved ones; both start from the recipe's depth.
            int base = roundRobin ? interleavedWarmup(problem, i) : p - i - 1;
            warmup[i] =
                std::min(mbs * problem.numStages(),
                         static_cast<int>(std::lround(base * scale)) + extra);
          }
          std::string name =
              fmt::format("backbone {} x{} +{}", np.name, scale, extra);
          double makespan = search.consider(
              runBackbone(np.placement, roundRobin, warmup), name);
          if (std::isfinite(makespan))
            backbones.push_back(
                {name, np.placement, roundRobin, warmup, makespan});
        }
    }
    for (int variant = 0; variant < 8 && !search.outOfTime(); ++variant) {
      ListPolicy policy;
      policy.memoryLimit = limits;
      policy.laterStageFirst = variant & 1;
      policy.backwardFirst = !(variant & 2);
      policy.deferWeights = !(variant & 4);
      search.consider(listSchedule(problem, np.placement, policy),
                      fmt::format("greedy {} #{}", np.name, variant));
    }
    // Greedy with a warm-up depth per rank (later chunk first, W deferred)
    // on the multi-chunk placements: a family of depths, the best of which
    // is tuned below. It pays where warm-up and cool-down are a large part
    // of the step (m <= 4p); beyond that it only costs search time.
    if (mbs > 4 * p || contiguous)
      continue;
    for (int variant : {1, 3})
      for (int base : {std::max(1, p / 2), p, 3 * p / 2, 2 * p})
        for (int slope : {0, 1}) {
          if (search.outOfTime())
            break;
          std::vector<int> depth(p);
          for (int r = 0; r < p; ++r)
            depth[r] = std::max(1, base + slope * (p - 1 - r));
          double makespan = search.consider(
              greedyWithDepth(problem, np.placement, limits, variant, depth),
              fmt::format("greedy {} #{} depth {}{}", np.name, variant, base,
                          slope ? "+" : ""));
          if (std::isfinite(makespan) &&
              (!bestDepth || makespan < bestDepth->makespan - 1e-9))
            bestDepth =
                DepthCandidate{np.placement, variant, depth, makespan, np.name};
        }
  }

  // Hill climbing on the best per-rank warm-up depths, a bounded number of
  // steps (deterministic, unlike a time budget).
  if (bestDepth) {
    int budget = 4 * p;
    for (bool improved = true; improved && budget > 0 && !search.outOfTime();) {
      improved = false;
      for (int i = 0; i < p && budget > 0 && !search.outOfTime(); ++i)
        for (int delta : {1, -1}) {
          std::vector<int> depth = bestDepth->depth;
          depth[i] += delta;
          if (depth[i] < 1 || budget-- <= 0)
            continue;
          double makespan = search.consider(
              greedyWithDepth(problem, bestDepth->placement, limits,
                              bestDepth->variant, depth),
              fmt::format("greedy {} #{} depths tuned", bestDepth->name,
                          bestDepth->variant));
          if (makespan < bestDepth->makespan - 1e-9) {
            bestDepth->depth = std::move(depth);
            bestDepth->makespan = makespan;
            improved = true;
            break;
          }
        }
    }
  }

  // 3. Hill climbing on the best backbone's warm-up depths, when a backbone
  // leads: tuning one that already lost rarely overtakes the leader and
  // costs a simulation per rank and step.
  bool backboneLeads =
      search.found && llvm::StringRef(search.best.name).starts_with("backbone");
  if (!backbones.empty() && backboneLeads) {
    Backbone current =
        *std::min_element(backbones.begin(), backbones.end(),
                          [](const Backbone &a, const Backbone &b) {
                            return a.makespan < b.makespan;
                          });
    for (bool improved = true; improved && !search.outOfTime();) {
      improved = false;
      for (int i = 0; i < p && !search.outOfTime(); ++i)
        for (int delta : {1, -1, 2, -2}) {
          std::vector<int> warmup = current.warmup;
          warmup[i] += delta;
          if (warmup[i] < 0)
            continue;
          double makespan = search.consider(
              runBackbone(current.placement, current.interleaved, warmup),
              current.name + " tuned");
          if (makespan < current.makespan - 1e-9) {
            current.warmup = std::move(warmup);
            current.makespan = makespan;
            improved = true;
            break;
          }
        }
    }
  }

  // 4. Local search over the per-rank orders of the best schedule, then of
  // the best on each other placement that is close (within
  // kLocalSearchWindow) and whose bound leaves room to win: a placement
  // whose first schedules lose can still hold the fastest (round-robin
  // with heavy end stages).
  if (search.found) {
    // A schedule at its placement's memory-aware bound is optimal there.
    size_t bestAt = 0;
    while (bestAt < placements.size() &&
           placements[bestAt].placement != search.best.schedule.placement)
      ++bestAt;
    if (bestAt == placements.size() ||
        search.best.value > placementBounds[bestAt] * (1 + 1e-9))
      improveOrders(search, search.best.schedule, search.best.name,
                    options.maxLocalSteps);
    std::vector<AutoResult> others;
    for (size_t i = 0; i < placements.size(); ++i) {
      auto it = search.perPlacement.find(placements[i].placement);
      if (it == search.perPlacement.end() ||
          placements[i].placement == search.best.schedule.placement)
        continue;
      if (it->second.value <= search.best.value * (1 + kLocalSearchWindow) &&
          placementBounds[i] < search.best.value * (1 - 1e-9))
        others.push_back(it->second);
    }
    std::sort(others.begin(), others.end(),
              [](const AutoResult &a, const AutoResult &b) {
                return a.value < b.value;
              });
    for (const AutoResult &other : others) {
      if (search.outOfTime())
        break;
      improveOrders(search, other.schedule, other.name, options.maxLocalSteps);
    }
  }

  // 5. Small problems: the exact search on every placement, seeded with
  // the best schedule where it is on that placement, each within a node
  // limit (the same result on every machine) and the time left. It finds
  // orders the heuristics miss, e.g. on round-robin with heavy end stages.
  // It minimizes the makespan, so not for the span objective.
  const long long actions = problem.numActions();
  if (search.found && objective == Objective::Makespan &&
      actions <= kExactActions &&
      search.best.makespan > memoryBound * (1 + 1e-9)) {
    for (size_t i = 0; i < placements.size(); ++i) {
      const NamedPlacement &np = placements[i];
      if (search.outOfTime())
        break;
      // Nothing on this placement can beat the best.
      if (placementBounds[i] >= search.best.makespan * (1 - 1e-9))
        continue;
      ExactOptions exact;
      exact.memoryLimit = limits;
      exact.timeLimit = options.timeLimit - search.elapsed();
      exact.maxNodes = kExactNodes;
      if (search.best.schedule.placement == np.placement)
        exact.initial = search.best.schedule;
      llvm::Expected<ExactResult> r =
          exactSchedule(problem, np.placement, exact);
      if (!r) {
        // Costs it does not model (overlap, recomputation, lengths, links).
        llvm::consumeError(r.takeError());
        break;
      }
      search.consider(std::move(r->schedule),
                      fmt::format("exact search on {}{}", np.name,
                                  r->optimal ? " (optimal there)" : ""));
    }
  }

  search.report(/*final=*/true);
  if (!search.found)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("no schedule fits memory-limit={} on every rank; the "
                    "smallest peak found is {}",
                    limit, search.smallestPeak));
  AutoResult result = std::move(search.best);
  result.lowerBound = makespanLowerBound;
  result.memoryAwareBound = memoryBound;
  result.spanBound = spanBound;
  result.objective = objective;
  result.memoryLimit = limit;
  result.candidates = search.count;
  return result;
}
