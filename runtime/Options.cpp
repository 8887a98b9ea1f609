//===- Options.cpp - Checked parsing of stagecraft-run's options ----------===//

#include "runtime/Options.h"

#include <fmt/format.h>

#include <cmath>

#include <unistd.h>

using namespace stagecraft::runtime;

static llvm::Error failure(std::string message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<double>
stagecraft::runtime::parseDuration(llvm::StringRef text, llvm::StringRef what) {
  double scale = 1.0;
  llvm::StringRef number = text;
  if (number.consume_back("ms"))
    scale = 1e-3;
  else if (number.consume_back("us"))
    scale = 1e-6;
  else if (number.consume_back("s"))
    scale = 1.0;
  double value;
  if (number.getAsDouble(value) || !std::isfinite(value) || value <= 0)
    return failure(fmt::format("--{}={}: expected a positive duration like 2ms",
                               what.str(), text.str()));
  // Beyond a day a duration is a typo, and chrono arithmetic would overflow.
  if (value * scale > kMaxDurationSeconds)
    return failure(fmt::format("--{}={}: above the limit of {} s", what.str(),
                               text.str(), kMaxDurationSeconds));
  return value * scale;
}

llvm::Expected<double> stagecraft::runtime::parseBytes(llvm::StringRef text,
                                                       llvm::StringRef what) {
  double scale = 1.0;
  llvm::StringRef number = text;
  for (auto [suffix, factor] : {std::pair<char, double>{'K', 1024.0},
                                {'M', 1024.0 * 1024},
                                {'G', 1024.0 * 1024 * 1024},
                                {'T', 1024.0 * 1024 * 1024 * 1024}})
    if (number.consume_back(llvm::StringRef(&suffix, 1))) {
      scale = factor;
      break;
    }
  double value;
  if (number.getAsDouble(value) || !std::isfinite(value) || value <= 0)
    return failure(fmt::format("--{}={}: expected a positive size like 8G",
                               what.str(), text.str()));
  return value * scale;
}

llvm::Error stagecraft::runtime::checkTrainOptions(const TrainOptions &train) {
  if (train.steps < 1)
    return failure("--steps must be at least 1");
  float lr = train.optimizer.lr;
  if (!std::isfinite(lr) || lr < 0.0f)
    return failure(fmt::format("--lr={} must be a finite number >= 0", lr));
  return train.model.validate();
}

std::string stagecraft::runtime::mpirunCommand(int ranks,
                                               llvm::StringRef command) {
  // Open MPI refuses root without --allow-run-as-root, and more processes
  // than cores without --oversubscribe (which costs nothing otherwise).
  return fmt::format("mpirun {}--oversubscribe -np {} {}",
                     geteuid() == 0 ? "--allow-run-as-root " : "", ranks,
                     command.str());
}

std::string stagecraft::runtime::processCountError(int ranks, int size,
                                                   llvm::StringRef command) {
  return fmt::format(
      "the plan has {} ranks but {} MPI {} run it; "
      "launch with: {}",
      ranks, size, size == 1 ? "process" : "processes",
      mpirunCommand(ranks, command.empty()
                               ? llvm::StringRef("stagecraft-run ...")
                               : command));
}

std::string stagecraft::runtime::quoteCommandLine(int argc,
                                                  const char *const *argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    bool plain =
        !arg.empty() &&
        arg.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789_@%+=:,./-") == llvm::StringRef::npos;
    if (!out.empty())
      out += ' ';
    if (plain) {
      out += arg.str();
      continue;
    }
    out += '\'';
    for (char c : arg)
      out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}
