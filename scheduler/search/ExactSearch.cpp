//===- ExactSearch.cpp - Exact makespan search for small problems ---------===//
//
// Depth-first: a node is a set of appended actions with fixed start times and
// the time `now` of the latest start. Children append one action whose
// inputs are all appended, that memory admits on its rank and that starts no
// earlier than `now` (for an equal start, on a rank no lower than the last
// one's unless that one took no time: actions starting together on
// different ranks are independent, so one order of them suffices).
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/ExactSearch.h"
#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/LowerBound.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>

using namespace stagecraft::pipe::sched;

namespace {
constexpr double kEps = 1e-9;
constexpr long long kMaxActions = 4096;

class Searcher {
public:
  Searcher(const Problem &problem, llvm::ArrayRef<int> placement,
           const ExactOptions &options)
      : problem(problem), placement(placement), options(options),
        n(problem.numStages()), m(problem.microbatches), p(problem.ranks),
        start(std::chrono::steady_clock::now()) {
    const size_t total = static_cast<size_t>(3) * n * m;
    finish.assign(total, -1.0);
    clock.assign(p, 0.0);
    live.assign(p, 0.0);
    remaining.assign(p, 0.0);
    orders.resize(p);
    // The runtime's own work around transfers (a calibrated torch
    // problem's message_overhead and receive_overhead), as the simulator
    // charges it: per message sent, added to the compute; per message
    // received, before the compute, overlapping the wait for it.
    const std::vector<int> where(placement.begin(), placement.end());
    const ActionKind kinds[3] = {ActionKind::Forward, ActionKind::BackwardInput,
                                 ActionKind::BackwardWeight};
    extra.assign(static_cast<size_t>(3) * n, 0.0);
    setup.assign(static_cast<size_t>(3) * n, 0.0);
    for (int s = 0; s < n; ++s)
      for (int type = 0; type < 3; ++type) {
        Action a{kinds[type], s, 0};
        extra[type * n + s] =
            problem.messageOverhead * crossRankMessages(problem, where, a);
        setup[type * n + s] =
            problem.receiveOverhead * crossRankInputs(problem, where, a);
      }
    for (int s = 0; s < n; ++s)
      for (int j = 0; j < m; ++j)
        for (int type = 0; type < 3; ++type)
          remaining[placement[s]] += cost(type, s);
    nextFirstForward = 0;
  }

  /// Cut with the order statistics of \p stats from here on.
  void useOrderStatistics(OrderStatistics s) {
    stats = std::move(s);
    done.assign(static_cast<size_t>(3) * n, 0);
  }

  void run(double upper, std::optional<Schedule> initial) {
    bestMakespan = upper;
    if (initial)
      best = std::move(*initial);
    dfs(0.0, -1, false);
  }

  const Problem &problem;
  llvm::ArrayRef<int> placement;
  const ExactOptions &options;
  const int n, m, p;
  double bestMakespan = std::numeric_limits<double>::infinity();
  double bound = 0.0;
  std::optional<Schedule> best;
  long long nodes = 0;
  bool stopped = false;

private:
  size_t id(int type, int s, int j) const {
    return (static_cast<size_t>(type) * n + s) * m + j;
  }
  double cost(int type, int s) const {
    const Stage &st = problem.stages[s];
    return (type == 0   ? st.forward
            : type == 1 ? st.backwardInput
                        : st.backwardWeight) +
           extra[type * n + s];
  }
  double limit(int r) const {
    return options.memoryLimit.empty() ? std::numeric_limits<double>::infinity()
                                       : options.memoryLimit[r];
  }
  double lat(int a, int b) const {
    return placement[a] == placement[b] ? 0.0 : problem.latency;
  }
  /// Earliest start of (type, s, j), or -1 when an input is not appended.
  double earliest(int type, int s, int j) const {
    double t = clock[placement[s]] + setup[type * n + s];
    auto need = [&](size_t dep, double delay) {
      if (finish[dep] < 0.0)
        return false;
      t = std::max(t, finish[dep] + delay);
      return true;
    };
    if (type == 0) {
      if (s > 0 && !need(id(0, s - 1, j), lat(s - 1, s)))
        return -1.0;
    } else if (type == 1) {
      if (!need(id(0, s, j), 0.0))
        return -1.0;
      if (s + 1 < n && !need(id(1, s + 1, j), lat(s + 1, s)))
        return -1.0;
    } else if (!need(id(1, s, j), 0.0)) {
      return -1.0;
    }
    return t;
  }
  bool outOfTime() {
    if (stopped)
      return true;
    if (options.maxNodes > 0 && nodes > options.maxNodes)
      return stopped = true;
    if ((nodes & 1023) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                .count() > options.timeLimit)
      stopped = true;
    return stopped;
  }

  void dfs(double now, int lastRank, bool lastFree);
  bool cannotBeat(double now);

