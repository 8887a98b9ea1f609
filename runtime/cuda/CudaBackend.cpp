//===- CudaBackend.cpp - Running a plan's ranks on CUDA devices -----------===//
//
// See runCuda in Runtime.h. Rank r runs on device r mod (device count), in a
// host thread of its own, with a compute stream and a communication stream.
// Every plan slot is a device buffer. A compute is the spin kernel on the
// compute stream, timed by CUDA events. Transfers follow NCCL's semantics,
// which the verifier assumes: a receive posts its destination (and an event
// marking the slot free) to the sender; the matching send waits for that
// post, then copies on its communication stream after the events that make
// the source ready and the destination free, and records a completion event
// that the receiver's compute stream waits on. Copies are device-to-device
// on one GPU and peer copies between GPUs. A later compute that overwrites a
// slot still being sent (by a compute or a receive) first waits for that
// send.
//
//===----------------------------------------------------------------------===//

#include "runtime/Runtime.h"
#include "runtime/cuda/Spin.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <condition_variable>
#include <deque>

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

/// Posted receives from one rank to another, in issue order.
struct Mailbox {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<Posted>> posted;
};

struct Shared {
  explicit Shared(int ranks)
      : ranks(ranks), boxes(static_cast<size_t>(ranks) * ranks) {}
  int ranks;
  std::vector<Mailbox> boxes;
  Mailbox &box(int from, int to) { return boxes[from * ranks + to]; }
  // The start barrier.
  std::mutex mutex;
  std::condition_variable arrived;
  int waiting = 0;
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
  std::vector<cudaEvent_t> events; // every event this rank created
  std::vector<cudaEvent_t> sending; // per slot: its last send's completion

