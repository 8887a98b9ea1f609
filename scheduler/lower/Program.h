//===- Program.h - Schedules with explicit communication --------*- C++ -*-===//
//
// A program is a schedule lowered for execution: every rank's compute
// actions interleaved with the point-to-point operations that carry data
// between ranks (an activation forward, a gradient backward), optionally
// grouped. Matching follows NCCL and MPI without tags: the k-th send from a
// to b pairs with the k-th receive on b from a.
//
// Semantics the verifier and the runtime share: a compute runs on data its
// rank already holds; a lone send is asynchronous (its buffer stays until it
// completes); a lone receive blocks until its matching send is posted; a
// group posts all its operations and blocks until each has been matched.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_LOWER_PROGRAM_H
#define STAGECRAFT_SCHEDULER_LOWER_PROGRAM_H

#include "scheduler/model/Schedule.h"

#include <string>
#include <vector>

namespace stagecraft::pipe::sched {

struct Timeline;

/// What a message carries, named by the stage s it belongs to:
///   Activation:   F(s) -> F(s + 1)           Gradient: I/B(s) -> I/B(s - 1)
///   Qkv:          F(s) -> A(s)      AttentionOutput: A(s) -> F(s + 1)
///   AttentionOutputGrad: I/B(s + 1) -> G(s)   QkvGrad: G(s) -> I/B(s)
/// (A, G: the attention that follows stage s, on whichever rank runs it).
enum class MessageKind : uint8_t {
  Activation,
  Gradient,
  Qkv,
  AttentionOutput,
  AttentionOutputGrad,
  QkvGrad,
};

struct Message {
  MessageKind kind;
  int stage;
  int microbatch;

  bool operator==(const Message &o) const {
    return kind == o.kind && stage == o.stage && microbatch == o.microbatch;
  }
};

/// "act(@s0, mb 3)" / "grad(@s2, mb 1)".
std::string describeMessage(const Problem &problem, const Message &message);

struct CommOp {
  bool isSend;
  int peer;
  Message message;
};

struct Instruction {
  enum class Kind : uint8_t { Compute, Comm, Group };
  Kind kind;
  /// Kind::Compute.
  Action action{ActionKind::Forward, -1, -1};
  /// Kind::Comm: one op; Kind::Group: one or more.
  std::vector<CommOp> ops;

  static Instruction compute(const Action &a) { return {Kind::Compute, a, {}}; }
  static Instruction comm(const CommOp &op) {
    return {Kind::Comm, {ActionKind::Forward, -1, -1}, {op}};
  }
  static Instruction group(std::vector<CommOp> ops) {
    return {Kind::Group, {ActionKind::Forward, -1, -1}, std::move(ops)};
  }
};

struct Program {
  std::vector<int> placement;
  std::vector<std::vector<Instruction>> ranks;
  /// As Schedule::recompute.
  RecomputeTable recompute;

  int numRanks() const { return static_cast<int>(ranks.size()); }
  /// The compute actions alone, as a schedule.
  Schedule computeSchedule() const;
  /// Sends and receives over all ranks (a group counts each of its ops).
  size_t numTransfers() const;
};

/// Lowers \p schedule: before each compute, a receive for every input that
/// comes from another rank; after it, the sends its outputs owe. Sends on a
/// channel go in the order the receiver consumes, so in-order matching pairs
/// them correctly (a send waits in its buffer until the messages due before
/// it on the channel are out). The operations between two computes go in one
/// group when they include both a send and a receive (NCCL's batched p2p, as
/// Megatron's send_forward_recv_backward). If that grouping could hang, the
/// groups are dropped: lone async sends and blocking receives run whenever the
/// schedule does. Adjacent stages on one rank exchange nothing.
/// Assumes `verifySchedule(problem, schedule)` succeeded.
Program lowerCommunication(const Problem &problem, const Schedule &schedule);

/// The same transfers for runtimes whose receive only posts a buffer and
/// whose compute waits for it (torch.distributed.pipelining's RECV_F /
/// RECV_B): every receive moves up to the first compute of its rank that
/// starts, in the simulated timeline, once the matching send is out, so the
/// data moves while the rank computes, keeping each channel's receives in
/// order. Sends stay after their producers; nothing is grouped. The result
/// is verified under the blocking-receive semantics of `verifyProgram` (the
/// simulated timeline is a run in which no moved receive waits); if that
/// fails, the receives stay where `lowerCommunication` puts them.
///
/// \p timeline, when given, is the schedule's simulated timeline (it is
/// simulated here otherwise), and \p verified says the schedule passed
/// verifySchedule, so that the program's compute order, the schedule's own,
/// is not checked again.
Program lowerCommunicationEarlyReceives(const Problem &problem,
                                        const Schedule &schedule,
                                        const Timeline *timeline = nullptr,
                                        bool verified = false);

/// Checks \p program: its computes form a valid schedule; each cross-rank
/// input is received before its compute and each output sent after its
/// producer, exactly once; channel order pairs every send with the receive of
/// the same message; and execution under the semantics above cannot hang.
/// On a hang the ScheduleError names the ranks, the operations they wait at
/// and the cycle of waits. Sites index into the rank's instructions.
/// When \p verifiedCompute (a schedule that passed verifySchedule) is the
/// program's compute order, that order is not checked again.
llvm::Error verifyProgram(const Problem &problem, const Program &program,
                          const Schedule *verifiedCompute = nullptr);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_LOWER_PROGRAM_H
