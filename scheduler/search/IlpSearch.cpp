//===- IlpSearch.cpp - Schedules as a mixed-integer program ---------------===//
//
// Columns: the start time of every action, then the objective's own columns
// (the makespan; or each rank's first start and last end and the largest
// span), then one binary per free pair (1: the pair's first action runs
// before its second). Pairs that a chain of dependencies orders, and the
// first stage's forwards (microbatches are interchangeable, so they go in
// microbatch order), need no binary. Each start lies between its earliest
// start over the dependencies (head) and the horizon less the work that
// must follow it (tail), which keeps the big-M rows tight.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/IlpSearch.h"
#include "scheduler/model/TaskGraph.h"
#include "scheduler/search/AutoScheduler.h"
#include "scheduler/search/ExactSearch.h"
#include "scheduler/search/LowerBound.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#ifdef STAGECRAFT_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

using namespace stagecraft::pipe::sched;

namespace {
constexpr double kEps = 1e-7;

llvm::Error error(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// What the program models: what the branch-and-bound models, without the
/// runtime overheads of a calibrated torch problem or a capacity.
llvm::Error checkSupported(const Problem &problem) {
  if (problem.messageOverhead > 0.0 || problem.receiveOverhead > 0.0)
    return error("the ILP handles transfers without a runtime overhead only");
  if (problem.hasCapacity())
    return error("the ILP does not plan recomputation under a capacity; use "
                 "kind=auto");
  return checkOrderSearchSupported(problem, "ILP");
}

#ifdef STAGECRAFT_HAVE_CBC

/// One action of the program.
struct Item {
  Action action;
  int rank;
  double cost, alloc, net;
  /// Earliest start over the dependencies; work that must follow its end.
  double head = 0.0, tail = 0.0;
};

/// The actions, their dependencies and which pairs they order.
struct Graph {
  std::vector<Item> items;
  /// (from, to, delay): `to` starts no sooner than `from`'s end + delay.
  struct Edge {
    int from, to;
    double delay;
  };
  std::vector<Edge> edges;
  /// reach[a][b]: a chain of dependencies leads from a to b.
  std::vector<llvm::SmallVector<uint64_t, 8>> reach;

  bool reaches(int a, int b) const {
    return (reach[a][b / 64] >> (b % 64)) & 1;
  }
};

/// Items in a topological order: every forward by stage, every input
/// gradient by stage from the last, then every weight gradient.
Graph buildGraph(const Problem &problem, llvm::ArrayRef<int> placement) {
  const int n = problem.numStages(), m = problem.microbatches;
  Graph g;
  std::vector<int> index(static_cast<size_t>(3) * n * m, -1);
  auto id = [&](int type, int s, int j) -> int & {
    return index[(static_cast<size_t>(type) * n + s) * m + j];
  };
  auto add = [&](ActionKind kind, int type, int s, int j) {
    Action a{kind, s, j};
    ActionEffect e = actionEffect(problem, RecomputeTable{}, a, placement[s]);
    id(type, s, j) = static_cast<int>(g.items.size());
    g.items.push_back({a, placement[s], e.cost, e.allocAtStart,
                       e.allocAtStart - e.freeAtEnd});
  };
  for (int s = 0; s < n; ++s)
    for (int j = 0; j < m; ++j)
      add(ActionKind::Forward, 0, s, j);
  for (int s = n - 1; s >= 0; --s)
    for (int j = 0; j < m; ++j)
      add(ActionKind::BackwardInput, 1, s, j);
  for (int s = 0; s < n; ++s)
    for (int j = 0; j < m; ++j)
      add(ActionKind::BackwardWeight, 2, s, j);
  auto lat = [&](int a, int b) {
    return placement[a] == placement[b] ? 0.0 : problem.latency;
  };
  for (int j = 0; j < m; ++j)
    for (int s = 0; s < n; ++s) {
      if (s > 0)
        g.edges.push_back({id(0, s - 1, j), id(0, s, j), lat(s - 1, s)});
      g.edges.push_back({id(0, s, j), id(1, s, j), 0.0});
      if (s + 1 < n)
        g.edges.push_back({id(1, s + 1, j), id(1, s, j), lat(s + 1, s)});
      g.edges.push_back({id(1, s, j), id(2, s, j), 0.0});
    }
  // Heads forwards; tails and descendants backwards (every edge goes from
  // a lower index to a higher one).
  const int count = static_cast<int>(g.items.size());
  std::sort(
      g.edges.begin(), g.edges.end(),
      [](const Graph::Edge &a, const Graph::Edge &b) { return a.to < b.to; });
  for (const Graph::Edge &e : g.edges) {
    Item &to = g.items[e.to];
    const Item &from = g.items[e.from];
    to.head = std::max(to.head, from.head + from.cost + e.delay);
  }
  // In decreasing order of `to`, every edge out of `to` comes before the
  // edges into it, so `to`'s tail and descendants are complete when used.
  const size_t words = (count + 63) / 64;
  g.reach.assign(count, llvm::SmallVector<uint64_t, 8>(words, 0));
  for (auto e = g.edges.rbegin(); e != g.edges.rend(); ++e) {
    Item &from = g.items[e->from];
    const Item &to = g.items[e->to];
    from.tail = std::max(from.tail, e->delay + to.cost + to.tail);
    for (size_t w = 0; w < words; ++w)
      g.reach[e->from][w] |= g.reach[e->to][w];
    g.reach[e->from][e->to / 64] |= uint64_t(1) << (e->to % 64);
  }
  return g;
}

/// The model, owned.
struct Model {
  Cbc_Model *cbc = Cbc_newModel();
  ~Model() { Cbc_deleteModel(cbc); }
  int columns = 0;

  int column(double lower, double upper, double objective, bool integer) {
    Cbc_addCol(cbc, "", lower, upper, objective, integer ? 1 : 0, 0, nullptr,
               nullptr);
    return columns++;
  }
  void row(llvm::ArrayRef<int> cols, llvm::ArrayRef<double> coefs, char sense,
           double rhs) {
    Cbc_addRow(cbc, "", static_cast<int>(cols.size()), cols.data(),
               coefs.data(), sense, rhs);
  }
};
#endif

llvm::Error noSolver() {
  return error("this build has no ILP solver (COIN-OR CBC, Debian's "
               "coinor-libcbc-dev, was not found when it was configured)");
}
} // namespace

bool stagecraft::pipe::sched::ilpAvailable() {
#ifdef STAGECRAFT_HAVE_CBC
  return true;
#else
  return false;
#endif
}

llvm::Expected<IlpResult>
stagecraft::pipe::sched::ilpSchedule(const Problem &problem,
                                     llvm::ArrayRef<int> placement,
                                     const IlpOptions &options) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  if (llvm::Error err = checkSupported(problem))
    return std::move(err);
  if (placement.size() != problem.stages.size())
    return error(fmt::format("a placement of {} stages for a pipeline of {}",
                             placement.size(), problem.stages.size()));
  if (problem.hasDevices()) {
    // Speeds folded into the costs; the orders are the same schedules.
    Problem scaled = scaledForDevices(problem, placement);
    scaled.devices.clear();
    llvm::Expected<IlpResult> r = ilpSchedule(scaled, placement, options);
    if (!r)
      return r.takeError();
    llvm::Expected<Timeline> t = simulate(problem, r->schedule);
    if (!t)
      return t.takeError();
    r->value = t->value(options.objective);
    return r;
  }
#ifndef STAGECRAFT_HAVE_CBC
  return noSolver();
#else
  const auto begin = std::chrono::steady_clock::now();
  const int p = problem.ranks;
  const bool span = options.objective == Objective::Span;
  auto limit = [&](int r) {
    return options.memoryLimit.empty() ? std::numeric_limits<double>::infinity()
                                       : options.memoryLimit[r];
  };
  auto fits = [&](const Timeline &t) {
    for (int r = 0; r < p; ++r)
      if (t.peakMemory[r] > limit(r) + kEps)
        return false;
    return true;
  };
  std::optional<Schedule> initial;
  std::optional<Timeline> initialTimeline;
  if (options.initial &&
      llvm::ArrayRef<int>(options.initial->placement) == placement) {
    llvm::Expected<Timeline> t = simulate(problem, *options.initial);
    if (!t)
      return t.takeError();
    if (fits(*t)) {
      initial = options.initial;
      initialTimeline = std::move(*t);
    }
  }

