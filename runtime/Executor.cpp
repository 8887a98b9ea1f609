//===- Executor.cpp - Runs one rank of a plan -----------------------------===//
//
// See Executor.h: the instruction loop of one rank (computes, transfers,
// buffer tags, metering) and the planned activation peaks. Buffer tags are
// written at three places in a slot (start, middle, end) so that a partial
// overwrite is caught too. The training side is in Training.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"

#include "kernels/device/HostDevice.h"
#include "runtime/Checkpoint.h"
#include "runtime/DataParallel.h"
#include "scheduler/search/Recompute.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <csignal>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <time.h>

using namespace stagecraft::runtime;
using namespace stagecraft::pipe;
namespace kernels = stagecraft::kernels;

std::string stagecraft::runtime::describePlanAction(const sched::Plan &plan,
                                                    const sched::Action &a) {
  auto name = [&](int s) {
    return s >= 0 && s < static_cast<int>(plan.stageNames.size())
               ? plan.stageNames[s]
               : std::to_string(s);
  };
  std::string text =
      fmt::format("{} @{} mb {}", sched::actionOpName(a.kind).str(),
                  name(a.stage), a.microbatch);
  if (a.kind == sched::ActionKind::ForwardBackward)
    text +=
        fmt::format(", @{} mb {}", name(a.backwardStage), a.backwardMicrobatch);
  return text;
}

namespace {
class RankRunner {
public:
  RankRunner(const sched::Plan &plan, int rank, Communicator &comm,
             ProgressMonitor &monitor, Clock::time_point start,
             const ExecOptions &options)
      : plan(plan), rank(rank),
        watch(options.watchIndex >= 0 ? options.watchIndex : rank), comm(comm),
        monitor(monitor), start(start), options(options),
        ops(withReductions(plan.ranks[rank].ops, options, placed)) {
    for (int64_t bytes : plan.ranks[rank].slotBytes)
      slots.emplace_back(static_cast<size_t>(bytes), 0);
  }

