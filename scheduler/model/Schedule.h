//===- Schedule.h - Per-rank ordered actions --------------------*- C++ -*-===//
//
// A schedule: where each stage lives (placement) and, for every rank, the
// order in which it runs its compute actions. It says nothing about time;
// the simulator derives time from a schedule and its problem.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_MODEL_SCHEDULE_H
#define STAGECRAFT_SCHEDULER_MODEL_SCHEDULE_H

#include "scheduler/model/Problem.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

/// F forward, I backward for inputs, W backward for weights, B full backward
/// (I and W fused), X: a forward and a full backward of two stages on one
/// rank, overlapped (DualPipe's F&B), and the core attention that follows a
/// stage (HelixPipe), forward A and backward G, on any rank.
enum class ActionKind : uint8_t {
  Forward,
  BackwardInput,
  BackwardWeight,
  Backward,
  ForwardBackward,
  AttentionForward,
  AttentionBackward,
};

/// Whether \p kind is an attention task (not bound to its stage's rank).
inline bool isAttention(ActionKind kind) {
  return kind == ActionKind::AttentionForward ||
         kind == ActionKind::AttentionBackward;
}

/// The letter PyTorch's pipelining CSV uses for \p kind.
char actionLetter(ActionKind kind);
/// Inverse of `actionLetter`; nullopt for any other character.
std::optional<ActionKind> actionKindFromLetter(char letter);
/// The `pipe` op name without dialect prefix ("forward", "backward_input").
llvm::StringRef actionOpName(ActionKind kind);

struct Action {
  ActionKind kind;
  /// For ForwardBackward: the forward half.
  int stage;
  int microbatch;
  /// For ForwardBackward only: the backward half.
  int backwardStage = -1;
  int backwardMicrobatch = -1;

  static Action overlapped(int fStage, int fMb, int bStage, int bMb) {
    return {ActionKind::ForwardBackward, fStage, fMb, bStage, bMb};
  }
  bool operator==(const Action &other) const {
    return kind == other.kind && stage == other.stage &&
           microbatch == other.microbatch &&
           backwardStage == other.backwardStage &&
           backwardMicrobatch == other.backwardMicrobatch;
  }
};

/// "forward @s0 mb 3", for diagnostics.
std::string describeAction(const Problem &problem, const Action &action);
/// "0F3", or "0F3+7B1" for an overlapped action, for messages.
std::string shortName(const Action &action);
/// torch.distributed.pipelining's spelling: "0F3", and "(0F3;7B1)OVERLAP_F_B"
/// for an overlapped action.
std::string torchName(const Action &action);
/// torchName(\p action) appended to \p out (no string of its own: CSVs of
/// millions of cells).
void appendTorchName(std::string &out, const Action &action);

/// Messages \p a sends to other ranks under \p placement: a forward's
/// output to each consumer elsewhere, a backward's (I or B) gradient to
/// each input elsewhere; both halves of an overlapped F&B.
int crossRankMessages(const Problem &problem, const std::vector<int> &placement,
                      const Action &a);
/// Messages \p a receives from other ranks under \p placement: a
/// forward's inputs from elsewhere, a backward's (I or B) gradients from
/// each consumer elsewhere; both halves of an overlapped F&B.
int crossRankInputs(const Problem &problem, const std::vector<int> &placement,
                    const Action &a);

/// What the forward of one (stage, microbatch) keeps for its backward.
/// None: its whole activation. Full: only the stage's `recomputed` memory;
/// the backward first re-runs the forward (cost F). Selective: the stage's
/// `selective` memory; the backward first re-runs its selective cost. The
/// re-run re-materializes the whole activation, live until I (or B) and W
/// free it as usual.
enum class Recompute : uint8_t { None, Full, Selective };

/// "none", "full", "selective".
llvm::StringRef recomputeName(Recompute mode);
std::optional<Recompute> parseRecompute(llvm::StringRef name);

/// Per (stage, microbatch) recomputation: table[s][m]. Missing entries (an
/// empty table) are None.
struct RecomputeTable {
  std::vector<std::vector<Recompute>> table;

  Recompute at(int stage, int microbatch) const {
    if (stage < 0 || stage >= static_cast<int>(table.size()))
      return Recompute::None;
    const std::vector<Recompute> &row = table[stage];
    return microbatch >= 0 && microbatch < static_cast<int>(row.size())
               ? row[microbatch]
               : Recompute::None;
  }
  void set(int stage, int microbatch, Recompute mode, int numStages,
           int numMicrobatches);
  /// Every (stage, microbatch) of \p numStages x \p numMicrobatches.
  void assignAll(int numStages, int numMicrobatches, Recompute mode);
  bool any() const;
  /// How many entries are \p mode.
  int count(Recompute mode) const;
  bool operator==(const RecomputeTable &other) const;
};

struct Schedule {
  /// placement[stage] is the rank hosting that stage.
  std::vector<int> placement;
  /// Which forwards recompute (and how) in their backward.
  RecomputeTable recompute;
  /// ranks[r] is the compute order of rank r.
  std::vector<std::vector<Action>> ranks;

  int numRanks() const { return static_cast<int>(ranks.size()); }
  /// Stages hosted by \p rank, in chain order.
  std::vector<int> stagesOf(int rank) const;
};

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_MODEL_SCHEDULE_H