  std::vector<double> finish, clock, live, remaining;
  /// Per (type, stage): the message overhead added to its cost, and the
  /// receive overhead before it.
  std::vector<double> extra, setup;
  std::vector<std::vector<Action>> orders;
  int nextFirstForward;
  size_t appended = 0;
  std::optional<OrderStatistics> stats;
  /// Actions appended per type and stage ([type * n + s]).
  std::vector<int> done;
  std::vector<OneMachineJob> jobs;
  std::chrono::steady_clock::time_point start;
};

/// Whether every completion of the partial schedule ends no earlier than the
/// best found: per rank, the actions left are the last ones of their stage
/// and type to start, so each has its order statistic's head (and starts no
/// earlier than now and than its rank is free) and tail; Jackson's
/// preemptive schedule of them bounds the rank.
bool Searcher::cannotBeat(double now) {
  for (int r = 0; r < p; ++r) {
    double free = std::max(clock[r], now);
    if (free + remaining[r] >= bestMakespan - kEps)
      return true;
    if (!stats)
      continue;
    jobs.clear();
    for (int s = 0; s < n; ++s) {
      if (placement[s] != r)
        continue;
      for (int type = 0; type < 3; ++type)
        for (int k = done[type * n + s]; k < m; ++k)
          jobs.push_back({std::max(free, stats->head(type, s, k)),
                          stats->cost(type, s),
                          stats->tail(type, s, m - 1 - k)});
    }
    if (!jobs.empty() && jacksonBound(jobs) >= bestMakespan - kEps)
      return true;
  }
  return false;
}

void Searcher::dfs(double now, int lastRank, bool lastFree) {
  ++nodes;
  if (outOfTime() || bestMakespan <= bound + kEps)
    return;
  if (appended == finish.size()) {
    double makespan = *std::max_element(clock.begin(), clock.end());
    if (makespan < bestMakespan - kEps) {
      bestMakespan = makespan;
      Schedule s;
      s.placement.assign(placement.begin(), placement.end());
      s.ranks = orders;
      best = std::move(s);
    }
    return;
  }
  if (cannotBeat(now))
    return;
  struct Child {
    double start;
    int type, s, j;
  };
  std::vector<Child> children;
  for (int s = 0; s < n; ++s) {
    int r = placement[s];
    for (int j = 0; j < m; ++j)
      for (int type = 0; type < 3; ++type) {
        if (finish[id(type, s, j)] >= 0.0)
          continue;
        if (type == 0 && s == 0 && j != nextFirstForward)
          continue;
        if (type == 0 &&
            live[r] + problem.stages[s].activation > limit(r) + kEps)
          continue;
        double t = earliest(type, s, j);
        if (t < 0.0 || t < now - kEps)
          continue;
        if (t <= now + kEps && r < lastRank && !lastFree)
          continue;
        children.push_back({t, type, s, j});
      }
  }
  // Backwards first among equal starts finds good schedules sooner.
  std::sort(children.begin(), children.end(),
            [](const Child &a, const Child &b) {
              if (a.start != b.start)
                return a.start < b.start;
              return (a.type + 2) % 3 < (b.type + 2) % 3;
            });
  for (const Child &c : children) {
    int r = placement[c.s];
    const Stage &st = problem.stages[c.s];
    double cst = cost(c.type, c.s);
    double savedClock = clock[r], savedLive = live[r];
    size_t task = id(c.type, c.s, c.j);
    finish[task] = c.start + cst;
    clock[r] = c.start + cst;
    remaining[r] -= cst;
    live[r] += c.type == 0   ? st.activation
               : c.type == 1 ? -(st.activation - st.weightGrad)
                             : -st.weightGrad;
    ActionKind kind = c.type == 0   ? ActionKind::Forward
                      : c.type == 1 ? ActionKind::BackwardInput
                                    : ActionKind::BackwardWeight;
    orders[r].push_back({kind, c.s, c.j});
    if (c.type == 0 && c.s == 0)
      ++nextFirstForward;
    ++appended;
    if (stats)
      ++done[c.type * n + c.s];
    dfs(c.start, r, cst <= 0.0);
    if (stats)
      --done[c.type * n + c.s];
    --appended;
    if (c.type == 0 && c.s == 0)
      --nextFirstForward;
    orders[r].pop_back();
    live[r] = savedLive;
    remaining[r] += cst;
    clock[r] = savedClock;
    finish[task] = -1.0;
    if (stopped || bestMakespan <= bound + kEps)
      return;
  }
}
} // namespace

llvm::Error
stagecraft::pipe::sched::checkOrderSearchSupported(const Problem &problem,
                                                   llvm::StringRef who) {
  auto unsupported = [&](const std::string &what) {
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("the {} handles {} only", who.str(), what));
  };
  if (!problem.isChain())
    return unsupported("a chain of stages");
  if (problem.hasLengths())
    return unsupported("microbatches of one length");
  if (problem.links)
    return unsupported("a plain latency between ranks (no links(...))");
  for (const Stage &s : problem.stages)
    if (s.forwardBackward || s.attention || s.recomputed)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("the {} handles F, I and W only; stage @{} has "
                      "overlapped, attention or recomputation costs",
                      who.str(), s.name));
  return llvm::Error::success();
}

