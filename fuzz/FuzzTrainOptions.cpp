//===- FuzzTrainOptions.cpp - Fuzz target: stagecraft-run's options -------===//
//
// An input is lines: a duration, a size, then hidden, heads, sequence,
// vocab, batch, steps and the learning rate as text. They go through the
// same checks `stagecraft-run` applies; whatever passes must give finite,
// positive sizes (message bytes, the model's estimate) without overflow.
//
//===----------------------------------------------------------------------===//

#include "runtime/Options.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/ErrorHandling.h"

#include <cmath>

using namespace stagecraft::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  lines.resize(9);
  if (llvm::Expected<double> d = parseDuration(lines[0], "time-unit")) {
    if (!(*d > 0 && *d <= kMaxDurationSeconds))
      llvm::report_fatal_error("a duration out of range was accepted");
  } else {
    llvm::consumeError(d.takeError());
  }
  if (llvm::Expected<double> b = parseBytes(lines[1], "max-memory")) {
    if (!(*b > 0 && std::isfinite(*b)))
      llvm::report_fatal_error("a size out of range was accepted");
  } else {
    llvm::consumeError(b.takeError());
  }
  TrainOptions train;
  int *fields[] = {&train.model.hidden,   &train.model.heads,
                   &train.model.sequence, &train.model.vocab,
                   &train.model.batch,    &train.steps};
  for (int i = 0; i < 6; ++i) {
    long long v = 0;
    if (lines[2 + i].getAsInteger(10, v) || v < INT32_MIN || v > INT32_MAX)
      return 0; // cl::opt<int> refuses these before any check runs
    *fields[i] = static_cast<int>(v);
  }
  double lr = 0.0;
  if (lines[8].getAsDouble(lr))
    return 0;
  train.optimizer.lr = static_cast<float>(lr);
  if (llvm::Error err = checkTrainOptions(train)) {
    llvm::consumeError(std::move(err));
    return 0;
  }
  // Accepted sizes: every product the runtime forms must be finite and fit.
  if (train.model.messageBytes() <= 0 || trainingMessageBytes(train.model) <= 0)
    llvm::report_fatal_error("accepted sizes give a non-positive message");
  double estimate = train.model.estimateBytes(4, 8);
  if (!(estimate > 0 && std::isfinite(estimate)))
    llvm::report_fatal_error("accepted sizes give no finite estimate");
  return 0;
}
