//===- ZeroBubbleHeuristic.h - The zero-bubble papers' heuristics -*- C++
//-*-===//
//
// Per-rank orders of F, I and W built the way Qi et al. build them: the
// contiguous heuristic of "Zero Bubble Pipeline Parallelism" (ZB-H1/ZB-H2
// at the memory limit of each) and the V-shape heuristic of "Pipeline
// Parallelism with Controllable Memory" (ZB-V). Each tries the variants the
// authors' code tries and returns the fastest, verified.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_KINDS_ZEROBUBBLEHEURISTIC_H
#define STAGECRAFT_SCHEDULER_KINDS_ZEROBUBBLEHEURISTIC_H

#include "scheduler/model/Schedule.h"
#include "scheduler/model/Simulator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <optional>

namespace stagecraft::pipe::sched {

/// The contiguous zero-bubble heuristic on \p placement (contiguous blocks,
/// one per rank, in chain order) with per-rank \p memoryLimit; of its
/// variants, the one with the least \p objective (the makespan, or the
/// largest per-rank span, as the paper's bubble rates count). Fails if no
/// variant fits the limits.
llvm::Expected<Schedule>
zeroBubbleChain(const Problem &problem, llvm::ArrayRef<int> placement,
                llvm::ArrayRef<double> memoryLimit,
                Objective objective = Objective::Makespan);

/// The V-shape heuristic on the V \p placement (rank r hosts stages r and
/// 2p - 1 - r) with per-rank \p memoryLimit. Fails if no variant fits.
/// \p plannedLatency, when given, is the link latency the heuristic plans
/// with (its offsets and W fills); the result is still simulated with the
/// problem's. `auto` tries a few, since planning for more slack than the
/// link has can shorten the real step.
llvm::Expected<Schedule>
zeroBubbleV(const Problem &problem, llvm::ArrayRef<int> placement,
            llvm::ArrayRef<double> memoryLimit,
            std::optional<double> plannedLatency = std::nullopt);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_KINDS_ZEROBUBBLEHEURISTIC_H
