//===- HalfStageModel.h - The model the quality benchmarks share -*- C++
//-*-===//
//
// 2p stages, each half of a rank's costs (F, I, W halved, activation 0.5),
// so that every placement applies: blocks of two for gpipe/1f1b/zb-h1/zb-h2,
// round-robin for interleaved, V for zb-v and dualpipev. A profile scales
// the first and the last stage (embedding, LM head).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_BENCH_HALFSTAGEMODEL_H
#define STAGECRAFT_BENCH_HALFSTAGEMODEL_H

#include "scheduler/model/Problem.h"

#include <algorithm>
#include <string>
#include <vector>

namespace stagecraft::pipe::sched::bench {

struct Profile {
  const char *name;
  /// A rank's F, I, W and the link latency.
  double f, i, w, latency;
  /// Cost scale of the first and the last stage.
  double first, last;
};

/// The quality benchmarks' profiles: uniform; uniform with latency 0.1; the
/// Zero Bubble paper's measured costs; those with heavy end stages.
inline std::vector<Profile> zeroBubbleProfiles() {
  return {
      {"uniform", 1.0, 1.0, 1.0, 0.0, 1.0, 1.0},
      {"uniform+lat0.1", 1.0, 1.0, 1.0, 0.1, 1.0, 1.0},
      {"zb-paper", 1.0, 0.9765, 0.5041, 0.0324, 1.0, 1.0},
      {"hetero", 1.0, 0.9765, 0.5041, 0.0324, 1.3, 1.6},
  };
}

/// \p p ranks, \p m microbatches, 2p half stages of \p profile, each with
/// activation 0.5 and \p weightGrad of it kept for W.
inline Problem halfStageProblem(const Profile &profile, int p, int m,
                                double weightGrad) {
  Problem problem;
  problem.name = "bench";
  problem.ranks = p;
  problem.microbatches = m;
  problem.latency = profile.latency;
  for (int s = 0; s < 2 * p; ++s) {
    double scale = s == 0 ? profile.first : s == 2 * p - 1 ? profile.last : 1.0;
    Stage stage;
    stage.name = "s" + std::to_string(s);
    stage.forward = 0.5 * profile.f * scale;
    stage.backwardInput = 0.5 * profile.i * scale;
    stage.backwardWeight = 0.5 * profile.w * scale;
    stage.activation = 0.5;
    stage.weightGrad = weightGrad;
    problem.stages.push_back(stage);
  }
  return problem;
}

/// \p stages identical unit stages (F = I = W = 1, activation 1).
inline Problem unitProblem(int ranks, int microbatches, int stages) {
  Problem problem;
  problem.name = "bench";
  problem.ranks = ranks;
  problem.microbatches = microbatches;
  for (int s = 0; s < stages; ++s) {
    Stage stage;
    stage.name = "s" + std::to_string(s);
    problem.stages.push_back(stage);
  }
  return problem;
}

inline double highest(const std::vector<double> &v) {
  return *std::max_element(v.begin(), v.end());
}

} // namespace stagecraft::pipe::sched::bench

#endif // STAGECRAFT_BENCH_HALFSTAGEMODEL_H
