//===- FuzzPolicy.cpp - Fuzz target: policy text --------------------------===//
//
// The first byte picks a pipeline (1-4 ranks, one to three stages per rank,
// 1-8 microbatches, random-ish costs); the rest is a policy's text, parsed
// and, where it parses, instantiated there with its default parameters.
// Every outcome must be a schedule that verifies or an error: no crash,
// no hang, no sanitizer report.
//
//===----------------------------------------------------------------------===//

#include "scheduler/model/Simulator.h"
#include "scheduler/policy/Policy.h"

#include <cstdlib>

using namespace stagecraft::pipe::sched;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  uint8_t pick = data[0];
  Problem problem;
  problem.name = "p";
  problem.ranks = 1 + (pick & 3);
  problem.microbatches = 1 + ((pick >> 2) & 7);
  int stages = problem.ranks * (1 + (pick >> 5) % 3);
  for (int s = 0; s < stages; ++s) {
    Stage stage;
    stage.name = "s" + std::to_string(s);
    stage.forward = 1.0 + (s % 3) * 0.5;
    stage.backwardInput = 1.0 + (s % 2) * 0.25;
    problem.stages.push_back(stage);
  }
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  llvm::Expected<Policy> policy = parsePolicy(text);
  if (!policy) {
    llvm::consumeError(policy.takeError());
    return 0;
  }
  llvm::Expected<Schedule> schedule = instantiatePolicy(*policy, problem);
  if (!schedule) {
    llvm::consumeError(schedule.takeError());
    return 0;
  }
  // instantiatePolicy verified it; a second opinion must agree.
  if (llvm::Error err = verifySchedule(problem, *schedule)) {
    llvm::consumeError(std::move(err));
    std::abort();
  }
  return 0;
}