/// What the search models (checkOrderSearchSupported), and a size its
/// recursion reaches.
static llvm::Error checkSupported(const Problem &problem) {
  // The search recurses once per action: a bound on its depth (it reaches
  // a few hundred actions in seconds anyway).
  const long long actions = problem.numActions();
  if (actions > kMaxActions)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("the exact search is for small problems: {} actions "
                    "({} stages x {} microbatches x 3), at most {}; use "
                    "kind=auto",
                    actions, problem.numStages(), problem.microbatches,
                    kMaxActions));
  return checkOrderSearchSupported(problem, "exact search");
}

llvm::Expected<ExactResult>
stagecraft::pipe::sched::exactSchedule(const Problem &problem,
                                       llvm::ArrayRef<int> placement,
                                       const ExactOptions &options) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  if (llvm::Error err = checkSupported(problem))
    return std::move(err);
  if (problem.hasDevices() && placement.size() == problem.stages.size()) {
    // Speeds folded into the costs; the orders are the same schedules.
    Problem scaled = scaledForDevices(problem, placement);
    scaled.devices.clear();
    return exactSchedule(scaled, placement, options);
  }
  Searcher searcher(problem, placement, options);
  searcher.bound =
      memoryAwareLowerBound(problem, placement, options.memoryLimit);
  if (options.orderStatisticCuts)
    searcher.useOrderStatistics(
        orderStatistics(problem, placement, options.memoryLimit));
  double upper = std::numeric_limits<double>::infinity();
  if (options.initial &&
      llvm::ArrayRef<int>(options.initial->placement) == placement) {
    llvm::Expected<Timeline> t = simulate(problem, *options.initial);
    if (!t)
      return t.takeError();
    bool fits = true;
    for (int r = 0; r < problem.ranks; ++r)
      if (!options.memoryLimit.empty() &&
          t->peakMemory[r] > options.memoryLimit[r] + kEps)
        fits = false;
    if (fits)
      upper = t->makespan;
  }
  bool seeded = std::isfinite(upper);
  if (options.upperBound < upper) {
    upper = options.upperBound;
    seeded = false;
  }
  searcher.run(upper, seeded ? options.initial : std::nullopt);
  if (!searcher.best && std::isfinite(options.upperBound)) {
    ExactResult none;
    none.makespan = std::numeric_limits<double>::infinity();
    none.lowerBound = searcher.bound;
    none.optimal = !searcher.stopped;
    none.nodes = searcher.nodes;
    return none;
  }
  if (!searcher.best)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        searcher.stopped
            ? std::string("the exact search found no schedule within its "
                          "time limit")
            : std::string("no schedule fits the memory limits"));
  ExactResult result;
  result.schedule = std::move(*searcher.best);
  result.makespan = searcher.bestMakespan;
  result.lowerBound = searcher.bound;
  result.optimal = !searcher.stopped;
  result.nodes = searcher.nodes;
  return result;
}

llvm::Expected<ExactOverPlacements>
stagecraft::pipe::sched::exactOverPlacements(const Problem &problem,
                                             double memoryLimit,
                                             double timeLimit) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  if (llvm::Error err = checkSupported(problem))
    return std::move(err);
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  AutoOptions autoOptions;
  autoOptions.memoryLimit = memoryLimit;
  autoOptions.timeLimit = timeLimit / 4;
  llvm::Expected<AutoResult> found = autoSchedule(problem, autoOptions);
  if (!found)
    return found.takeError();
  ExactOverPlacements result;
  result.schedule = std::move(found->schedule);
  result.makespan = found->makespan;
  result.memoryAwareBound = found->memoryAwareBound;
  result.found = found->name;
  const std::vector<double> limits(problem.ranks, found->memoryLimit);
  std::vector<std::pair<double, NamedPlacement>> order;
  for (NamedPlacement &np : candidatePlacements(problem))
    order.push_back(
        {memoryAwareLowerBound(problem, np.placement, limits), std::move(np)});
  std::stable_sort(
      order.begin(), order.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  result.placements = static_cast<int>(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const auto &[bound, np] = order[i];
    if (bound >= result.makespan - kEps) {
      ++result.placementsProven;
      continue;
    }
    double left = timeLimit - elapsed();
    if (left <= 0.0)
      break;
    ExactOptions options;
    options.memoryLimit = limits;
    options.timeLimit = left / static_cast<double>(order.size() - i);
    if (result.schedule.placement == np.placement)
      options.initial = result.schedule;
    else
      options.upperBound = result.makespan;
    llvm::Expected<ExactResult> r =
        exactSchedule(problem, np.placement, options);
    if (!r)
      return r.takeError();
    result.nodes += r->nodes;
    result.placementsProven += r->optimal;
    if (!r->schedule.ranks.empty() && r->makespan < result.makespan - kEps) {
      result.schedule = std::move(r->schedule);
      result.makespan = r->makespan;
      result.found = "exact search on " + np.name;
    }
  }
  result.optimal = result.placementsProven == result.placements;
  return result;
}