  // The bounds the other searches prove hold here too: they give the
  // objective its lower bound, which settles the search when a solution
  // meets it.
  const double known =
      span ? memoryAwareSpanBound(problem, placement, options.memoryLimit)
           : memoryAwareLowerBound(problem, placement, options.memoryLimit);
  if (!std::isfinite(known))
    return error("no schedule on this placement fits the memory limit (one "
                 "microbatch needs more than a rank's limit)");

  Graph g = buildGraph(problem, placement);
  const int count = static_cast<int>(g.items.size());
  auto firstStageForwards = [&](int a, int b) {
    const Action &x = g.items[a].action, &y = g.items[b].action;
    return x.kind == ActionKind::Forward && y.kind == ActionKind::Forward &&
           x.stage == 0 && y.stage == 0;
  };
  auto isFree = [&](int a, int b) {
    return !g.reaches(a, b) && !g.reaches(b, a) && !firstStageForwards(a, b);
  };
  std::vector<std::vector<int>> onRank(p);
  for (int a = 0; a < count; ++a)
    onRank[g.items[a].rank].push_back(a);
  // Past a size the solver's root work alone outlasts any time limit here
  // (19,596 order variables: 11 s of building and root work beyond auto's
  // quarter): the start stands, with the bound the other searches prove.
  long long orderVariables = 0;
  for (const std::vector<int> &acts : onRank)
    for (size_t i = 0; i < acts.size(); ++i)
      for (size_t k = i + 1; k < acts.size(); ++k)
        orderVariables += isFree(acts[i], acts[k]);
  if (orderVariables > kIlpMaxOrderVariables) {
    if (!initial)
      return error(fmt::format(
          "the program has {} order variables, more than the {} the ILP "
          "solves; use kind=auto",
          orderVariables, kIlpMaxOrderVariables));
    IlpResult result;
    result.schedule = *initial;
    result.value = initialTimeline->value(options.objective);
    result.bound = std::min(known, result.value);
    result.optimal = result.value <= known + kEps * std::max(1.0, known);
    result.orderVariables = static_cast<int>(orderVariables);
    result.solved = false;
    return result;
  }
  // Every as-early-as-possible schedule ends within the work plus the
  // latency of every transfer (while no rank computes, a transfer is on its
  // way); with the makespan objective a start schedule's makespan bounds
  // the optimum's.
  double horizon = 0.0;
  for (const Item &it : g.items)
    horizon += it.cost;
  for (const Graph::Edge &e : g.edges)
    horizon += e.delay;
  if (initialTimeline && !span)
    horizon = std::min(horizon, initialTimeline->makespan);
  horizon += kEps;

