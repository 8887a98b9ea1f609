//===- LayerSearch.cpp - auto on a layer pipeline -------------------------===//
//
// See LayerSearch.h. The candidates: device orders (as written, fastest
// first, slowest first, fastest and slowest alternating; duplicates once)
// x stages per rank (1: 1f1b, zb-h1, zb-h2 on contiguous stages; 2:
// interleaved-1f1b round robin, zb-v and dualpipev in a V; 3 and 4:
// interleaved-1f1b round robin) x the cut that is exact for that
// placement, where the layers are enough for the stages.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/LayerSearch.h"
#include "scheduler/search/ScheduleByName.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <set>

using namespace stagecraft::pipe::sched;

Problem stagecraft::pipe::sched::stagedProblem(const Problem &ranks,
                                               llvm::ArrayRef<Layer> layers,
                                               const Partition &partition) {
  Problem problem = ranks;
  problem.stages = stagesFromPartition(layers, partition);
  for (size_t s = 0; s < problem.stages.size(); ++s)
    problem.stages[s].name = fmt::format("s{}", s);
  return problem;
}

namespace {
struct Shape {
  const char *kind;
  int perRank;
  /// Stage s of S on p ranks runs on this rank.
  int (*rankOf)(int s, int S, int p);
};

int contiguous(int s, int S, int p) {
  return static_cast<int>(int64_t(s) * p / S);
}
int loop(int s, int, int p) { return s % p; }
int vShape(int s, int, int p) { return s < p ? s : 2 * p - 1 - s; }

const Shape kShapes[] = {
    {"1f1b", 1, contiguous},       {"zb-h1", 1, contiguous},
    {"zb-h2", 1, contiguous},      {"interleaved-1f1b", 2, loop},
    {"zb-v", 2, vShape},           {"dualpipev", 2, vShape},
    {"interleaved-1f1b", 3, loop}, {"interleaved-1f1b", 4, loop},
};
} // namespace

/// The device orders tried: rank r gets the device of rank order[r].
static std::vector<std::vector<int>> deviceOrders(const Problem &ranks) {
  const int p = ranks.ranks;
  std::vector<int> given(p);
  std::iota(given.begin(), given.end(), 0);
  if (!ranks.hasDevices())
    return {given};
  auto key = [&](int r) {
    return std::make_pair(-ranks.devices[r].speed,
                          -ranks.devices[r].memory.value_or(0.0));
  };
  std::vector<int> fast = given;
  std::stable_sort(fast.begin(), fast.end(),
                   [&](int a, int b) { return key(a) < key(b); });
  std::vector<int> slow(fast.rbegin(), fast.rend());
  std::vector<int> alternate;
  for (int i = 0, j = p - 1; i <= j; ++i, --j) {
    alternate.push_back(fast[i]);
    if (i != j)
      alternate.push_back(fast[j]);
  }
  // Orders that give every rank the same device are the same candidate.
  std::vector<std::vector<int>> orders;
  std::set<std::vector<std::string>> seen;
  for (const std::vector<int> &order : {given, fast, slow, alternate}) {
    std::vector<std::string> names;
    for (int r : order)
      names.push_back(ranks.devices[r].name);
    if (seen.insert(names).second)
      orders.push_back(order);
  }
  return orders;
}

llvm::Expected<LayerSearchResult>
stagecraft::pipe::sched::searchLayerPipeline(const Problem &ranks,
                                             llvm::ArrayRef<Layer> layers,
                                             const KindRequest &request) {
  const int p = ranks.ranks, n = static_cast<int>(layers.size());
  const int m = ranks.microbatches;
  std::optional<LayerSearchResult> best;
  std::string lastWhy = "no candidate applies";
  int candidates = 0;
  for (const std::vector<int> &order : deviceOrders(ranks)) {
    Problem shell = ranks;
    if (ranks.hasDevices())
      for (int r = 0; r < p; ++r)
        shell.devices[r] = ranks.devices[order[r]];
    for (const Shape &shape : kShapes) {
      const int S = shape.perRank * p;
      if (S > n)
        continue;
      PartitionTarget target;
      target.stages = S;
      for (int s = 0; s < S; ++s) {
        int r = shape.rankOf(s, S, p);
        target.speed.push_back(shell.speedOf(r));
        target.budget.push_back(shell.capacityOf(r) / shape.perRank);
        target.inFlight.push_back(std::min(m, p - r));
        target.rank.push_back(r);
      }
      llvm::Expected<Partition> cut = partitionLayers(layers, target);
      if (!cut) {
        llvm::consumeError(cut.takeError());
        target.inFlight.assign(S, 1);
        cut = partitionLayers(layers, target);
      }
      if (!cut) {
        lastWhy = fmt::format("{} on {} stages: {}", shape.kind, S,
                              llvm::toString(cut.takeError()));
        continue;
      }
      Problem staged = stagedProblem(shell, layers, *cut);
      KindRequest fixed = request;
      fixed.kind = shape.kind;
      fixed.progress = nullptr;
      ++candidates;
      llvm::Expected<KindResult> result = scheduleByName(staged, fixed);
      if (!result) {
        lastWhy = fmt::format("{} on {} stages: {}", shape.kind, S,
                              llvm::toString(result.takeError()));
        continue;
      }
      if (best && result->timeline.makespan >=
                      best->result.timeline.makespan * (1 - 1e-12))
        continue;
      LayerSearchResult found;
      found.problem = std::move(staged);
      found.partition = std::move(*cut);
      found.deviceOrder = order;
      found.result = std::move(*result);
      found.choice = shape.kind;
      best = std::move(found);
    }
  }
  if (!best)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("no partition, device order and kind fits: {}", lastWhy));
  // auto's own search on the winner's stages may order them better.
  {
    KindRequest search = request;
    search.kind = "auto";
    ++candidates;
    if (llvm::Expected<KindResult> improved =
            scheduleByName(best->problem, search)) {
      if (improved->timeline.makespan <
          best->result.timeline.makespan * (1 - 1e-9)) {
        best->choice = "auto (" + improved->choice + ")";
        best->result = std::move(*improved);
      }
    } else {
      llvm::consumeError(improved.takeError());
    }
  }
  std::string ranges;
  for (int s = 0; s < best->partition.numStages(); ++s)
    ranges += fmt::format("{}{}-{}", s ? " | " : "", best->partition.first[s],
                          best->partition.first[s + 1] - 1);
  std::string devices;
  if (ranks.hasDevices())
    for (int r = 0; r < p; ++r)
      devices +=
          fmt::format("{}@{}", r ? " " : "", best->problem.devices[r].name);
  best->choice = fmt::format(
      "{} on {} stages (layers {}){}{}", best->choice,
      best->partition.numStages(), ranges,
      devices.empty() ? "" : "; devices by rank: " + devices,
      best->result.recompute.empty() || best->result.recompute == "none"
          ? ""
          : "; recompute " + best->result.recompute);
  best->candidates = candidates;
  return std::move(*best);
}
