//===- DataParallel.cpp - Replicas of a pipeline --------------------------===//
//
// See DataParallel.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/DataParallel.h"

using namespace stagecraft::runtime;

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
