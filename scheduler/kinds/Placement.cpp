//===- Placement.cpp - Stage placement for the schedule kinds -------------===//
//
// Maps stages to ranks: contiguous blocks (GPipe, 1F1B) or round-robin
// (interleaved). Pins from the spec are honoured or rejected with a reason.
//
//===----------------------------------------------------------------------===//

#include "scheduler/kinds/Kinds.h"

#include <fmt/format.h>

using namespace stagecraft::pipe::sched;

static llvm::Error placementError(std::string message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<std::vector<int>>
stagecraft::pipe::sched::placeContiguous(const Problem &problem,
                                         bool requireContiguous) {
  const int n = problem.numStages(), p = problem.ranks;
  std::vector<int> placement(n);
  if (problem.isPinned()) {
    for (int s = 0; s < n; ++s)
      placement[s] = *problem.stages[s].rank;
    if (requireContiguous) {
      std::vector<bool> seen(p, false);
      for (int s = 0; s < n; ++s) {
        int r = placement[s];
        if (s > 0 && placement[s - 1] == r)
          continue;
        if (seen[r])
          return placementError(fmt::format(
              "stages pinned to rank {} are not contiguous (@{} follows a "
              "stage on rank {}); this kind needs one block of consecutive "
              "stages per rank, use interleaved-1f1b or gpipe",
              r, problem.stages[s].name, placement[s - 1]));
        seen[r] = true;
      }
    }
    return placement;
  }
  // Blocks as even as the counts allow: the first n % p ranks take one more.
  int base = n / p, extra = n % p, s = 0;
  for (int r = 0; r < p; ++r)
    for (int k = 0, e = base + (r < extra ? 1 : 0); k < e; ++k)
      placement[s++] = r;
  return placement;
}

llvm::Expected<std::vector<int>>
stagecraft::pipe::sched::placeRoundRobin(const Problem &problem, int chunks) {
  const int n = problem.numStages(), p = problem.ranks;
  if (chunks == 0) {
    if (n % p != 0)
      return placementError(fmt::format(
          "interleaved placement needs a stage count divisible by the ranks: "
          "pipeline @{} has {} stages for {} ranks",
          problem.name, n, p));
    chunks = n / p;
  }
  if (chunks < 1)
    return placementError(
        fmt::format("chunks must be at least 1, got {}", chunks));
  const long long needed = static_cast<long long>(p) * chunks;
  if (needed != n)
    return placementError(fmt::format(
        "interleaved placement with {} chunks on {} ranks needs {} stages, "
        "pipeline @{} has {}",
        chunks, p, needed, problem.name, n));
  std::vector<int> placement(n);
  for (int s = 0; s < n; ++s) {
    placement[s] = s % p;
    const std::optional<int> &pin = problem.stages[s].rank;
    if (pin && *pin != placement[s])
      return placementError(fmt::format(
          "interleaved placement puts stage @{} on rank {}, but it is pinned "
          "to rank {}",
          problem.stages[s].name, placement[s], *pin));
  }
  return placement;
}
