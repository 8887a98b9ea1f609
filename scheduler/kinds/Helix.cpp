//===- Helix.cpp - HelixPipe attention-parallel schedules -----------------===//
//
// Builds the HelixPipe task graph and the layer-pipeline problem used to
// compare it with the other kinds; see Helix.h for the schedule itself.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Helix.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <tuple>

using namespace stagecraft::pipe::sched;

namespace {
/// A task before it is ordered; lower priority runs first.
struct Node {
  Task task;
  std::vector<std::pair<int, double>> deps; // node, latency
  double priority;
};

/// Each rank, when free, runs its ready task of lowest priority: the helix
/// order without a rank idling behind a task that is not ready yet. Returns
/// the nodes in start order.
llvm::Expected<std::vector<int>> greedyOrder(const std::vector<Node> &nodes,
                                             int p) {
  const size_t count = nodes.size();
  std::vector<std::vector<int>> users(count);
  std::vector<int> waiting(count, 0);
  std::vector<double> readyAt(count, 0.0), end(count, 0.0);
  for (size_t k = 0; k < count; ++k) {
    waiting[k] = static_cast<int>(nodes[k].deps.size());
    for (auto [d, lat] : nodes[k].deps)
      users[d].push_back(static_cast<int>(k));
  }
  // Per rank: tasks whose inputs are all done, by the time they arrive, and
  // those arrived, by priority (heaps, so that picking is logarithmic).
  using Entry = std::pair<double, int>;
  using Heap = std::priority_queue<Entry, std::vector<Entry>, std::greater<>>;
  std::vector<Heap> pending(p), arrived(p);
  for (size_t k = 0; k < count; ++k)
    if (waiting[k] == 0)
      pending[nodes[k].task.rank].push({0.0, static_cast<int>(k)});
  std::vector<double> freeAt(p, 0.0);
  std::vector<int> order;
  order.reserve(count);
  double now = 0.0;
  while (order.size() < count) {
    double next = std::numeric_limits<double>::infinity();
    bool progressed = false;
    for (int r = 0; r < p; ++r) {
      if (freeAt[r] > now + 1e-12) {
        next = std::min(next, freeAt[r]);
        continue;
      }
      while (!pending[r].empty() && pending[r].top().first <= now + 1e-12) {
        int k = pending[r].top().second;
        pending[r].pop();
        arrived[r].push({nodes[k].priority, k});
      }
      if (!pending[r].empty())
        next = std::min(next, pending[r].top().first);
      if (arrived[r].empty())
        continue;
      int best = arrived[r].top().second;
      arrived[r].pop();
      end[best] = now + nodes[best].task.cost;
      freeAt[r] = end[best];
      next = std::min(next, freeAt[r]);
      order.push_back(best);
      progressed = true;
      for (int u : users[best]) {
        double lat = 0.0;
        for (auto [d, l] : nodes[u].deps)
          if (d == best)
            lat = std::max(lat, l);
        readyAt[u] = std::max(readyAt[u], end[best] + lat);
        if (--waiting[u] == 0)
          pending[nodes[u].task.rank].push({readyAt[u], u});
      }
    }
    if (!progressed) {
      if (!std::isfinite(next))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "helix ordering stalled: a task never became ready");
      now = next;
    }
  }
  return order;
}

/// The global forward order of HelixPipe: super-groups of `folds` groups of
/// p microbatches, layer by layer.
struct Item {
  bool attention;
  int j, m;
};
std::vector<Item> helixForwardOrder(int p, int mbs, int blocks,
                                    bool lastHasAttention, int folds) {
  std::vector<Item> forward;
  // At most all microbatches in one group (p * folds may overflow int).
  const int groupSpan = static_cast<int>(
      std::min<long long>(static_cast<long long>(p) * folds, mbs));
  for (int m0 = 0; m0 < mbs; m0 += groupSpan) {
    int m1 = std::min(mbs, m0 + groupSpan);
    for (int j = 0; j < blocks; ++j)
      for (int m = m0; m < m1; ++m) {
        forward.push_back({false, j, m});
        if (j + 1 < blocks || lastHasAttention)
          forward.push_back({true, j, m});
      }
  }
  return forward;
}
} // namespace

