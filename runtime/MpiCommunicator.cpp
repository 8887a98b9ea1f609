//===- MpiCommunicator.cpp - One process per rank over MPI ----------------===//
//
// MPI_Isend / MPI_Irecv on MPI_COMM_WORLD with one tag, so operations between
// two ranks match in issue order (MPI's non-overtaking rule). Waits poll with
// MPI_Test so that the progress monitor can end a hang.
//
//===----------------------------------------------------------------------===//

#include "runtime/Communicator.h"

#include <fmt/format.h>
#include <mpi.h>

#include <map>
#include <thread>

using namespace stagecraft::runtime;

/// Turns an MPI failure into an error naming the call.
#define PIPE_MPI_CHECK(call)                                                   \
  do {                                                                         \
    int rc_ = (call);                                                          \
    if (rc_ != MPI_SUCCESS) {                                                  \
      char text_[MPI_MAX_ERROR_STRING];                                        \
      int len_ = 0;                                                            \
      MPI_Error_string(rc_, text_, &len_);                                     \
      return llvm::createStringError(                                          \
          llvm::inconvertibleErrorCode(),                                      \
          fmt::format("{} failed: {}", #call, std::string(text_, len_)));      \
    }                                                                          \
  } while (false)

namespace {
class MpiCommunicator : public Communicator {
public:
  MpiCommunicator() {
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    // Errors come back as codes, not aborts, so they can be reported.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  int rank() const override { return me; }
  int size() const override { return ranks; }

  llvm::Error isend(int peer, const void *data, size_t bytes,
                    Request &request) override {
    MPI_Request r;
    PIPE_MPI_CHECK(MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, peer, 0,
                             MPI_COMM_WORLD, &r));
    request.id = nextId++;
    pending[request.id] = {r, peer, bytes, false};
    return llvm::Error::success();
  }

  llvm::Error irecv(int peer, void *data, size_t bytes,
                    Request &request) override {
    MPI_Request r;
    PIPE_MPI_CHECK(MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, peer, 0,
                             MPI_COMM_WORLD, &r));
    request.id = nextId++;
    pending[request.id] = {r, peer, bytes, true};
    return llvm::Error::success();
  }

  llvm::Expected<bool> test(Request &request) override {
    if (!request.active())
      return true;
    auto it = pending.find(request.id);
    int done = 0;
    PIPE_MPI_CHECK(MPI_Test(&it->second.request, &done, MPI_STATUS_IGNORE));
    if (done) {
      pending.erase(it);
      request.id = -1;
    }
    return done != 0;
  }

  llvm::Error wait(Request &request, ProgressMonitor &monitor) override {
    if (!request.active())
      return llvm::Error::success();
    Pending op = pending[request.id];
    pending.erase(request.id);
    request.id = -1;
    MPI_Status status;
    int done = 0;
    while (true) {
      PIPE_MPI_CHECK(MPI_Test(&op.request, &done, &status));
      if (done)
        break;
      if (monitor.expired())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "no progress");
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    if (op.isRecv) {
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      if (static_cast<size_t>(count) != op.bytes)
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            fmt::format("received {} bytes from rank {}, expected {}", count,
                        op.peer, op.bytes));
    }
    return llvm::Error::success();
  }

private:
  struct Pending {
    MPI_Request request;
    int peer;
    size_t bytes;
    bool isRecv;
  };
  int me = 0, ranks = 1, nextId = 0;
  std::map<int, Pending> pending;
};
} // namespace

std::unique_ptr<Communicator> stagecraft::runtime::createMpiCommunicator() {
  return std::make_unique<MpiCommunicator>();
}
