//===- LowerBound.cpp - Memory-aware makespan lower bound -----------------===//
//
// Heads and tails are order statistics: the k-th F of a stage to start is
// some microbatch's F, so its head bounds whichever F that is in a given
// schedule, and since a rank runs one action at a time, the k-th F to start
// is also the k-th to end and the (m - 1 - k)-th from last. That pairing
// gives every job one head and one tail. Jackson's preemptive schedule
// (always run the available job with the longest tail) is optimal for the
// one-machine relaxation, so its largest completion-plus-tail is a bound.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/LowerBound.h"
#include "scheduler/search/AutoScheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <vector>

using namespace stagecraft::pipe::sched;

double stagecraft::pipe::sched::jacksonBound(std::vector<OneMachineJob> jobs) {
  using Job = OneMachineJob;
  std::sort(jobs.begin(), jobs.end(),
            [](const Job &a, const Job &b) { return a.head < b.head; });
  // Available jobs by tail, with their remaining time.
  std::priority_queue<std::pair<double, double>> ready;
  double now = 0.0, bound = 0.0;
  size_t next = 0;
  while (next < jobs.size() || !ready.empty()) {
    if (ready.empty())
      now = std::max(now, jobs[next].head);
    while (next < jobs.size() && jobs[next].head <= now) {
      ready.push({jobs[next].tail, jobs[next].cost});
      ++next;
    }
    auto [tail, remaining] = ready.top();
    ready.pop();
    double until = next < jobs.size() ? jobs[next].head
                                      : std::numeric_limits<double>::infinity();
    if (now + remaining <= until) {
      now += remaining;
      bound = std::max(bound, now + tail);
    } else {
      ready.push({tail, remaining - (until - now)});
      now = until;
    }
  }
  return bound;
}

/// The most forward time a rank can run with nothing freed: a fractional
/// knapsack over its stages' forwards (\p items: cost, activation; at most
/// \p m of each) in \p room, most forward time per unit of memory first.
static double forwardTimeThatFits(std::vector<std::pair<double, double>> items,
                                  double room, int m) {
  std::sort(items.begin(), items.end(), [](const auto &a, const auto &b) {
    return a.first * b.second > b.first * a.second;
  });
  double fits = 0.0;
  for (auto [cost, activation] : items) {
    if (activation <= 0.0) {
      fits += m * cost;
      continue;
    }
    double count = std::min<double>(m, std::max(0.0, room) / activation);
    fits += count * cost;
    room -= count * activation;
  }
  return fits;
}

/// Until a rank's first I starts, it can run only forwards (a W follows its
/// own I), and every forward it runs keeps its activation until then (an I
/// frees it), so its busy time before that is at most the forward work whose
/// activation fits the limit together. Rank r cannot start before its first
/// forward's head, nor its first I before that I's head T; so it ends no
/// earlier than T + its work - min(T - start, the forward work that fits):
/// the idle time that memory forces before the first backward. The forward
/// work that fits is bounded by the fractional knapsack over the rank's
/// stages (cost per activation, at most m of each). The order statistics
/// alone miss it: they limit each stage's forwards in flight, not the sum
/// over the rank's stages.
static double warmUpBound(const Problem &problem, llvm::ArrayRef<int> placement,
                          llvm::ArrayRef<double> memoryLimit,
                          const OrderStatistics &stats) {
  const int n = problem.numStages(), m = problem.microbatches;
  double bound = 0.0;
  for (int r = 0; r < problem.ranks; ++r) {
    double start = std::numeric_limits<double>::infinity(), firstI = start;
    double work = 0.0, forwardWork = 0.0;
    std::vector<std::pair<double, double>> items; // (cost, activation)
    for (int s = 0; s < n; ++s) {
      if (placement[s] != r)
        continue;
      start = std::min(start, stats.head(0, s, 0));
      firstI = std::min(firstI, stats.head(1, s, 0));
      work += m * (stats.cost(0, s) + stats.cost(1, s) + stats.cost(2, s));
      forwardWork += m * stats.cost(0, s);
      items.push_back({stats.cost(0, s), problem.stages[s].activation});
    }
    if (items.empty())
      continue;
    double fits = forwardTimeThatFits(items, memoryLimit[r], m);
    double busy = std::min({forwardWork, fits, firstI - start});
    bound = std::max(bound, firstI + work - busy);
  }
  return bound;
}

