//===- ZeroBubbleHeuristic.cpp - The zero-bubble papers' heuristics -------===//
//
// The schedule construction heuristics of Qi et al.: "Zero Bubble Pipeline
// Parallelism" (ICLR 2024, section 3.1: warm-up as deep as memory allows
// without delaying the first I, then one F and one I per microbatch with W
// filling every gap it fits in, a W also placed in a smaller gap when that
// gap would otherwise become the largest bubble of any rank, and W forced
// when memory is full) and "Pipeline Parallelism with Controllable Memory"
// (the V-shape: chunk-0 forwards on every rank up to the point where the
// first chunk-1 forward arrives, which absorbs the link latency, then
// backward-first alternation with the same W rules). Both build per-rank
// orders while tracking the time each action would end, as the authors'
// reference implementation does, and are retried with the variants their
// code tries (bubble allowed before the first I or not, I prioritized or
// not, W greedily in small gaps or not; fill W before F and/or before I
// for the V). Every variant's orders are verified and simulated; the
// fastest valid one is kept.
//
// A rank hosting a contiguous block of stages acts as one stage whose costs
// and memory are the block's sums: on one rank consecutive stages need no
// transfer, so running a block's actions back to back is the same timing.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/ZeroBubbleHeuristic.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <deque>
#include <limits>
#include <optional>

using namespace stagecraft::pipe::sched;

namespace {
constexpr double kEps = 1e-9;

/// Costs and memory effects of F, I and W on one unit (a rank's block, or
/// one chunk of a V rank).
struct UnitCosts {
  double cost[3] = {0, 0, 0};
  double mem[3] = {0, 0, 0};
};

UnitCosts sumOf(const Problem &problem, llvm::ArrayRef<int> stages) {
  UnitCosts u;
  for (int s : stages) {
    const Stage &st = problem.stages[s];
    u.cost[0] += st.forward;
    u.cost[1] += st.backwardInput;
    u.cost[2] += st.backwardWeight;
    u.mem[0] += st.activation;
    u.mem[1] -= st.activation - st.weightGrad;
    u.mem[2] -= st.weightGrad;
  }
  return u;
}

/// Appends the actions of unit action \p type (0 F, 1 I, 2 W) of microbatch
/// \p mb over the stages of a block: forwards in chain order, backwards in
/// reverse.
void emit(std::vector<Action> &out, llvm::ArrayRef<int> stages, int type,
          int mb) {
  if (type == 0) {
    for (int s : stages)
      out.push_back({ActionKind::Forward, s, mb});
    return;
  }
  ActionKind kind =
      type == 1 ? ActionKind::BackwardInput : ActionKind::BackwardWeight;
  for (auto it = stages.rbegin(); it != stages.rend(); ++it)
    out.push_back({kind, *it, mb});
}

/// The contiguous heuristic (ZB-1p/2p) over units 0..n-1 in chain order.
class ChainHeuristic {
public:
  ChainHeuristic(std::vector<UnitCosts> units, int mbs, double comm,
                 std::vector<double> maxMem)
      : u(std::move(units)), n(static_cast<int>(u.size())), nmb(mbs),
        comm(comm), maxMem(std::move(maxMem)) {}

  /// Per unit, the order as (type, microbatch); nullopt when the variant
  /// cannot place an action within memory.
  std::optional<std::vector<std::vector<std::pair<int, int>>>>
  run(bool allowBubbleBeforeFirstI, bool prioritizeI, bool noBubbleGreedy);
  /// The makespan the last run estimated; never above the simulated one
  /// (an input not yet placed counts as ready at 0).
  double estimate() const { return *std::max_element(e.begin(), e.end()); }

private:
  double cost(int j, int type) const { return u[j].cost[type]; }
  double mem(int j, int type) const { return u[j].mem[type]; }
  double &endOf(int type, int j, int mb) {
    return t[(static_cast<size_t>(type) * n + j) * nmb + mb];
  }
  double maxBubble() const { return largestBubble; }
  void put(int j, int type);
  /// Fills the wait of unit \p j for an input arriving at \p arrival with W.
  void fillW(int j, double arrival, bool noBubbleGreedy);
  /// Runs W on \p j until \p need more fits; false when none is pending.
  bool makeRoom(int j, double need);

