//===- CudaBackend.cpp - Running a plan's ranks on CUDA devices -----------===//
//
// See runCuda in Runtime.h. Rank r runs on device r mod (device count), in a
// host thread of its own, with a compute stream and a communication stream.
// Every plan slot is a device buffer. A compute is the spin kernel on the
// compute stream, timed by CUDA events. Transfers follow NCCL's semantics,
// which the verifier assumes: a receive posts its destination (and an event
// marking the slot free) to the sender; a send that finds its receive
// posted copies on its communication stream after the events that make the
// source ready and the destination free, and records a completion event
// that the receiver's compute stream waits on. A lone send is asynchronous,
// as the verifier assumes: one that finds no receive posted copies its
// source into a staging buffer and goes on; the receive then copies from
// there. (Waiting for the receive instead hangs a ring of sends, as in an
// interleaved plan whose last stage sends to rank 0.) Copies are
// device-to-device on one GPU and peer copies between GPUs. A later compute
// that overwrites a slot still being sent (by a compute or a receive) first
// waits for that send.
//
//===----------------------------------------------------------------------===//

#include "runtime/Options.h"
#include "runtime/Runtime.h"
#include "runtime/cuda/Spin.h"

#include "kernels/cuda/CudaStage.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#ifdef STAGECRAFT_HAVE_NCCL
#include <nccl.h>
#endif
#ifdef STAGECRAFT_HAVE_MPI
#include <mpi.h>
#endif

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <thread>

using namespace stagecraft::runtime;
using namespace stagecraft::pipe;

namespace {

/// "\p who: cuda: call: error", \p who naming the rank or the device.
llvm::Error cudaFailure(const std::string &who, const char *what,
                        cudaError_t err) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      fmt::format("{}: cuda: {}: {}", who, what, cudaGetErrorString(err)));
}

#define SC_CUDA(who, call)                                                     \
  do {                                                                         \
    cudaError_t scErr = (call);                                                \
    if (scErr != cudaSuccess)                                                  \
      return cudaFailure(who, #call, scErr);                                   \
  } while (false)

/// A posted receive.
struct Posted {
  void *dst = nullptr;
  int device = 0;
  size_t bytes = 0;
  cudaEvent_t slotFree = nullptr; // on the receiver's device
  cudaEvent_t done = nullptr;     // on the sender's device, set by the send
  bool recorded = false;
};

/// A send that found no receive posted: its data in a staging buffer on the
/// sender's device, until the receive copies it out.
struct Staged {
  void *data = nullptr;
  int device = 0;
  size_t bytes = 0;
  cudaEvent_t staged = nullptr;   // on the sender's device: data is there
  cudaEvent_t consumed = nullptr; // on the receiver's device: copied out
  /// Set by the receiver once `consumed` is recorded; the sender reuses the
  /// buffer after that event completes.
  std::atomic<bool> taken{false};
};

/// From one rank to another, in issue order: posted receives waiting for
/// their sends, or staged sends waiting for their receives (never both).
struct Mailbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<Posted>> posted;
  std::deque<std::shared_ptr<Staged>> staged;
};

struct Shared {
  explicit Shared(int ranks)
      : ranks(ranks), boxes(static_cast<size_t>(ranks) * ranks) {}
  int ranks;
  std::vector<Mailbox> boxes;
  Mailbox &box(int from, int to) { return boxes[from * ranks + to]; }
  // The start barrier, and the end one: ranks in threads of one process
  // read each other's events and staging buffers, so none frees its own
  // until every rank's device work is done.
  std::mutex mutex;
  std::condition_variable arrived;
  int waiting = 0;
  int finished = 0;

  /// Counts this rank in at barrier \p count (waiting or finished) and
  /// waits for every rank; a failed rank releases both by setting them full.
  void arriveAt(int &count) {
    std::unique_lock<std::mutex> lock(mutex);
    if (++count >= ranks)
      arrived.notify_all();
    else
      arrived.wait(lock, [&] { return count >= ranks; });
  }
};