LayerCosts stagecraft::pipe::sched::layerCosts(const TransformerShape &t) {
  const double b = t.batch, S = t.sequence, h = t.hidden, e = t.elementBytes;
  LayerCosts c;
  c.blockForward = 24.0 * b * S * h * h / t.flops;
  c.blockBackward = 2 * c.blockForward;
  c.attentionForward = 2.0 * b * S * S * h / t.flops;
  c.attentionBackward = 2 * c.attentionForward;
  c.headForward = 2.0 * b * S * h * t.vocab / t.flops;
  c.headBackward = 2 * c.headForward;
  c.hiddenBytes = b * S * h * e;
  c.qkvBytes = 3 * c.hiddenBytes;
  c.storedBytes = 34.0 * b * S * h;
  c.blockInputBytes = c.hiddenBytes;
  // Q, K, V and the output for the backward, and the log-sum-exp (fp32).
  c.attentionKeptBytes = c.qkvBytes + c.hiddenBytes + 4.0 * b * S * t.heads;
  c.mlpIntermediateBytes = 2 * 4 * b * S * h * e;
  c.layerParamBytes = 16.0 * 12 * h * h;
  c.embeddingParamBytes = 16.0 * t.vocab * h;
  return c;
}

LayerCosts stagecraft::pipe::sched::tensorParallelCosts(const LayerCosts &c,
                                                        int tensor,
                                                        double bandwidth) {
  LayerCosts g = c;
  const double t = tensor;
  for (double *time : {&g.blockForward, &g.blockBackward, &g.attentionForward,
                       &g.attentionBackward, &g.headForward, &g.headBackward})
    *time /= t;
  double collectives = 4 * (t - 1) / t * c.hiddenBytes / bandwidth;
  g.blockForward += collectives;
  g.blockBackward += collectives;
  for (double *bytes :
       {&g.hiddenBytes, &g.qkvBytes, &g.storedBytes, &g.blockInputBytes,
        &g.attentionKeptBytes, &g.mlpIntermediateBytes, &g.layerParamBytes,
        &g.embeddingParamBytes})
    *bytes /= t;
  return g;
}

double stagecraft::pipe::sched::helixRematerializedBytes(const LayerCosts &c,
                                                         int mlpChunks) {
  double linear = c.storedBytes - c.attentionKeptBytes;
  return linear - c.mlpIntermediateBytes * (1.0 - 1.0 / std::max(1, mlpChunks));
}

