//===- ZeroBubble.cpp - ZB-H1, ZB-H2 and ZB-V schedules -------------------===//
//
// The zero-bubble schedules of Qi et al. ("Zero Bubble Pipeline
// Parallelism", ICLR 2024; "Pipeline Parallelism with Controllable Memory",
// 2024): the backward is split into I and W, I runs as soon as it can, and
// W fills the time a rank would otherwise idle. Each kind is the fastest of
// the papers' heuristic (ZeroBubbleHeuristic.h) and the handcrafted shape
// (a 1F1B-shaped order of F and I with W filling the waits, or for ZB-V a
// forward-first list policy), both at the kind's memory:
//   - zb-h1: every rank within 1F1B's highest peak;
//   - zb-h2: every rank within (2p - 1) / p times that, the paper's
//     (2p - 1) microbatches, under twice 1F1B's peak;
//   - zb-v: V placement (rank r hosts stages r and 2p - 1 - r) within the
//     highest 1F1B peak of the same model.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"
#include "scheduler/kinds/ListScheduler.h"
#include "scheduler/kinds/ZeroBubbleHeuristic.h"
#include "scheduler/model/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <thread>

using namespace stagecraft::pipe::sched;

/// Per-rank peak memory of 1F1B on the contiguous placement of \p problem.
static llvm::Expected<std::vector<double>>
oneFOneBPeaks(const Problem &problem) {
  Problem plain = problem;
  for (Stage &s : plain.stages)
    s.rank.reset();
  llvm::Expected<std::vector<int>> placement =
      placeContiguous(plain, /*requireContiguous=*/true);
  if (!placement)
    return placement.takeError();
  llvm::Expected<Timeline> t =
      simulate(plain, generateOneFOneB(plain, *placement));
  if (!t)
    return t.takeError();
  return t->peakMemory;
}

llvm::Expected<std::vector<double>>
stagecraft::pipe::sched::oneFOneBPeakMemory(const Problem &problem) {
  return oneFOneBPeaks(problem);
}

/// The zero-bubble policy: a 1F1B-shaped order of F and I with \p warmup(k)
/// warm-up forwards on block k, W filling the waits, memory limits \p limits.
static llvm::Expected<Schedule> zeroBubble(const Problem &problem,
                                           llvm::ArrayRef<int> placement,
                                           llvm::function_ref<int(int)> warmup,
                                           std::vector<double> limits) {
  ListPolicy policy;
  policy.memoryLimit = std::move(limits);
  policy.backbone =
      oneFOneBOrders(problem, placement, warmup, ActionKind::BackwardInput);
  return listSchedule(problem, placement, policy);
}

namespace {
/// Problems with at least this many actions generate their candidates in
/// parallel threads; below it a thread costs more than it saves.
constexpr long long kParallelActions = 50000;

/// The fastest of several candidate schedules by an objective (the
/// makespan, or the largest per-rank span), each generated and simulated
/// once: in a thread of its own on large problems, the result being the
/// same either way. The first of equally fast candidates wins; when every
/// candidate failed, the first failure is the result.
class Fastest {
public:
  using Candidate = std::function<llvm::Expected<Schedule>()>;
  Fastest(const Problem &problem, Objective objective)
      : problem(problem), objective(objective) {}

  void add(Candidate candidate) { candidates.push_back(std::move(candidate)); }

  llvm::Expected<Schedule> take() {
    const size_t n = candidates.size();
    std::vector<std::optional<llvm::Expected<Schedule>>> results(n);
    std::vector<double> makespans(n, 0.0);
    std::vector<char> invalid(n, 0);
    auto run = [&](size_t i) {
      llvm::Expected<Schedule> s = candidates[i]();
      if (s) {
        llvm::Expected<Timeline> t = simulate(problem, *s);
        if (t) {
          makespans[i] = t->value(objective);
        } else {
          llvm::consumeError(t.takeError());
          invalid[i] = 1;
        }
      }
      results[i].emplace(std::move(s));
    };
    if (n > 1 && problem.numActions() >= kParallelActions &&
        std::thread::hardware_concurrency() > 1) {
      std::vector<std::thread> threads;
      for (size_t i = 1; i < n; ++i)
        threads.emplace_back(run, i);
      run(0);
      for (std::thread &t : threads)
        t.join();
    } else {
      for (size_t i = 0; i < n; ++i)
        run(i);
    }
    std::optional<Schedule> best;
    double makespan = 0.0;
    llvm::Error firstError = llvm::Error::success();
    bool anyInvalid = false;
    for (size_t i = 0; i < n; ++i) {
      llvm::Expected<Schedule> &s = *results[i];
      if (!s) {
        if (firstError)
          llvm::consumeError(s.takeError());
        else
          firstError = s.takeError();
        continue;
      }
      if (invalid[i]) {
        anyInvalid = true;
        continue;
      }
      if (!best || makespans[i] < makespan - 1e-9) {
        best = std::move(*s);
        makespan = makespans[i];
      }
    }
    if (!best && !anyInvalid)
      return std::move(firstError);
    llvm::consumeError(std::move(firstError));
    if (anyInvalid)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "a zero-bubble candidate does not "
                                     "verify");
    return std::move(*best);
  }

private:
  const Problem &problem;
  const Objective objective;
  std::vector<Candidate> candidates;
};
} // namespace

