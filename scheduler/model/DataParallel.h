//===- DataParallel.h - A pipeline inside data parallelism ------*- C++ -*-===//
//
// Each pipeline replica's stages reduce their gradients across the
// data-parallel group after their last gradient (DDP), or, sharded
// (FSDP / ZeRO-3), gather their weights before their first forward and
// reduce-scatter their gradients (HSDP: shard within a group of replicas,
// all-reduce across the groups). The collectives run on a channel beside
// each rank's compute, one at a time (they share the rank's link), in the
// order they are released; the optimizer step of a rank runs on its compute
// after its last gradient and its last reduction. A step ends when every
// rank's optimizer step is done.
//
// `simulateDataParallel` adds this to a pipeline's simulated timeline: where
// each reduction is released is the placement (torch's rule: a stage's
// whole gradient after its last backward; Megatron's bucketed overlap: in
// buckets as the last gradient action of the stage completes their layers).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_DATAPARALLEL_H
#define STAGECRAFT_SCHEDULER_MODEL_DATAPARALLEL_H

#include "scheduler/model/Simulator.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

/// The data parallelism around a pipeline.
struct DataParallel {
  /// Replicas of the pipeline.
  int degree = 1;
  enum class Sharding { None, Full, Hybrid };
  Sharding sharding = Sharding::None;
  /// Hybrid: replicas per shard group (divides `degree`).
  int shardGroup = 1;
  /// The data-parallel link of a rank: time per step of a ring collective,
  /// and bytes per time unit. Hybrid's all-reduce across shard groups uses
  /// the inter link.
  double latency = 0.0, bandwidth = 1.0;
  double interLatency = 0.0, interBandwidth = 1.0;
  /// Per stage: bytes of its gradient (and of its weights, same type).
  std::vector<double> gradBytes;
  /// Optimizer step time per byte of gradient the rank updates (its shard
  /// when sharded).
  double optimizerPerByte = 0.0;
};

/// Fails naming what is wrong with \p dp around \p problem: a degree
/// below 1, a shard group that does not divide it (hybrid), gradient bytes
/// not one per stage or not finite and >= 0, a bandwidth not finite and
/// positive, a latency or optimizer time not finite and >= 0.
llvm::Error validateDataParallel(const Problem &problem,
                                 const DataParallel &dp);

/// "none", "full", "hybrid".
llvm::StringRef shardingName(DataParallel::Sharding sharding);
llvm::Expected<DataParallel::Sharding> parseSharding(llvm::StringRef name);

/// Where the gradient reductions are released.
enum class ReducePlacement {
  /// torch's rule: a stage's whole gradient, once its last backward ends.
  AfterLastBackward,
  /// Megatron's --overlap-grad-reduce: buckets of `bucketBytes`, each once
  /// the last gradient action of the stage has run through its layers (a
  /// bucket k of K at that action's start + (k + 1) / K of its length).
  Bucketed,
};

struct DataParallelOptions {
  ReducePlacement placement = ReducePlacement::AfterLastBackward;
  /// Bucketed: bytes per bucket (<= 0: the whole stage).
  double bucketBytes = 0.0;
};

/// One collective or optimizer step on a rank.
struct DataParallelOp {
  enum class Kind { Gather, Reduce, Optimizer };
  Kind kind;
  int stage;
  /// Bucket index within the stage's gradient (0 for a whole one).
  int bucket = 0;
  double bytes = 0.0;
  double release = 0.0, start = 0.0, end = 0.0;
};

struct DataParallelTimeline {
  /// Every rank's optimizer step done.
  double step = 0.0;
  /// The pipeline's compute, delayed uniformly by `shift` when a sharded
  /// stage's weights arrive after its first forward would start.
  double shift = 0.0;
  /// Per rank: its last compute end (shifted), its last collective end,
  /// the time its collectives add to the step (exposed: past the
  /// pipeline's last compute, plus the shift), and the bytes of weights and
  /// gradients it holds at its peak.
  std::vector<double> computeEnd, commEnd, exposed, heldBytes;
  /// Per rank: collectives and the optimizer step, in the order they ran.
  std::vector<std::vector<DataParallelOp>> ops;
  double maxExposed() const;
};

/// Time of one collective of \p bytes over \p ranks ranks on a ring:
/// all-reduce 2 (n - 1) steps of bytes / n, reduce-scatter and all-gather
/// n - 1.
double allReduceTime(double bytes, int ranks, double latency, double bandwidth);
double reduceScatterTime(double bytes, int ranks, double latency,
                         double bandwidth);

/// The step of \p timeline (the pipeline's, with \p schedule's placement)
/// inside \p dp with the reductions placed by \p options. Fails on a degree
/// below 1, a shard group that does not divide it, gradient bytes not one
/// per stage or negative, a bandwidth not positive, or a bucket size that
/// is not finite.
llvm::Expected<DataParallelTimeline>
simulateDataParallel(const Problem &problem, const Schedule &schedule,
                     const Timeline &timeline, const DataParallel &dp,
                     const DataParallelOptions &options);

/// A lower bound on the step with \p dp's collectives, for any schedule
/// with \p schedule's placement and any placement of the reductions: the
/// pipeline's own compute bound (\p computeBound) plus the least optimizer
/// step, and per rank its collectives, one at a time, each stage's
/// released no sooner than its last gradient action can start, then its
/// optimizer step.
double dataParallelLowerBound(const Problem &problem, const Schedule &schedule,
                              double computeBound, const DataParallel &dp);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_DATAPARALLEL_H
