//===- Partition.h - Cutting a chain of layers into stages ------*- C++ -*-===//
//
// A layer pipeline (`pipe.layer` ops, in model order) becomes a stage
// pipeline by cutting the chain into contiguous stages. Each stage runs on
// the rank a placement gives it; a rank's device has a speed (an action
// takes cost / speed) and a memory capacity. The partition minimizes the
// slowest stage's time per microbatch, (F + I + W) / speed, subject to each
// stage fitting its share of its rank's memory; `partitionLayers` is exact
// (dynamic programming over cut points).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_SEARCH_PARTITION_H
#define STAGECRAFT_SCHEDULER_SEARCH_PARTITION_H

#include "scheduler/model/Problem.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

/// One layer of the model (a `pipe.layer` op with `count(N)` stands for N
/// of these).
struct Layer {
  std::string name;
  double forward = 1.0, backwardInput = 1.0, backwardWeight = 1.0;
  double activation = 1.0, weightGrad = 1.0;
  /// Weights, gradients and optimizer state of the layer.
  double params = 0.0;
  /// Size of the activation it sends to the next layer (0: not given).
  double output = 0.0;
  /// Bytes of its gradient, reduced over the data-parallel group (0: not
  /// given); a stage's is its layers' sum.
  double gradient = 0.0;

  double work() const { return forward + backwardInput + backwardWeight; }
};

/// Where the stages of a partition will run.
struct PartitionTarget {
  int stages = 1;
  /// Per stage: the speed of the device of its rank (default 1).
  std::vector<double> speed;
  /// Per stage: the memory it may use: its layers' params plus
  /// `inFlight[s]` forwards' activations must fit (infinity: unbounded).
  std::vector<double> budget;
  std::vector<int> inFlight;
  /// Per stage: its rank, for messages (empty: not said).
  std::vector<int> rank;
};

/// A partition: stage s holds layers [first[s], first[s + 1]).
struct Partition {
  std::vector<int> first;
  /// The slowest stage's (F + I + W) / speed.
  double slowest = 0.0;

  int numStages() const { return static_cast<int>(first.size()) - 1; }
};

/// The memory stage layers [begin, end) need with \p inFlight forwards'
/// activations live.
double stageMemory(llvm::ArrayRef<Layer> layers, int begin, int end,
                   int inFlight);

/// The partition of \p layers into `target.stages` non-empty contiguous
/// stages whose slowest stage is fastest, every stage within its budget;
/// among equally fast ones, the first found with the earliest cuts. Fails
/// naming the stage and what it needed when no partition fits.
llvm::Expected<Partition> partitionLayers(llvm::ArrayRef<Layer> layers,
                                          const PartitionTarget &target);

/// The same by trying every cut (for tests; at most ~20 layers).
llvm::Expected<Partition>
partitionLayersBruteForce(llvm::ArrayRef<Layer> layers,
                          const PartitionTarget &target);

/// Stages from a partition: costs, memory and params summed over their
/// layers; named `prefix` + index; `layers` is the layer count (one
/// transformer layer per `Layer` when training).
std::vector<Stage> stagesFromPartition(llvm::ArrayRef<Layer> layers,
                                       const Partition &partition);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_SEARCH_PARTITION_H