  Model model;
  Cbc_setLogLevel(model.cbc, 0);
  Cbc_setAllowableGap(model.cbc, 1e-6);
  Cbc_setAllowableFractionGap(model.cbc, 0.0);
  std::vector<int> start(count);
  for (int a = 0; a < count; ++a) {
    const Item &it = g.items[a];
    start[a] = model.column(it.head, horizon - it.cost - it.tail, 0.0, false);
  }
  for (const Graph::Edge &e : g.edges)
    model.row({start[e.to], start[e.from]}, {1.0, -1.0}, 'G',
              g.items[e.from].cost + e.delay);
  int objective = -1;
  std::vector<int> first(p, -1), last(p, -1);
  if (!span) {
    objective = model.column(known, horizon, 1.0, false);
    for (int a = 0; a < count; ++a)
      if (g.items[a].tail == 0.0)
        model.row({objective, start[a]}, {1.0, -1.0}, 'G', g.items[a].cost);
  } else {
    for (int r = 0; r < p; ++r) {
      first[r] = model.column(0.0, horizon, 0.0, false);
      last[r] = model.column(0.0, horizon, 0.0, false);
    }
    objective = model.column(known, horizon, 1.0, false);
    for (int a = 0; a < count; ++a) {
      const int r = g.items[a].rank;
      model.row({start[a], first[r]}, {1.0, -1.0}, 'G', 0.0);
      model.row({last[r], start[a]}, {1.0, -1.0}, 'G', g.items[a].cost);
    }
    for (int r = 0; r < p; ++r)
      model.row({objective, last[r], first[r]}, {1.0, -1.0, 1.0}, 'G', 0.0);
  }

