//===- Plan.h - The runtime plan --------------------------------*- C++ -*-===//
//
// What `stagecraft-run` executes: per rank, an instruction stream (compute,
// send, recv, group, free) over numbered buffer slots with sizes. Every
// buffer a schedule needs (stashed activations, outgoing and incoming
// activations and gradients) is assigned a slot by liveness; each use names
// the slot and the tag of the buffer expected there, so a runtime that writes
// tags on produce and checks them on consume detects wrong slot reuse.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_LOWER_PLAN_H
#define STAGECRAFT_SCHEDULER_LOWER_PLAN_H

#include "scheduler/lower/Program.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

/// What a buffer holds.
enum class BufferKind : uint8_t {
  /// Output of F(stage, mb), or the same received by the next stage.
  Activation,
  /// Output of I/B(stage, mb), or the same received by the previous stage.
  Gradient,
  /// The part of F(stage, mb)'s activation that I (or B) releases.
  StashInput,
  /// The part that W (or B) releases: weight_grad.
  StashWeight,
  /// The attention messages of Program.h's MessageKind, in its order.
  Qkv,
  AttentionOutput,
  AttentionOutputGrad,
  QkvGrad,
  /// What an attention forward keeps for its backward.
  AttentionKept,
};

/// Whether buffers of \p kind travel between ranks.
inline bool isMessageBuffer(BufferKind kind) {
  return kind != BufferKind::StashInput && kind != BufferKind::StashWeight &&
         kind != BufferKind::AttentionKept;
}

/// Identity of one buffer: kind, stage, microbatch. Never 0.
uint64_t bufferTag(BufferKind kind, int stage, int microbatch);
/// What bufferTag encoded: the kind's index (-1 for tag 0; out of range
/// for a tag bufferTag never made), stage and microbatch.
struct TagParts {
  int kind, stage, microbatch;
};
TagParts decodeTag(uint64_t tag);
/// "act(@s0, mb 3)", "stash-w(@s1, mb 0)"; \p stageNames may be empty.
std::string describeTag(uint64_t tag, llvm::ArrayRef<std::string> stageNames);

/// A buffer in a slot: the slot, the buffer's tag and its size (at most the
/// slot's).
struct SlotUse {
  int slot;
  uint64_t tag;
  int64_t bytes;
};

struct PlanOp {
  enum class Kind : uint8_t {
    Compute,
    Send,
    Recv,
    Group,
    Free,
    /// Data parallelism: posts the reduction of `stage`'s gradients over
    /// its data-parallel group; the rank computes on while it runs.
    Reduce,
    /// Completes `stage`'s reduction: its gradients are the group's mean.
    ReduceWait,
  };
  Kind kind;
  /// Compute: the action, its cost, the slots it reads and writes.
  Action action{ActionKind::Forward, -1, -1};
  double cost = 0.0;
  std::vector<SlotUse> reads, writes;
  /// Send/Recv: peer and buffer (slot + tag of its content).
  int peer = -1;
  SlotUse buffer{-1, 0, 0};
  /// Send, with `links(...)`: the time the transfer holds its link (the
  /// link's latency + output / bandwidth, in the spec's units), which the
  /// timed CPU runtime emulates; 0 otherwise.
  double transfer = 0.0;
  /// Group: its sends and receives.
  std::vector<PlanOp> ops;
  /// Free: slot.
  /// Reduce, ReduceWait: the stage.
  int stage = -1;
};

struct PlanRank {
  std::vector<int64_t> slotBytes;
  std::vector<PlanOp> ops;
  /// The rank's device (`devices(...)`; empty name: none declared). The
  /// compute costs above are already divided by its speed.
  std::string device;
  double speed = 1.0;
  /// Its memory capacity in the spec's units (unset: unbounded).
  std::optional<double> memory;
};