double stagecraft::pipe::sched::memoryAwareLowerBound(
    const Problem &problem, llvm::ArrayRef<int> placement,
    llvm::ArrayRef<double> memoryLimit) {
  // On devices of different speeds: the costs as each stage's rank sees
  // them.
  for (const Problem::Device &d : problem.devices)
    if (d.speed != 1.0)
      return memoryAwareLowerBound(scaledForDevices(problem, placement),
                                   placement, memoryLimit);
  // Microbatches of different lengths: the bound of the problem where each
  // stage's every microbatch is as short (and as small) as its shortest.
  // That problem's schedules are no slower than this one's, so its bound
  // holds here too (the pairing below needs alike microbatches).
  if (problem.hasLengths()) {
    Problem relaxed = problem;
    relaxed.lengths.clear();
    double memory = std::numeric_limits<double>::infinity();
    for (int k = 0; k < problem.microbatches; ++k)
      memory = std::min(memory, problem.memoryScale(k));
    for (int s = 0; s < problem.numStages(); ++s) {
      double c = std::numeric_limits<double>::infinity();
      for (int k = 0; k < problem.microbatches; ++k)
        c = std::min(c, problem.costScale(s, k));
      Stage &st = relaxed.stages[s];
      st.forward *= c;
      st.backwardInput *= c;
      st.backwardWeight *= c;
      st.activation *= memory;
      st.weightGrad *= memory;
    }
    return memoryAwareLowerBound(relaxed, placement, memoryLimit);
  }
  OrderStatistics stats = orderStatistics(problem, placement, memoryLimit);
  if (!stats.feasible)
    return std::numeric_limits<double>::infinity();
  const int n = problem.numStages(), m = problem.microbatches;
  std::vector<std::vector<OneMachineJob>> jobs(problem.ranks);
  for (int s = 0; s < n; ++s)
    for (int type = 0; type < 3; ++type)
      for (int k = 0; k < m; ++k)
        jobs[placement[s]].push_back({stats.head(type, s, k),
                                      stats.cost(type, s),
                                      stats.tail(type, s, m - 1 - k)});
  double bound = 0.0;
  for (auto &rankJobs : jobs)
    if (!rankJobs.empty())
      bound = std::max(bound, jacksonBound(std::move(rankJobs)));
  if (!memoryLimit.empty())
    bound =
        std::max(bound, warmUpBound(problem, placement, memoryLimit, stats));
  return bound;
}

/// The least time a stage's input gradient takes: its I, or its fused B
/// where that is shorter.
static double leastInputGradient(const Stage &st) {
  return std::min(st.backwardInput, st.backward());
}

double
stagecraft::pipe::sched::roundTripSpanBound(const Problem &problem,
                                            llvm::ArrayRef<int> placement) {
  if (problem.hasLengths())
    return 0.0;
  for (const Problem::Device &d : problem.devices)
    if (d.speed != 1.0)
      return roundTripSpanBound(scaledForDevices(problem, placement),
                                placement);
  const int n = problem.numStages(), m = problem.microbatches;
  const Problem::Edges edges = problem.edges();
  auto lat = [&](int a, int b) {
    return placement[a] == placement[b] ? 0.0 : problem.latency;
  };
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  double bound = 0.0;
  std::vector<double> there(n), back(n);
  for (int u = 0; u < n; ++u) {
    // Over the stages downstream of u (inputs come before their consumers):
    // there[v], the longest chain of forwards and links from the start of
    // F(u, k) to the start of F(v, k); back[v], the longest chain of links
    // and input gradients strictly between v and u, from the end of I(v, k)
    // to the start of I(u, k).
    std::fill(there.begin(), there.end(), kNone);
    std::fill(back.begin(), back.end(), kNone);
    there[u] = back[u] = 0.0;
    const Stage &su = problem.stages[u];
    for (int v = u + 1; v < n; ++v) {
      for (int i : edges.inputs[v]) {
        if (there[i] == kNone)
          continue;
        const Stage &si = problem.stages[i];
        there[v] = std::max(there[v], there[i] + si.forward + lat(i, v));
        back[v] =
            std::max(back[v], back[i] + lat(v, i) +
                                  (i == u ? 0.0 : leastInputGradient(si)));
      }
      if (there[v] == kNone)
        continue;
      const Stage &sv = problem.stages[v];
      double own = m * std::max(0.0, sv.forward + leastInputGradient(sv) -
                                         sv.overlapGain());
      bound = std::max(bound, there[v] + own + back[v] + su.leastBackward());
    }
  }
  return bound;
}

