//===- DataParallel.h - Replicas of a pipeline --------------------*- C++
//-*-===//
//
// `stagecraft-run --train --data-parallel=N`: N replicas of the pipeline,
// replica k training on microbatches k x m .. k x m + m - 1 of the step's
// N x m. Each stage's gradients are reduced over its data-parallel group
// (the same rank of every replica) right after the stage's last weight
// gradient of the step, torch's rule for DDP: every replica receives every
// other's gradients and sums them in replica order, then divides by N, so
// the replicas hold the same bits and a run equals the sequential reference
// of the same replicas (`--reference --data-parallel=N`) bit for bit, on
// threads and on MPI alike. Ranks of the whole job are numbered replica
// by replica: world rank k x R + r is rank r of replica k.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_DATAPARALLEL_H
#define STAGECRAFT_RUNTIME_DATAPARALLEL_H

#include "kernels/Model.h"
#include "runtime/Communicator.h"

#include "llvm/ADT/ArrayRef.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace stagecraft::runtime {

/// Some ranks of a communicator, renumbered 0..members-1: a replica's
/// pipeline, or a data-parallel group.
class MemberCommunicator : public Communicator {
public:
  /// \p members: the ranks of \p world in this group, in order; this rank
  /// is member \p me.
  MemberCommunicator(Communicator &world, std::vector<int> members, int me)
      : world(world), members(std::move(members)), me(me) {}
  int rank() const override { return me; }
  int size() const override { return static_cast<int>(members.size()); }
  llvm::Error isend(int peer, const void *data, size_t bytes,
                    Request &request) override {
    return world.isend(members[peer], data, bytes, request);
  }
  llvm::Error irecv(int peer, void *data, size_t bytes,
                    Request &request) override {
    return world.irecv(members[peer], data, bytes, request);
  }
  llvm::Error wait(Request &request, ProgressMonitor &monitor) override {
    return world.wait(request, monitor);
  }
  llvm::Expected<bool> test(Request &request) override {
    return world.test(request);
  }

private:
  Communicator &world;
  std::vector<int> members;
  int me;
};

/// Which replicas train (local backend): the same list for every rank, as
/// it stands after each step. A replica whose rank failed leaves
/// (`leave`); at the end of each step every rank of the replicas still
/// there meets the others (`endStep`), and the replicas that have not left
/// by then are those that train the step. When a replica left during a
/// step, that step runs again on the rest, renumbered: survivor i computes
/// the microbatches of replica i of as many replicas, so a run that lost a
/// replica at step s equals, from s on, a run started from step s's
/// checkpoint with one replica fewer. A replica restarted after it left
/// (`join`) trains again from the step it asks for: the end of the step
/// before waits for all its ranks and admits it (unless a replica left in
/// that step), and the replicas are numbered by their place again.
class ReplicaSet {
public:
  ReplicaSet(int replicas, int ranks);
  /// Replica \p replica leaves (a rank of it failed).
  void leave(int replica);
  /// Waits for every rank of every replica still there to end step
  /// \p step (\p replica's rank calls it) and returns those replicas, in
  /// order. Fails when \p monitor expires first.
  llvm::Expected<std::vector<int>> endStep(int replica, int step,
                                           ProgressMonitor &monitor);
  /// Waits at most \p seconds until replica \p replica is out of the list
  /// (the end of the step it left in has passed): from then on, no replica
  /// sends to it. False when the time ran out.
  bool waitGone(int replica, double seconds);
  /// A rank of the restarted replica \p replica: waits until the replica
  /// is admitted at the end of step \p step - 1 and returns the replicas
  /// that train step \p step.
  llvm::Expected<std::vector<int>> join(int replica, int step,
                                        ProgressMonitor &monitor);

private:
  bool complete() const;
  bool gone(int replica) const;
  void finishStep();

  const int ranks;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<bool> there;
  /// Ranks of each replica at the end of step `ending` (-1: none yet).
  std::vector<int> arrived;
  int ending = -1;
  /// Restarted replicas: the step each joins at (-1: none) and its ranks
  /// waiting; the meeting each replica left in.
  std::vector<int> joinAt, registered, leftAt;
  /// A replica left during the step ending.
  bool leftNow = false;
  int generation = 0;
  std::vector<int> after;
};

/// Which replicas train changed: from step `step` on, `replicas` of them.
/// `ranAgain`: replicas left during that step, which ran again on the rest;
/// else restarted replicas joined from it.
struct MembershipChange {
  int step = 0;
  int replicas = 0;
  bool ranAgain = false;
};

/// The world ranks of replica \p replica's pipeline of \p ranks ranks.
std::vector<int> replicaMembers(int replica, int ranks);
/// The world ranks of rank \p rank's data-parallel group: that rank of
/// each of \p replicas replicas.
std::vector<int> groupMembers(int rank, int ranks, int replicas);

/// A field of a stage's parameters (value, grad, adamM, adamV).
using ParameterPart = std::vector<float> kernels::Parameter::*;
/// \p part of each of \p params, laid end to end.
std::vector<float> flatten(llvm::ArrayRef<kernels::Parameter> params,
                           ParameterPart part);
/// Lays \p flat over \p params' \p part, \p sizes[i] floats for
/// parameter i (the whole sizes: a sharded stage's fields may be empty).
void scatterInto(std::vector<kernels::Parameter> &params,
                 llvm::ArrayRef<float> flat, ParameterPart part,
                 llvm::ArrayRef<size_t> sizes);

/// \p parts (\p count floats each) summed in their order into \p out
/// (which may be one of them).
void sumInOrder(llvm::ArrayRef<const float *> parts, size_t count, float *out);
/// The data-parallel mean: \p parts (one per replica, \p count floats
/// each) summed in replica order within each group of \p group
/// consecutive replicas, the groups' sums added in group order, then
/// divided by the number of replicas, into \p out (which may be one of
/// them). \p group 0 (or the number of parts): one group.
void meanOverReplicas(llvm::ArrayRef<const float *> parts, size_t count,
                      float *out, int group = 0);
/// The same for one value per replica (the step's loss).
double meanOverReplicas(llvm::ArrayRef<double> parts);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_DATAPARALLEL_H