llvm::Expected<TaskGraph> stagecraft::pipe::sched::helixTaskGraph(
    const TransformerShape &shape, const LayerCosts &c, const Link &link, int p,
    int mbs, const HelixOptions &options) {
  const int L = shape.layers;
  auto fail = [](std::string what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
  };
  if (p < 1 || mbs < 1 || L < 1 || options.folds < 1)
    return fail(fmt::format("helix needs ranks ({}), microbatches ({}), "
                            "layers ({}) and folds ({}) of at least 1",
                            p, mbs, L, options.folds));
  if (L % p != 0)
    return fail(fmt::format("helix places the blocks of layers k*p + r on rank "
                            "r: {} layers do not divide over {} ranks",
                            L, p));
  // Block j covers the post-attention part of layer j - 1 (3/4 of its
  // linear work) and the pre-attention part of layer j (1/4).
  auto blockForward = [&](int j) {
    double f = (j > 0 ? 0.75 : 0.0) + (j < L ? 0.25 : 0.0);
    return f * c.blockForward + (j == L ? c.headForward : 0.0);
  };
  auto blockBackward = [&](int j) {
    double f = (j > 0 ? 0.75 : 0.0) + (j < L ? 0.25 : 0.0);
    return f * c.blockBackward + (j == L ? c.headBackward : 0.0) +
           (options.recompute ? blockForward(j) : 0.0);
  };
  double blockKept = options.recompute ? c.blockInputBytes : c.storedBytes;
  // A recomputing block's backward re-materializes its linear activation
  // (chunked MLP) on top of what it kept, until it ends.
  double rematerialized =
      options.recompute ? helixRematerializedBytes(c, options.mlpChunks) : 0.0;

  // Task ids: forward then backward of blocks (L + 1) and attentions (L)
  // per microbatch. Stage indices: blocks 0..L, attention j is L + 1 + j.
  const int blocks = L + 1;
  auto rankOfBlock = [&](int j) { return j % p; };
  auto offset = [&](int m) { return m % p; };
  auto rankOfAttention = [&](int j, int m) {
    return (j % p + offset(m) + 1) % p;
  };
  std::vector<Item> forward = helixForwardOrder(
      p, mbs, blocks, /*lastHasAttention=*/false, options.folds);
  // The tasks, before they are ordered: forwards in the global order, then
  // backwards in exactly the reverse order; lower priority runs first.
  std::vector<Node> nodes;
  std::vector<int> fwdNode(static_cast<size_t>(mbs) * (blocks + L), -1),
      bwdNode(fwdNode.size(), -1);
  auto key = [&](bool attention, int j, int m) {
    return static_cast<size_t>(m) * (blocks + L) + (attention ? blocks + j : j);
  };
  auto rankOf = [&](const Item &it) {
    return it.attention ? rankOfAttention(it.j, it.m) : rankOfBlock(it.j);
  };
  for (const Item &it : forward) {
    Task t{ActionKind::Forward,
           it.attention ? blocks + it.j : it.j,
           it.m,
           rankOf(it),
           0,
           0,
           0};
    t.cost = it.attention ? c.attentionForward : blockForward(it.j);
    t.allocAtStart = it.attention ? c.attentionKeptBytes : blockKept;
    fwdNode[key(it.attention, it.j, it.m)] = static_cast<int>(nodes.size());
    nodes.push_back({t, {}, static_cast<double>(nodes.size())});
  }
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Task t{ActionKind::Backward,
           it->attention ? blocks + it->j : it->j,
           it->m,
           rankOf(*it),
           0,
           0,
           0};
    t.cost = it->attention ? c.attentionBackward : blockBackward(it->j);
    t.allocAtStart = it->attention ? 0.0 : rematerialized;
    t.freeAtEnd =
        it->attention ? c.attentionKeptBytes : blockKept + rematerialized;
    bwdNode[key(it->attention, it->j, it->m)] = static_cast<int>(nodes.size());
    nodes.push_back({t, {}, static_cast<double>(nodes.size())});
  }
  auto edge = [&](Node &to, int from, double bytes) {
    double latency =
        nodes[from].task.rank == to.task.rank ? 0.0 : link.transfer(bytes);
    to.deps.push_back({from, latency});
  };
  for (const Item &it : forward) {
    Node &n = nodes[fwdNode[key(it.attention, it.j, it.m)]];
    if (it.attention) {
      edge(n, fwdNode[key(false, it.j, it.m)], c.qkvBytes);
    } else if (it.j > 0) {
      // The attention output and the residual stream of the layer below.
      edge(n, fwdNode[key(true, it.j - 1, it.m)], c.hiddenBytes);
      edge(n, fwdNode[key(false, it.j - 1, it.m)], c.hiddenBytes);
    }
  }
  for (const Item &it : forward) {
    Node &n = nodes[bwdNode[key(it.attention, it.j, it.m)]];
    edge(n, fwdNode[key(it.attention, it.j, it.m)], 0.0);
    if (it.attention) {
      // The gradient of the attention output, from the block above.
      edge(n, bwdNode[key(false, it.j + 1, it.m)], c.hiddenBytes);
    } else if (it.j < L) {
      edge(n, bwdNode[key(true, it.j, it.m)], c.qkvBytes);
      edge(n, bwdNode[key(false, it.j + 1, it.m)], c.hiddenBytes);
    }
  }

  llvm::Expected<std::vector<int>> ordered = greedyOrder(nodes, p);
  if (!ordered)
    return ordered.takeError();
  const std::vector<int> &order = *ordered;
  const size_t count = nodes.size();

  // The graph in that order, so that simulating it replays the run.
  TaskGraph graph(p);
  // Block j's parameters on rank j mod p: layer j - 1's post-attention part
  // (3/4) and layer j's pre-attention part (1/4); the embedding and head.
  graph.staticMemory.assign(p, 0.0);
  for (int j = 0; j < blocks; ++j)
    graph.staticMemory[rankOfBlock(j)] +=
        ((j > 0 ? 0.75 : 0.0) + (j < L ? 0.25 : 0.0)) * c.layerParamBytes +
        (j == 0 || j == L ? c.embeddingParamBytes : 0.0);
  std::vector<TaskId> id(count, -1);
  for (int k : order)
    id[k] = graph.addTask(nodes[k].task);
  for (int k : order) {
    llvm::SmallVector<Dependency, 3> deps;
    for (auto [d, lat] : nodes[k].deps)
      deps.push_back({id[d], lat});
    graph.addDependencies(id[k], deps);
  }
  return graph;
}