  llvm::Expected<RankResult> run();

private:
  double now() const {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  /// The CPU seconds this rank's thread has computed: the device time of a
  /// CPU rank. Time the thread waits for a core (another process's turn on
  /// a loaded host) is not in it; a slower core is.
  static double cpuNow() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) +
           1e-9 * static_cast<double>(ts.tv_nsec);
  }
  llvm::Error fail(size_t at, const std::string &what) {
    monitor.abort();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fmt::format("rank {}{}: instruction {}: {}",
                                               rank, replicaText(), at, what));
  }
  int replicas() const { return options.train ? options.train->replicas : 1; }
  /// Sharded: the replicas per shard group, this replica's place in its
  /// group, and the group's replicas (or, across the groups, the replicas
  /// at this one's place in each).
  int group() const {
    return options.train && options.train->shardGroup > 0
               ? options.train->shardGroup
               : replicas();
  }
  int member() const { return options.replica % group(); }
  std::vector<int> groupReplicas() const {
    std::vector<int> all;
    for (int j = 0; j < group(); ++j)
      all.push_back(options.replica - member() + j);
    return all;
  }
  std::vector<int> acrossGroups() const {
    std::vector<int> all;
    for (int k = member(); k < replicas(); k += group())
      all.push_back(k);
    return all;
  }
  /// This rank's number among every replica's ranks (--inject-failure's).
  int jobRank() const { return options.replica * plan.numRanks() + rank; }
  /// The replicas that train the step running, in order, and this one's
  /// place among them (its data: that many replicas' microbatches).
  std::vector<int> training;
  int trainingIndex() const {
    return static_cast<int>(
        std::find(training.begin(), training.end(), options.replica) -
        training.begin());
  }
  /// Waits for a receive from replica \p k of the data-parallel group:
  /// false when that replica left (with --data-parallel on local, the
  /// others go on).
  llvm::Expected<bool> receiveFrom(size_t at, int k, Request &request,
                                   const std::string &what);
  /// After a step's pass: whether replicas left during it, so that it runs
  /// again on those still there.
  llvm::Expected<bool> stepAgain(int step);
  /// Replicas admitted at the end of the last step, which this rank's
  /// replica may owe its state, and the replicas training from the next.
  std::vector<int> joiners, admitted;
  /// The replica that hands a joining one its state: the first of those
  /// training that is not joining.
  int donor() const {
    for (int k : training)
      if (std::find(joiners.begin(), joiners.end(), k) == joiners.end())
        return k;
    return -1;
  }
  /// Sharded data parallelism (TrainOptions::sharded): per stage, the
  /// bounds of each replica's slice of its parameters laid end to end, and
  /// this replica's slice of the weights, of the step's mean gradient and
  /// of the AdamW moments; `whole` while the parameters hold everything.
  struct Shard {
    std::vector<size_t> bounds;
    std::vector<float> values, grad, m, v;
    bool whole = true;
    size_t begin(int k) const { return bounds[k]; }
    size_t size(int k) const { return bounds[k + 1] - bounds[k]; }
  };
  std::map<int, Shard> shards;
  /// Each stage's parameter sizes (fixed when the stages are built).
  std::map<int, std::vector<size_t>> sizesOf;
  std::vector<size_t> paramSizes(int stage) { return sizesOf.at(stage); }
  /// The stages whose weights are gathered before each instruction (their
  /// first action of the step).
  std::map<size_t, std::vector<int>> gatherBefore;
  bool sharded() const {
    return options.train && options.train->sharded && replicas() > 1;
  }
  kernels::StageModel &modelOf(int stage) {
    for (auto &[index, piece] : models.all)
      if (index == stage)
        return *piece;
    llvm_unreachable("a stage this rank does not hold");
  }
  /// Slices this replica's part of every stage out of the whole parameters
  /// (after the start or the checkpoint restored) and frees the rest.
  void shardStages();
  /// Frees what the parameters of \p stage hold beyond this replica's slice.
  void release(int stage);
  /// Every replica's slice \p mine of \p stage, laid end to end.
  llvm::Expected<std::vector<float>> allGather(size_t at, int stage,
                                               const std::vector<float> &mine,
                                               const std::string &what);
  /// Before the stage's first action: its whole weights from every slice.
  llvm::Error gatherWeights(size_t at, int stage);
  /// Every stage whole (its weights, gradients and moments), or sliced.
  llvm::Error materialize(bool whole);

  /// Sends (the donor) or receives (the joiner \p k) every stage's
  /// weights, AdamW moments and step count on this rank.
  llvm::Error sendState(int k);
  llvm::Error receiveState(int from);
  /// " of replica K" with replicas, else nothing.
  std::string replicaText() const {
    return replicas() > 1 ? fmt::format(" of replica {}", options.replica)
                          : std::string();
  }
  /// One collective over the replicas training: this rank's requests.
  struct Exchange {
    std::map<int, Request> sends, receives;
  };
  using Outgoing = llvm::function_ref<std::pair<const void *, size_t>(int)>;
  using Incoming = llvm::function_ref<std::pair<void *, size_t>(int)>;
  /// Posts, with every replica of \p peers (this one among them) but this
  /// one, a send of \p out(k) and a receive into \p in(k) (pointer and
  /// bytes).
  llvm::Error postExchange(size_t at, Exchange &x, llvm::ArrayRef<int> peers,
                           Outgoing out, Incoming in);
  /// Waits for \p x. Returns the replicas heard from, this one included, in
  /// order: one that left during the exchange is missing (the step runs
  /// again without it).
  llvm::Expected<std::vector<int>>
  finishExchange(size_t at, Exchange &x, llvm::ArrayRef<int> peers,
                 llvm::function_ref<std::string(int)> what);
  llvm::Expected<std::vector<int>>
  exchange(size_t at, llvm::ArrayRef<int> peers, Outgoing out, Incoming in,
           llvm::function_ref<std::string(int)> what) {
    Exchange x;
    if (llvm::Error err = postExchange(at, x, peers, out, in))
      return std::move(err);
    return finishExchange(at, x, peers, what);
  }
  /// A stage's gradient reduction between its Reduce and its ReduceWait:
  /// this replica's gradients (whole, flat) and every other's (whole, or
  /// this replica's slice of them when sharded).
  struct Reduction {
    Exchange exchange;
    std::vector<float> flat;
    std::map<int, std::vector<float>> parts;
  };
  std::map<int, Reduction> reductions;
  /// Data parallelism: posts the reduction of stage \p stage's gradients
  /// of the step over its data-parallel group (runtime/DataParallel.h): an
  /// all-reduce, or a reduce-scatter when sharded.
  llvm::Error postReduction(size_t at, int stage);
  /// Completes it: the stage's gradients (its slice's, then the rest freed,
  /// when sharded) are the replicas' mean.
  llvm::Error finishReduction(size_t at, int stage);
  /// The step's loss over every replica (on the last stage's rank).
  llvm::Expected<double> reduceLoss(double mine);
  /// Tags go at the start, middle and end of a buffer; when training, the
  /// middle holds the payload and only the ends carry tags.
  size_t middle(size_t size) const {
    return options.train ? 0 : (size / 2) & ~size_t(7);
  }
  void writeTag(const sched::SlotUse &use, uint64_t tag) {
    char *buf = slots[use.slot].data();
    size_t size = static_cast<size_t>(use.bytes);
    for (size_t off : {size_t(0), middle(size), size - 8})
      std::memcpy(buf + off, &tag, 8);
  }
  float *payload(const sched::SlotUse &use) {
    return reinterpret_cast<float *>(slots[use.slot].data() +
                                     kTrainingPayloadOffset);
  }
  /// The reference model's step for one compute.
  llvm::Error train(size_t at, const sched::PlanOp &op);
  llvm::Error runStream();
  /// The tag of the \p use.bytes-byte buffer in its slot, or 0 if the three
  /// copies disagree.
  uint64_t readTag(const sched::SlotUse &use) const {
    const char *buf = slots[use.slot].data();
    size_t size = static_cast<size_t>(use.bytes);
    size_t mid = middle(size);
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
  /// Runs \p slice until \p done holds, ending early (the error names
  /// \p who and the \p amount it computes) when another rank failed or the
  /// watchdog found no rank progressing for the timeout, this one included,
  /// instead of the process waiting it out. A hang report shows \p shown.
  llvm::Error runUntil(size_t at, const std::string &who,
                       const std::string &amount, const std::string &shown,
                       llvm::function_ref<bool()> done,
                       llvm::function_ref<void()> slice) {
    monitor.waiting(watch,
                    fmt::format("instruction {}: {} ({})", at, who, shown));
    while (!done()) {
      if (monitor.expired()) {
        monitor.waiting(watch, "");
        return fail(at, monitor.timedOut()
                            ? fmt::format("no rank progressed for {} s; {} "
                                          "computes for {}",
                                          monitor.timeoutSeconds(), who, amount)
                            : std::string("stopped: another rank failed"));
      }
      slice();
    }
    monitor.waiting(watch, "");
    return llvm::Error::success();
  }

  /// The timed kernel: sleeps `cost` time units in slices of 10 ms.
  llvm::Error sleepFor(size_t at, const std::string &who, double cost) {
    const double seconds = cost * options.timeUnit;
    const auto until =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(seconds));
    const std::string amount = fmt::format("{:.6g} s", seconds);
    return runUntil(
        at, who, amount, "timed kernel, " + amount,
        [&] { return Clock::now() >= until; },
        [&] {
          std::this_thread::sleep_until(
              std::min(until, Clock::now() + std::chrono::milliseconds(10)));
        });
  }

  /// Computes on this thread for \p seconds of its CPU time, as a device
  /// that many times slower would (--inject-slowdown).
  llvm::Error computeFor(size_t at, const std::string &who, double seconds) {
    const double until = cpuNow() + seconds;
    volatile double sink = 1.0;
    const std::string amount = fmt::format("{:.6g} CPU s", seconds);
    return runUntil(
        at, who, amount, amount, [&] { return cpuNow() >= until; },
        [&] {
          for (int i = 0; i < 2000; ++i)
            sink = sink * 1.0000001 + 1e-9;
        });
  }

  /// The start of training step \p step: the injected failure, if due.
  llvm::Error atStep(int step) {
    currentStep = step;
    if (sharded() && shards.empty())
      shardStages(); // the start's weights, or the checkpoint's
    if (!joiners.empty()) {
      // Replicas joined at the end of the last step: they train from this
      // one, renumbered, and the donor hands them the state the update
      // left.
      training = std::move(admitted);
      for (auto &[index, model] : models.all)
        model->setDataOffset(trainingIndex() * plan.microbatches);
      if (donor() == options.replica)
        for (int k : joiners)
          if (llvm::Error err = sendState(k))
            return err;
      joiners.clear();
    }
    const TrainOptions &t = *options.train;
    if (t.injectRank != jobRank() || t.injectStep != step ||
        t.inject == TrainOptions::Inject::Checkpoint)
      return llvm::Error::success();
    stampFailure();
    if (t.inject == TrainOptions::Inject::Kill)
      return die(fmt::format("failed at step {}", step));
    // Stop making progress; on mpi for good, on local until the others
    // gave up (a thread cannot be killed).
    monitor.waiting(watch, fmt::format("nothing: it hangs at step {}", step));
    while (!options.ranksAreThreads || !monitor.aborted())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("{}rank {} stopped making progress at step {} (injected)",
                    kRankLostPrefix, rank, step));
  }

  /// This rank's part of the checkpoint after \p done steps is written:
  /// the injected failure while checkpointing, if due.
  llvm::Error atCheckpoint(int done) {
    const TrainOptions &t = *options.train;
    if (t.injectRank != jobRank() || t.injectStep != done ||
        t.inject != TrainOptions::Inject::Checkpoint)
      return llvm::Error::success();
    stampFailure();
    return die(
        fmt::format("failed while writing the checkpoint of step {}", done));
  }

  /// The injected death: on mpi the process kills itself; on local the
  /// thread fails and the others stop.
  llvm::Error die(const std::string &what) {
    if (!options.ranksAreThreads)
      std::raise(SIGKILL);
    monitor.abort();
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fmt::format("{}rank {}{} {} (injected)",
                                               kRankLostPrefix, rank,
                                               replicaText(), what));
  }

  /// Records when the injected failure fired (--failure-stamp).
  void stampFailure() {
    const std::string &path = options.train->failureStamp;
    if (path.empty())
      return;
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    if (ec)
      return; // only a measurement: the failure itself goes on
    os << fmt::format("{:.6f}\n",
                      std::chrono::duration<double>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count());
  }

  /// Returns once every rank has called it (a checkpoint's parts are all
  /// written): a message to rank 0 from each rank, then one back. Each
  /// channel's earlier messages of the step are already consumed, so they
  /// match in order. Watching for stragglers, each rank's message holds its
  /// compute seconds per simulated unit in the last steps, and rank 0's
  /// answer says whether to stop here (true) to re-plan.
  llvm::Expected<bool> barrier(int done) {
    const TrainOptions &t = *options.train;
    const int p = plan.numRanks();
    const std::string what = "the checkpoint barrier";
    const bool watch = t.stragglerThreshold > 0.0;
    const int k = watch ? t.stragglerSteps : 0;
    // The last k steps' rates, NaN for steps not run in this attempt.
    std::vector<double> mine(std::max(k, 1),
                             std::numeric_limits<double>::quiet_NaN());
    for (int i = 0; i < k; ++i) {
      int at = static_cast<int>(stepRates.size()) - k + i;
      if (at >= 0)
        mine[i] = stepRates[at];
    }
    const size_t bytes = watch ? sizeof(double) * k : 1;
    char decision = 0;
    if (rank != 0) {
      Request send, recv;
      if (llvm::Error err = comm.isend(0, mine.data(), bytes, send))
        return std::move(err);
      if (llvm::Error err = await(0, send, what))
        return std::move(err);
      if (llvm::Error err = comm.irecv(0, &decision, 1, recv))
        return std::move(err);
      if (llvm::Error err = await(0, recv, what))
        return std::move(err);
      return decision != 0;
    }
    std::vector<std::vector<double>> rates(p, mine);
    for (int r = 1; r < p; ++r) {
      Request recv;
      if (llvm::Error err = comm.irecv(r, rates[r].data(), bytes, recv))
        return std::move(err);
      if (llvm::Error err = await(0, recv, what))
        return std::move(err);
    }
    if (watch) {
      result.stragglers = findStragglers(rates, t.stragglerThreshold, done);
      decision = result.stragglers.empty() ? 0 : 1;
    }
    for (int r = 1; r < p; ++r) {
      Request send;
      if (llvm::Error err = comm.isend(r, &decision, 1, send))
        return std::move(err);
      if (llvm::Error err = await(0, send, what))
        return std::move(err);
    }
    return decision != 0;
  }

  /// A step's gradient checks on their way between the ranks: this rank's
  /// values, every rank's (filled as they arrive) and the requests.
  struct CheckExchange {
    std::vector<double> mine, all;
    std::vector<Request> sends, receives;
  };
  std::map<int, CheckExchange> checks;

  /// Starts sending this rank's checks of \p step to every rank and
  /// receiving theirs. Every rank posts them at the same point of its
  /// stream (after the step's instructions, before the next step's), so
  /// they match in order on each channel, as the plan's messages do.
  llvm::Error postChecks(int step, const std::vector<double> &mine) {
    const int p = plan.numRanks();
    const size_t k = mine.size();
    CheckExchange &x = checks[step];
    x.mine = mine;
    x.all.assign(p * k, 0.0);
    std::copy(mine.begin(), mine.end(), x.all.begin() + rank * k);
    x.sends.resize(p);
    x.receives.resize(p);
    for (int r = 0; r < p; ++r) {
      if (r == rank)
        continue;
      if (llvm::Error err =
              comm.isend(r, x.mine.data(), k * sizeof(double), x.sends[r]))
        return err;
      if (llvm::Error err = comm.irecv(r, x.all.data() + r * k,
                                       k * sizeof(double), x.receives[r]))
        return err;
    }
    return llvm::Error::success();
  }

  /// Every rank's checks of \p step, in rank order.
  llvm::Expected<std::vector<double>> finishChecks(int step) {
    auto it = checks.find(step);
    if (it == checks.end())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("rank {}: the gradient checks of step {} were never "
                      "sent",
                      rank, step));
    CheckExchange &x = it->second;
    for (int r = 0; r < plan.numRanks(); ++r) {
      const std::string what =
          fmt::format("the gradient checks of step {} with rank {}", step, r);
      if (llvm::Error err = await(ops.size(), x.receives[r], what))
        return std::move(err);
      if (llvm::Error err = await(ops.size(), x.sends[r], what))
        return std::move(err);
    }
    std::vector<double> all = std::move(x.all);
    checks.erase(it);
    return all;
  }

  /// This rank's number in the first attempt.
  int identity() const {
    const std::vector<int> &id = options.train->identity;
    return rank < static_cast<int>(id.size()) ? id[rank] : rank;
  }
  /// Whether --inject-slowdown slows this rank's computes now.
  bool slowed() const {
    const TrainOptions &t = *options.train;
    return t.slowRank >= 0 && identity() == t.slowRank &&
           currentStep >= t.slowStep && t.slowFactor > 1.0;
  }

  /// Waits for \p request; the hang report names \p what.
  llvm::Error await(size_t at, Request &request, const std::string &what) {
    if (!request.active())
      return llvm::Error::success();
    monitor.waiting(watch, fmt::format("instruction {}: {}", at, what));
    double t0 = now();
    llvm::Error err = comm.wait(request, monitor);
    result.waiting += now() - t0;
    monitor.waiting(watch, "");
    if (!err)
      return llvm::Error::success();
    std::string message = llvm::toString(std::move(err));
    if (message == "no progress" && monitor.timedOut() && options.train) {
      // Training stalls only when a rank died or hangs: name the rank this
      // one waits on, and the step.
      monitor.abort();
      int peer = -1;
      if (at < ops.size()) {
        const sched::PlanOp &op = ops[at];
        if (op.kind == sched::PlanOp::Kind::Group && !op.ops.empty())
          peer = op.ops.front().peer;
        else if (op.kind != sched::PlanOp::Kind::Compute)
          peer = op.peer;
      }
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("{}rank {} sent nothing for {} s at step {} (rank {} "
                      "waits for {})",
                      kRankLostPrefix,
                      peer >= 0 ? std::to_string(peer) : std::string("?"),
                      monitor.timeoutSeconds(), currentStep, rank, what));
    }
    if (message == "no progress")
      return fail(at, monitor.giveUpReason(what));
    if (message == kPeerLeft)
      return fail(at, fmt::format("stopped: {}: the peer failed", what));
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
    if (!options.train && op.transfer > 0.0) {
      // Emulated link: when the send left and how long it holds the link,
      // between the start tag and the middle one (buffers are >= 64 bytes).
      double stamp[2] = {epochSeconds(), op.transfer * options.timeUnit};
      std::memcpy(o.copy->data() + 8, stamp, sizeof stamp);
    }
    if (llvm::Error err = comm.isend(op.peer, o.copy->data(), bytes, o.request))
      return err;
    return reapSends();
  }
  /// Seconds on the host's monotonic clock, the same in every process.
  static double epochSeconds() {
    return std::chrono::duration<double>(Clock::now().time_since_epoch())
        .count();
  }
  /// A received message on an emulated link (its send carries a transfer
  /// time): it arrives once the link, free after the previous message from
  /// the same peer, has carried it for that time; waits until then. The
  /// link's messages come in the sender's order (in-order matching), so
  /// this queues them as the simulator does.
  llvm::Error arrive(size_t at, const sched::PlanOp &recv) {
    if (options.train || !plan.links)
      return llvm::Error::success();
    double stamp[2];
    std::memcpy(stamp, slots[recv.buffer.slot].data() + 8, sizeof stamp);
    if (!(stamp[1] > 0.0))
      return llvm::Error::success();
    if (linkFree.empty())
      linkFree.assign(plan.numRanks(), 0.0);
    double &free = linkFree[recv.peer];
    free = std::max(stamp[0], free) + stamp[1];
    double wait = free - epochSeconds();
    if (wait <= 0.0)
      return llvm::Error::success();
    return sleepFor(at, fmt::format("the link from rank {}", recv.peer),
                    wait / options.timeUnit);
  }
  /// Drops the copies of sends that have completed, oldest first.
  llvm::Error reapSends() {
    while (!outstanding.empty()) {
      llvm::Expected<bool> done = comm.test(outstanding.front().request);
      if (!done)
        return done.takeError();
      if (!*done)
        break;
      outstanding.pop_front();
    }
    return llvm::Error::success();
  }

  const sched::Plan &plan;
  int rank;
  /// This rank's index in the progress monitor.
  int watch;
  Communicator &comm;
  ProgressMonitor &monitor;
  Clock::time_point start;
  const ExecOptions &options;
  /// The rank's stream with its reductions placed, when training replicas
  /// on a plan without them (sched::placeReductions: torch's rule).
  std::vector<sched::PlanOp> placed;
  static const std::vector<sched::PlanOp> &
  withReductions(const std::vector<sched::PlanOp> &ops,
                 const ExecOptions &options,
                 std::vector<sched::PlanOp> &placed) {
    if (!options.train || options.train->replicas <= 1 ||
        sched::hasReductions(ops))
      return ops;
    placed = ops;
    sched::placeReductions(placed);
    return placed;
  }
  const std::vector<sched::PlanOp> &ops;
  std::vector<std::vector<char>> slots;
  struct Outstanding {
    std::unique_ptr<std::vector<char>> copy;
    Request request;
    size_t at;
    std::string what;
  };
  std::deque<Outstanding> outstanding;
  /// Emulated links: when each peer's link to this rank is next free.
  std::vector<double> linkFree;
  RankResult result;
  int computes = 0;
  /// Training: the step running.
  int currentStep = 0;
  /// Training: the compute CPU seconds per simulated unit of each step run,
  /// and the CPU seconds computed so far in the step running.
  std::vector<double> stepRates;
  double stepCpu = 0.0;
  /// Training: this rank's model pieces, and the attention of each layer
  /// that runs here (created when first needed).
  RankModels models;
  std::map<int, kernels::HelixAttention> attention;
};
} // namespace

