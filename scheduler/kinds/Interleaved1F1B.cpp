//===- Interleaved1F1B.cpp - Interleaved 1F1B schedule --------------------===//
//
// Megatron-LM's interleaved 1F1B (Narayanan et al., SC'21): with v chunks,
// rank r hosts stages r, r + p, ..., and walks its "virtual microbatches" in
// rounds: for each round of p microbatches, chunk 0 for all of them, then
// chunk 1, and so on; backwards in the same rounds with the chunks reversed.
// Rank r warms up with 2(p - r - 1) + (v - 1)p forwards, then alternates.
//
// Megatron requires m to be a multiple of p. Here the m mod p extra
// microbatches are spread over the rounds (rounds of p or p + 1, ...), and the
// warm-up covers the first round's v - 1 chunks. Should a rank still be
// unable to make progress (the simulator reports it stuck), it gets one more
// warm-up forward and the schedule is checked again; warm-up equal to all
// forwards is GPipe-like and always valid, so the loop ends.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"
#include "scheduler/model/Simulator.h"

#include <algorithm>

using namespace stagecraft::pipe::sched;

namespace {
struct VirtualOrder {
  std::vector<Action> forwards;
  std::vector<Action> backwards;
};
} // namespace

/// Sizes of the microbatch rounds: as many rounds as full groups of \p p
/// fit (at least one), the remainder spread over them so that every round
/// has at least p microbatches when m >= p. A round shorter than p stalls
/// rank 0 when it moves to the next chunk; a longer one only costs memory.
static std::vector<int> roundSizes(int p, int mbs) {
  int rounds = std::max(1, mbs / p);
  std::vector<int> sizes(rounds, mbs / rounds);
  for (int i = 0; i < mbs % rounds; ++i)
    ++sizes[i];
  return sizes;
}

/// The forward and backward sequences of rank \p r.
static VirtualOrder virtualOrder(int r, int p, int v,
                                 llvm::ArrayRef<int> rounds,
                                 ActionKind backwardKind) {
  VirtualOrder order;
  int m0 = 0;
  for (int size : rounds) {
    int m1 = m0 + size;
    for (int c = 0; c < v; ++c)
      for (int m = m0; m < m1; ++m)
        order.forwards.push_back({ActionKind::Forward, c * p + r, m});
    for (int c = v - 1; c >= 0; --c)
      for (int m = m0; m < m1; ++m)
        order.backwards.push_back({backwardKind, c * p + r, m});
    m0 = m1;
  }
  return order;
}

static std::vector<Action> interleave(const VirtualOrder &order, int warmup) {
  std::vector<Action> result;
  size_t total = order.forwards.size();
  result.reserve(2 * total);
  size_t f = 0, b = 0;
  for (; f < static_cast<size_t>(warmup); ++f)
    result.push_back(order.forwards[f]);
  while (f < total) {
    result.push_back(order.forwards[f++]);
    result.push_back(order.backwards[b++]);
  }
  while (b < total)
    result.push_back(order.backwards[b++]);
  return result;
}

int stagecraft::pipe::sched::interleavedWarmup(const Problem &problem, int r) {
  const int p = problem.ranks, mbs = problem.microbatches;
  const int v = problem.numStages() / p;
  int w = v == 1 ? p - r - 1
                 : 2 * (p - r - 1) + (v - 1) * roundSizes(p, mbs).front();
  return std::min(w, mbs * v);
}

std::vector<std::vector<Action>>
stagecraft::pipe::sched::interleavedOrders(const Problem &problem,
                                           llvm::function_ref<int(int)> warmup,
                                           ActionKind backwardKind) {
  const int p = problem.ranks, mbs = problem.microbatches;
  const int v = problem.numStages() / p;
  const std::vector<int> rounds = roundSizes(p, mbs);
  std::vector<std::vector<Action>> orders(p);
  for (int r = 0; r < p; ++r)
    orders[r] = interleave(virtualOrder(r, p, v, rounds, backwardKind),
                           std::clamp(warmup(r), 0, mbs * v));
  return orders;
}

llvm::Expected<Schedule>
stagecraft::pipe::sched::generateInterleaved1F1B(const Problem &problem,
                                                 int chunks) {
  llvm::Expected<std::vector<int>> placement = placeRoundRobin(problem, chunks);
  if (!placement)
    return placement.takeError();
  const int p = problem.ranks, mbs = problem.microbatches;
  const int total = mbs * (problem.numStages() / p);

  Schedule schedule;
  schedule.placement = std::move(*placement);
  std::vector<int> warmup(p);
  for (int r = 0; r < p; ++r)
    warmup[r] = interleavedWarmup(problem, r);
  auto build = [&] {
    schedule.ranks = interleavedOrders(
        problem, [&](int r) { return warmup[r]; }, ActionKind::Backward);
  };
  build();

  while (true) {
    llvm::Error err = verifySchedule(problem, schedule);
    if (!err)
      return schedule;
    bool grew = false;
    llvm::Error rest = llvm::handleErrors(
        std::move(err), [&](const ScheduleError &error) -> llvm::Error {
          for (const ScheduleNote &note : error.notes) {
            int r = note.site.rank;
            if (r < 0 || warmup[r] >= total)
              continue;
            ++warmup[r];
            grew = true;
          }
          return llvm::Error::success();
        });
    if (rest)
      return std::move(rest);
    if (!grew)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "interleaved-1f1b found no valid warm-up");
    build();
  }
}
