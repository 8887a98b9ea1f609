//===- FuzzPlan.cpp - Fuzz target: plan loading and validation ------------===//
//
// An input is a plan file. What `readPlan` accepts must be a plan the
// runtime can rely on: it writes back and reads again to the same text.
//
//===----------------------------------------------------------------------===//

#include "scheduler/lower/Plan.h"

#include "llvm/Support/ErrorHandling.h"

using namespace stagecraft::pipe::sched;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::Expected<Plan> plan = readPlan(text);
  if (!plan) {
    llvm::consumeError(plan.takeError());
    return 0;
  }
  std::string written = writePlan(*plan);
  llvm::Expected<Plan> again = readPlan(written);
  if (!again)
    llvm::report_fatal_error(llvm::Twine("an accepted plan does not read "
                                         "back: ") +
                             llvm::toString(again.takeError()));
  if (writePlan(*again) != written)
    llvm::report_fatal_error("an accepted plan does not round-trip");
  return 0;
}