  /// The instruction being run, for messages.
  size_t at = 0;

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
    return fmt::format("{} rank {} ({})",
                       op.kind == sched::PlanOp::Kind::Send ? "send to"
                                                            : "receive from",
                       op.peer,
                       sched::describeTag(op.buffer.tag, plan.stageNames));
  }

  llvm::Expected<std::shared_ptr<Posted>> post(const sched::PlanOp &op) {
    auto posted = std::make_shared<Posted>();
    posted->dst = slots[op.buffer.slot];
    posted->device = device;
    posted->bytes = static_cast<size_t>(op.buffer.bytes);
    llvm::Expected<cudaEvent_t> free = event(false);
    if (!free)
      return free.takeError();
    posted->slotFree = *free;
    // The slot is free once its readers and any send from it are done.
    if (sending[op.buffer.slot])
      SC_CUDA(who, cudaStreamWaitEvent(compute, sending[op.buffer.slot], 0));
    SC_CUDA(who, cudaEventRecord(posted->slotFree, compute));
    Mailbox &box = shared.box(op.peer, rank);
    {
      std::lock_guard<std::mutex> lock(box.mutex);
      box.posted.push_back(posted);
    }
    box.changed.notify_all();
    return posted;
  }

  llvm::Error complete(const sched::PlanOp &op, Posted &posted) {
    Mailbox &box = shared.box(op.peer, rank);
    std::unique_lock<std::mutex> lock(box.mutex);
    if (llvm::Error err = waitOn(box, lock, describe(op),
                                 [&] { return posted.recorded; }))
      return err;
    lock.unlock();
    SC_CUDA(who, cudaStreamWaitEvent(compute, posted.done, 0));
    return llvm::Error::success();
  }

  llvm::Error send(const sched::PlanOp &op) {
    Mailbox &box = shared.box(rank, op.peer);
    std::shared_ptr<Posted> posted;
    {
      std::unique_lock<std::mutex> lock(box.mutex);
      if (llvm::Error err = waitOn(box, lock, describe(op),
                                   [&] { return !box.posted.empty(); }))
        return err;
      posted = box.posted.front();
      box.posted.pop_front();
    }
    if (posted->bytes != static_cast<size_t>(op.buffer.bytes))
      return fail(fmt::format("send of {} bytes to rank {} ({}) meets a "
                              "receive of {} bytes",
                              op.buffer.bytes, op.peer,
                              sched::describeTag(op.buffer.tag,
                                                 plan.stageNames),
                              posted->bytes));
    llvm::Expected<cudaEvent_t> ready = event(false);
    if (!ready)
      return ready.takeError();
    llvm::Expected<cudaEvent_t> done = event(false);
    if (!done)
      return done.takeError();
    SC_CUDA(who, cudaEventRecord(*ready, compute));
    SC_CUDA(who, cudaStreamWaitEvent(comm, *ready, 0));
    SC_CUDA(who, cudaStreamWaitEvent(comm, posted->slotFree, 0));
    SC_CUDA(who, cudaMemcpyPeerAsync(posted->dst, posted->device,
                                      slots[op.buffer.slot], device,
                                      posted->bytes, comm));
    SC_CUDA(who, cudaEventRecord(*done, comm));
    sending[op.buffer.slot] = *done;
    {
      std::lock_guard<std::mutex> lock(box.mutex);
      posted->done = *done;
      posted->recorded = true;
    }
    box.changed.notify_all();
    return llvm::Error::success();
  }

  llvm::Expected<RankResult> run() {
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
    std::vector<std::pair<cudaEvent_t, cudaEvent_t>> timed;
    size_t computes = 0;
    for (const sched::PlanOp &op : mine.ops)
      computes += op.kind == sched::PlanOp::Kind::Compute;
    for (size_t k = 0; k < computes; ++k) {
      llvm::Expected<cudaEvent_t> a = event(true), b = event(true);
      if (!a)
        return a.takeError();
      if (!b)
        return b.takeError();
      timed.emplace_back(*a, *b);
    }
    llvm::Expected<cudaEvent_t> origin = event(true), end = event(true);
    if (!origin)
      return origin.takeError();
    if (!end)
      return end.takeError();
    SC_CUDA(who, cudaDeviceSynchronize());
    {
      std::unique_lock<std::mutex> lock(shared.mutex);
      // At least: a failed rank releases the barrier by setting it full.
      if (++shared.waiting >= shared.ranks)
        shared.arrived.notify_all();
      else
        shared.arrived.wait(lock, [&] { return shared.waiting >= shared.ranks; });
    }
    SC_CUDA(who, cudaEventRecord(*origin, compute));

    RankResult result;
    result.rank = rank;
    size_t index = 0;
    for (; at < mine.ops.size(); ++at) {
      if (monitor.aborted())
        return fail("stopped: another rank failed");
      const sched::PlanOp &op = mine.ops[at];
      switch (op.kind) {
      case sched::PlanOp::Kind::Compute: {
        for (const sched::SlotUse &w : op.writes)
          if (sending[w.slot])
            SC_CUDA(who, cudaStreamWaitEvent(compute, sending[w.slot], 0));
        auto [a, b] = timed[index];
        SC_CUDA(who, cudaEventRecord(a, compute));
        long long n = static_cast<long long>(op.cost * options.exec.timeUnit *
                                             cycles);
        if (cudaError_t err = cuda::launchSpin(n, compute); err != cudaSuccess)
          return fail(fmt::format("cuda: {}: {}",
                                  describePlanAction(plan, op.action),
                                  cudaGetErrorString(err)));
        SC_CUDA(who, cudaEventRecord(b, compute));
        ++index;
        break;
      }
      case sched::PlanOp::Kind::Recv: {
        auto posted = post(op);
        if (!posted)
          return posted.takeError();
        if (llvm::Error err = complete(op, **posted))
          return std::move(err);
        break;
      }
      case sched::PlanOp::Kind::Send:
        if (llvm::Error err = send(op))
          return std::move(err);
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
              return std::move(err);
        for (auto &[inner, posted] : receives)
          if (llvm::Error err = complete(*inner, *posted))
            return std::move(err);
        break;
      }
      case sched::PlanOp::Kind::Free:
        break;
      }
      ++result.instructions;
      monitor.progress(rank);
    }
    llvm::Expected<cudaEvent_t> commEnd = event(false);
    if (!commEnd)
      return commEnd.takeError();
    SC_CUDA(who, cudaEventRecord(*commEnd, comm));
    SC_CUDA(who, cudaStreamWaitEvent(compute, *commEnd, 0));
    SC_CUDA(who, cudaEventRecord(*end, compute));
    // Wait for the device with the watchdog running: a receive whose send
    // never comes cannot happen here (the host saw every send recorded).
    SC_CUDA(who, cudaEventSynchronize(*end));
    float ms = 0;
    SC_CUDA(who, cudaEventElapsedTime(&ms, *origin, *end));
    result.wall = ms * 1e-3;
    for (size_t k = 0; k < timed.size(); ++k) {
      float s = 0, e = 0;
      SC_CUDA(who, cudaEventElapsedTime(&s, *origin, timed[k].first));
      SC_CUDA(who, cudaEventElapsedTime(&e, *origin, timed[k].second));
      result.actions.push_back({static_cast<int>(k), s * 1e-3, e * 1e-3});
      result.busy += (e - s) * 1e-3;
    }
    result.waiting = std::max(0.0, result.wall - result.busy);
    return result;
  }

  ~RankRun() {
    cudaSetDevice(device);
    if (compute)
      cudaStreamSynchronize(compute);
    if (comm)
      cudaStreamSynchronize(comm);
    for (cudaEvent_t e : events)
      cudaEventDestroy(e);
    for (void *p : slots)
      cudaFree(p);
    if (compute)
      cudaStreamDestroy(compute);
    if (comm)
      cudaStreamDestroy(comm);
  }
};

} // namespace

llvm::Expected<RunReport> stagecraft::runtime::runCuda(const sched::Plan &plan,
                                                       const RunOptions &options) {
  if (options.exec.train)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "the cuda backend runs the timed kernel only: training on CUDA is not "
        "implemented yet (train with --backend=local or --backend=mpi)");
  int devices = 0;
  if (cudaError_t err = cudaGetDeviceCount(&devices); err != cudaSuccess)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        fmt::format("no usable CUDA device: cudaGetDeviceCount: {}",
                    cudaGetErrorString(err)));
  if (devices < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no usable CUDA device");
  const int p = plan.numRanks();
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
  // The spin kernel's clock, once per device in use.
  std::vector<double> cycles;
  for (int d = 0; d < std::min(p, devices); ++d) {
    llvm::Expected<double> rate = cyclesPerSecond(d);
    if (!rate)
      return rate.takeError();
    cycles.push_back(*rate);
  }
  Shared shared(p);
  ProgressMonitor monitor(p, options.timeout);
  return runRankThreads(p, [&](int r) -> llvm::Expected<RankResult> {
    RankRun run{plan, r, r % devices, shared, monitor, options,
                cycles[r % devices]};
    llvm::Expected<RankResult> result = run.run();
    if (!result) {
      monitor.abort();
      // Release ranks still at the start barrier.
      std::lock_guard<std::mutex> lock(shared.mutex);
      shared.waiting = shared.ranks;
      shared.arrived.notify_all();
    }
    return result;
  });
}
