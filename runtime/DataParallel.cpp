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
    : ranks(ranks), there(replicas, true), arrived(replicas, 0),
      joinAt(replicas, -1), registered(replicas, 0), leftAt(replicas, -1) {}

void ReplicaSet::leave(int replica) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!there[replica])
    return;
  there[replica] = false;
  leftAt[replica] = generation;
  leftNow = true;
  // The step may now be complete without it.
  if (ending >= 0 && complete())
    finishStep();
  changed.notify_all();
}

bool ReplicaSet::complete() const {
  bool anyone = false;
  for (size_t k = 0; k < there.size(); ++k) {
    if (there[k]) {
      anyone = true;
      if (arrived[k] < ranks)
        return false;
    } else if (joinAt[k] == ending + 1 && !leftNow && gone(k) &&
               registered[k] < ranks) {
      // A replica that joins from the next step: every rank of it.
      return false;
    }
  }
  return anyone;
}

bool ReplicaSet::gone(int replica) const {
  return !there[replica] && leftAt[replica] >= 0 &&
         generation > leftAt[replica];
}

void ReplicaSet::finishStep() {
  if (!leftNow)
    for (size_t k = 0; k < there.size(); ++k)
      if (!there[k] && joinAt[k] == ending + 1 && registered[k] == ranks) {
        there[k] = true;
        joinAt[k] = -1;
        registered[k] = 0;
        leftAt[k] = -1;
      }
  after.clear();
  for (size_t k = 0; k < there.size(); ++k)
    if (there[k])
      after.push_back(static_cast<int>(k));
  std::fill(arrived.begin(), arrived.end(), 0);
  ending = -1;
  leftNow = false;
  ++generation;
}

llvm::Expected<std::vector<int>> ReplicaSet::endStep(int replica, int step,
                                                     ProgressMonitor &monitor) {
  std::unique_lock<std::mutex> lock(mutex);
  const int mine = generation;
  ending = step;
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

bool ReplicaSet::waitGone(int replica, double seconds) {
  std::unique_lock<std::mutex> lock(mutex);
  return changed.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
    return gone(replica) || (after.empty() && generation > 0);
  });
}

llvm::Expected<std::vector<int>> ReplicaSet::join(int replica, int step,
                                                  ProgressMonitor &monitor) {
  std::unique_lock<std::mutex> lock(mutex);
  joinAt[replica] = step;
  ++registered[replica];
  if (ending >= 0 && complete()) {
    finishStep();
    changed.notify_all();
  }
  while (!there[replica]) {
    if (monitor.expired())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          fmt::format("no progress: replica {} waits to train again from "
                      "step {}",
                      replica, step));
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

void stagecraft::runtime::sumInOrder(llvm::ArrayRef<const float *> parts,
                                     size_t count, float *out) {
  for (size_t i = 0; i < count; ++i) {
    float sum = parts[0][i];
    for (size_t k = 1; k < parts.size(); ++k)
      sum += parts[k][i];
    out[i] = sum;
  }
}

void stagecraft::runtime::meanOverReplicas(llvm::ArrayRef<const float *> parts,
                                           size_t count, float *out,
                                           int group) {
  const size_t n = parts.size();
  const size_t g = group > 0 && static_cast<size_t>(group) < n ? group : n;
  if (g == n) {
    sumInOrder(parts, count, out);
  } else {
    std::vector<std::vector<float>> sums(n / g, std::vector<float>(count));
    std::vector<const float *> groups;
    for (size_t k = 0; k < n / g; ++k) {
      sumInOrder(parts.slice(k * g, g), count, sums[k].data());
      groups.push_back(sums[k].data());
    }
    sumInOrder(groups, count, out);
  }
  const float replicas = static_cast<float>(n);
  for (size_t i = 0; i < count; ++i)
    out[i] /= replicas;
}

double stagecraft::runtime::meanOverReplicas(llvm::ArrayRef<double> parts) {
  double sum = 0.0;
  for (double v : parts)
    sum += v;
  return sum / static_cast<double>(parts.size());
}

std::vector<float>
stagecraft::runtime::flatten(llvm::ArrayRef<kernels::Parameter> params,
                             ParameterPart part) {
  std::vector<float> flat;
  for (const kernels::Parameter &param : params)
    flat.insert(flat.end(), (param.*part).begin(), (param.*part).end());
  return flat;
}

void stagecraft::runtime::scatterInto(std::vector<kernels::Parameter> &params,
                                      llvm::ArrayRef<float> flat,
                                      ParameterPart part,
                                      llvm::ArrayRef<size_t> sizes) {
  size_t offset = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    (params[i].*part)
        .assign(flat.begin() + offset, flat.begin() + offset + sizes[i]);
    offset += sizes[i];
  }
}