llvm::Expected<RankResult> RankRunner::run() {
#ifdef __linux__
  // Timed kernels sleep; the default 50 us timer slack would add that much
  // to every action.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
#endif
  result.rank = rank;
  double t0 = now();
  if (!options.train) {
    if (llvm::Error err = runStream())
      return std::move(err);
  } else {
    const TrainOptions &train = *options.train;
    if (llvm::Error err = checkTrainingBuffers(plan, rank, train.model))
      return fail(0, llvm::toString(std::move(err)));
    llvm::Expected<RankModels> built =
        buildStages(plan, rank, train, hostStagesFor(train));
    if (!built)
      return fail(0, llvm::toString(built.takeError()));
    models = std::move(*built);
    if (replicas() > 1) {
      for (int k = 0; k < replicas(); ++k)
        training.push_back(k);
      for (auto &[index, model] : models.all)
        model->setDataOffset(options.replica * plan.microbatches);
      // The plan's reductions (placeReductions where it has none).
      for (auto &[index, model] : models.all)
        if (std::none_of(ops.begin(), ops.end(), [&](const sched::PlanOp &op) {
              return op.kind == sched::PlanOp::Kind::Reduce &&
                     op.stage == index;
            }))
          return fail(0, fmt::format("stage @{} has no weight gradient on "
                                     "this rank to reduce",
                                     plan.stageNames[index]));
      for (auto &[index, model] : models.all)
        for (const kernels::Parameter &param : model->parameters())
          sizesOf[index].push_back(param.value.size());
      if (sharded()) {
        for (auto &[index, model] : models.all) {
          for (size_t at = 0; at < ops.size(); ++at)
            if (ops[at].kind == sched::PlanOp::Kind::Compute &&
                ops[at].action.stage == index) {
              gatherBefore[at].push_back(index);
              break;
            }
        }
      }
    }
    // The simulated compute of one step here, in units.
    double units = 0.0;
    for (const sched::PlanOp &op : ops)
      if (op.kind == sched::PlanOp::Kind::Compute)
        units += op.cost;
    TrainHooks hooks;
    hooks.firstStep = &result.firstStep;
    hooks.rank = rank;
    hooks.ranks = plan.numRanks();
    hooks.barrier = [&](int done) { return barrier(done); };
    hooks.stoppedAt = &result.stoppedAt;
    hooks.atStep = [&](int step) { return atStep(step); };
    hooks.atCheckpoint = [&](int done) { return atCheckpoint(done); };
    hooks.resumeSeconds = &result.resumeSeconds;
    hooks.postChecks = [&](int step, const std::vector<double> &mine) {
      return postChecks(step, mine);
    };
    hooks.finishChecks = [&](int step) { return finishChecks(step); };
    hooks.stepEnds = &result.stepEnds;
    hooks.now = [&] { return now(); };
    hooks.rollbacks = &result.rollbacks;
    hooks.skippedSteps = &result.skippedSteps;
    if (replicas() > 1) {
      hooks.reduceLoss = [&](double mine) { return reduceLoss(mine); };
      hooks.writes = [&] { return training.front() == options.replica; };
      if (sharded()) {
        hooks.update = [&](kernels::StageModel &model, int index) {
          Shard &sh = shards[index];
          const kernels::OptimizerConfig &o = options.train->optimizer;
          int step = model.optimizerSteps();
          if (o.kind == kernels::OptimizerConfig::Kind::AdamW) {
            model.setOptimizerSteps(++step);
            if (sh.m.empty()) {
              sh.m.assign(sh.values.size(), 0.0f);
              sh.v.assign(sh.values.size(), 0.0f);
            }
          }
          kernels::updateSlice(sh.values.data(), sh.grad.data(), sh.m.data(),
                               sh.v.data(), sh.values.size(), o, step);
        };
        hooks.materialize = [&](bool whole) { return materialize(whole); };
      }
      if (options.membership)
        hooks.stepAgain = [&](int step) { return stepAgain(step); };
      if (options.joinAt >= 0) {
        // Restarted: admitted at the end of the step before, then the
        // state of a replica that stayed.
        llvm::Expected<std::vector<int>> list =
            options.membership->join(options.replica, options.joinAt, monitor);
        if (!list)
          return fail(0, llvm::toString(list.takeError()));
        training = std::move(*list);
        joiners = {options.replica};
        if (llvm::Error err = receiveState(donor()))
          return std::move(err);
        joiners.clear();
        for (auto &[index, model] : models.all)
          model->setDataOffset(trainingIndex() * plan.microbatches);
        hooks.startStep = options.joinAt;
      }
    }
    if (llvm::Error err = trainSteps(
            plan, models, train,
            [&]() -> llvm::Error {
              stepCpu = 0.0;
              if (llvm::Error err = runStream())
                return err;
              // An attempt's first step warms up (allocation, caches): not
              // judged.
              stepRates.push_back(stepRates.empty() || !(units > 0.0)
                                      ? std::numeric_limits<double>::quiet_NaN()
                                      : stepCpu / units);
              return llvm::Error::success();
            },
            result.losses, hooks))
      return std::move(err);
    if (models.metered)
      result.activationPeak = models.meter->peak;
  }
  for (Outstanding &o : outstanding)
    if (llvm::Error err = await(o.at, o.request, o.what + ", to complete"))
      return std::move(err);
  result.wall = now();
  result.overhead =
      std::max(0.0, (result.wall - t0) - result.busy - result.waiting);
  return result;
}

