//===- Executor.cpp - Runs one rank of a plan -----------------------------===//
//
// See Executor.h. Buffer tags are written at three places in a slot (start,
// middle, end) so that a partial overwrite is caught too.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"

#include <fmt/format.h>

#include <csignal>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <cstring>
#include <thread>

using namespace stagecraft::runtime;
using namespace stagecraft::pipe;

std::string stagecraft::runtime::describePlanAction(const sched::Plan &plan,
                                                    const sched::Action &a) {
  auto name = [&](int s) {
    return s >= 0 && s < static_cast<int>(plan.stageNames.size())
               ? plan.stageNames[s]
               : std::to_string(s);
  };
  std::string text = fmt::format("{} @{} mb {}", sched::actionOpName(a.kind).str(),
                                 name(a.stage), a.microbatch);
  if (a.kind == sched::ActionKind::ForwardBackward)
    text += fmt::format(", @{} mb {}", name(a.backwardStage),
                        a.backwardMicrobatch);
  return text;
}

namespace {
class RankRunner {
public:
  RankRunner(const sched::Plan &plan, int rank, Communicator &comm,
             ProgressMonitor &monitor, Clock::time_point start,
             const ExecOptions &options)
      : plan(plan), rank(rank), comm(comm), monitor(monitor), start(start),
        options(options), ops(plan.ranks[rank].ops) {
    for (int64_t bytes : plan.ranks[rank].slotBytes)
      slots.emplace_back(static_cast<size_t>(bytes), 0);
  }

  llvm::Expected<RankResult> run();

private:
  double now() const {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  llvm::Error fail(size_t at, const std::string &what) {
    monitor.abort();
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("rank {}: instruction {}: {}", rank, at, what));
  }
  void writeTag(const sched::SlotUse &use, uint64_t tag) {
    char *buf = slots[use.slot].data();
    size_t size = static_cast<size_t>(use.bytes);
    size_t mid = (size / 2) & ~size_t(7);
    for (size_t off : {size_t(0), mid, size - 8})
      std::memcpy(buf + off, &tag, 8);
  }
  /// The tag of the \p use.bytes-byte buffer in its slot, or 0 if the three
  /// copies disagree.
  uint64_t readTag(const sched::SlotUse &use) const {
    const char *buf = slots[use.slot].data();
    size_t size = static_cast<size_t>(use.bytes);
    size_t mid = (size / 2) & ~size_t(7);
    uint64_t a, b, c;
    std::memcpy(&a, buf, 8);
    std::memcpy(&b, buf + mid, 8);
    std::memcpy(&c, buf + size - 8, 8);
    return a == b && b == c ? a : 0;
  }
  llvm::Error expectTag(size_t at, const std::string &who, sched::SlotUse use) {
    uint64_t found = readTag(use);
    if (found == use.tag)
      return llvm::Error::success();
    return fail(at, fmt::format("{} reads slot {}: it holds {}, expected {}",
                                who, use.slot,
                                sched::describeTag(found, plan.stageNames),
                                sched::describeTag(use.tag, plan.stageNames)));
  }
  /// Waits for \p request; the hang report names \p what.
  llvm::Error await(size_t at, Request &request, const std::string &what) {
    if (!request.active())
      return llvm::Error::success();
    monitor.waiting(rank, fmt::format("instruction {}: {}", at, what));
    double t0 = now();
    llvm::Error err = comm.wait(request, monitor);
    result.waiting += now() - t0;
    monitor.waiting(rank, "");
    if (!err)
      return llvm::Error::success();
    std::string message = llvm::toString(std::move(err));
    if (message == "no progress" && !monitor.timedOut())
      return fail(at, "stopped: another rank failed");
    if (message == "no progress")
      return fail(at, fmt::format("no rank progressed for {} s; waiting for {}",
                                  monitor.timeoutSeconds(), what));
    return fail(at, fmt::format("{}: {}", what, message));
  }
  std::string commText(const sched::PlanOp &op) const {
    return fmt::format("{} {} {} rank {} (slot {})",
                       op.kind == sched::PlanOp::Kind::Send ? "send" : "recv",
                       sched::describeTag(op.buffer.tag, plan.stageNames),
                       op.kind == sched::PlanOp::Kind::Send ? "to" : "from",
                       op.peer, op.buffer.slot);
  }
  /// Posts a receive into \p request, or a send out of a copy of its buffer:
  /// the slot is free at once and the send completes whenever the peer takes
  /// it, so sends never hold up the stream, alone or in a group. (The
  /// verifier assumes NCCL's stricter groups, whose sends wait for their
  /// receives; every plan it accepts runs here too.)
  llvm::Error post(size_t at, const sched::PlanOp &op, Request &request) {
    std::vector<char> &buf = slots[op.buffer.slot];
    size_t bytes = static_cast<size_t>(op.buffer.bytes);
    if (op.kind == sched::PlanOp::Kind::Recv)
      return comm.irecv(op.peer, buf.data(), bytes, request);
    if (llvm::Error err = expectTag(at, "send", op.buffer))
      return err;
    outstanding.push_back(
        {std::make_unique<std::vector<char>>(buf.begin(), buf.begin() + bytes),
         Request{}, at, commText(op)});
    Outstanding &o = outstanding.back();
    return comm.isend(op.peer, o.copy->data(), bytes, o.request);
  }

