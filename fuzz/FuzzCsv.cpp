//===- FuzzCsv.cpp - Fuzz target: PyTorch CSV import ----------------------===//
//
// The first byte picks a pipeline (1-4 ranks, one or two stages per rank,
// 1-8 microbatches); the rest is a CSV imported against it. What imports
// is verified (and its communication, when the CSV spells it out).
//
//===----------------------------------------------------------------------===//

#include "scheduler/formats/PyTorchCsv.h"
#include "scheduler/lower/Program.h"
#include "scheduler/model/Simulator.h"

using namespace stagecraft::pipe::sched;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  uint8_t pick = data[0];
  Problem problem;
  problem.name = "p";
  problem.ranks = 1 + (pick & 3);
  problem.microbatches = 1 + ((pick >> 2) & 7);
  int stages = problem.ranks * (1 + ((pick >> 5) & 1));
  for (int s = 0; s < stages; ++s) {
    Stage stage;
    stage.name = "s" + std::to_string(s);
    problem.stages.push_back(stage);
  }
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  llvm::Expected<ImportedSchedule> imported = parsePyTorchCsv(text, problem);
  if (!imported) {
    llvm::consumeError(imported.takeError());
    return 0;
  }
  if (llvm::Error err = verifySchedule(problem, imported->schedule))
    llvm::consumeError(std::move(err));
  if (imported->program)
    if (llvm::Error err = verifyProgram(problem, *imported->program))
      llvm::consumeError(std::move(err));
  return 0;
}