double stagecraft::pipe::sched::memoryAwareSpanBound(
    const Problem &problem, llvm::ArrayRef<int> placement,
    llvm::ArrayRef<double> memoryLimit) {
  const int n = problem.numStages(), m = problem.microbatches;
  std::vector<double> work(problem.ranks, 0.0);
  bool plain = memoryLimit.empty() || problem.hasLengths();
  for (const Problem::Device &d : problem.devices)
    plain |= d.speed != 1.0;
  for (int s = 0; s < n; ++s) {
    const Stage &st = problem.stages[s];
    plain |= st.overlapGain() > 0.0;
    work[placement[s]] += m * (st.forward + st.leastBackward());
  }
  const double roundTrip = roundTripSpanBound(problem, placement);
  if (plain) {
    double most = roundTrip;
    for (double w : work)
      most = std::max(most, w);
    return most;
  }
  // down[s]: from the end of F(s, k) to the earliest start of I(s, k): the
  // round trip through the stages that consume s.
  const Problem::Edges edges = problem.edges();
  auto lat = [&](int a, int b) {
    return placement[a] == placement[b] ? 0.0 : problem.latency;
  };
  std::vector<double> down(n, 0.0);
  for (int s = n - 1; s >= 0; --s)
    for (int c : edges.consumers[s]) {
      const Stage &cs = problem.stages[c];
      down[s] = std::max(down[s], lat(s, c) + cs.forward + down[c] +
                                      leastInputGradient(cs) + lat(c, s));
    }
  double bound = roundTrip;
  for (int r = 0; r < problem.ranks; ++r) {
    double gap = std::numeric_limits<double>::infinity(), forwardWork = 0.0;
    std::vector<std::pair<double, double>> items; // (cost, activation)
    for (int s = 0; s < n; ++s) {
      if (placement[s] != r)
        continue;
      const Stage &st = problem.stages[s];
      gap = std::min(gap, st.forward + down[s]);
      forwardWork += m * st.forward;
      items.push_back({st.forward, st.activation});
    }
    if (items.empty())
      continue;
    double fits = forwardTimeThatFits(items, memoryLimit[r], m);
    double busy = std::min(forwardWork, fits);
    bound = std::max(bound, work[r] + std::max(0.0, gap - busy));
  }
  return bound;
}

