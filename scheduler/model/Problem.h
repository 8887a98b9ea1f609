//===- Problem.h - Pipeline scheduling problem ------------------*- C++ -*-===//
//
// The input to every scheduler: the stages of one pipeline in chain order,
// their per-action costs and memory, the ranks and microbatches, the link
// latency, and optional user placement. Pure data, no MLIR; `validateProblem`
// states the preconditions every algorithm relies on.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_PROBLEM_H
#define STAGECRAFT_SCHEDULER_MODEL_PROBLEM_H

#include "llvm/Support/Error.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

/// One contiguous slice of the model. Costs are in abstract time units,
/// memory in abstract units (the simulator only adds them up).
struct Stage {
  std::string name;
  double forward = 1.0;
  double backwardInput = 1.0;
  double backwardWeight = 1.0;
  /// Memory allocated by a forward and held until the backward ends.
  double activation = 1.0;
  /// The part of `activation` still needed by the weight gradient after the
  /// input gradient has run.
  double weightGrad = 1.0;
  /// What a forward keeps when the schedule recomputes it in full before
  /// the backward (typically its input); unset: the whole activation, so
  /// full recomputation saves nothing.
  std::optional<double> recomputed;
  /// Selective recomputation (Megatron's: the attention core), offered only
  /// where both are given: what a forward keeps, and the cost the backward
  /// first spends to re-derive the rest.
  std::optional<double> selective;
  std::optional<double> selectiveCost;
  /// Static memory resident on the rank hosting the stage (weights,
  /// gradients, optimizer state), in the unit of `activation`.
  double params = 0.0;
  /// Cost of this stage's forward overlapped with a full backward of a stage
  /// like it (DualPipe's F&B); unset means no overlap gain (F + B).
  std::optional<double> forwardBackward;
  /// Cost of one fused backward B where it differs from I + W (a runtime
  /// whose split backward costs more than the fused one, as measured by
  /// stagecraft.torch.profile); unset means I + W.
  std::optional<double> fusedBackward;
  /// Size of the activation this stage sends to the next one (its
  /// gradient coming back is as large), in memory units; 0: not given.
  double output = 0.0;
  /// How the costs grow with a microbatch's sequence length l (with the
  /// pipeline's `lengths`): as linear l + quadratic l^2.
  double scalingLinear = 1.0, scalingQuadratic = 0.0;
  /// The stages whose outputs this stage takes (a branching pipeline,
  /// `inputs(...)`), each earlier than it; unset: the previous stage (none
  /// for the first). Set and empty: a source (it reads the data itself).
  std::optional<std::vector<int>> inputs;
  /// The rank the user pinned this stage to, if any.
  std::optional<int> rank;
  /// Transformer layers of the stage (for training); 0 when not given.
  int layers = 0;
  /// The core attention that follows this stage (HelixPipe cuts layers at
  /// the attention boundary): its costs and the memory it keeps from its
  /// forward to its backward.
  struct Attention {
    double forward = 0.0, backward = 0.0, memory = 0.0;
  };
  std::optional<Attention> attention;

  /// One fused backward B (input and weight gradients in one action);
  /// unset: backwardInput + backwardWeight.
  double backward() const {
    return fusedBackward.value_or(backwardInput + backwardWeight);
  }
  /// The least backward a schedule can run: fused or split.
  double leastBackward() const {
    return std::min(backward(), backwardInput + backwardWeight);
  }
  /// Time saved by overlapping this stage's F with a B: F + B - F&B.
  double overlapGain() const {
    return forwardBackward ? forward + backward() - *forwardBackward : 0.0;
  }
};

/// Cost of the forward of \p f overlapped with the full backward of \p b:
/// F(f) + B(b) less the mean of their overlap gains, and never less than the
/// longer of the two.
double overlappedCost(const Stage &f, const Stage &b);

struct Problem {
  std::string name;
  int ranks = 1;
  int microbatches = 1;
  /// Latency of a transfer between two different ranks.
  double latency = 0.0;
  /// The runtime's own work, in time units, per message a compute sends
  /// to another rank (posting it; measured by stagecraft.torch.calibrate on
  /// torch's runtime), added to that compute; 0 for runtimes that post
  /// messages off the compute's path.
  double messageOverhead = 0.0;
  /// The runtime's own work, in time units, per message a compute
  /// receives from another rank, done on the compute's rank just before
  /// it (torch's runtime posts each receive right before the compute that
  /// needs it, and the transfer's handshake starts then, even when the
  /// sender sent long before; measured by stagecraft.torch.calibrate). It
  /// overlaps with waiting for the message; 0 for runtimes that post
  /// receives ahead.
  double receiveOverhead = 0.0;
  /// Memory capacity of every rank (unset: unbounded): its stages' `params`
  /// plus its live activations must stay within it.
  std::optional<double> capacity;
  std::vector<Stage> stages;
  /// The device of each rank (`pipe.device`, `devices(...)`); empty: every
  /// rank the same device of speed 1 with `capacity`.
  struct Device {
    std::string name;
    /// An action on the rank takes cost / speed.
    double speed = 1.0;
    /// Its memory capacity (unset: the pipeline's `capacity`).
    std::optional<double> memory;
  };
  std::vector<Device> devices;
  /// Links between ranks (`links(...)`): ranks in groups of `node`; a
  /// transfer takes latency + bytes / bandwidth of the link it crosses.
  /// Unset: every transfer between ranks takes `latency`.
  struct Link {
    double latency = 0.0, bandwidth = 1.0;
  };
  struct Links {
    int node = 1;
    Link intra, inter;
  };
  std::optional<Links> links;
  /// Each microbatch's sequence length (`lengths(...)`); empty: all alike.
  /// The stages' costs and memory are for `referenceLength`.
  std::vector<double> lengths;
  double referenceLength = 1.0;
  /// The spec's microbatch each position holds, when a schedule reordered
  /// them (`microbatch_order`); empty: position k is microbatch k.
  std::vector<int> microbatchOrder;