  // The pairs on each rank: fixed (a dependency or the first stage's
  // microbatch order) or free (a binary).
  // relation[a][k]: how a relates to the k-th action of its rank: 1 before,
  // 0 after, or the binary's column + 2 (free; 1 = a first), -(column + 2)
  // when the binary says the other runs first.
  std::vector<std::vector<int>> relation(count);
  std::vector<int> position(count);
  for (int r = 0; r < p; ++r)
    for (size_t k = 0; k < onRank[r].size(); ++k) {
      position[onRank[r][k]] = static_cast<int>(k);
      relation[onRank[r][k]].assign(onRank[r].size(), 0);
    }
  struct Pair {
    int a, b, column;
  };
  std::vector<Pair> free;
  for (int r = 0; r < p; ++r) {
    const std::vector<int> &acts = onRank[r];
    for (size_t i = 0; i < acts.size(); ++i)
      for (size_t k = i + 1; k < acts.size(); ++k) {
        int a = acts[i], b = acts[k];
        int &ab = relation[a][k], &ba = relation[b][i];
        if (g.reaches(a, b)) {
          ab = 1;
          ba = 0;
        } else if (g.reaches(b, a)) {
          ab = 0;
          ba = 1;
        } else if (firstStageForwards(a, b)) {
          // a is the lower microbatch: items are in microbatch order.
          model.row({start[b], start[a]}, {1.0, -1.0}, 'G', g.items[a].cost);
          ab = 1;
          ba = 0;
        } else {
          int y = model.column(0.0, 1.0, 0.0, true);
          const double big = horizon;
          // y = 1: b starts after a ends; y = 0: a starts after b ends.
          model.row({start[b], start[a], y}, {1.0, -1.0, -big}, 'G',
                    g.items[a].cost - big);
          model.row({start[a], start[b], y}, {1.0, -1.0, big}, 'G',
                    g.items[b].cost);
          ab = y + 2;
          ba = -(y + 2);
          free.push_back({a, b, y});
        }
      }
  }
  // Memory at the start of each action that allocates: its own allocation
  // plus the net of every action before it on its rank.
  for (int r = 0; r < p; ++r) {
    if (!std::isfinite(limit(r)))
      continue;
    const std::vector<int> &acts = onRank[r];
    for (int x : acts) {
      if (g.items[x].alloc <= 0.0)
        continue;
      double fixed = g.items[x].alloc, worst = fixed;
      llvm::SmallVector<int> cols;
      llvm::SmallVector<double> coefs;
      for (size_t k = 0; k < acts.size(); ++k) {
        int a = acts[k];
        if (a == x)
          continue;
        // How a relates to x: relation[a][position of x].
        int rel = relation[a][position[x]];
        double net = g.items[a].net;
        if (rel == 1) {
          fixed += net;
        } else if (rel >= 2) {
          cols.push_back(rel - 2);
          coefs.push_back(net);
        } else if (rel <= -2) {
          // a first when the binary is 0: net * (1 - y).
          fixed += net;
          cols.push_back(-rel - 2);
          coefs.push_back(-net);
        }
        if (rel != 0)
          worst += std::max(net, 0.0);
      }
      if (worst <= limit(r) + kEps)
        continue; // Cannot bind.
      model.row(cols, coefs, 'L', limit(r) - fixed);
    }
  }