  std::vector<UnitCosts> u;
  const int n, nmb;
  const double comm;
  std::vector<double> maxMem;
  std::vector<int> count[3];
  std::vector<double> e, m, bubble, t;
  /// The largest entry of `bubble` (entries only grow).
  double largestBubble = 0.0;
  std::vector<std::vector<std::pair<int, int>>> order;
};

void ChainHeuristic::put(int j, int type) {
  int mb = count[type][j];
  double c = cost(j, type);
  double end = e[j] + c, noBubble = end;
  if (type == 0 && j > 0)
    end = std::max(end, endOf(0, j - 1, mb) + comm + c);
  if (type == 1 && j + 1 < n)
    end = std::max(end, endOf(1, j + 1, mb) + comm + c);
  if (count[0][j] > 0) {
    bubble[j] += end - noBubble;
    largestBubble = std::max(largestBubble, bubble[j]);
  }
  e[j] = end;
  endOf(type, j, mb) = end;
  m[j] += mem(j, type);
  order[j].push_back({type, mb});
  ++count[type][j];
}

bool ChainHeuristic::makeRoom(int j, double need) {
  while (m[j] + need > maxMem[j] + kEps) {
    if (count[2][j] >= count[1][j])
      return false;
    put(j, 2);
  }
  return true;
}

void ChainHeuristic::fillW(int j, double arrival, bool noBubbleGreedy) {
  while (count[2][j] < count[1][j] && e[j] + cost(j, 2) <= arrival + kEps)
    put(j, 2);
  if (count[2][j] < count[1][j] && e[j] < arrival - kEps) {
    // A W longer than the gap: worth it when the gap would be the largest
    // bubble anywhere, or always when greedy.
    if (arrival - e[j] > maxBubble() - bubble[j] || noBubbleGreedy)
      put(j, 2);
  }
}

std::optional<std::vector<std::vector<std::pair<int, int>>>>
ChainHeuristic::run(bool allowBubbleBeforeFirstI, bool prioritizeI,
                    bool noBubbleGreedy) {
  for (auto &c : count)
    c.assign(n, 0);
  e.assign(n, 0.0);
  m.assign(n, 0.0);
  bubble.assign(n, 0.0);
  largestBubble = 0.0;
  t.assign(static_cast<size_t>(3) * n * nmb, 0.0);
  order.assign(n, {});

  // Warm-up: the first microbatch through, then on each unit as many
  // forwards as memory allows that do not delay the first I passing by.
  for (int j = 0; j < n; ++j)
    put(j, 0);
  std::vector<int> extra(n, 0);
  double lastT = 0.0;
  for (int j = n - 1; j >= 0; --j) {
    if (j == n - 1) {
      lastT = endOf(0, j, 0) + cost(j, 1);
      continue;
    }
    double mm = m[j], c = e[j];
    while (count[0][j] + extra[j] < nmb && mm + mem(j, 0) <= maxMem[j] + kEps) {
      if (allowBubbleBeforeFirstI ? c + cost(j, 0) > lastT + comm + kEps
                                  : c >= lastT + comm - kEps)
        break;
      mm += mem(j, 0);
      c += cost(j, 0);
      ++extra[j];
    }
    lastT = std::max(c, lastT + comm) + cost(j, 1);
  }
  for (int j = 1; j < n; ++j)
    while (extra[j] > 0 && extra[j] >= extra[j - 1] &&
           count[0][j] + extra[j] < nmb)
      --extra[j];
  for (int j = 0; j < n; ++j)
    for (int k = 0; k < extra[j]; ++k) {
      if (!makeRoom(j, mem(j, 0)))
        return std::nullopt;
      put(j, 0);
    }
  for (int j = n - 1; j >= 0; --j) {
    if (!makeRoom(j, mem(j, 1)))
      return std::nullopt;
    put(j, 1);
  }

  // Steady state and cool-down: per microbatch, a forward where one is due,
  // then the I of the next microbatch on every unit from the last.
  for (int i = 1; i < nmb; ++i) {
    std::vector<int> want(n, 0);
    for (int j = 0; j < n; ++j) {
      if (count[0][j] >= nmb)
        continue;
      if (prioritizeI && j + 1 < n && count[0][j] >= count[0][j + 1] + 2) {
        // Ahead of the next unit: a forward now must not hold up the I
        // coming back.
        double nextPlusFI = e[j + 1] + cost(j + 1, 0) + cost(j + 1, 1) + comm;
        if (e[j] >= nextPlusFI)
          continue;
        double wCost = 0.0, withW = m[j] + mem(j, 0);
        for (int w = count[2][j]; withW > maxMem[j] + kEps && w < count[1][j];
             ++w) {
          wCost += cost(j, 2);
          withW += mem(j, 2);
        }
        if (e[j] + cost(j, 0) + wCost <= nextPlusFI + kEps) {
          want[j] = 1;
          continue;
        }
        if (nextPlusFI - e[j] <= maxBubble() - bubble[j] + kEps)
          continue;
      }
      want[j] = 1;
    }
    for (int j = n - 2; j >= 0; --j)
      want[j] = std::min(want[j], want[j + 1]);
    for (int j = 0; j < n; ++j) {
      if (!want[j])
        continue;
      if (!makeRoom(j, mem(j, 0)))
        return std::nullopt;
      if (j > 0)
        fillW(j, endOf(0, j - 1, count[0][j]) + comm, noBubbleGreedy);
      put(j, 0);
    }
    for (int j = n - 1; j >= 0; --j) {
      if (count[1][j] != i || count[0][j] <= i)
        return std::nullopt;
      if (!makeRoom(j, mem(j, 1)))
        return std::nullopt;
      if (j + 1 < n)
        fillW(j, endOf(1, j + 1, i) + comm, noBubbleGreedy);
      if (j == 0 && count[0][j] == nmb)
        while (count[2][j] < count[1][j])
          put(j, 2);
      put(j, 1);
    }
  }
  for (int j = 0; j < n; ++j)
    while (count[2][j] < nmb)
      put(j, 2);
  return order;
}

/// The V heuristic over p ranks. Internally, like the authors' code, the
/// backward chunks are numbered in backward order: backward chunk 0 is
/// model chunk 1 (the second half of the V, whose I runs first).
class VHeuristic {
public:
  VHeuristic(std::vector<std::array<UnitCosts, 2>> units, int mbs, double comm,
             std::vector<double> maxMem)
      : u(std::move(units)), n(static_cast<int>(u.size())), nmb(mbs),
        comm(comm), maxMem(std::move(maxMem)) {}