/// The highest per-rank peak of 1F1B on \p placement.
static llvm::Expected<double>
highestOneFOneBPeak(const Problem &problem, llvm::ArrayRef<int> placement) {
  llvm::Expected<Timeline> t =
      simulate(problem, generateOneFOneB(problem, placement));
  if (!t)
    return t.takeError();
  return *std::max_element(t->peakMemory.begin(), t->peakMemory.end());
}

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateZBH1(const Problem &problem,
                                      llvm::ArrayRef<int> placement,
                                      Objective objective) {
  llvm::Expected<double> highest = highestOneFOneBPeak(problem, placement);
  if (!highest)
    return highest.takeError();
  // 1F1B's warm-up depth; deferred W may use memory up to 1F1B's highest
  // peak on every rank.
  const int p = problem.ranks;
  std::vector<double> limits(p, *highest);
  Fastest fastest(problem, objective);
  // The papers' heuristic is built on a chain; a branching pipeline gets
  // the list scheduler alone.
  if (problem.isChain())
    fastest.add([&] { return zeroBubbleChain(problem, placement, limits); });
  fastest.add([&] {
    return zeroBubble(
        problem, placement, [&](int k) { return p - k - 1; }, limits);
  });
  return fastest.take();
}

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateZBH2(const Problem &problem,
                                      llvm::ArrayRef<int> placement,
                                      Objective objective) {
  llvm::Expected<double> highest = highestOneFOneBPeak(problem, placement);
  if (!highest)
    return highest.takeError();
  // Twice 1F1B's warm-up (2p - 1 in flight on rank 0), and room for 2p - 1
  // of 1F1B's highest per-microbatch memory on every rank, so that the last
  // ranks can run their I early and defer W to the end.
  const int p = problem.ranks;
  std::vector<double> limits(p, *highest * (2.0 * p - 1) / p);
  Fastest fastest(problem, objective);
  // The papers' heuristic is built on a chain; a branching pipeline gets
  // the list scheduler alone.
  if (problem.isChain())
    fastest.add([&] { return zeroBubbleChain(problem, placement, limits); });
  fastest.add([&] {
    return zeroBubble(
        problem, placement, [&](int k) { return 2 * (p - k) - 2; }, limits);
  });
  return fastest.take();
}

llvm::Expected<std::vector<int>>
stagecraft::pipe::sched::placeVShape(const Problem &problem) {
  const int n = problem.numStages(), p = problem.ranks;
  if (n != 2 * p)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("V placement needs 2 stages per rank: pipeline @{} has {} "
                    "stages for {} ranks (needs {})",
                    problem.name, n, p, 2 * p));
  std::vector<int> placement(n);
  for (int r = 0; r < p; ++r) {
    placement[r] = r;
    placement[n - 1 - r] = r;
  }
  for (int s = 0; s < n; ++s) {
    const std::optional<int> &pin = problem.stages[s].rank;
    if (pin && *pin != placement[s])
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("V placement puts stage @{} on rank {}, but it is pinned "
                      "to rank {}",
                      problem.stages[s].name, placement[s], *pin));
  }
  return placement;
}

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateZBV(const Problem &problem,
                                     Objective objective) {
  llvm::Expected<std::vector<int>> placement = placeVShape(problem);
  if (!placement)
    return placement.takeError();
  llvm::Expected<std::vector<double>> peaks = oneFOneBPeaks(problem);
  if (!peaks)
    return peaks.takeError();
  // Forwards before backwards and the earlier chunk first keep every rank fed
  // in the V: with uniform costs each added microbatch adds exactly its work
  // to the makespan once m >= 2p (unit-tested), i.e. no steady-state bubble.
  ListPolicy policy;
  policy.memoryLimit.assign(problem.ranks,
                            *std::max_element(peaks->begin(), peaks->end()));
  policy.backwardFirst = false;
  policy.laterStageFirst = false;
  Fastest fastest(problem, objective);
  fastest.add(
      [&] { return zeroBubbleV(problem, *placement, policy.memoryLimit); });
  // With latency, the heuristic planned for 2 to 8 times the real latency
  // (more slack in its offsets and W fills) often ends sooner once
  // simulated with the real one (with heavy end stages, both on rank 0 in
  // the V, 8 times reaches the V placement's memory-aware bound where the
  // plain heuristic is 9 % above it); tried up to a size where the extra
  // runs stay cheap.
  if (problem.latency > 0.0 && problem.numActions() <= 200000)
    for (double factor : {2.0, 3.0, 5.0, 8.0})
      fastest.add([&, factor] {
        return zeroBubbleV(problem, *placement, policy.memoryLimit,
                           problem.latency * factor);
      });
  fastest.add([&] { return listSchedule(problem, *placement, policy); });
  return fastest.take();
}