llvm::Error RankRunner::train(size_t at, const sched::PlanOp &op) {
  // Inputs and outputs by what their tags hold.
  auto payloadOf = [&](const sched::SlotUse &u) { return payload(u); };
  auto find = [&](const std::vector<sched::SlotUse> &uses,
                  sched::BufferKind kind, int stage) {
    return findMessage(uses, kind, stage, payloadOf);
  };
  const sched::Action &a = op.action;
  using BK = sched::BufferKind;
  if (!models.blocks.empty()) {
    // HelixPipe: blocks and the attention between them.
    auto attentionOf = [&](int s) -> kernels::HelixAttention & {
      return attention.try_emplace(s, options.train->model).first->second;
    };
    auto input = [&](int s, int mb) {
      models.blocks.at(s)->backwardInput(
          mb, find(op.reads, BK::Gradient, s + 1),
          find(op.reads, BK::QkvGrad, s), find(op.writes, BK::Gradient, s),
          find(op.writes, BK::AttentionOutputGrad, s - 1));
    };
    switch (a.kind) {
    case sched::ActionKind::Forward:
      models.blocks.at(a.stage)->forward(
          a.microbatch, find(op.reads, BK::Activation, a.stage - 1),
          find(op.reads, BK::AttentionOutput, a.stage - 1),
          find(op.writes, BK::Activation, a.stage),
          find(op.writes, BK::Qkv, a.stage));
      break;
    case sched::ActionKind::AttentionForward:
      attentionOf(a.stage).forward(
          a.microbatch, find(op.reads, BK::Qkv, a.stage),
          find(op.writes, BK::AttentionOutput, a.stage));
      break;
    case sched::ActionKind::AttentionBackward:
      attentionOf(a.stage).backward(
          a.microbatch, find(op.reads, BK::AttentionOutputGrad, a.stage),
          find(op.writes, BK::QkvGrad, a.stage));
      break;
    case sched::ActionKind::BackwardInput:
      input(a.stage, a.microbatch);
      break;
    case sched::ActionKind::Backward:
      input(a.stage, a.microbatch);
      models.blocks.at(a.stage)->backwardWeight(a.microbatch);
      break;
    case sched::ActionKind::BackwardWeight:
      models.blocks.at(a.stage)->backwardWeight(a.microbatch);
      break;
    case sched::ActionKind::ForwardBackward:
      return fail(at, "overlapped actions are not trained on helix blocks");
    }
    return llvm::Error::success();
  }
  if (llvm::Error err = runLayerCompute(op, models, payloadOf))
    return fail(at, llvm::toString(std::move(err)));
  return llvm::Error::success();
}