  /// Per rank, the order as (type, model chunk, microbatch), and the
  /// largest per-rank bubble; nullopt when the variant breaks memory or
  /// runs an action before its input exists.
  struct Result {
    std::vector<std::vector<std::array<int, 3>>> order;
    std::vector<double> bubble;
    /// The makespan of these orders (every input is placed first).
    double makespan;
  };
  std::optional<Result> run(bool fillF, bool fillB,
                            const std::vector<double> &approved);

private:
  /// Model chunk of internal (type, chunk).
  static int modelChunk(int type, int chunk) {
    return type == 0 ? chunk : 1 - chunk;
  }
  double cost(int r, int type, int chunk) const {
    return u[r][modelChunk(type, chunk)].cost[type];
  }
  double mem(int r, int type, int chunk) const {
    return u[r][modelChunk(type, chunk)].mem[type];
  }
  double &endOf(int type, int chunk, int r, int mb) {
    return t[((static_cast<size_t>(type) * 2 + chunk) * n + r) * nmb + mb];
  }
  int &cnt(int r, int type, int chunk) { return count[r][type * 2 + chunk]; }
  double maxBubble(int r = -1) const {
    double b = largestBubble;
    if (r >= 0)
      b = std::max(b, maxApproved - approved[r]);
    return b;
  }
  bool put(int type, int chunk, int r);
  bool putW(int r) {
    if (pendingW[r].empty())
      return false;
    int chunk = pendingW[r].front();
    pendingW[r].pop_front();
    return put(2, chunk, r);
  }
  /// W into the wait for an input that arrives at \p arrival.
  bool fillW(int r, double arrival, bool fill);