  // The start: the initial schedule's order and times.
  if (initialTimeline) {
    std::vector<int> cols;
    std::vector<double> values;
    std::vector<int> rankOrder(count, 0);
    for (int a = 0; a < count; ++a) {
      const Item &it = g.items[a];
      const std::vector<TimedAction> &row = initialTimeline->ranks[it.rank];
      for (size_t k = 0; k < row.size(); ++k)
        if (row[k].action == it.action) {
          cols.push_back(start[a]);
          values.push_back(row[k].start);
          rankOrder[a] = static_cast<int>(k);
        }
    }
    for (const Pair &pr : free) {
      cols.push_back(pr.column);
      values.push_back(rankOrder[pr.a] < rankOrder[pr.b] ? 1.0 : 0.0);
    }
    Cbc_setMIPStartI(model.cbc, static_cast<int>(cols.size()), cols.data(),
                     values.data());
  }

  // The time left after building; the solver's root work may still run
  // past it.
  Cbc_setMaximumSeconds(
      model.cbc,
      std::max(0.01,
               options.timeLimit - std::chrono::duration<double>(
                                       std::chrono::steady_clock::now() - begin)
                                       .count()));
  Cbc_solve(model.cbc);
  IlpResult result;
  result.orderVariables = static_cast<int>(free.size());
  const bool infeasible = Cbc_isProvenInfeasible(model.cbc);
  result.bound = Cbc_getBestPossibleObjValue(model.cbc);
  if (!std::isfinite(result.bound))
    result.bound = known;
  const double *solution = Cbc_bestSolution(model.cbc);
  if (infeasible && !initial)
    return error(fmt::format("no schedule on this placement fits the memory "
                             "limit (the ILP is infeasible)"));
  if (initial) {
    result.schedule = *initial;
    result.value = initialTimeline->value(options.objective);
  }
  if (solution) {
    Schedule found;
    found.placement.assign(placement.begin(), placement.end());
    found.ranks.resize(p);
    for (int r = 0; r < p; ++r) {
      std::vector<int> acts = onRank[r];
      // By start; ties (actions of no cost) in topological order.
      std::stable_sort(acts.begin(), acts.end(), [&](int a, int b) {
        return solution[start[a]] < solution[start[b]] - kEps;
      });
      for (int a : acts)
        found.ranks[r].push_back(g.items[a].action);
    }
    llvm::Expected<Timeline> t = simulate(problem, found);
    if (!t)
      return t.takeError();
    double value = t->value(options.objective);
    if (fits(*t) && value < result.value - kEps) {
      result.schedule = std::move(found);
      result.value = value;
      result.improved = true;
    }
  }
  if (!std::isfinite(result.value))
    return error(fmt::format("the ILP found no schedule within {:g} s",
                             options.timeLimit));
  // An infeasible program with a start: nothing beats the horizon, which
  // is the start's makespan.
  if (infeasible)
    result.bound = result.value;
  result.bound = std::min(std::max(result.bound, known), result.value);
  result.optimal =
      result.value <= result.bound + kEps * std::max(1.0, result.bound);
  return result;
#endif
}

/// The searches over auto's result: what the program models checked, then
/// auto for a quarter of \p timeLimit.
static llvm::Expected<AutoResult> autoFirst(const Problem &problem,
                                            double memoryLimit,
                                            double timeLimit,
                                            Objective objective) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  if (llvm::Error err = checkSupported(problem))
    return std::move(err);
  if (!ilpAvailable())
    return noSolver();
  AutoOptions options;
  options.memoryLimit = memoryLimit;
  options.timeLimit = timeLimit / 4;
  options.objective = objective;
  return autoSchedule(problem, options);
}