llvm::Expected<bool> RankRunner::receiveFrom(size_t at, int k, Request &request,
                                             const std::string &what) {
  if (!options.membership) {
    if (llvm::Error err = await(at, request, what))
      return std::move(err);
    return true;
  }
  // The replica may have left: its channel is closed (LocalFabric::close).
  monitor.waiting(watch, fmt::format("instruction {}: {}", at, what));
  double t0 = now();
  llvm::Error err = options.replicaGroup->wait(request, monitor);
  result.waiting += now() - t0;
  monitor.waiting(watch, "");
  if (!err)
    return true;
  std::string message = llvm::toString(std::move(err));
  if (message == kPeerLeft)
    return false;
  if (message == "no progress")
    return fail(at, monitor.giveUpReason(what));
  return fail(at, fmt::format("{}: {}", what, message));
}

llvm::Error RankRunner::postExchange(size_t at, Exchange &x,
                                     llvm::ArrayRef<int> peers, Outgoing out,
                                     Incoming in) {
  Communicator &group = *options.replicaGroup;
  for (int k : peers) {
    if (k == options.replica)
      continue;
    auto [data, bytes] = out(k);
    if (llvm::Error err = group.isend(k, data, bytes, x.sends[k]))
      return fail(at, llvm::toString(std::move(err)));
    auto [into, size] = in(k);
    if (llvm::Error err = group.irecv(k, into, size, x.receives[k]))
      return fail(at, llvm::toString(std::move(err)));
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<int>>
RankRunner::finishExchange(size_t at, Exchange &x, llvm::ArrayRef<int> peers,
                           llvm::function_ref<std::string(int)> what) {
  std::vector<int> heard;
  for (int k : peers) {
    if (k != options.replica) {
      llvm::Expected<bool> there = receiveFrom(at, k, x.receives[k], what(k));
      if (!there)
        return there.takeError();
      if (!*there)
        continue; // it left: the step runs again without it
    }
    heard.push_back(k);
  }
  // The buffers sent must outlive the sends (on local they are done).
  for (auto &[k, send] : x.sends)
    if (llvm::Error err = await(at, send, what(k)))
      return std::move(err);
  return heard;
}

llvm::Error RankRunner::postReduction(size_t at, int stage) {
  auto [it, fresh] = reductions.try_emplace(stage);
  if (!fresh)
    return fail(at, fmt::format("stage @{}'s gradients are reduced twice in "
                                "one step",
                                plan.stageNames[stage]));
  Reduction &r = it->second;
  r.flat = flatten(modelOf(stage).parameters(), &kernels::Parameter::grad);
  const Shard *sh = sharded() ? &shards[stage] : nullptr;
  const int me = options.replica, base = me - member();
  // Sharded, each replica receives its own slice of every other's in its
  // shard group (a reduce-scatter); else every replica's whole gradients.
  const size_t count = sh ? sh->size(member()) : r.flat.size();
  std::vector<int> peers = sh ? groupReplicas() : training;
  for (int k : peers)
    if (k != me)
      r.parts[k].resize(count);
  return postExchange(
      at, r.exchange, peers,
      [&](int k) {
        return sh ? std::pair<const void *, size_t>(
                        r.flat.data() + sh->begin(k - base),
                        sh->size(k - base) * sizeof(float))
                  : std::pair<const void *, size_t>(
                        r.flat.data(), r.flat.size() * sizeof(float));
      },
      [&](int k) {
        return std::pair<void *, size_t>(r.parts[k].data(),
                                         count * sizeof(float));
      });
}

llvm::Error RankRunner::finishReduction(size_t at, int stage) {
  auto it = reductions.find(stage);
  if (it == reductions.end())
    return fail(at, fmt::format("a reduce-wait of stage @{}, whose reduction "
                                "was not posted this step",
                                plan.stageNames[stage]));
  Reduction &r = it->second;
  const double begin = now();
  auto exposed = llvm::make_scope_exit(
      [&] { result.dataParallelExposed += now() - begin; });
  const Shard *sh = sharded() ? &shards[stage] : nullptr;
  auto what = [&](int k) {
    return fmt::format("stage @{}'s gradients of step {} with replica {}",
                       plan.stageNames[stage], currentStep, k);
  };
  llvm::Expected<std::vector<int>> heard =
      finishExchange(at, r.exchange, sh ? groupReplicas() : training, what);
  if (!heard)
    return heard.takeError();
  const int me = options.replica;
  const float *mine = r.flat.data() + (sh ? sh->begin(member()) : 0);
  const size_t count = sh ? sh->size(member()) : r.flat.size();
  std::vector<const float *> all;
  for (int k : *heard)
    all.push_back(k == me ? mine : r.parts[k].data());
  std::vector<float> mean(count);
  if (!sh) {
    meanOverReplicas(all, count, mean.data());
    scatterInto(modelOf(stage).parameters(), mean, &kernels::Parameter::grad,
                paramSizes(stage));
    reductions.erase(it);
    return llvm::Error::success();
  }
  // The group's sum of this slice, then (hybrid) every group's sum of it,
  // added in group order: meanOverReplicas's order with shard groups.
  std::vector<float> partial(count);
  sumInOrder(all, count, partial.data());
  std::vector<int> across = acrossGroups();
  std::map<int, std::vector<float>> sums;
  for (int k : across)
    if (k != me)
      sums[k].resize(count);
  llvm::Expected<std::vector<int>> groups = exchange(
      at, across,
      [&](int) {
        return std::pair<const void *, size_t>(partial.data(),
                                               count * sizeof(float));
      },
      [&](int k) {
        return std::pair<void *, size_t>(sums[k].data(), count * sizeof(float));
      },
      [&](int k) {
        return fmt::format("stage @{}'s gradient sums of step {} with "
                           "replica {}",
                           plan.stageNames[stage], currentStep, k);
      });
  if (!groups)
    return groups.takeError();
  std::vector<const float *> bySum;
  for (int k : *groups)
    bySum.push_back(k == me ? partial.data() : sums[k].data());
  sumInOrder(bySum, count, mean.data());
  const float n = static_cast<float>(replicas());
  for (float &x : mean)
    x /= n;
  shards[stage].grad = std::move(mean);
  release(stage);
  reductions.erase(it);
  return llvm::Error::success();
}

llvm::Expected<double> RankRunner::reduceLoss(double mine) {
  std::map<int, double> all;
  for (int k : training)
    all[k] = mine;
  llvm::Expected<std::vector<int>> heard = exchange(
      ops.size(), training,
      [&](int) {
        return std::pair<const void *, size_t>(&mine, sizeof(double));
      },
      [&](int k) { return std::pair<void *, size_t>(&all[k], sizeof(double)); },
      [&](int k) {
        return fmt::format("the loss of step {} from replica {}", currentStep,
                           k);
      });
  if (!heard)
    return heard.takeError();
  std::vector<double> values;
  for (int k : *heard)
    values.push_back(all[k]);
  return meanOverReplicas(values);
}

llvm::Expected<bool> RankRunner::stepAgain(int step) {
  llvm::Expected<std::vector<int>> after =
      options.membership->endStep(options.replica, step, monitor);
  if (!after)
    return fail(ops.size(), llvm::toString(after.takeError()));
  if (std::find(after->begin(), after->end(), options.replica) == after->end())
    return fail(ops.size(), "stopped: its replica left the job");
  if (*after == training)
    return false;
  bool left = false;
  for (int k : training)
    left |= std::find(after->begin(), after->end(), k) == after->end();
  if (!left) {
    // Replicas joined: this step ends as it ran (its loss over those that
    // trained it); they train from the next step (atStep).
    joiners.clear();
    for (int k : *after)
      if (std::find(training.begin(), training.end(), k) == training.end())
        joiners.push_back(k);
    admitted = std::move(*after);
    result.membershipChanges.push_back(
        {step + 1, static_cast<int>(admitted.size()), /*ranAgain=*/false});
    return false;
  }
  // Replicas left during the step: it runs again on those still there,
  // renumbered.
  training = std::move(*after);
  for (auto &[index, model] : models.all)
    model->setDataOffset(trainingIndex() * plan.microbatches);
  result.membershipChanges.push_back(
      {step, static_cast<int>(training.size()), /*ranAgain=*/true});
  return true;
}

void RankRunner::shardStages() {
  // Slices per shard group: member j of each group keeps slice j.
  const int n = group(), me = member();
  for (auto &[index, model] : models.all) {
    Shard &sh = shards[index];
    size_t total = 0;
    for (const kernels::Parameter &param : model->parameters())
      total += param.value.size();
    sh.bounds.clear();
    for (int k = 0; k <= n; ++k)
      sh.bounds.push_back(total * k / n);
    const std::vector<kernels::Parameter> &params = model->parameters();
    bool adam = true;
    for (const kernels::Parameter &param : params)
      adam &= !param.adamM.empty();
    std::vector<float> values = flatten(params, &kernels::Parameter::value);
    std::vector<float> m = flatten(params, &kernels::Parameter::adamM);
    std::vector<float> v = flatten(params, &kernels::Parameter::adamV);
    auto slice = [&](const std::vector<float> &flat) {
      return std::vector<float>(flat.begin() + sh.begin(me),
                                flat.begin() + sh.begin(me) + sh.size(me));
    };
    sh.values = slice(values);
    sh.m = adam ? slice(m) : std::vector<float>();
    sh.v = adam ? slice(v) : std::vector<float>();
    sh.grad.clear();
    release(index);
  }
}

void RankRunner::release(int stage) {
  for (kernels::Parameter &param : modelOf(stage).parameters())
    for (std::vector<float> *part :
         {&param.value, &param.grad, &param.adamM, &param.adamV}) {
      part->clear();
      part->shrink_to_fit();
    }
  shards[stage].whole = false;
}

llvm::Expected<std::vector<float>>
RankRunner::allGather(size_t at, int stage, const std::vector<float> &mine,
                      const std::string &what) {
  const Shard &sh = shards[stage];
  const int base = options.replica - member();
  std::vector<float> flat(sh.bounds.back());
  std::copy(mine.begin(), mine.end(), flat.begin() + sh.begin(member()));
  llvm::Expected<std::vector<int>> heard = exchange(
      at, groupReplicas(),
      [&](int) {
        return std::pair<const void *, size_t>(mine.data(),
                                               mine.size() * sizeof(float));
      },
      [&](int k) {
        return std::pair<void *, size_t>(flat.data() + sh.begin(k - base),
                                         sh.size(k - base) * sizeof(float));
      },
      [&](int k) { return fmt::format("{} with replica {}", what, k); });
  if (!heard)
    return heard.takeError();
  return flat;
}

llvm::Error RankRunner::gatherWeights(size_t at, int stage) {
  Shard &sh = shards[stage];
  if (sh.whole)
    return llvm::Error::success();
  llvm::Expected<std::vector<float>> flat =
      allGather(at, stage, sh.values,
                fmt::format("gathering stage @{}'s weights of step {}",
                            plan.stageNames[stage], currentStep));
  if (!flat)
    return flat.takeError();
  std::vector<kernels::Parameter> &params = modelOf(stage).parameters();
  std::vector<size_t> sizes = paramSizes(stage);
  scatterInto(params, *flat, &kernels::Parameter::value, sizes);
  for (size_t i = 0; i < params.size(); ++i)
    params[i].grad.assign(sizes[i], 0.0f);
  sh.whole = true;
  return llvm::Error::success();
}

llvm::Error RankRunner::materialize(bool whole) {
  for (auto &[index, model] : models.all) {
    Shard &sh = shards[index];
    if (!whole) {
      release(index);
      continue;
    }
    std::vector<kernels::Parameter> &params = model->parameters();
    std::vector<size_t> sizes = paramSizes(index);
    const std::string what =
        fmt::format("making stage @{} whole", plan.stageNames[index]);
    std::pair<std::vector<float> *, ParameterPart> parts[] = {
        {&sh.values, &kernels::Parameter::value},
        {&sh.grad, &kernels::Parameter::grad},
        {&sh.m, &kernels::Parameter::adamM},
        {&sh.v, &kernels::Parameter::adamV}};
    for (auto [mine, part] : parts) {
      // Gradients and moments exist once a step or update made them (the
      // same on every replica).
      if (mine->empty() && part != &kernels::Parameter::value) {
        for (size_t i = 0; i < params.size(); ++i)
          (params[i].*part)
              .assign(part == &kernels::Parameter::grad ? sizes[i] : 0, 0.0f);
        continue;
      }
      llvm::Expected<std::vector<float>> flat =
          allGather(ops.size(), index, *mine, what);
      if (!flat)
        return flat.takeError();
      scatterInto(params, *flat, part, sizes);
    }
    sh.whole = true;
  }
  return llvm::Error::success();
}

llvm::Error RankRunner::sendState(int k) {
  for (auto &[index, model] : models.all) {
    std::vector<double> header{static_cast<double>(model->optimizerSteps())};
    std::vector<float> state;
    for (const kernels::Parameter &param : model->parameters()) {
      header.push_back(param.adamM.empty() ? 0.0 : 1.0);
      state.insert(state.end(), param.value.begin(), param.value.end());
      state.insert(state.end(), param.adamM.begin(), param.adamM.end());
      state.insert(state.end(), param.adamV.begin(), param.adamV.end());
    }
    Request a, b;
    const std::string what = fmt::format("stage @{}'s state for replica {}",
                                         plan.stageNames[index], k);
    if (llvm::Error err = options.replicaGroup->isend(
            k, header.data(), header.size() * sizeof(double), a))
      return fail(ops.size(), llvm::toString(std::move(err)));
    if (llvm::Error err = options.replicaGroup->isend(
            k, state.data(), state.size() * sizeof(float), b))
      return fail(ops.size(), llvm::toString(std::move(err)));
    if (llvm::Error err = await(ops.size(), a, what))
      return err;
    if (llvm::Error err = await(ops.size(), b, what))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error RankRunner::receiveState(int from) {
  for (auto &[index, model] : models.all) {
    std::vector<kernels::Parameter> &params = model->parameters();
    std::vector<double> header(1 + params.size());
    const std::string what = fmt::format("stage @{}'s state from replica {}",
                                         plan.stageNames[index], from);
    Request a;
    if (llvm::Error err = options.replicaGroup->irecv(
            from, header.data(), header.size() * sizeof(double), a))
      return fail(0, llvm::toString(std::move(err)));
    if (llvm::Error err = await(0, a, what))
      return err;
    size_t count = 0;
    for (size_t i = 0; i < params.size(); ++i)
      count += params[i].value.size() * (header[1 + i] != 0.0 ? 3 : 1);
    std::vector<float> state(count);
    Request b;
    if (llvm::Error err = options.replicaGroup->irecv(
            from, state.data(), state.size() * sizeof(float), b))
      return fail(0, llvm::toString(std::move(err)));
    if (llvm::Error err = await(0, b, what))
      return err;
    const float *at = state.data();
    for (size_t i = 0; i < params.size(); ++i) {
      kernels::Parameter &param = params[i];
      const size_t n = param.value.size();
      param.value.assign(at, at + n);
      at += n;
      if (header[1 + i] != 0.0) {
        param.adamM.assign(at, at + n);
        param.adamV.assign(at + n, at + 2 * n);
        at += 2 * n;
      } else {
        param.adamM.clear();
        param.adamV.clear();
      }
    }
    model->setOptimizerSteps(static_cast<int>(header[0]));
  }
  return llvm::Error::success();
}

llvm::Error RankRunner::runStream() {
  computes = 0;
  reductions.clear();
  for (size_t at = 0; at < ops.size(); ++at) {
    if (options.killAfter >= 0 && static_cast<int>(at) == options.killAfter)
      std::raise(SIGKILL);
    if (monitor.aborted())
      return fail(at, "stopped: another rank failed");
    const sched::PlanOp &op = ops[at];
    switch (op.kind) {
    case sched::PlanOp::Kind::Compute: {
      if (auto it = gatherBefore.find(at); it != gatherBefore.end())
        for (int stage : it->second)
          if (llvm::Error err = gatherWeights(at, stage))
            return err;
      std::string who = describePlanAction(plan, op.action);
      for (const sched::SlotUse &use : op.reads)
        if (llvm::Error err = expectTag(at, who, use))
          return std::move(err);
      double begin = now();
      if (options.train) {
        const double cpuBegin = cpuNow();
        if (llvm::Error err = train(at, op))
          return err;
        if (slowed())
          if (llvm::Error err = computeFor(at, who + " (injected slowdown)",
                                           (options.train->slowFactor - 1.0) *
                                               (cpuNow() - cpuBegin)))
            return err;
        stepCpu += cpuNow() - cpuBegin;
      } else if (llvm::Error err = sleepFor(at, who, op.cost)) {
        return err;
      }
      for (const sched::SlotUse &use : op.writes)
        writeTag(use, use.tag);
      double end = now();
      result.busy += end - begin;
      result.actions.push_back({computes++, begin, end});
      break;
    }
    case sched::PlanOp::Kind::Reduce:
      if (replicas() > 1)
        if (llvm::Error err = postReduction(at, op.stage))
          return err;
      break;
    case sched::PlanOp::Kind::ReduceWait:
      if (replicas() > 1)
        if (llvm::Error err = finishReduction(at, op.stage))
          return err;
      break;
    case sched::PlanOp::Kind::Send:
    case sched::PlanOp::Kind::Recv: {
      Request recv;
      if (llvm::Error err = post(at, op, recv))
        return fail(at, llvm::toString(std::move(err)));
      if (llvm::Error err = await(at, recv, commText(op)))
        return std::move(err);
      if (op.kind == sched::PlanOp::Kind::Recv) {
        if (llvm::Error err = expectTag(at, "recv", op.buffer))
          return std::move(err);
        if (llvm::Error err = arrive(at, op))
          return err;
      }
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
        if (sub.kind == sched::PlanOp::Kind::Recv) {
          if (llvm::Error err = expectTag(at, "recv", sub.buffer))
            return std::move(err);
          if (llvm::Error err = arrive(at, sub))
            return err;
        }
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
    monitor.progress(watch);
    ++result.instructions;
  }
  return llvm::Error::success();
}

llvm::Expected<RankResult>
stagecraft::runtime::executeRank(const sched::Plan &plan, int rank,
                                 Communicator &comm, ProgressMonitor &monitor,
                                 Clock::time_point start,
                                 const ExecOptions &options) {
  return RankRunner(plan, rank, comm, monitor, start, options).run();
}

std::vector<double>
stagecraft::runtime::plannedActivationPeaks(const sched::Plan &plan,
                                            const kernels::ModelConfig &model) {
  const int n = static_cast<int>(plan.stageNames.size());
  if (!model.lengths.empty() || !plan.stageInputs.empty())
    return {};
  for (bool attention : plan.stageAttention)
    if (attention)
      return {};
  sched::Problem problem;
  problem.name = plan.pipeline;
  problem.ranks = plan.numRanks();
  problem.microbatches = plan.microbatches;
  for (int s = 0; s < n; ++s) {
    int layers =
        s < static_cast<int>(plan.stageLayers.size()) ? plan.stageLayers[s] : 0;
    if (layers < 1)
      return {};
    kernels::ActivationBytes bytes =
        kernels::activationBytes(model, s, n, layers);
    sched::Stage stage;
    stage.name = plan.stageNames[s];
    stage.activation = bytes.activation;
    stage.weightGrad = bytes.weightGrad;
    stage.recomputed = bytes.recomputed;
    stage.selective = bytes.selective;
    stage.selectiveCost = 0.0;
    problem.stages.push_back(stage);
  }
  return sched::peakMemoryByOrder(problem, plan.computeSchedule());
}