  std::vector<std::array<UnitCosts, 2>> u;
  const int n, nmb;
  const double comm;
  std::vector<double> maxMem;
  std::vector<double> approved;
  double maxApproved = -1.0;
  std::vector<std::array<int, 6>> count;
  std::vector<double> curTime, m, bubble, t;
  /// The largest entry of `bubble` (entries only grow).
  double largestBubble = 0.0;
  std::vector<std::deque<int>> pendingW;
  std::vector<std::vector<std::array<int, 3>>> order;
};

bool VHeuristic::put(int type, int chunk, int r) {
  int mb = cnt(r, type, chunk);
  if (mb >= nmb || m[r] + mem(r, type, chunk) > maxMem[r] + kEps)
    return false;
  double c = cost(r, type, chunk);
  double end = curTime[r] + c, noBubble = end;
  // The same rank's previous action of this microbatch must exist.
  if (type == 2) {
    if (endOf(1, chunk, r, mb) < 0)
      return false;
  } else if (type > 0 || chunk > 0) {
    int last = type * 2 + chunk - 1;
    if (endOf(last / 2, last % 2, r, mb) < 0)
      return false;
  }
  if (type < 2) {
    int from = chunk == 1 ? r + 1 : r - 1;
    if (from >= 0 && from < n) {
      double dep = endOf(type, chunk, from, mb);
      if (dep < 0)
        return false;
      end = std::max(end, dep + comm + c);
    }
  }
  if (cnt(r, 0, 0) > 0) {
    bubble[r] += end - noBubble;
    largestBubble = std::max(largestBubble, bubble[r]);
  }
  endOf(type, chunk, r, mb) = end;
  curTime[r] = end;
  m[r] += mem(r, type, chunk);
  order[r].push_back({type, modelChunk(type, chunk), mb});
  if (type == 1)
    pendingW[r].push_back(chunk);
  ++cnt(r, type, chunk);
  return true;
}

bool VHeuristic::fillW(int r, double arrival, bool fill) {
  while (!pendingW[r].empty() &&
         arrival >= curTime[r] + cost(r, 2, pendingW[r].front()) - kEps)
    if (!putW(r))
      return false;
  if (!pendingW[r].empty() && arrival - curTime[r] > maxBubble(r) - bubble[r] &&
      fill)
    return putW(r);
  return true;
}

std::optional<VHeuristic::Result>
VHeuristic::run(bool fillF, bool fillB, const std::vector<double> &approvedIn) {
  count.assign(n, {0, 0, 0, 0, 0, 0});
  curTime.assign(n, 0.0);
  m.assign(n, 0.0);
  bubble.assign(n, 0.0);
  largestBubble = 0.0;
  t.assign(static_cast<size_t>(6) * n * nmb, -1.0);
  pendingW.assign(n, {});
  order.assign(n, {});
  approved = approvedIn.empty() ? std::vector<double>(n, -1.0) : approvedIn;
  maxApproved = *std::max_element(approved.begin(), approved.end());

  // Warm-up: chunk-0 forwards down the ranks, then from the last rank up
  // the chunk-1 forwards, each rank first running the chunk-0 forwards
  // that fit before its first chunk-1 input arrives (this absorbs the
  // latency) while memory leaves room for the in-flight chunks behind it.
  for (int r = 0; r < n; ++r)
    if (!put(0, 0, r))
      return std::nullopt;
  for (int r = n - 1; r >= 0; --r) {
    if (r < n - 1) {
      double arrival = endOf(0, 1, r + 1, 0) + comm;
      double perMb = u[r][0].mem[0] + u[r][1].mem[0];
      while (m[r] + perMb * (r + 1) <= maxMem[r] + kEps &&
             curTime[r] + cost(r, 0, 0) <= arrival + kEps && cnt(r, 0, 0) < nmb)
        for (int j = 0; j <= r; ++j)
          if (cnt(j, 0, 0) < nmb && !put(0, 0, j))
            return std::nullopt;
    }
    if (!put(0, 1, r))
      return std::nullopt;
  }
  // Forwards until every rank has as many in flight as the one before it.
  int chunk = 0;
  for (int r = 1; r < n; ++r) {
    for (int guard = 0;
         (cnt(r, 0, 0) + cnt(r, 0, 1) < cnt(r - 1, 0, 0) + cnt(r - 1, 0, 1) ||
          (cnt(r, 0, 1) <= cnt(r - 1, 0, 1) && cnt(r - 1, 0, 1) < nmb));
         ++guard) {
      if (guard > 4 * nmb)
        return std::nullopt;
      for (int j = n - 1; j >= r; --j)
        if (cnt(j, 0, chunk) < nmb && !put(0, chunk, j))
          return std::nullopt;
      chunk = 1 - chunk;
    }
  }

  for (int step = 0; step < 2 * nmb; ++step) {
    // Memory before the backwards.
    for (int r = 0; r < n; ++r)
      while (m[r] + std::max(mem(r, 1, 0), mem(r, 1, 1)) > maxMem[r] + kEps)
        if (!putW(r))
          return std::nullopt;
    std::vector<std::pair<int, int>> backwards;
    std::vector<int> b0, b1;
    for (int r = 0; r < n; ++r) {
      if (cnt(r, 1, 1) >= cnt(r, 1, 0))
        b0.push_back(r);
      else if (r == n - 1)
        b1.push_back(r);
      else if (endOf(1, 1, r + 1, cnt(r, 1, 1)) >= 0 || cnt(r, 1, 0) >= nmb)
        b1.push_back(r);
      else
        b0.push_back(r);
    }
    for (auto it = b1.rbegin(); it != b1.rend(); ++it)
      backwards.push_back({*it, 1});
    for (int r : b0)
      backwards.push_back({r, 0});
    for (auto [r, c] : backwards) {
      if (cnt(r, 1, c) >= nmb)
        continue;
      int from = c == 1 ? r + 1 : r - 1;
      if (from >= 0 && from < n) {
        double dep = endOf(1, c, from, cnt(r, 1, c));
        if (dep >= 0 && !fillW(r, dep + comm, c == 1 || fillB))
          return std::nullopt;
      }
      if (!put(1, c, r))
        return std::nullopt;
    }
    for (int r = 0; r < n; ++r) {
      if (cnt(r, 0, 1) >= nmb)
        continue;
      int item = -1;
      if (cnt(r, 0, 1) >= cnt(r, 0, 0))
        item = 0;
      else if (r == n - 1)
        item = 1;
      else if (endOf(0, 1, r + 1, cnt(r, 0, 1)) >= 0)
        item = 1;
      else if (cnt(r, 0, 0) < nmb &&
               (r == 0 || endOf(0, 0, r - 1, cnt(r, 0, 0)) >= 0))
        item = 0;
      if (item < 0)
        continue;
      while (m[r] + mem(r, 0, item) > maxMem[r] + kEps)
        if (!putW(r))
          return std::nullopt;
      int from = item == 1 ? r + 1 : r - 1;
      if (from >= 0 && from < n) {
        double dep = endOf(0, item, from, cnt(r, 0, item));
        if (dep >= 0 && !fillW(r, dep + comm, fillF))
          return std::nullopt;
      }
      if (!put(0, item, r))
        return std::nullopt;
    }
  }
  for (int r = 0; r < n; ++r)
    while (!pendingW[r].empty())
      if (!putW(r))
        return std::nullopt;
  for (int r = 0; r < n; ++r)
    if (order[r].size() != static_cast<size_t>(6 * nmb))
      return std::nullopt;
  return Result{order, bubble,
                *std::max_element(curTime.begin(), curTime.end())};
}

/// Keeps the fastest valid schedule among candidates. Candidates come with
/// the heuristic's estimate of their makespan, a lower bound of the
/// simulated one, so only those whose estimate beats the best so far are
/// simulated (fastest estimate first).
struct Best {
  /// What "fastest" means; the estimates (the heuristic's own end times)
  /// order the simulations and, for the makespan, stop them early.
  Objective objective = Objective::Makespan;
  std::optional<Schedule> schedule;
  double value = 0.0;
  std::string lastError;
  std::vector<std::pair<double, Schedule>> pending;

