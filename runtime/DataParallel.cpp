//===- DataParallel.cpp - Replicas of a pipeline --------------------------===//
//
// See DataParallel.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/DataParallel.h"

#include <fmt/format.h>

#include <algorithm>

using namespace stagecraft::runtime;

ReplicaSet::ReplicaSet(int replicas, int ranks)
    : ranks(ranks), there(replicas, true), arrived(replicas, 0) {}

void ReplicaSet::leave(int replica) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!there[replica])
    return;
  there[replica] = false;
  // The step may now be complete without it.
  if (complete())
    finishStep();
  changed.notify_all();
}

bool ReplicaSet::complete() const {
  bool anyone = false;
  for (size_t k = 0; k < there.size(); ++k) {
    if (!there[k])
      continue;
    anyone = true;
    if (arrived[k] < ranks)
      return false;
  }
  return anyone;
}

void ReplicaSet::finishStep() {
  after.clear();
  for (size_t k = 0; k < there.size(); ++k)
    if (there[k])
      after.push_back(static_cast<int>(k));
  std::fill(arrived.begin(), arrived.end(), 0);
  ++generation;
}

llvm::Expected<std::vector<int>>
ReplicaSet::endStep(int replica, int step, ProgressMonitor &monitor) {
  std::unique_lock<std::mutex> lock(mutex);
  const int mine = generation;
  ++arrived[replica];
  if (complete()) {
    finishStep();
    changed.notify_all();
    return after;
  }
  while (generation == mine) {
    if (monitor.expired())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("no progress: the end of step {} waits for the other "
                      "replicas",
                      step));
    changed.wait_for(lock, std::chrono::milliseconds(5));
  }
  return after;
}


std::vector<int> stagecraft::runtime::replicaMembers(int replica, int ranks) {
  std::vector<int> members;
  for (int r = 0; r < ranks; ++r)
    members.push_back(replica * ranks + r);
  return members;
}

std::vector<int> stagecraft::runtime::groupMembers(int rank, int ranks,
                                                   int replicas) {
  std::vector<int> members;
  for (int k = 0; k < replicas; ++k)
    members.push_back(k * ranks + rank);
  return members;
}

void stagecraft::runtime::meanOverReplicas(llvm::ArrayRef<const float *> parts,
                                           size_t count, float *out) {
  const float n = static_cast<float>(parts.size());
  for (size_t i = 0; i < count; ++i) {
    float sum = parts[0][i];
    for (size_t k = 1; k < parts.size(); ++k)
      sum += parts[k][i];
    out[i] = sum / n;
  }
}

double stagecraft::runtime::meanOverReplicas(llvm::ArrayRef<double> parts) {
  double sum = 0.0;
  for (double v : parts)
    sum += v;
  return sum / static_cast<double>(parts.size());
}
