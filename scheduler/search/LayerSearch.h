//===- LayerSearch.h - auto on a layer pipeline -----------------*- C++ -*-===//
//
// `kind=auto` on a pipeline of layers chooses together how many stages each
// rank hosts (1 or 2), which device sits where in the chain, the cut of the
// layers into stages (exact for each placement, Partition.h) and the
// schedule kind, under every rank's capacity: each candidate is cut,
// scheduled with its recomputation planned, and simulated; the fastest
// wins, and auto's own search then tries to improve it.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_LAYERSEARCH_H
#define STAGECRAFT_SCHEDULER_SEARCH_LAYERSEARCH_H

#include "scheduler/kinds/Kinds.h"
#include "scheduler/search/Partition.h"
#include "scheduler/search/ScheduleByName.h"

namespace stagecraft::pipe::sched {

struct LayerSearchResult {
  /// The pipeline with its stages (named s0, s1, ...) and its devices in
  /// the chosen order.
  Problem problem;
  Partition partition;
  /// Rank r runs on the device the spec assigned to rank deviceOrder[r].
  std::vector<int> deviceOrder;
  KindResult result;
  /// What was chosen, in words (the schedule's `auto_choice`).
  std::string choice;
  /// Candidates cut, scheduled and simulated.
  int candidates = 0;
};

/// Searches \p layers on \p ranks (a problem without stages: ranks,
/// microbatches, latency, capacity, devices) as described above.
/// \p request's recomputation and time limit apply. Fails, naming what
/// the last candidate needed, when nothing fits.
llvm::Expected<LayerSearchResult>
searchLayerPipeline(const Problem &ranks, llvm::ArrayRef<Layer> layers,
                    const KindRequest &request);

/// The stage pipeline of \p layers cut by \p partition on \p ranks' ranks
/// and devices (stages named s0, s1, ...).
Problem stagedProblem(const Problem &ranks, llvm::ArrayRef<Layer> layers,
                      const Partition &partition);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_LAYERSEARCH_H