OrderStatistics
stagecraft::pipe::sched::orderStatistics(const Problem &problem,
                                         llvm::ArrayRef<int> placement,
                                         llvm::ArrayRef<double> memoryLimit) {
  OrderStatistics stats;
  const int n = problem.numStages(), m = problem.microbatches;
  const Problem::Edges edges = problem.edges();
  const std::vector<std::vector<int>> &inputs = edges.inputs,
                                      &consumers = edges.consumers;
  auto cost = [&](int s, int type) {
    const Stage &st = problem.stages[s];
    return type == 0   ? st.forward
           : type == 1 ? st.backwardInput
                       : st.backwardWeight;
  };
  auto lat = [&](int a, int b) {
    return placement[a] == placement[b] ? 0.0 : problem.latency;
  };
  // Activation of s and the stages of its rank before it: what a
  // microbatch between F(s) and I(s) holds at least.
  std::vector<double> held(n);
  {
    std::vector<double> sum(problem.ranks, 0.0);
    for (int s = 0; s < n; ++s)
      held[s] = sum[placement[s]] += problem.stages[s].activation;
  }
  // K[s]: microbatches that may be between F(s) and I(s) at once.
  std::vector<int> inFlight(n, m);
  for (int s = 0; s < n; ++s) {
    if (memoryLimit.empty() || held[s] <= 0.0)
      continue;
    double k = std::floor(memoryLimit[placement[s]] / held[s] + 1e-9);
    if (k < 1.0) {
      stats.feasible = false;
      return stats;
    }
    inFlight[s] = static_cast<int>(std::min<double>(k, m));
  }
  auto at = [&](int s, int k) { return static_cast<size_t>(s) * m + k; };
  // Heads: start of the k-th F / I / W of a stage.
  std::vector<double> hF(static_cast<size_t>(n) * m), hI(hF.size()),
      hW(hF.size());
  // When the k-th F of s starts, of the k microbatches before it x have
  // run I(s) and y <= x also W(s); the others hold `held[s]`, those between
  // I and W at least weight_grad. So (k - x) held + (x - y) weight_grad +
  // held (the new one) fits the limit, and the F starts after the x-th I
  // and the y-th W end. The earliest such time over the feasible (x, y).
  auto memoryHead = [&](int s, int k) {
    if (memoryLimit.empty() || k == 0)
      return 0.0;
    const double a = held[s], g = problem.stages[s].weightGrad;
    const double room = memoryLimit[placement[s]] - a;
    // The fewest I done that fit with y W done (k + 1 when none fit).
    auto fewestI = [&](int y) {
      if (a > g) {
        double need = (k * a - y * g - room) / (a - g);
        int x = std::max(y, static_cast<int>(std::ceil(need - 1e-9)));
        return std::min(x, k + 1);
      }
      return (k - y) * a > room + 1e-9 ? k + 1 : y;
    };
    auto wEnd = [&](int y) {
      return y > 0 ? hW[at(s, y - 1)] + cost(s, 2) : 0.0;
    };
    auto iEnd = [&](int x) {
      return x > 0 ? hI[at(s, x - 1)] + cost(s, 1) : 0.0;
    };
    // wEnd grows with y and fewestI shrinks, so max(wEnd, iEnd) is least
    // where they cross: binary search over the feasible y.
    int lo = 0, hi = k;
    if (fewestI(hi) > k)
      return std::numeric_limits<double>::infinity();
    while (lo < hi && fewestI(lo) > k) {
      int mid = lo + (hi - lo) / 2;
      if (fewestI(mid) > k)
        lo = mid + 1;
      else
        hi = mid;
    }
    int first = lo;
    lo = first;
    hi = k;
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      if (wEnd(mid) >= iEnd(fewestI(mid)))
        hi = mid;
      else
        lo = mid + 1;
    }
    double best = std::max(wEnd(lo), iEnd(fewestI(lo)));
    if (lo > first)
      best = std::min(best, std::max(wEnd(lo - 1), iEnd(fewestI(lo - 1))));
    return best;
  };
  for (int k = 0; k < m; ++k) {
    for (int s = 0; s < n; ++s) {
      double h = 0.0;
      for (int i : inputs[s])
        h = std::max(h, hF[at(i, k)] + cost(i, 0) + lat(i, s));
      if (k > 0)
        h = std::max(h, hF[at(s, k - 1)] + cost(s, 0));
      if (k >= inFlight[s])
        h = std::max(h, hI[at(s, k - inFlight[s])] + cost(s, 1));
      h = std::max(h, memoryHead(s, k));
      hF[at(s, k)] = h;
    }
    for (int s = n - 1; s >= 0; --s) {
      double h = hF[at(s, k)] + cost(s, 0);
      for (int c : consumers[s])
        h = std::max(h, hI[at(c, k)] + cost(c, 1) + lat(c, s));
      if (k > 0)
        h = std::max(h, hI[at(s, k - 1)] + cost(s, 1));
      hI[at(s, k)] = h;
      double w = h + cost(s, 1);
      if (k > 0)
        w = std::max(w, hW[at(s, k - 1)] + cost(s, 2));
      hW[at(s, k)] = w;
    }
  }
  // Tails: time after the end of the i-th from last F / I / W.
  std::vector<double> tF(hF.size()), tI(hF.size()), tW(hF.size());
  for (int i = 0; i < m; ++i) {
    for (int s = 0; s < n; ++s) {
      // The W of this and of the i later I all come after.
      double t = (i + 1) * cost(s, 2);
      tW[at(s, i)] = i * cost(s, 2);
      for (int j : inputs[s])
        t = std::max(t, lat(s, j) + cost(j, 1) + tI[at(j, i)]);
      if (i > 0)
        t = std::max(t, cost(s, 1) + tI[at(s, i - 1)]);
      if (i >= inFlight[s])
        t = std::max(t, cost(s, 0) + tF[at(s, i - inFlight[s])]);
      tI[at(s, i)] = t;
    }
    for (int s = n - 1; s >= 0; --s) {
      double t = cost(s, 1) + tI[at(s, i)];
      for (int c : consumers[s])
        t = std::max(t, lat(s, c) + cost(c, 0) + tF[at(c, i)]);
      if (i > 0)
        t = std::max(t, cost(s, 0) + tF[at(s, i - 1)]);
      tF[at(s, i)] = t;
    }
  }
  stats.microbatches = m;
  stats.costs.resize(static_cast<size_t>(3) * n);
  for (int s = 0; s < n; ++s)
    for (int type = 0; type < 3; ++type)
      stats.costs[static_cast<size_t>(type) * n + s] = cost(s, type);
  stats.heads = {std::move(hF), std::move(hI), std::move(hW)};
  stats.tails = {std::move(tF), std::move(tI), std::move(tW)};
  return stats;
}