struct Plan {
  static constexpr int kVersion = 2;
  std::string pipeline;
  std::string schedule;
  int microbatches = 0;
  std::vector<std::string> stageNames;
  /// Transformer layers per stage (0: not given).
  std::vector<int> stageLayers;
  /// Whether an attention task follows each stage (HelixPipe).
  std::vector<bool> stageAttention;
  /// A branching pipeline: each stage's inputs (`inputs(...)`, by stage
  /// index); empty: a chain.
  std::vector<std::vector<int>> stageInputs;
  /// Which forwards recompute in their backward (see Schedule::recompute).
  RecomputeTable recompute;
  std::vector<int> placement;
  /// The spec's `links(...)`: what a transfer between two ranks costs in
  /// the simulation (`simulated_*`); the sends' bytes are the stages'
  /// `output` times the unit bytes where given.
  std::optional<Problem::Links> links;
  /// Each microbatch's length by position (`lengths(...)`, in the
  /// schedule's `microbatch_order`), and the reference length; empty: all
  /// alike.
  std::vector<double> lengths;
  double referenceLength = 1.0;
  /// The spec's microbatch each position holds (`microbatch_order`; its
  /// data when training); empty: position k is microbatch k.
  std::vector<int> microbatchOrder;
  /// What the schedule was chosen to minimize (`objective` on pipe.schedule):
  /// "makespan" (a barrier between steps, as torch's runtime has) or "span"
  /// (steps overlap: stagecraft-run --overlap-steps).
  std::string objective = "makespan";
  /// Simulated makespan in schedule time units, the largest per-rank span
  /// (a step's cost when steps overlap), and per-rank busy time.
  double simulatedMakespan = 0.0;
  double simulatedSpan = 0.0;
  std::vector<double> simulatedBusy;
  /// The simulated timeline, for side-by-side traces: per rank, per compute.
  std::vector<std::vector<double>> simulatedStart;
  std::vector<PlanRank> ranks;
  /// The spec's data parallelism (`data_parallel(...)`): replicas of the
  /// pipeline (1: none declared) and the sharding ("none", "full",
  /// "hybrid"). With replicas, every rank's stream carries its stages'
  /// reductions (placeReductions).
  int dataParallel = 1;
  std::string sharding = "none";
  /// Precomputed plans of the same pipeline for fewer ranks (verified when
  /// written; `stagecraft-translate --pipe-to-plan --fallbacks=K`): what
  /// `stagecraft-run --elastic` runs after a lost rank without compiling.
  /// A fallback holds none of its own.
  std::vector<Plan> fallbacks;

  int numRanks() const { return static_cast<int>(ranks.size()); }
  /// The compute actions alone, with the placement and recomputation, as a
  /// schedule.
  Schedule computeSchedule() const;
};

struct BufferStats {
  /// Per rank: slots used, bytes in slots, and bytes with one buffer each.
  std::vector<int> slots;
  std::vector<int64_t> slotBytes;
  std::vector<int64_t> naiveBytes;
  /// Per rank: the most buffers live at once (equals `slots`).
  std::vector<int> peakLive;
};

/// Builds the plan of \p program (already verified): buffers for every
/// stash and message, slots by liveness over each rank's instruction order
/// (greedy interval colouring, which uses exactly the peak live count), and
/// a `free` after each buffer's last use. Buffer sizes are the stage's
/// activation (or weight_grad) times \p unitBytes, at least 64 bytes, and
/// at least \p minMessageBytes for activation and gradient messages.
Plan buildPlan(const Problem &problem, const Program &program,
               llvm::StringRef scheduleName, int64_t unitBytes,
               BufferStats *stats = nullptr, int64_t minMessageBytes = 64);

/// Places each stage's gradient reduction on its rank, replacing any there:
/// a Reduce right after the stage's last gradient action (W, B, or the
/// backward of an F&B), torch's rule for DDP, and its ReduceWait at the end
/// of the rank's stream, in the order posted, so the rest of the step
/// overlaps the collectives.
void placeReductions(Plan &plan);
/// The same on one rank's stream.
void placeReductions(std::vector<PlanOp> &ops);
/// Whether one rank's stream carries a reduction.
bool hasReductions(llvm::ArrayRef<PlanOp> stream);
/// Whether any rank's stream carries a reduction.
bool hasReductions(const Plan &plan);
/// A plan's reductions: none at all, or on every rank one Reduce for each
/// stage that has a gradient action there, after its last, and one
/// ReduceWait after that Reduce, for no other stage. Fails naming the rank,
/// the stage and what is wrong.
llvm::Error checkReductions(const Plan &plan);

/// The plan as versioned JSON.
std::string writePlan(const Plan &plan);

/// Parses and validates a plan: format and version, then consistency (slot
/// and peer indices in range, known kinds, non-negative costs and sizes,
/// group contents). Fails with a message naming what is wrong and where.
llvm::Expected<Plan> readPlan(llvm::StringRef text);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_LOWER_PLAN_H