/// SM clock cycles per second of \p device, measured.
llvm::Expected<double> cyclesPerSecond(int device) {
  const std::string who = fmt::format("device {}", device);
  SC_CUDA(who, cudaSetDevice(device));
  cudaStream_t stream;
  cudaEvent_t a, b;
  SC_CUDA(who, cudaStreamCreate(&stream));
  SC_CUDA(who, cudaEventCreate(&a));
  SC_CUDA(who, cudaEventCreate(&b));
  const long long cycles = 20'000'000;
  SC_CUDA(who, cuda::launchSpin(1000, stream)); // warm-up
  SC_CUDA(who, cudaEventRecord(a, stream));
  SC_CUDA(who, cuda::launchSpin(cycles, stream));
  SC_CUDA(who, cudaEventRecord(b, stream));
  SC_CUDA(who, cudaEventSynchronize(b));
  float ms = 0;
  SC_CUDA(who, cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(stream);
  return cycles / (ms * 1e-3);
}

struct RankRun {
  const sched::Plan &plan;
  int rank;
  int device;
  Shared &shared;
  ProgressMonitor &monitor;
  const RunOptions &options;
  /// SM clock cycles per second of the device.
  double cycles;
  /// "rank N", for messages.
  std::string who = fmt::format("rank {}", rank);

  cudaStream_t compute = nullptr, comm = nullptr;
  std::vector<void *> slots;
  std::vector<cudaEvent_t> events;  // every event this rank created
  std::vector<cudaEvent_t> sending; // per slot: its last send's completion
  /// This rank's staging buffers, reused once their receive copied out.
  std::vector<std::shared_ptr<Staged>> staging;

  /// The instruction being run, for messages.
  size_t at = 0;
  /// Training: this rank's stages on the device.
  RankModels models;
  /// Per compute, over all steps: its start and end events.
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timed;
  /// Instead of the shared start barrier (one process per rank).
  std::function<void()> barrier;
#ifdef STAGECRAFT_HAVE_NCCL
  /// Set: transfers go through NCCL on this communicator.
  ncclComm_t nccl = nullptr;
  /// Per NCCL transfer or group: its completion and what it was.
  struct Issued {
    cudaEvent_t done;
    size_t at;
    std::string what;
  };
  std::vector<Issued> issued;

  llvm::Error ncclCheck(ncclResult_t r, const std::string &what) {
    if (r == ncclSuccess)
      return llvm::Error::success();
    return fail(fmt::format("nccl: {}: {}", what, ncclGetErrorString(r)));
  }

  /// \p ops (one transfer, or a group's) on the communication stream with
  /// NCCL: after the computes issued so far (a send's source is written, a
  /// receive's destination no longer read; earlier sends from a slot are
  /// ahead on the same stream), grouped when there are several. Later
  /// computes wait for the receives, and writers of a sent slot for the
  /// send.
  llvm::Error ncclTransfer(const std::vector<const sched::PlanOp *> &ops) {
    llvm::Expected<cudaEvent_t> ready = event(false), done = event(false);
    if (!ready)
      return ready.takeError();
    if (!done)
      return done.takeError();
    SC_CUDA(who, cudaEventRecord(*ready, compute));
    SC_CUDA(who, cudaStreamWaitEvent(comm, *ready, 0));
    std::string what;
    if (ops.size() > 1)
      if (llvm::Error err = ncclCheck(ncclGroupStart(), "ncclGroupStart"))
        return err;
    bool receives = false;
    for (const sched::PlanOp *op : ops) {
      void *buf = slots[op->buffer.slot];
      size_t bytes = static_cast<size_t>(op->buffer.bytes);
      what += (what.empty() ? "" : ", ") + describe(*op);
      ncclResult_t r =
          op->kind == sched::PlanOp::Kind::Send
              ? ncclSend(buf, bytes, ncclUint8, op->peer, nccl, comm)
              : ncclRecv(buf, bytes, ncclUint8, op->peer, nccl, comm);
      if (llvm::Error err = ncclCheck(r, describe(*op)))
        return err;
      receives |= op->kind == sched::PlanOp::Kind::Recv;
    }
    if (ops.size() > 1)
      if (llvm::Error err = ncclCheck(ncclGroupEnd(), "ncclGroupEnd"))
        return err;
    SC_CUDA(who, cudaEventRecord(*done, comm));
    for (const sched::PlanOp *op : ops)
      if (op->kind == sched::PlanOp::Kind::Send)
        sending[op->buffer.slot] = *done;
    if (receives)
      SC_CUDA(who, cudaStreamWaitEvent(compute, *done, 0));
    issued.push_back({*done, at, what});
    return llvm::Error::success();
  }
#endif

  /// Drops the communicator, so that NCCL work queued behind a failure
  /// ends and the streams drain.
  void abortNccl() {
#ifdef STAGECRAFT_HAVE_NCCL
    if (nccl)
      ncclCommAbort(nccl);
    nccl = nullptr;
#endif
  }

  /// Runs the rank. After a failure: tells the other ranks, drops the NCCL
  /// communicator and releases ranks still at the start barrier.
  llvm::Expected<RankResult> run() {
    llvm::Expected<RankResult> result = execute();
    if (!result) {
      monitor.abort();
      abortNccl();
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.waiting = shared.ranks;
      shared.finished = shared.ranks;
      shared.arrived.notify_all();
    }
    return result;
  }

  /// Waits for \p end on the device with the watchdog: with NCCL a
  /// transfer whose peer never comes would wait forever, so past the
  /// timeout this fails naming the first transfer that did not complete.
  llvm::Error waitForDevice(cudaEvent_t end) {
#ifdef STAGECRAFT_HAVE_NCCL
    if (nccl) {
      auto last = Clock::now();
      size_t completed = 0;
      while (true) {
        cudaError_t q = cudaEventQuery(end);
        if (q == cudaSuccess)
          return llvm::Error::success();
        if (q != cudaErrorNotReady)
          return cudaFailure(who, "cudaEventQuery", q);
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(nccl, &async);
        if (async != ncclSuccess && async != ncclInProgress)
          return fail(fmt::format("nccl: {}", ncclGetErrorString(async)));
        while (completed < issued.size() &&
               cudaEventQuery(issued[completed].done) == cudaSuccess) {
          ++completed;
          last = Clock::now();
        }
        if (monitor.aborted()) {
          abortNccl();
          return fail("stopped: another rank failed");
        }
        if (std::chrono::duration<double>(Clock::now() - last).count() >
            options.timeout) {
          abortNccl();
          if (completed < issued.size()) {
            at = issued[completed].at;
            return fail(fmt::format("{} did not complete within {} s (its "
                                    "peer never matched it)",
                                    issued[completed].what, options.timeout));
          }
          return fail(fmt::format("the device did not finish within {} s",
                                  options.timeout));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
#endif
    SC_CUDA(who, cudaEventSynchronize(end));
    return llvm::Error::success();
  }

  llvm::Error fail(const std::string &what) {
    monitor.abort();
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("rank {}: instruction {}: {}", rank, at, what));
  }

  /// Waits on \p box until \p ready holds, polling the monitor.
  template <typename Ready>
  llvm::Error waitOn(Mailbox &box, std::unique_lock<std::mutex> &lock,
                     const std::string &what, Ready ready) {
    monitor.waiting(rank, fmt::format("instruction {}: {}", at, what));
    while (!ready()) {
      if (monitor.expired())
        return fail(monitor.giveUpReason(what));
      box.changed.wait_for(lock, std::chrono::milliseconds(5));
    }
    monitor.waiting(rank, "");
    return llvm::Error::success();
  }

  llvm::Expected<cudaEvent_t> event(bool timing) {
    cudaEvent_t e;
    SC_CUDA(who, cudaEventCreateWithFlags(&e, timing ? cudaEventDefault
                                                     : cudaEventDisableTiming));
    events.push_back(e);
    return e;
  }

  std::string describe(const sched::PlanOp &op) const {
    return fmt::format(
        "{} rank {} ({})",
        op.kind == sched::PlanOp::Kind::Send ? "send to" : "receive from",
        op.peer, sched::describeTag(op.buffer.tag, plan.stageNames));
  }

  /// Posts the receive \p op, or takes the send staged for it. The mailbox
  /// stays locked throughout, so that a send and a receive arriving at once
  /// see each other (the CUDA calls under it only enqueue).
  llvm::Expected<std::shared_ptr<Posted>> post(const sched::PlanOp &op) {
    Mailbox &box = shared.box(op.peer, rank);
    std::lock_guard<std::mutex> lock(box.mutex);
    // The slot is free once its readers and any send from it are done.
    if (sending[op.buffer.slot])
      SC_CUDA(who, cudaStreamWaitEvent(compute, sending[op.buffer.slot], 0));
    if (!box.staged.empty()) {
      std::shared_ptr<Staged> early = box.staged.front();
      box.staged.pop_front();
      return takeStaged(op, *early);
    }
    auto posted = std::make_shared<Posted>();
    posted->dst = slots[op.buffer.slot];
    posted->device = device;
    posted->bytes = static_cast<size_t>(op.buffer.bytes);
    llvm::Expected<cudaEvent_t> free = event(false);
    if (!free)
      return free.takeError();
    posted->slotFree = *free;
    SC_CUDA(who, cudaEventRecord(posted->slotFree, compute));
    box.posted.push_back(posted);
    box.changed.notify_all();
    return posted;
  }

  llvm::Error complete(const sched::PlanOp &op, Posted &posted) {
    Mailbox &box = shared.box(op.peer, rank);
    std::unique_lock<std::mutex> lock(box.mutex);
    if (llvm::Error err =
            waitOn(box, lock, describe(op), [&] { return posted.recorded; }))
      return err;
    lock.unlock();
    if (posted.done) // null: copied out of a staging buffer on this stream
      SC_CUDA(who, cudaStreamWaitEvent(compute, posted.done, 0));
    return llvm::Error::success();
  }

  /// The receive \p op matched with a send that was staged before it was
  /// posted: copies the data out on the compute stream (after the slot's
  /// readers); the staging buffer is the sender's again after that copy.
  llvm::Expected<std::shared_ptr<Posted>> takeStaged(const sched::PlanOp &op,
                                                     Staged &early) {
    if (early.bytes != static_cast<size_t>(op.buffer.bytes))
      return fail(fmt::format(
          "receive of {} bytes from rank {} ({}) meets a "
          "send of {} bytes",
          op.buffer.bytes, op.peer,
          sched::describeTag(op.buffer.tag, plan.stageNames), early.bytes));
    SC_CUDA(who, cudaStreamWaitEvent(compute, early.staged, 0));
    SC_CUDA(who, cudaMemcpyPeerAsync(slots[op.buffer.slot], device, early.data,
                                     early.device, early.bytes, compute));
    SC_CUDA(who, cudaEventRecord(early.consumed, compute));
    early.taken = true;
    auto posted = std::make_shared<Posted>();
    posted->recorded = true;
    return posted;
  }

  /// A staging buffer of \p bytes on this rank's device: one whose receive
  /// has copied it out, or a new one.
  llvm::Expected<std::shared_ptr<Staged>> stagingBuffer(size_t bytes) {
    for (const std::shared_ptr<Staged> &s : staging)
      if (s->bytes == bytes && s->taken &&
          cudaEventQuery(s->consumed) == cudaSuccess) {
        s->taken = false;
        return s;
      }
    auto s = std::make_shared<Staged>();
    s->device = device;
    s->bytes = bytes;
    SC_CUDA(who, cudaMalloc(&s->data, std::max<size_t>(bytes, 1)));
    staging.push_back(s);
    llvm::Expected<cudaEvent_t> staged = event(false), consumed = event(false);
    if (!staged)
      return staged.takeError();
    if (!consumed)
      return consumed.takeError();
    s->staged = *staged;
    s->consumed = *consumed;
    return s;
  }

  /// The send \p op: to its posted receive, or into a staging buffer when
  /// none is posted yet. The mailbox stays locked throughout (see post).
  llvm::Error send(const sched::PlanOp &op) {
    Mailbox &box = shared.box(rank, op.peer);
    std::lock_guard<std::mutex> lock(box.mutex);
    size_t bytes = static_cast<size_t>(op.buffer.bytes);
    llvm::Expected<cudaEvent_t> ready = event(false);
    if (!ready)
      return ready.takeError();
    SC_CUDA(who, cudaEventRecord(*ready, compute));
    SC_CUDA(who, cudaStreamWaitEvent(comm, *ready, 0));
    if (box.posted.empty()) {
      llvm::Expected<std::shared_ptr<Staged>> s = stagingBuffer(bytes);
      if (!s)
        return s.takeError();
      SC_CUDA(who, cudaMemcpyAsync((*s)->data, slots[op.buffer.slot], bytes,
                                   cudaMemcpyDeviceToDevice, comm));
      SC_CUDA(who, cudaEventRecord((*s)->staged, comm));
      sending[op.buffer.slot] = (*s)->staged;
      box.staged.push_back(*s);
      box.changed.notify_all();
      return llvm::Error::success();
    }
    std::shared_ptr<Posted> posted = box.posted.front();
    box.posted.pop_front();
    if (posted->bytes != bytes)
      return fail(fmt::format(
          "send of {} bytes to rank {} ({}) meets a "
          "receive of {} bytes",
          op.buffer.bytes, op.peer,
          sched::describeTag(op.buffer.tag, plan.stageNames), posted->bytes));
    llvm::Expected<cudaEvent_t> done = event(false);
    if (!done)
      return done.takeError();
    SC_CUDA(who, cudaStreamWaitEvent(comm, posted->slotFree, 0));
    SC_CUDA(who, cudaMemcpyPeerAsync(posted->dst, posted->device,
                                     slots[op.buffer.slot], device,
                                     posted->bytes, comm));
    SC_CUDA(who, cudaEventRecord(*done, comm));
    sending[op.buffer.slot] = *done;
    posted->done = *done;
    posted->recorded = true;
    box.changed.notify_all();
    return llvm::Error::success();
  }

  /// The compute \p op: the spin kernel for its cost, or the model's F, I
  /// or W on the slots' payloads.
  llvm::Error computeOn(const sched::PlanOp &op) {
    std::string what = describePlanAction(plan, op.action);
    if (!options.exec.train) {
      long long n =
          static_cast<long long>(op.cost * options.exec.timeUnit * cycles);
      if (cudaError_t err = cuda::launchSpin(n, compute); err != cudaSuccess)
        return fail(fmt::format("cuda: {}: {}", what, cudaGetErrorString(err)));
      return llvm::Error::success();
    }
    auto payload = [&](const sched::SlotUse &u) {
      return reinterpret_cast<float *>(static_cast<char *>(slots[u.slot]) +
                                       kTrainingPayloadOffset);
    };
    if (llvm::Error err = runLayerCompute(op, models, payload))
      return fail(fmt::format("{}: {}", what, llvm::toString(std::move(err))));
    for (auto &[index, stage] : models.all)
      if (llvm::Error err = stage->status())
        return fail(
            fmt::format("{}: {}", what, llvm::toString(std::move(err))));
    return llvm::Error::success();
  }

  /// One pass over the rank's instructions: computes, transfers, groups.
  llvm::Error runOps(RankResult &result) {
    const sched::PlanRank &mine = plan.ranks[rank];
    for (at = 0; at < mine.ops.size(); ++at) {
      if (monitor.aborted())
        return fail("stopped: another rank failed");
      const sched::PlanOp &op = mine.ops[at];
#ifdef STAGECRAFT_HAVE_NCCL
      if (nccl && (op.kind == sched::PlanOp::Kind::Send ||
                   op.kind == sched::PlanOp::Kind::Recv ||
                   op.kind == sched::PlanOp::Kind::Group)) {
        // A transfer, or a group's, through NCCL.
        std::vector<const sched::PlanOp *> transfers;
        if (op.kind == sched::PlanOp::Kind::Group)
          for (const sched::PlanOp &inner : op.ops)
            transfers.push_back(&inner);
        else
          transfers.push_back(&op);
        if (llvm::Error err = ncclTransfer(transfers))
          return err;
        ++result.instructions;
        monitor.progress(rank);
        continue;
      }
#endif
      switch (op.kind) {
      case sched::PlanOp::Kind::Compute: {
        for (const sched::SlotUse &w : op.writes)
          if (sending[w.slot])
            SC_CUDA(who, cudaStreamWaitEvent(compute, sending[w.slot], 0));
        llvm::Expected<cudaEvent_t> a = event(true), b = event(true);
        if (!a)
          return a.takeError();
        if (!b)
          return b.takeError();
        timed.emplace_back(*a, *b);
        SC_CUDA(who, cudaEventRecord(*a, compute));
        if (llvm::Error err = computeOn(op))
          return err;
        SC_CUDA(who, cudaEventRecord(*b, compute));
        break;
      }
      case sched::PlanOp::Kind::Recv: {
        auto posted = post(op);
        if (!posted)
          return posted.takeError();
        if (llvm::Error err = complete(op, **posted))
          return err;
        break;
      }
      case sched::PlanOp::Kind::Send:
        if (llvm::Error err = send(op))
          return err;
        break;
      case sched::PlanOp::Kind::Group: {
        std::vector<std::pair<const sched::PlanOp *, std::shared_ptr<Posted>>>
            receives;
        for (const sched::PlanOp &inner : op.ops)
          if (inner.kind == sched::PlanOp::Kind::Recv) {
            auto posted = post(inner);
            if (!posted)
              return posted.takeError();
            receives.emplace_back(&inner, *posted);
          }
        for (const sched::PlanOp &inner : op.ops)
          if (inner.kind == sched::PlanOp::Kind::Send)
            if (llvm::Error err = send(inner))
              return err;
        for (auto &[inner, posted] : receives)
          if (llvm::Error err = complete(*inner, *posted))
            return err;
        break;
      }
      case sched::PlanOp::Kind::Free:
      // One replica (the cuda backend runs no others): nothing to reduce.
      case sched::PlanOp::Kind::Reduce:
      case sched::PlanOp::Kind::ReduceWait:
        break;
      }
      ++result.instructions;
      monitor.progress(rank);
    }
    return llvm::Error::success();
  }

  llvm::Expected<RankResult> execute() {
    SC_CUDA(who, cudaSetDevice(device));
    SC_CUDA(who, cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    SC_CUDA(who, cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
    const sched::PlanRank &mine = plan.ranks[rank];
    for (int64_t bytes : mine.slotBytes) {
      void *p = nullptr;
      SC_CUDA(who, cudaMalloc(&p, std::max<int64_t>(bytes, 1)));
      slots.push_back(p);
    }
    sending.assign(slots.size(), nullptr);
    if (const TrainOptions *train = options.exec.train) {
      if (llvm::Error err = checkTrainingBuffers(plan, rank, train->model))
        return fail(llvm::toString(std::move(err)));
      // Slots start zeroed, so unused tag bytes are defined.
      for (size_t k = 0; k < slots.size(); ++k)
        SC_CUDA(who, cudaMemsetAsync(slots[k], 0,
                                     std::max<int64_t>(mine.slotBytes[k], 1),
                                     compute));
      llvm::Expected<RankModels> built = buildStages(
          plan, rank, *train,
          stagecraft::kernels::cuda::cudaStages(
              device, compute, [this] { return monitor.aborted(); }));
      if (!built)
        return fail(llvm::toString(built.takeError()));
      models = std::move(*built);
    }
    llvm::Expected<cudaEvent_t> origin = event(true), end = event(true);
    if (!origin)
      return origin.takeError();
    if (!end)
      return end.takeError();
    SC_CUDA(who, cudaDeviceSynchronize());
    if (barrier)
      barrier();
    else
      shared.arriveAt(shared.waiting);
    SC_CUDA(who, cudaEventRecord(*origin, compute));

    RankResult result;
    result.rank = rank;
    if (options.exec.train) {
      if (llvm::Error err = trainSteps(
              plan, models, *options.exec.train, [&] { return runOps(result); },
              result.losses))
        return std::move(err);
    } else if (llvm::Error err = runOps(result)) {
      return std::move(err);
    }
    llvm::Expected<cudaEvent_t> commEnd = event(false);
    if (!commEnd)
      return commEnd.takeError();
    SC_CUDA(who, cudaEventRecord(*commEnd, comm));
    SC_CUDA(who, cudaStreamWaitEvent(compute, *commEnd, 0));
    SC_CUDA(who, cudaEventRecord(*end, compute));
    // With copies, a receive whose send never comes cannot be waited for
    // here (the host saw every send recorded); with NCCL it can.
    if (llvm::Error err = waitForDevice(*end))
      return err;
    if (!barrier)
      shared.arriveAt(shared.finished);
    float ms = 0;
    SC_CUDA(who, cudaEventElapsedTime(&ms, *origin, *end));
    result.wall = ms * 1e-3;
    size_t perPass = 0;
    for (const sched::PlanOp &op : mine.ops)
      perPass += op.kind == sched::PlanOp::Kind::Compute;
    for (size_t k = 0; k < timed.size(); ++k) {
      float s = 0, e = 0;
      SC_CUDA(who, cudaEventElapsedTime(&s, *origin, timed[k].first));
      SC_CUDA(who, cudaEventElapsedTime(&e, *origin, timed[k].second));
      // Positions among the computes of one pass, as the other backends.
      result.actions.push_back(
          {static_cast<int>(perPass ? k % perPass : k), s * 1e-3, e * 1e-3});
      result.busy += (e - s) * 1e-3;
    }
    result.waiting = std::max(0.0, result.wall - result.busy);
    return result;
  }

  ~RankRun() {
    cudaSetDevice(device);
    models = RankModels(); // their device memory, while the streams exist
    if (compute)
      cudaStreamSynchronize(compute);
    if (comm)
      cudaStreamSynchronize(comm);
    for (cudaEvent_t e : events)
      cudaEventDestroy(e);
    for (void *p : slots)
      cudaFree(p);
    for (const std::shared_ptr<Staged> &s : staging)
      cudaFree(s->data);
    if (compute)
      cudaStreamDestroy(compute);
    if (comm)
      cudaStreamDestroy(comm);
  }
};

} // namespace

/// The number of CUDA devices, or why there is none.
static llvm::Expected<int> deviceCount() {
  int devices = 0;
  if (cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess) {
    // Without a driver the runtime says "driver version is insufficient":
    // say what it means.
    bool noDriver =
        err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("no usable CUDA device: {}(cudaGetDeviceCount: {})",
                    noDriver ? "this machine has no NVIDIA GPU or no NVIDIA "
                               "driver; run on a machine with one, or use "
                               "--backend=local or mpi "
                             : "",
                    cudaGetErrorString(err)));
  }
  if (devices < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no usable CUDA device");
  return devices;
}

llvm::Error stagecraft::runtime::withCudaStages(
    llvm::function_ref<llvm::Error(const kernels::StageFactory &)> fn) {
  llvm::Expected<int> devices = deviceCount();
  if (!devices)
    return devices.takeError();
  SC_CUDA("device 0", cudaSetDevice(0));
  cudaStream_t stream;
  SC_CUDA("device 0",
          cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  llvm::Error err = fn(stagecraft::kernels::cuda::cudaStages(0, stream));
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  return err;
}

llvm::Expected<RunReport>
stagecraft::runtime::runCuda(const sched::Plan &plan,
                             const RunOptions &options) {
  // Options first: they fail the same with or without a GPU.
  const std::string &transport = options.cudaTransport;
  if (transport != "auto" && transport != "copy" && transport != "nccl")
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("unknown cuda transport '{}'; expected auto, copy or nccl",
                    transport));
  const int p = plan.numRanks();
  // Every rank has two streams. CUDA maps a device's streams onto
  // CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by default), and streams
  // that share a queue wait for each other: 8 ranks on one H200 measured
  // 1.72 x their simulated step with 8 queues, 1.005 with 16. So ask for a
  // queue per stream (32 at most) before CUDA starts, unless the user chose.
  if (!std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"))
    setenv("CUDA_DEVICE_MAX_CONNECTIONS",
           std::to_string(std::clamp(2 * p, 8, 32)).c_str(), 0);
  llvm::Expected<int> count = deviceCount();
  if (!count)
    return count.takeError();
  const int devices = *count;
  // Peer access between the devices in use, where the hardware offers it
  // (cudaMemcpyPeerAsync stages through the host otherwise).
  for (int a = 0; a < std::min(p, devices); ++a)
    for (int b = 0; b < std::min(p, devices); ++b) {
      int can = 0;
      if (a != b && cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess && can) {
        cudaSetDevice(a);
        cudaDeviceEnablePeerAccess(b, 0);
        cudaGetLastError(); // already enabled is fine
      }
    }
  // The spin kernel's clock, once per device in use (training has none).
  std::vector<double> cycles(std::min(p, devices), 0.0);
  if (!options.exec.train)
    for (int d = 0; d < std::min(p, devices); ++d) {
      llvm::Expected<double> rate = cyclesPerSecond(d);
      if (!rate)
        return rate.takeError();
      cycles[d] = *rate;
    }
  if (transport == "nccl" && p > devices)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("the nccl transport needs a GPU per rank: {} ranks, {} "
                    "GPUs (ranks sharing a GPU use copies: "
                    "--cuda-transport=copy or auto)",
                    p, devices));
#ifdef STAGECRAFT_HAVE_NCCL
  // One communicator per rank, created together before the ranks start.
  std::vector<ncclComm_t> comms;
  if (transport == "nccl" || (transport == "auto" && p > 1 && p <= devices)) {
    comms.resize(p);
    std::vector<int> devs(p);
    for (int r = 0; r < p; ++r)
      devs[r] = r;
    if (ncclResult_t r = ncclCommInitAll(comms.data(), p, devs.data());
        r != ncclSuccess)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("nccl: ncclCommInitAll over {} GPUs: {}", p,
                      ncclGetErrorString(r)));
  }
#else
  if (transport == "nccl")
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "this build has no NCCL (nccl.h and libnccl were not found next to "
        "the CUDA toolkit when it was configured)");
#endif
  Shared shared(p);
  ProgressMonitor monitor(p, options.timeout);
  llvm::Expected<RunReport> report =
      runRankThreads(p, [&](int r) -> llvm::Expected<RankResult> {
        RankRun run{plan,    r,       r % devices,        shared,
                    monitor, options, cycles[r % devices]};
#ifdef STAGECRAFT_HAVE_NCCL
        if (!comms.empty())
          run.nccl = comms[r];
#endif
        llvm::Expected<RankResult> result = run.run();
#ifdef STAGECRAFT_HAVE_NCCL
        // An aborted communicator is gone; the rest are destroyed below.
        if (!comms.empty())
          comms[r] = run.nccl;
#endif
        return result;
      });
#ifdef STAGECRAFT_HAVE_NCCL
  for (ncclComm_t c : comms)
    if (c)
      ncclCommDestroy(c);
#endif
  return report;
}

#if defined(STAGECRAFT_HAVE_MPI) && defined(STAGECRAFT_HAVE_NCCL)
llvm::Expected<RunReport>
stagecraft::runtime::runCudaMpi(const sched::Plan &plan,
                                const RunOptions &options) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string who = fmt::format("rank {}", rank);
  auto error = [&](const std::string &what) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   fmt::format("{}: {}", who, what));
  };
  if (size != plan.numRanks())
    return error(processCountError(plan.numRanks(), size, options.commandLine));
  llvm::Expected<int> devices = deviceCount();
  if (!devices)
    return error(llvm::toString(devices.takeError()));
  // One rank per GPU: the processes of a node take its GPUs in order.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  int local = 0, localSize = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &localSize);
  MPI_Comm_free(&node);
  // (A launcher may give each process one visible GPU: then all see one.)
  const int device = local % *devices;
  const std::string sharing =
      localSize > *devices
          ? fmt::format(" ({} processes on this node see {} GPUs: under "
                        "mpirun the cuda backend runs one rank per GPU; to "
                        "share a GPU, run without mpirun)",
                        localSize, *devices)
          : std::string();
  double cycles = 0;
  if (!options.exec.train) {
    llvm::Expected<double> rate = cyclesPerSecond(device);
    if (!rate)
      return error(llvm::toString(rate.takeError()));
    cycles = *rate;
  }
  // The communicator, eagerly: rank 0's unique id to every process.
  ncclUniqueId id;
  if (rank == 0)
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      return error(
          fmt::format("nccl: ncclGetUniqueId: {}", ncclGetErrorString(r)));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  SC_CUDA(who, cudaSetDevice(device));
  ncclComm_t comm;
  if (ncclResult_t r = ncclCommInitRank(&comm, size, id, rank);
      r != ncclSuccess)
    return error(fmt::format("nccl: ncclCommInitRank on GPU {}: {}{}", device,
                             ncclGetErrorString(r), sharing));
  Shared shared(size);
  ProgressMonitor monitor(size, options.timeout);
  llvm::Expected<RankResult> result = [&]() -> llvm::Expected<RankResult> {
    RankRun run{plan, rank, device, shared, monitor, options, cycles};
    run.nccl = comm;
    run.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
    llvm::Expected<RankResult> r = run.run();
    comm = run.nccl; // null once aborted
    return r;
  }();
  if (comm)
    ncclCommDestroy(comm);
  if (!result)
    return result.takeError();
  return gatherMpiReport(std::move(*result));
}
#endif
