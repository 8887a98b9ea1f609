//===- Partition.cpp - Cutting a chain of layers into stages --------------===//
//
// See Partition.h. The dynamic program: best[s][j] is the fastest slowest
// stage over partitions of layers [0, j) into stages 0..s; a stage
// [i, j) on stage index s costs work(i, j) / speed[s] and must fit
// budget[s]. O(S L^2) with prefix sums.
//
//===----------------------------------------------------------------------===//

#include "scheduler/search/Partition.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

using namespace stagecraft::pipe::sched;

static constexpr double kInf = std::numeric_limits<double>::infinity();

double stagecraft::pipe::sched::stageMemory(llvm::ArrayRef<Layer> layers,
                                            int begin, int end, int inFlight) {
  double params = 0.0, activation = 0.0;
  for (int l = begin; l < end; ++l) {
    params += layers[l].params;
    activation += layers[l].activation;
  }
  return params + inFlight * activation;
}

/// Checks the target against the layers; fills defaults.
static llvm::Expected<PartitionTarget> normalize(llvm::ArrayRef<Layer> layers,
                                                 PartitionTarget target) {
  const int n = static_cast<int>(layers.size());
  if (target.stages < 1 || target.stages > n)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("cannot cut {} layers into {} stages: each stage needs "
                    "at least one layer",
                    n, target.stages));
  target.speed.resize(target.stages, 1.0);
  target.budget.resize(target.stages, kInf);
  target.inFlight.resize(target.stages, 1);
  for (double v : target.speed)
    if (!(v > 0.0) || !std::isfinite(v))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "device speeds must be finite and "
                                     "positive");
  return target;
}

/// Why nothing fits: the stage whose smallest possible slice (one layer)
/// exceeds its budget, or the whole.
static llvm::Error nothingFits(llvm::ArrayRef<Layer> layers,
                               const PartitionTarget &t) {
  const int n = static_cast<int>(layers.size());
  for (int s = 0; s < t.stages; ++s) {
    // Stage s holds some layer in [s, n - stages + s].
    double least = kInf;
    int which = s;
    for (int l = s; l <= n - t.stages + s; ++l) {
      double need = stageMemory(layers, l, l + 1, t.inFlight[s]);
      if (need < least) {
        least = need;
        which = l;
      }
    }
    if (least > t.budget[s])
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("stage {}{} cannot fit even one layer: the smallest "
                      "it can hold, layer {} (@{}), needs {:g} (params plus "
                      "{} forwards' activations), above its {:g}",
                      s,
                      s < static_cast<int>(t.rank.size())
                          ? fmt::format(" (rank {})", t.rank[s])
                          : std::string(),
                      which, layers[which].name, least, t.inFlight[s],
                      t.budget[s]));
  }
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      fmt::format("no cut of the {} layers into {} stages fits every "
                  "stage's memory: the layers need more than the stages "
                  "hold together",
                  n, t.stages));
}

llvm::Expected<Partition>
stagecraft::pipe::sched::partitionLayers(llvm::ArrayRef<Layer> layers,
                                         const PartitionTarget &request) {
  llvm::Expected<PartitionTarget> target = normalize(layers, request);
  if (!target)
    return target.takeError();
  const PartitionTarget &t = *target;
  const int n = static_cast<int>(layers.size()), S = t.stages;
  std::vector<double> work(n + 1, 0.0), params(n + 1, 0.0), act(n + 1, 0.0);
  for (int l = 0; l < n; ++l) {
    work[l + 1] = work[l] + layers[l].work();
    params[l + 1] = params[l] + layers[l].params;
    act[l + 1] = act[l] + layers[l].activation;
  }
  auto fits = [&](int s, int i, int j) {
    return params[j] - params[i] + t.inFlight[s] * (act[j] - act[i]) <=
           t.budget[s] * (1 + 1e-12);
  };
  // best[s][j], from[s][j]: stages 0..s over layers [0, j).
  std::vector<std::vector<double>> best(S, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> from(S, std::vector<int>(n + 1, -1));
  for (int j = 1; j <= n - S + 1; ++j)
    if (fits(0, 0, j))
      best[0][j] = work[j] / t.speed[0];
  for (int s = 1; s < S; ++s)
    for (int j = s + 1; j <= n - S + s + 1; ++j)
      for (int i = s; i < j; ++i) {
        if (best[s - 1][i] == kInf || !fits(s, i, j))
          continue;
        double v = std::max(best[s - 1][i], (work[j] - work[i]) / t.speed[s]);
        if (v < best[s][j]) {
          best[s][j] = v;
          from[s][j] = i;
        }
      }
  if (best[S - 1][n] == kInf)
    return nothingFits(layers, t);
  Partition p;
  p.slowest = best[S - 1][n];
  p.first.assign(S + 1, 0);
  p.first[S] = n;
  for (int s = S - 1, j = n; s > 0; --s) {
    j = from[s][j];
    p.first[s] = j;
  }
  return p;
}

llvm::Expected<Partition> stagecraft::pipe::sched::partitionLayersBruteForce(
    llvm::ArrayRef<Layer> layers, const PartitionTarget &request) {
  llvm::Expected<PartitionTarget> target = normalize(layers, request);
  if (!target)
    return target.takeError();
  const PartitionTarget &t = *target;
  const int n = static_cast<int>(layers.size()), S = t.stages;
  std::optional<Partition> best;
  std::vector<int> first(S + 1, 0);
  first[S] = n;
  // Every increasing choice of the S - 1 inner cuts in 1..n-1.
  std::function<void(int, int)> choose = [&](int s, int from) {
    if (s == S) {
      double slowest = 0.0;
      for (int k = 0; k < S; ++k) {
        if (stageMemory(layers, first[k], first[k + 1], t.inFlight[k]) >
            t.budget[k] * (1 + 1e-12))
          return;
        double w = 0.0;
        for (int l = first[k]; l < first[k + 1]; ++l)
          w += layers[l].work();
        slowest = std::max(slowest, w / t.speed[k]);
      }
      if (!best || slowest < best->slowest)
        best = Partition{first, slowest};
      return;
    }
    for (int c = from; c <= n - (S - s); ++c) {
      first[s] = c;
      choose(s + 1, c + 1);
    }
  };
  choose(1, 1);
  if (!best)
    return nothingFits(layers, t);
  return *best;
}

std::vector<Stage>
stagecraft::pipe::sched::stagesFromPartition(llvm::ArrayRef<Layer> layers,
                                             const Partition &partition) {
  std::vector<Stage> stages;
  for (int s = 0; s < partition.numStages(); ++s) {
    Stage st;
    st.forward = st.backwardInput = st.backwardWeight = 0.0;
    st.activation = st.weightGrad = 0.0;
    for (int l = partition.first[s]; l < partition.first[s + 1]; ++l) {
      st.forward += layers[l].forward;
      st.backwardInput += layers[l].backwardInput;
      st.backwardWeight += layers[l].backwardWeight;
      st.activation += layers[l].activation;
      st.weightGrad += layers[l].weightGrad;
      st.params += layers[l].params;
    }
    st.layers = partition.first[s + 1] - partition.first[s];
    // What the stage sends on is its last layer's output.
    st.output = layers[partition.first[s + 1] - 1].output;
    stages.push_back(st);
  }
  return stages;
}