  void add(double estimate, Schedule s) {
    pending.push_back({estimate, std::move(s)});
  }
  void settle(const Problem &problem) {
    std::stable_sort(
        pending.begin(), pending.end(),
        [](const auto &a, const auto &b) { return a.first < b.first; });
    for (auto &[estimate, s] : pending) {
      if (schedule && objective == Objective::Makespan &&
          estimate >= value - kEps)
        break;
      llvm::Expected<Timeline> t = simulate(problem, s);
      if (!t) {
        lastError = llvm::toString(t.takeError());
        continue;
      }
      if (!schedule || t->value(objective) < value - kEps) {
        schedule = std::move(s);
        value = t->value(objective);
      }
    }
    pending.clear();
  }
  /// The fastest schedule, or an error naming the \p heuristic that found
  /// none within the memory limit.
  llvm::Expected<Schedule> take(const Problem &problem,
                                llvm::StringRef heuristic) {
    settle(problem);
    if (!schedule)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("the {} heuristic finds no schedule within the memory "
                      "limit{}",
                      heuristic.str(),
                      lastError.empty() ? "" : ": " + lastError));
    return std::move(*schedule);
  }
};
} // namespace

llvm::Expected<Schedule> stagecraft::pipe::sched::zeroBubbleChain(
    const Problem &problem, llvm::ArrayRef<int> placement,
    llvm::ArrayRef<double> memoryLimit, Objective objective) {
  // Blocks in chain order.
  std::vector<std::vector<int>> blocks;
  std::vector<int> blockRank;
  for (int s = 0; s < problem.numStages(); ++s) {
    if (s == 0 || placement[s] != placement[s - 1]) {
      blocks.push_back({});
      blockRank.push_back(placement[s]);
    }
    blocks.back().push_back(s);
  }
  std::vector<UnitCosts> units;
  std::vector<double> limits;
  for (size_t k = 0; k < blocks.size(); ++k) {
    units.push_back(sumOf(problem, blocks[k]));
    limits.push_back(memoryLimit[blockRank[k]]);
  }
  ChainHeuristic heuristic(units, problem.microbatches, problem.latency,
                           limits);
  Best best;
  best.objective = objective;
  for (int variant = 0; variant < 8; ++variant) {
    auto order = heuristic.run(variant & 1, variant & 2, variant & 4);
    if (!order)
      continue;
    Schedule s;
    s.placement.assign(placement.begin(), placement.end());
    s.ranks.resize(problem.ranks);
    for (size_t k = 0; k < blocks.size(); ++k)
      for (auto [type, mb] : (*order)[k])
        emit(s.ranks[blockRank[k]], blocks[k], type, mb);
    best.add(heuristic.estimate(), std::move(s));
  }
  return best.take(problem, "zero-bubble");
}

