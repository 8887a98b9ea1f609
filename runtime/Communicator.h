//===- Communicator.h - Point-to-point transport for the executor -*- C++
//-*-===//
//
// The interface the executor moves data through, and the progress monitor
// that every blocking wait polls so that a hang becomes a report instead of a
// stuck process. Implementations: `local` (ranks are threads of one process)
// and `mpi` (one process per rank). Operations between two ranks match in
// issue order, as NCCL and MPI do without tags. A CUDA/NCCL backend fits the
// same shape: isend/irecv enqueue on a stream, wait synchronizes on an event.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_COMMUNICATOR_H
#define STAGECRAFT_RUNTIME_COMMUNICATOR_H

#include "llvm/Support/Error.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace stagecraft::runtime {

using Clock = std::chrono::steady_clock;

/// Watches progress. A wait gives up once no rank it can see has made
/// progress for the timeout, or once another rank has given up.
class ProgressMonitor {
public:
  ProgressMonitor(int ranks, double timeoutSeconds);

  /// Records that \p rank completed an instruction.
  void progress(int rank);
  /// Records what \p rank is about to wait for (for the hang report).
  void waiting(int rank, std::string what);
  /// True when the wait should give up: sets the abort flag the first time.
  bool expired();
  bool aborted() const { return abortFlag.load(); }
  /// True once a wait gave up for lack of progress (not for another failure).
  bool timedOut() const { return timedOutFlag.load(); }
  void abort() { abortFlag = true; }
  double timeoutSeconds() const { return timeout; }
  /// Why a wait for \p what gives up once expired() holds: another rank
  /// failed, or no rank progressed for the timeout.
  std::string giveUpReason(const std::string &what) const;
  std::string waitingOn(int rank);

private:
  double timeout;
  std::atomic<int64_t> lastProgress;
  std::atomic<bool> abortFlag{false};
  std::atomic<bool> timedOutFlag{false};
  std::mutex mutex;
  std::vector<std::string> what;
};

/// A pending operation; opaque to the executor.
struct Request {
  int id = -1;
  bool active() const { return id >= 0; }
};

class Communicator {
public:
  virtual ~Communicator();
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Starts sending \p bytes at \p data to \p peer; \p data must stay valid
  /// until `wait` returns for \p request.
  virtual llvm::Error isend(int peer, const void *data, size_t bytes,
                            Request &request) = 0;
  /// Starts receiving exactly \p bytes from \p peer into \p data.
  virtual llvm::Error irecv(int peer, void *data, size_t bytes,
                            Request &request) = 0;
  /// Completes \p request. Fails when the monitor expires (naming what this
  /// rank waits for) or the transport reports an error.
  virtual llvm::Error wait(Request &request, ProgressMonitor &monitor) = 0;
  /// Whether \p request has completed, without blocking; a completed request
  /// becomes inactive.
  virtual llvm::Expected<bool> test(Request &request) = 0;
};

/// The error of a receive from a rank that left (LocalFabric::close).
constexpr const char *kPeerLeft = "the peer left";

/// Ranks as threads: one shared fabric, one communicator per rank thread.
class LocalFabric {
public:
  explicit LocalFabric(int ranks);
  ~LocalFabric();
  std::unique_ptr<Communicator> communicator(int rank);
  /// \p rank has left (its thread ended): a receive from it fails with
  /// kPeerLeft once the messages it sent are taken, instead of waiting.
  void close(int rank);
  /// \p rank starts again (a restarted rank): every message to or from
  /// it that is still queued is dropped, and it is open again.
  void reopen(int rank);

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

#ifdef STAGECRAFT_HAVE_MPI
/// MPI_COMM_WORLD. MPI must be initialized.
std::unique_ptr<Communicator> createMpiCommunicator();
#endif

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_COMMUNICATOR_H