llvm::Expected<IlpOverAuto>
stagecraft::pipe::sched::ilpOverAuto(const Problem &problem, double memoryLimit,
                                     double timeLimit, Objective objective) {
  auto begin = std::chrono::steady_clock::now();
  llvm::Expected<AutoResult> found =
      autoFirst(problem, memoryLimit, timeLimit, objective);
  if (!found)
    return found.takeError();
  IlpOverAuto result;
  result.autoName = found->name;
  result.autoValue = found->value;
  result.memoryAwareBound = found->memoryAwareBound;
  IlpOptions options;
  options.memoryLimit.assign(problem.ranks, found->memoryLimit);
  options.objective = objective;
  options.timeLimit = timeLimit - std::chrono::duration<double>(
                                      std::chrono::steady_clock::now() - begin)
                                      .count();
  options.initial = found->schedule;
  llvm::Expected<IlpResult> ilp =
      ilpSchedule(problem, found->schedule.placement, options);
  if (!ilp)
    return ilp.takeError();
  result.schedule = std::move(ilp->schedule);
  result.value = ilp->value;
  result.bound = ilp->bound;
  result.optimal = ilp->optimal;
  result.improved = ilp->improved;
  result.solved = ilp->solved;
  result.orderVariables = ilp->orderVariables;
  return result;
}

llvm::Expected<IlpOverPlacements>
stagecraft::pipe::sched::ilpOverPlacements(const Problem &problem,
                                           double memoryLimit, double timeLimit,
                                           Objective objective) {
  auto begin = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         begin)
        .count();
  };
  llvm::Expected<AutoResult> found =
      autoFirst(problem, memoryLimit, timeLimit, objective);
  if (!found)
    return found.takeError();
  IlpOverPlacements result;
  result.schedule = std::move(found->schedule);
  result.value = found->value;
  result.found = found->name;
  const std::vector<double> limits(problem.ranks, found->memoryLimit);
  auto boundOf = [&](llvm::ArrayRef<int> placement) {
    return objective == Objective::Span
               ? std::max(spanLowerBound(problem, placement),
                          memoryAwareSpanBound(problem, placement, limits))
               : memoryAwareLowerBound(problem, placement, limits);
  };
  std::vector<std::pair<double, NamedPlacement>> order;
  for (NamedPlacement &np : candidatePlacements(problem))
    order.push_back({boundOf(np.placement), std::move(np)});
  std::stable_sort(
      order.begin(), order.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  result.placements = static_cast<int>(order.size());
  result.bound = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < order.size(); ++i) {
    const auto &[bound, np] = order[i];
    if (bound >= result.value - kEps) {
      ++result.placementsProven;
      result.bound = std::min(result.bound, bound);
      continue;
    }
    const double left = timeLimit - elapsed();
    if (left <= 0.0) {
      result.bound = std::min(result.bound, bound);
      continue;
    }
    IlpOptions options;
    options.memoryLimit = limits;
    options.objective = objective;
    options.timeLimit = left / static_cast<double>(order.size() - i);
    if (result.schedule.placement == np.placement)
      options.initial = result.schedule;
    llvm::Expected<IlpResult> r = ilpSchedule(problem, np.placement, options);
    if (!r) {
      // No schedule on this placement fits the limit: settled.
      llvm::consumeError(r.takeError());
      ++result.placementsProven;
      continue;
    }
    result.placementsProven += r->optimal;
    result.bound = std::min(result.bound, r->bound);
    if (r->value < result.value - kEps) {
      result.schedule = std::move(r->schedule);
      result.value = r->value;
      result.found = "ilp on " + np.name;
    }
  }
  result.bound = std::min(result.bound, result.value);
  result.optimal = result.placementsProven == result.placements;
  return result;
}