// The placement bounds auto reports (declared in AutoScheduler.h).

/// On devices of different speeds: \p problem with the costs as each
/// stage's rank sees them; none when every device has speed 1.
static std::optional<Problem> deviceScaled(const Problem &problem,
                                           llvm::ArrayRef<int> placement) {
  for (const Problem::Device &d : problem.devices)
    if (d.speed != 1.0)
      return scaledForDevices(problem, placement);
  return std::nullopt;
}

double stagecraft::pipe::sched::lowerBound(const Problem &problem,
                                           llvm::ArrayRef<int> placement) {
  if (std::optional<Problem> scaled = deviceScaled(problem, placement))
    return lowerBound(*scaled, placement);
  const int n = problem.numStages(), p = problem.ranks;
  std::vector<double> work(p, 0.0), chain(p, -1.0);
  // The earliest a forward of stage s can start: the longest path of
  // (shortest) forwards and latencies from a source (a chain: everything
  // before it).
  std::vector<double> earliest(n, 0.0), forwardOf(n, 0.0);
  for (int s = 0; s < n; ++s) {
    int r = placement[s];
    for (int i : problem.inputsOf(s))
      earliest[s] = std::max(earliest[s],
                             earliest[i] + forwardOf[i] +
                                 (placement[i] != r ? problem.latency : 0.0));
    chain[r] = chain[r] < 0.0 ? earliest[s] : std::min(chain[r], earliest[s]);
    const Stage &stage = problem.stages[s];
    // With lengths: each microbatch's own work, and the chain of the one
    // whose forward here is shortest.
    double total = 0.0, shortest = std::numeric_limits<double>::infinity();
    for (int m = 0; m < problem.microbatches; ++m) {
      double c = problem.costScale(s, m);
      total += c;
      shortest = std::min(shortest, c);
    }
    work[r] += total * (stage.forward + stage.leastBackward());
    forwardOf[s] = shortest * stage.forward;
  }
  double bound = 0.0;
  for (int r = 0; r < p; ++r)
    bound = std::max(bound, std::max(chain[r], 0.0) + work[r]);
  return bound;
}

double stagecraft::pipe::sched::spanLowerBound(const Problem &problem,
                                               llvm::ArrayRef<int> placement) {
  if (std::optional<Problem> scaled = deviceScaled(problem, placement))
    return spanLowerBound(*scaled, placement);
  std::vector<double> work(problem.ranks, 0.0);
  for (int s = 0; s < problem.numStages(); ++s) {
    const Stage &stage = problem.stages[s];
    double total = 0.0;
    for (int m = 0; m < problem.microbatches; ++m)
      total += problem.costScale(s, m);
    // An overlapped F&B saves at most the mean of its two stages' gains,
    // and each F and each B is in one pair at most.
    work[placement[s]] +=
        total * std::max(0.0, stage.forward + stage.leastBackward() -
                                  stage.overlapGain());
  }
  return std::max(*std::max_element(work.begin(), work.end()),
                  roundTripSpanBound(problem, placement));
}

double stagecraft::pipe::sched::lowerBound(const Problem &problem) {
  double bound = std::numeric_limits<double>::infinity();
  for (const NamedPlacement &p : candidatePlacements(problem))
    bound = std::min(bound, lowerBound(problem, p.placement));
  return bound;
}