llvm::Expected<Problem> stagecraft::pipe::sched::layerPipelineProblem(
    const TransformerShape &shape, const LayerCosts &c, const Link &link,
    int ranks, int stages, int microbatches) {
  if (stages < 1 || shape.layers % stages != 0)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("{} layers do not split into {} equal stages", shape.layers,
                    stages));
  const int per = shape.layers / stages;
  Problem problem;
  problem.name = "transformer";
  problem.ranks = ranks;
  problem.microbatches = microbatches;
  problem.latency = link.transfer(c.hiddenBytes);
  for (int s = 0; s < stages; ++s) {
    Stage stage;
    stage.name = "s" + std::to_string(s);
    bool last = s == stages - 1;
    stage.forward = per * (c.blockForward + c.attentionForward) +
                    (last ? c.headForward : 0);
    stage.backwardInput = per * (c.attentionBackward + c.blockBackward / 2) +
                          (last ? c.headBackward / 2 : 0);
    stage.backwardWeight =
        per * c.blockBackward / 2 + (last ? c.headBackward / 2 : 0);
    stage.activation = per * c.storedBytes;
    stage.weightGrad = stage.activation / 2;
    stage.recomputed = per * c.blockInputBytes;
    stage.selective = per * (c.storedBytes - c.hiddenBytes);
    stage.selectiveCost = per * c.attentionForward;
    stage.params = per * c.layerParamBytes +
                   (s == 0 || last ? c.embeddingParamBytes : 0.0);
    problem.stages.push_back(stage);
  }
  return problem;
}

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateHelix(const Problem &problem, int folds,
                                       bool recompute) {
  if (llvm::Error err = validateProblem(problem))
    return std::move(err);
  const int p = problem.ranks, n = problem.numStages(),
            mbs = problem.microbatches;
  auto fail = [](std::string what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), what);
  };
  if (folds < 1)
    return fail(fmt::format("folds must be at least 1, got {}", folds));
  for (int s = 0; s + 1 < n; ++s)
    if (!problem.stages[s].attention)
      return fail(fmt::format("helix cuts every layer at its attention: stage "
                              "@{} needs attention(...) (every stage but the "
                              "last does)",
                              problem.stages[s].name));
  Schedule schedule;
  if (recompute)
    schedule.recompute.assignAll(n, mbs, Recompute::Full);
  schedule.placement.resize(n);
  for (int s = 0; s < n; ++s) {
    schedule.placement[s] = s % p;
    const std::optional<int> &pin = problem.stages[s].rank;
    if (pin && *pin != s % p)
      return fail(fmt::format("helix places block @{} on rank {}, but it is "
                              "pinned to rank {}",
                              problem.stages[s].name, s % p, *pin));
  }
  std::vector<Item> forward =
      helixForwardOrder(p, mbs, n, /*lastHasAttention=*/false, folds);
  auto rankOf = [&](const Item &it) {
    return it.attention ? (it.j % p + it.m % p + 1) % p : it.j % p;
  };
  std::vector<Node> nodes;
  std::map<std::tuple<bool, bool, int, int>, int> id; // backward?, attn?, j, m
  auto add = [&](const Item &it, bool backward) {
    const Stage &st = problem.stages[it.j];
    ActionKind kind =
        it.attention ? (backward ? ActionKind::AttentionBackward
                                 : ActionKind::AttentionForward)
                     : (backward ? ActionKind::Backward : ActionKind::Forward);
    Task t{kind, it.j, it.m, rankOf(it), 0, 0, 0};
    t.cost = it.attention
                 ? (backward ? st.attention->backward : st.attention->forward)
                 : (backward ? st.backward() + (recompute ? st.forward : 0.0)
                             : st.forward);
    id[{backward, it.attention, it.j, it.m}] = static_cast<int>(nodes.size());
    nodes.push_back({t, {}, static_cast<double>(nodes.size())});
  };
  for (const Item &it : forward)
    add(it, false);
  for (auto it = forward.rbegin(); it != forward.rend(); ++it)
    add(*it, true);
  auto dep = [&](int to, bool backward, bool attention, int j, int m) {
    int from = id.at({backward, attention, j, m});
    double lat =
        nodes[from].task.rank == nodes[to].task.rank ? 0.0 : problem.latency;
    nodes[to].deps.push_back({from, lat});
  };
  for (const Item &it : forward) {
    int f = id.at({false, it.attention, it.j, it.m});
    int b = id.at({true, it.attention, it.j, it.m});
    dep(b, false, it.attention, it.j, it.m);
    if (it.attention) {
      dep(f, false, false, it.j, it.m);
      dep(b, true, false, it.j + 1, it.m);
      continue;
    }
    if (it.j > 0) {
      dep(f, false, false, it.j - 1, it.m);
      dep(f, false, true, it.j - 1, it.m);
    }
    if (it.j + 1 < n) {
      dep(b, true, false, it.j + 1, it.m);
      dep(b, true, true, it.j, it.m);
    }
  }
  llvm::Expected<std::vector<int>> order = greedyOrder(nodes, p);
  if (!order)
    return order.takeError();
  schedule.ranks.resize(p);
  for (int k : *order)
    schedule.ranks[nodes[k].task.rank].push_back(nodes[k].task.action());
  if (llvm::Error err = verifySchedule(problem, schedule))
    return std::move(err);
  return schedule;
}
