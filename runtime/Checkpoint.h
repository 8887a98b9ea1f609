//===- Checkpoint.h - Training checkpoints by global parameter --*- C++ -*-===//
//
// A checkpoint of `stagecraft-run --train` at a step boundary: every
// parameter's value and AdamW moments in a file named by the parameter's
// global name ("layer3.wqkv.value.bin"), so that any later split of the
// model into stages, any rank count and any schedule kind can load it; the
// step reached (which is also the data position: data is seeded per step)
// and AdamW's step count; and `manifest.json` (format, version, model
// sizes, optimizer, per-file size and CRC-32).
//
// Layout: DIR/step-00000004/. Each rank writes its stages' files and a
// `part-R.json` into DIR/step-00000004.tmp/ (every file fsynced); after a
// barrier, rank 0 checks the parts, writes the manifest, renames the folder
// into place and removes checkpoints older than the previous complete one.
// A folder without a valid manifest is not a checkpoint.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_RUNTIME_CHECKPOINT_H
#define STAGECRAFT_RUNTIME_CHECKPOINT_H

#include "kernels/Model.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stagecraft::runtime {

/// What a checkpoint must agree with to be loaded.
struct CheckpointModel {
  kernels::ModelConfig model;
  /// Transformer layers of the whole model.
  int layers = 0;
  kernels::OptimizerConfig::Kind optimizer =
      kernels::OptimizerConfig::Kind::SGD;
};

/// The temporary folder of step \p step's checkpoint in \p dir.
std::string checkpointTempDir(const std::string &dir, int step);

/// Writes \p models' parameters (values and AdamW moments) into
/// `checkpointTempDir(dir, step)` and `part-RANK.json` listing them.
/// \p losses: the step losses this rank knows (zeros unless it holds the
/// last stage), from step 0; the manifest keeps their sum over ranks.
llvm::Error writeCheckpointPart(
    const std::string &dir, int step, int rank,
    llvm::ArrayRef<std::pair<int, kernels::StageModel *>> models,
    llvm::ArrayRef<double> losses);

/// Rank 0, once every rank's part is written: checks that \p ranks parts are
/// there, writes the manifest, renames the folder to DIR/step-NNNNNNNN and
/// removes the checkpoints older than the previous complete one.
llvm::Error finishCheckpoint(const std::string &dir, int step, int ranks,
                             const CheckpointModel &expected);

/// Whether \p dir holds a checkpoint folder with its manifest (not yet
/// validated: `loadCheckpoint` does that).
bool hasCheckpoint(const std::string &dir);

struct Checkpoint {
  std::string path;
  int step = 0;
  int optimizerSteps = 0;
  /// The loss of every step before `step`.
  std::vector<double> losses;
  /// File name ("layer3.wqkv.value.bin") to its floats.
  std::map<std::string, std::vector<float>> files;
  /// Checkpoints that were newer but invalid, with why.
  std::vector<std::string> skipped;
};

/// The newest complete checkpoint in \p dir that validates against
/// \p expected (format, version, model sizes, optimizer, every file's size
/// and CRC-32). A newer one that fails is skipped with its reason (in
/// `skipped`); fails naming each one when none is valid, or when \p dir has
/// no checkpoint.
llvm::Expected<Checkpoint> loadCheckpoint(const std::string &dir,
                                          const CheckpointModel &expected);

/// Sets \p models' parameters and optimizer state from \p checkpoint. Fails
/// naming a parameter the checkpoint lacks or holds with another size.
llvm::Error
restoreCheckpoint(const Checkpoint &checkpoint,
                  llvm::ArrayRef<std::pair<int, kernels::StageModel *>> models);

} // namespace stagecraft::runtime

#endif // STAGECRAFT_RUNTIME_CHECKPOINT_H
