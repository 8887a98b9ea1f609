//===- DualPipeV.cpp - DualPipeV schedule ---------------------------------===//
//
// DualPipeV, the V-shaped half of DeepSeek's DualPipe: rank r hosts chunk 0
// (stage r) and chunk 1 (stage 2p - 1 - r). Each rank runs eight phases:
//   1. 2(p - r - 1) forwards of chunk 0;
//   2. r + 1 pairs: forward chunk 0, forward chunk 1;
//   3. p - r - 1 times: I of chunk 1 (W deferred), a W, forward chunk 1;
//   4. m - 2p + r + 1 times: overlapped F0&B1, then overlapped F1&B0 (the
//      last rank runs its first F0 and B1 apart, as DualPipe does);
//   5. p - r - 1 times: full backward chunk 1, overlapped F1&B0;
//   6. r + 1 pairs of backwards chunk 1 and chunk 0, the second half split
//      into I with W deferred;
//   7. p - r - 1 times: a W, then I of chunk 0;
//   8. the remaining W.
// The phases need m >= 2p - 1 microbatches. With fewer, the recipe has no
// steady state; the schedule is then ZB-V's (V placement, split backward,
// no overlap), which is valid for any m.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"

#include <deque>

using namespace stagecraft::pipe::sched;

namespace {
/// Emits one rank's actions, tracking the next microbatch of each chunk.
class RankEmitter {
public:
  RankEmitter(std::vector<Action> &out, int stage0, int stage1)
      : out(out), stages{stage0, stage1} {}

  void forward(int c) {
    out.push_back({ActionKind::Forward, stages[c], nextF[c]++});
  }
  void backward(int c, bool split) {
    int m = nextB[c]++;
    if (!split) {
      out.push_back({ActionKind::Backward, stages[c], m});
      return;
    }
    out.push_back({ActionKind::BackwardInput, stages[c], m});
    pendingW.push_back({stages[c], m});
  }
  void overlapped(int fc, int bc) {
    out.push_back(
        Action::overlapped(stages[fc], nextF[fc]++, stages[bc], nextB[bc]++));
  }
  void weight() {
    auto [s, m] = pendingW.front();
    pendingW.pop_front();
    out.push_back({ActionKind::BackwardWeight, s, m});
  }
  bool hasWeight() const { return !pendingW.empty(); }

private:
  std::vector<Action> &out;
  int stages[2];
  int nextF[2] = {0, 0};
  int nextB[2] = {0, 0};
  std::deque<std::pair<int, int>> pendingW;
};
} // namespace

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateDualPipeV(const Problem &problem) {
  llvm::Expected<std::vector<int>> placement = placeVShape(problem);
  if (!placement)
    return placement.takeError();
  const int p = problem.ranks, m = problem.microbatches;
  if (m < 2 * p - 1)
    return generateZBV(problem);

  Schedule schedule;
  schedule.placement = std::move(*placement);
  schedule.ranks.resize(p);
  for (int r = 0; r < p; ++r) {
    RankEmitter e(schedule.ranks[r], r, 2 * p - 1 - r);
    const bool last = r == p - 1;
    for (int i = 0; i < 2 * (p - r - 1); ++i)
      e.forward(0);
    for (int i = 0; i < r + 1; ++i) {
      e.forward(0);
      e.forward(1);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      e.backward(1, /*split=*/true);
      e.weight();
      e.forward(1);
    }
    for (int i = 0, steps = m - 2 * p + r + 1; i < steps; ++i) {
      if (i == 0 && last) {
        e.forward(0);
        e.backward(1, /*split=*/false);
      } else {
        e.overlapped(0, 1);
      }
      e.overlapped(1, 0);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      e.backward(1, /*split=*/false);
      e.overlapped(1, 0);
    }
    bool split = false;
    for (int i = 0, steps = r + 1; i < steps; ++i) {
      if (i == steps / 2 && r % 2 == 1)
        split = true;
      e.backward(1, split);
      if (i == steps / 2 && r % 2 == 0)
        split = true;
      e.backward(0, split);
    }
    for (int i = 0; i < p - r - 1; ++i) {
      e.weight();
      e.backward(0, /*split=*/true);
    }
    while (e.hasWeight())
      e.weight();
  }
  if (llvm::Error err = verifySchedule(problem, schedule))
    return std::move(err);
  return schedule;
}
