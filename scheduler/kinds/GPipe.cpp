//===- GPipe.cpp - GPipe schedule -----------------------------------------===//
//
// GPipe (Huang et al., 2019): every forward, then every backward. Ordering
// forwards by (microbatch, stage) and backwards by (microbatch, reverse stage)
// is a topological order of the dependencies for any placement, so the
// schedule is valid whatever ranks host the stages.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"

using namespace stagecraft::pipe::sched;

Schedule stagecraft::pipe::sched::generateGPipe(const Problem &problem,
                                                llvm::ArrayRef<int> placement) {
  Schedule schedule;
  schedule.placement.assign(placement.begin(), placement.end());
  schedule.ranks.resize(problem.ranks);
  const int n = problem.numStages();
  for (int m = 0; m < problem.microbatches; ++m)
    for (int s = 0; s < n; ++s)
      schedule.ranks[placement[s]].push_back({ActionKind::Forward, s, m});
  for (int m = 0; m < problem.microbatches; ++m)
    for (int s = n - 1; s >= 0; --s)
      schedule.ranks[placement[s]].push_back({ActionKind::Backward, s, m});
  return schedule;
}
