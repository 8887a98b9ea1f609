//===- Calibrate.h - Costs fitted to a measured run --------------*- C++
//-*-===//
//
// What a traced run says about the costs the simulator should use: each
// stage's F, I, W (and fused B) as measured in the run itself (medians over
// the microbatches and steps after the first), the time a message takes
// between ranks (link latency, from receivers that waited for it), and the
// time each rank spends per compute outside computes and waits (per-action
// overhead, folded into the costs). `stagecraft-run --calibrate=FILE` writes
// the spec with these costs, so that scheduling from it predicts the run.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_CALIBRATE_H
#define STAGECRAFT_RUNTIME_CALIBRATE_H

#include "runtime/Runtime.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace stagecraft::runtime {

struct Calibration {
  /// Per stage, in milliseconds: the measured forward, backward-input and
  /// backward-weight with the rank's per-action overhead added. A stage
  /// whose plan fuses the backward (B) splits its measured B in the ratio
  /// of the plan's own I and W costs.
  std::vector<double> forward, backwardInput, backwardWeight;
  /// Per stage, the measured fused backward when the plan has one (else 0).
  std::vector<double> backward;
  /// Actions measured per stage (after the first step).
  std::vector<int> samples;
  /// Median delay, in milliseconds, from the end of a compute to the start
  /// of its consumer on another rank when that rank was idle waiting for
  /// it: the simulator's link latency. 0 when no such pair was seen.
  double latency = 0.0;
  /// Per rank: milliseconds per compute spent neither computing nor
  /// waiting (the runtime's own instructions), added to the costs above.
  std::vector<double> overhead;
  /// Steps the fit used (the first is left out when there are several).
  int steps = 0;
};

/// Fits \p plan's costs to \p report (a run of \p plan with `--train` or
/// timed computes; `RankResult::actions` of every rank). Fails naming the
/// stage when a stage has no measured action.
llvm::Expected<Calibration> calibrate(const sched::Plan &plan,
                                      const RunReport &report);

/// One line per stage and the fitted latency, for the run's output.
std::string describeCalibration(const sched::Plan &plan,
                                const Calibration &calibration);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_CALIBRATE_H
