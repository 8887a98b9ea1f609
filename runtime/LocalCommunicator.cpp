//===- LocalCommunicator.cpp - Ranks as threads ---------------------------===//
//
// Every ordered pair of ranks has a FIFO of messages guarded by a mutex. A
// send copies its data into the FIFO and completes at once; receives match
// the messages in the order they were posted, each waiting
// on the FIFO's condition variable, waking regularly to poll the progress
// monitor so that a hang is reported rather than waited out.
//
//===----------------------------------------------------------------------===//

#include "runtime/Communicator.h"

#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <set>

using namespace stagecraft::runtime;

Communicator::~Communicator() = default;

ProgressMonitor::ProgressMonitor(int ranks, double timeoutSeconds)
    : timeout(timeoutSeconds),
      lastProgress(Clock::now().time_since_epoch().count()), what(ranks) {}

void ProgressMonitor::progress(int rank) {
  lastProgress = Clock::now().time_since_epoch().count();
}

void ProgressMonitor::waiting(int rank, std::string text) {
  std::lock_guard<std::mutex> lock(mutex);
  what[rank] = std::move(text);
}

std::string ProgressMonitor::waitingOn(int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  return what[rank];
}

std::string ProgressMonitor::giveUpReason(const std::string &what) const {
  if (!timedOut())
    return "stopped: another rank failed";
  return fmt::format("no rank progressed for {} s; waiting for {}", timeout,
                     what);
}

bool ProgressMonitor::expired() {
  if (abortFlag)
    return true;
  auto idle =
      Clock::now().time_since_epoch() - Clock::duration(lastProgress.load());
  if (std::chrono::duration<double>(idle).count() > timeout) {
    timedOutFlag = true;
    abortFlag = true;
    return true;
  }
  return false;
}

struct LocalFabric::Impl {
  struct Channel {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<std::vector<char>> messages;
    /// The sender left (LocalFabric::close): once the messages it sent are
    /// taken, a receive fails with kPeerLeft.
    bool closed = false;
  };
  explicit Impl(int ranks) : ranks(ranks), channels(ranks * ranks) {}
  Channel &channel(int from, int to) { return channels[from * ranks + to]; }

  int ranks;
  std::vector<Channel> channels;
};

namespace {
class LocalCommunicator : public Communicator {
public:
  LocalCommunicator(LocalFabric::Impl &fabric, int rank)
      : fabric(fabric), me(rank) {}

  int rank() const override { return me; }
  int size() const override { return fabric.ranks; }

  llvm::Error isend(int peer, const void *data, size_t bytes,
                    Request &request) override {
    auto &ch = fabric.channel(me, peer);
    {
      std::lock_guard<std::mutex> lock(ch.mutex);
      const char *p = static_cast<const char *>(data);
      ch.messages.emplace_back(p, p + bytes);
    }
    ch.ready.notify_all();
    request.id = -1; // complete: the data was copied
    return llvm::Error::success();
  }

  llvm::Error irecv(int peer, void *data, size_t bytes,
                    Request &request) override {
    request.id = nextId++;
    pending[request.id] = {peer, data, bytes};
    posted[peer].push_back(request.id);
    return llvm::Error::success();
  }

  llvm::Expected<bool> test(Request &request) override {
    // Sends complete when posted; only receives stay pending, and the
    // executor waits for those.
    return !request.active();
  }

  /// Receives match messages in the order they were posted to a peer (as
  /// MPI's do), whatever order they are waited in: waiting for one first
  /// completes the earlier ones from the same peer.
  llvm::Error wait(Request &request, ProgressMonitor &monitor) override {
    if (!request.active())
      return llvm::Error::success();
    const int id = request.id;
    request.id = -1;
    if (done.erase(id))
      return llvm::Error::success();
    if (auto it = failed.find(id); it != failed.end()) {
      std::string message = std::move(it->second);
      failed.erase(it);
      return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
    }
    std::deque<int> &queue = posted[pending.at(id).peer];
    while (!queue.empty()) {
      const int next = queue.front();
      queue.pop_front();
      Pending recv = pending[next];
      pending.erase(next);
      llvm::Error err = receive(recv, monitor);
      if (next == id)
        return err;
      if (err) // its own wait reports it (the peer left, or a timeout)
        failed[next] = llvm::toString(std::move(err));
      else
        done.insert(next);
    }
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a receive that was never posted");
  }

private:
  struct Pending {
    int peer;
    void *data;
    size_t bytes;
  };

  /// Takes the next message from \p recv's peer into its buffer.
  llvm::Error receive(const Pending &recv, ProgressMonitor &monitor) {
    auto &ch = fabric.channel(recv.peer, me);
    std::unique_lock<std::mutex> lock(ch.mutex);
    while (ch.messages.empty()) {
      if (ch.closed)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       kPeerLeft);
      if (monitor.expired())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "no progress");
      ch.ready.wait_for(lock, std::chrono::milliseconds(5));
    }
    std::vector<char> message = std::move(ch.messages.front());
    ch.messages.pop_front();
    lock.unlock();
    if (message.size() != recv.bytes)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("received {} bytes from rank {}, expected {}",
                      message.size(), recv.peer, recv.bytes));
    std::memcpy(recv.data, message.data(), message.size());
    return llvm::Error::success();
  }

  LocalFabric::Impl &fabric;
  int me;
  int nextId = 0;
  std::map<int, Pending> pending;
  /// Per peer, the receives not yet matched, in the order posted.
  std::map<int, std::deque<int>> posted;
  /// Receives matched while waiting for a later one.
  std::set<int> done;
  /// Receives completed early that failed, with why.
  std::map<int, std::string> failed;
};
} // namespace

LocalFabric::LocalFabric(int ranks) : impl(std::make_unique<Impl>(ranks)) {}
LocalFabric::~LocalFabric() = default;

void LocalFabric::close(int rank) {
  for (int to = 0; to < impl->ranks; ++to) {
    Impl::Channel &ch = impl->channel(rank, to);
    {
      std::lock_guard<std::mutex> lock(ch.mutex);
      ch.closed = true;
    }
    ch.ready.notify_all();
  }
}

void LocalFabric::reopen(int rank) {
  for (int other = 0; other < impl->ranks; ++other)
    for (Impl::Channel *ch :
         {&impl->channel(rank, other), &impl->channel(other, rank)}) {
      std::lock_guard<std::mutex> lock(ch->mutex);
      ch->messages.clear();
      ch->closed = false;
    }
}

std::unique_ptr<Communicator> LocalFabric::communicator(int rank) {
  return std::make_unique<LocalCommunicator>(*impl, rank);
}