llvm::Expected<Schedule> stagecraft::pipe::sched::zeroBubbleV(
    const Problem &problem, llvm::ArrayRef<int> placement,
    llvm::ArrayRef<double> memoryLimit, std::optional<double> plannedLatency) {
  const int p = problem.ranks, n = problem.numStages();
  std::vector<std::array<UnitCosts, 2>> units(p);
  for (int r = 0; r < p; ++r) {
    units[r][0] = sumOf(problem, {r});
    units[r][1] = sumOf(problem, {n - 1 - r});
  }
  VHeuristic heuristic(
      units, problem.microbatches, plannedLatency.value_or(problem.latency),
      std::vector<double>(memoryLimit.begin(), memoryLimit.end()));
  Best best;
  for (bool fillB : {true, false})
    for (bool fillF : {true, false}) {
      // As the authors do: retry, approving the bubbles of the last try,
      // while the largest bubble shrinks.
      std::vector<double> approved;
      double previous = std::numeric_limits<double>::infinity();
      for (int round = 0; round < 32; ++round) {
        auto result = heuristic.run(fillF, fillB, approved);
        if (!result)
          break;
        Schedule s;
        s.placement.assign(placement.begin(), placement.end());
        s.ranks.resize(p);
        for (int r = 0; r < p; ++r)
          for (auto [type, chunk, mb] : result->order[r])
            emit(s.ranks[r], {chunk == 0 ? r : n - 1 - r}, type, mb);
        best.add(result->makespan, std::move(s));
        double largest =
            *std::max_element(result->bubble.begin(), result->bubble.end());
        if (largest >= previous - kEps)
          break;
        previous = largest;
        approved = result->bubble;
      }
    }
  return best.take(problem, "ZB-V");
}