  const sched::Plan &plan;
  int rank;
  Communicator &comm;
  ProgressMonitor &monitor;
  Clock::time_point start;
  const ExecOptions &options;
  const std::vector<sched::PlanOp> &ops;
  std::vector<std::vector<char>> slots;
  struct Outstanding {
    std::unique_ptr<std::vector<char>> copy;
    Request request;
    size_t at;
    std::string what;
  };
  std::vector<Outstanding> outstanding;
  RankResult result;
};
} // namespace

llvm::Expected<RankResult> RankRunner::run() {
#ifdef __linux__
  // Timed kernels sleep; the default 50 us timer slack would add that much
  // to every action.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
#endif
  result.rank = rank;
  int computes = 0;
  double t0 = now();
  for (size_t at = 0; at < ops.size(); ++at) {
    if (options.killAfter >= 0 &&
        static_cast<int>(at) == options.killAfter)
      std::raise(SIGKILL);
    if (monitor.aborted())
      return fail(at, "stopped: another rank failed");
    const sched::PlanOp &op = ops[at];
    switch (op.kind) {
    case sched::PlanOp::Kind::Compute: {
      std::string who = describePlanAction(plan, op.action);
      for (const sched::SlotUse &use : op.reads)
        if (llvm::Error err = expectTag(at, who, use))
          return std::move(err);
      double begin = now();
      auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(
                                          op.cost * options.timeUnit));
      std::this_thread::sleep_until(until);
      for (const sched::SlotUse &use : op.writes)
        writeTag(use, use.tag);
      double end = now();
      result.busy += end - begin;
      result.actions.push_back({computes++, begin, end});
      break;
    }
    case sched::PlanOp::Kind::Send:
    case sched::PlanOp::Kind::Recv: {
      Request recv;
      if (llvm::Error err = post(at, op, recv))
        return fail(at, llvm::toString(std::move(err)));
      if (llvm::Error err = await(at, recv, commText(op)))
        return std::move(err);
      if (op.kind == sched::PlanOp::Kind::Recv)
        if (llvm::Error err = expectTag(at, "recv", op.buffer))
          return std::move(err);
      break;
    }
    case sched::PlanOp::Kind::Group: {
      std::vector<Request> requests(op.ops.size());
      for (size_t k = 0; k < op.ops.size(); ++k)
        if (llvm::Error err = post(at, op.ops[k], requests[k]))
          return fail(at, llvm::toString(std::move(err)));
      for (size_t k = 0; k < op.ops.size(); ++k) {
        const sched::PlanOp &sub = op.ops[k];
        if (llvm::Error err = await(at, requests[k], "group: " + commText(sub)))
          return std::move(err);
        if (sub.kind == sched::PlanOp::Kind::Recv)
          if (llvm::Error err = expectTag(at, "recv", sub.buffer))
            return std::move(err);
      }
      break;
    }
    case sched::PlanOp::Kind::Free: {
      if (llvm::Error err = expectTag(at, "free", op.buffer))
        return std::move(err);
      writeTag(op.buffer, 0);
      break;
    }
    }
    monitor.progress(rank);
    ++result.instructions;
  }
  for (Outstanding &o : outstanding)
    if (llvm::Error err = await(o.at, o.request, o.what + ", to complete"))
      return std::move(err);
  result.wall = now();
  result.overhead = std::max(0.0, (result.wall - t0) - result.busy - result.waiting);
  return result;
}

llvm::Expected<RankResult> stagecraft::runtime::executeRank(
    const sched::Plan &plan, int rank, Communicator &comm,
    ProgressMonitor &monitor, Clock::time_point start,
    const ExecOptions &options) {
  return RankRunner(plan, rank, comm, monitor, start, options).run();
}