  /// Stage \p s's cost factor for microbatch \p m: (a l + b l^2) / (a l0 +
  /// b l0^2) with its scaling; 1 without lengths.
  double costScale(int s, int m) const {
    if (lengths.empty() || m < 0 || m >= static_cast<int>(lengths.size()))
      return 1.0;
    const Stage &st = stages[s];
    double l = lengths[m], l0 = referenceLength;
    return (st.scalingLinear * l + st.scalingQuadratic * l * l) /
           (st.scalingLinear * l0 + st.scalingQuadratic * l0 * l0);
  }
  /// The memory (and message size) factor of microbatch \p m: l / l0.
  double memoryScale(int m) const {
    if (lengths.empty() || m < 0 || m >= static_cast<int>(lengths.size()))
      return 1.0;
    return lengths[m] / referenceLength;
  }
  bool hasLengths() const { return !lengths.empty(); }

  /// The capacity of rank \p r: its device's memory, else `capacity`;
  /// infinity when unbounded.
  double capacityOf(int r) const;
  /// The speed of rank \p r's device (1 without devices).
  double speedOf(int r) const;
  bool hasDevices() const { return !devices.empty(); }
  /// The time of a transfer from rank \p from to rank \p to of stage
  /// \p stage's output (or its gradient; -1: a size of 0): 0 on one rank,
  /// `latency` without links, else the crossed link's latency plus the
  /// output over its bandwidth. Alone on its link: with links, the
  /// simulator queues the transfers of each directed link
  /// (TaskGraph::linkContention).
  double transferTime(int from, int to, int stage, int microbatch = -1) const;
  /// Whether some rank's memory is bounded (`capacity`, or a device's
  /// `memory`).
  bool hasCapacity() const {
    if (capacity)
      return true;
    for (const Device &d : devices)
      if (d.memory)
        return true;
    return false;
  }

  int numStages() const { return static_cast<int>(stages.size()); }
  /// The F, I and W of every stage and microbatch: the size the search
  /// limits and the parallel generation threshold are stated in.
  long long numActions() const {
    return 3LL * numStages() * static_cast<long long>(microbatches);
  }
  /// The stages stage \p s takes outputs from (in a chain: s - 1).
  std::vector<int> inputsOf(int s) const;
  /// The stages that take stage \p s's output (in a chain: s + 1); the
  /// gradient of its output is the sum of theirs.
  std::vector<int> consumersOf(int s) const;
  /// Every stage's inputs and consumers at once (inputsOf and consumersOf
  /// for all stages, in linear time).
  struct Edges {
    std::vector<std::vector<int>> inputs, consumers;
  };
  Edges edges() const;
  /// Whether every stage takes the previous one's output (no `inputs`
  /// other than that): the kinds built on a chain need one.
  bool isChain() const;
  /// Units of the gradient message stage \p c's backward sends back: the
  /// outputs of all its inputs (one message, to each input's rank).
  double gradientUnits(int c) const;
  /// transferTime for a message of \p units memory units.
  double transferTimeOfUnits(int from, int to, double units,
                             int microbatch = -1) const;
  /// True when every stage carries a user placement.
  bool isPinned() const;
};

/// Checks the preconditions of all algorithms: at least one rank, microbatch
/// and stage; finite non-negative costs, memory and latency; weight_grad not
/// above activation; `recomputed` and `selective` at most activation,
/// `selective` and its cost given together; capacity positive; pins either on
/// every stage or on none, each in range, leaving no rank empty. Fails with a
/// message naming the offending value.
llvm::Error validateProblem(const Problem &problem);

/// \p problem as every rank's device sees it when stage s runs on rank
/// \p placement[s]: each stage's costs divided by its rank's speed, and no
/// devices left (capacities stay per rank through `devices[r].memory`, as
/// device-less ranks keep `capacity`). What the generators schedule, so
/// that their cost heuristics see the real durations.
Problem scaledForDevices(const Problem &problem, llvm::ArrayRef<int> placement);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_PROBLEM_H
