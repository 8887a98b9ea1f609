//===- OneFOneB.cpp - 1F1B schedule ---------------------------------------===//
//
// 1F1B (PipeDream-Flush, Narayanan et al., 2021). A rank holding the k-th of
// p contiguous blocks runs min(p - k - 1, m) warm-up forwards, then alternates
// one forward and one backward, then drains the remaining backwards. A block
// of several stages runs its forwards in chain order and its backwards in
// reverse, as one unit. The rank with block 0 thus keeps at most min(p, m)
// microbatches in flight. On a branching pipeline a rank warms up by its
// depth: the most rank changes on a path from its stages to the last.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"

#include <algorithm>
#include <numeric>

using namespace stagecraft::pipe::sched;

std::vector<std::vector<Action>> stagecraft::pipe::sched::oneFOneBOrders(
    const Problem &problem, llvm::ArrayRef<int> placement,
    llvm::function_ref<int(int)> warmup, ActionKind backwardKind) {
  const int p = problem.ranks, mbs = problem.microbatches;
  std::vector<std::vector<Action>> orders(p);

  // Block position of each rank: ranks ordered by their first stage.
  std::vector<int> firstStage(p, problem.numStages());
  for (int s = problem.numStages() - 1; s >= 0; --s)
    firstStage[placement[s]] = s;
  std::vector<int> byPosition(p);
  std::iota(byPosition.begin(), byPosition.end(), 0);
  std::sort(byPosition.begin(), byPosition.end(),
            [&](int a, int b) { return firstStage[a] < firstStage[b]; });

  // A branching pipeline: a rank's depth is the most rank changes on a
  // path from its stages to the last (on a chain of contiguous blocks,
  // p - k - 1 for the k-th block), and it warms up as the block at that
  // depth would.
  std::vector<int> depthOf(p, 0);
  if (!problem.isChain()) {
    const int n = problem.numStages();
    std::vector<int> down(n, 0);
    for (int s = n - 1; s >= 0; --s) {
      for (int c : problem.consumersOf(s))
        down[s] =
            std::max(down[s], down[c] + (placement[c] != placement[s] ? 1 : 0));
      depthOf[placement[s]] = std::max(depthOf[placement[s]], down[s]);
    }
  }
  for (int k = 0; k < p; ++k) {
    int r = byPosition[k];
    const int position = problem.isChain() ? k : p - 1 - depthOf[r];
    std::vector<int> stages;
    for (int s = 0; s < problem.numStages(); ++s)
      if (placement[s] == r)
        stages.push_back(s);
    std::vector<Action> &order = orders[r];
    auto forward = [&](int m) {
      for (int s : stages)
        order.push_back({ActionKind::Forward, s, m});
    };
    auto backward = [&](int m) {
      for (auto it = stages.rbegin(); it != stages.rend(); ++it)
        order.push_back({backwardKind, *it, m});
    };
    int w = std::clamp(warmup(position), 0, mbs);
    int nextF = 0, nextB = 0;
    for (; nextF < w; ++nextF)
      forward(nextF);
    while (nextF < mbs) {
      forward(nextF++);
      backward(nextB++);
    }
    while (nextB < mbs)
      backward(nextB++);
  }
  return orders;
}

Schedule
stagecraft::pipe::sched::generateOneFOneB(const Problem &problem,
                                          llvm::ArrayRef<int> placement) {
  Schedule schedule;
  schedule.placement.assign(placement.begin(), placement.end());
  const int p = problem.ranks;
  schedule.ranks = oneFOneBOrders(
      problem, placement, [p](int k) { return p - k - 1; },
      ActionKind::Backward);
  return schedule;
}
