//===- Model.h - Reference transformer stages with split backward -*- C++
//-*-===//
//
// A small decoder-only transformer in fp32, cut into pipeline stages by layer
// counts: token + position embedding on the first stage, blocks of RMSNorm,
// causal multi-head self-attention and a GELU MLP with residuals, and a final
// RMSNorm, LM head and cross-entropy on the last. Every piece has a forward,
// a backward for its input (I) and a backward for its weights (W) that run as
// separate calls: I stashes the output gradients that W needs, so zero-bubble
// schedules can defer W. GEMMs go through OpenBLAS. Parameters are seeded per
// global layer, so any split into stages computes the same model, and the
// data is synthetic and seeded per (step, microbatch).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_MODEL_H
#define STAGECRAFT_KERNELS_MODEL_H

#include "llvm/Support/Error.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace stagecraft::kernels {

struct ModelConfig {
  int hidden = 32;
  int heads = 4;
  int sequence = 16;
  int vocab = 64;
  /// Sequences per microbatch.
  int batch = 2;
  /// Microbatches per step (the loss is their mean).
  int microbatches = 1;
  uint64_t seed = 1;
  /// Microbatches of different lengths (the spec's lengths(...)), by their
  /// position in the plan: each one's sequence length, at most `sequence`
  /// (the longest, which sizes messages and the position table); empty:
  /// every microbatch `sequence` long.
  std::vector<int> lengths;
  /// The microbatch whose data each position computes (auto's microbatch
  /// order); empty: its own.
  std::vector<int> order;
  /// The data of this replica's first microbatch under data parallelism
  /// (replica k of a step's N x m microbatches starts at k x m); 0 alone.
  int dataOffset = 0;
  /// Prepended to every parameter name (a branch of a branching model:
  /// its parameters apart from the trunk's).
  std::string prefix;

  int tokens() const { return batch * sequence; }
  /// The shape microbatch \p mb computes: `sequence` is its length.
  ModelConfig forMicrobatch(int mb) const {
    ModelConfig c = *this;
    if (mb >= 0 && mb < static_cast<int>(lengths.size()))
      c.sequence = lengths[mb];
    return c;
  }
  /// The data microbatch position \p mb computes (its seed).
  int dataIndex(int mb) const {
    return dataOffset +
           (mb >= 0 && mb < static_cast<int>(order.size()) ? order[mb] : mb);
  }
  int ffn() const { return 4 * hidden; }
  /// Bytes of one activation or gradient message (tokens x hidden floats).
  int64_t messageBytes() const {
    return static_cast<int64_t>(tokens()) * hidden * 4;
  }
  /// Fails naming the size that is out of range, including any tensor of
  /// 2^31 elements or more (kernels index with int).
  llvm::Error validate() const;
  /// Bytes the reference model needs for \p layers layers with \p inFlight
  /// microbatches stashed at once: parameters with gradient and AdamW state,
  /// per-layer stashes and logits. An estimate to refuse hopeless requests
  /// before allocating, not an exact count.
  double estimateBytes(int layers, int inFlight) const;

  static constexpr double kMaxTensorElements = 2147483647.0;
};

struct Parameter {
  std::string name;
  std::vector<float> value, grad, adamM, adamV;
};

struct OptimizerConfig {
  enum class Kind { SGD, AdamW } kind = Kind::SGD;
  float lr = 0.05f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weightDecay = 0.01f;
};

/// The parameter \p name ("embedding", "position", "final_norm", "head",
/// "layer<l>.<norm1|wqkv|wo|norm2|w1|w2>") as initialized for \p config:
/// seeded by name, so any split of the model starts from the same weights.
Parameter initialParameter(const ModelConfig &config, const std::string &name);

/// One optimizer update of the \p n elements at \p value from \p grad,
/// with AdamW's moments \p m and \p v (n each; unused by SGD) at AdamW step
/// \p adamStep (counted already): a slice of a parameter, as a shard of
/// data parallelism updates it, computes what the whole update would.
void updateSlice(float *value, const float *grad, float *m, float *v, size_t n,
                 const OptimizerConfig &optimizer, int adamStep);

/// One optimizer step over \p params; \p adamSteps counts AdamW's steps.
void optimizerStep(std::vector<Parameter> &params,
                   const OptimizerConfig &optimizer, int &adamSteps);

/// What the training loop needs of a piece of the model.
class StageModel {
public:
  virtual ~StageModel();
  virtual void setStep(int step) = 0;
  /// Data parallelism: the data of this piece's microbatch 0 is the step's
  /// microbatch \p first (ModelConfig::dataOffset).
  virtual void setDataOffset(int first) = 0;
  virtual std::vector<Parameter> &parameters() = 0;
  /// Cross-entropy of microbatch \p mb (the piece with the loss only).
  virtual double loss(int mb) const = 0;
  virtual void zeroGrad();
  virtual void step(const OptimizerConfig &optimizer);
  /// The first failure of the device the piece runs on, if any (host
  /// pieces never fail).
  virtual llvm::Error status() { return llvm::Error::success(); }

  /// AdamW steps taken so far (its bias correction), for checkpoints.
  int optimizerSteps() const { return adamSteps; }
  void setOptimizerSteps(int steps) { adamSteps = steps; }

private:
  int adamSteps = 0;
};

/// What the forward of a microbatch keeps for its backward (the schedule's
/// choice, sched::Recompute): everything; only its input, re-running the
/// forward before I (full); everything but the attention probabilities,
/// re-derived from Q, K and V before I (selective, Megatron's).
enum class Recompute : uint8_t { None, Full, Selective };

/// Bytes of activation one microbatch of a stage holds: what its forward
/// keeps without recomputation, what is left after I (what W needs), and
/// what the forward keeps under full and under selective recomputation.
/// Activations are the tensors a forward makes and keeps for the backward;
/// the output gradients I keeps for W are not counted.
struct ActivationBytes {
  double activation = 0, weightGrad = 0, recomputed = 0, selective = 0;
};
ActivationBytes activationBytes(const ModelConfig &config, int index,
                                int numStages, int layers);

/// Activation bytes held on one rank, and the most held at once: the stages
/// of a rank share one, so its peak is the rank's.
struct ActivationMeter {
  int64_t live = 0, peak = 0;
  void change(int64_t delta) {
    live += delta;
    peak = std::max(peak, live);
  }
};

/// A layer-wise stage: F, I and W on messages of tokens x hidden floats,
/// in the memory the stage computes in (host, or the device's).
class LayerStage : public StageModel {
public:
  /// Per microbatch, what its forward keeps (missing: None).
  void setRecompute(std::vector<Recompute> perMicrobatch) {
    recompute = std::move(perMicrobatch);
  }
  Recompute recomputeOf(int mb) const {
    return mb >= 0 && mb < static_cast<int>(recompute.size()) ? recompute[mb]
                                                              : Recompute::None;
  }
  /// Reports the activation bytes held to \p meter (null: none); stages
  /// that cannot count them leave it untouched and return false.
  virtual bool setMeter(ActivationMeter *meter) { return false; }
  /// F: \p input is the previous stage's output (tokens x hidden), null on
  /// the first stage; \p output is written unless this is the last stage.
  virtual void forward(int mb, const float *input, float *output) = 0;
  /// I: \p outputGrad is the next stage's input gradient, null on the last
  /// stage (the loss starts it); \p inputGrad is written unless first.
  virtual void backwardInput(int mb, const float *outputGrad,
                             float *inputGrad) = 0;
  /// W: accumulates this microbatch's weight gradients.
  virtual void backwardWeight(int mb) = 0;

private:
  std::vector<Recompute> recompute;
};

/// The reference: on the host, GEMMs through OpenBLAS.
class Stage : public LayerStage {
public:
  /// Stage \p index of \p numStages, holding global layers
  /// [firstLayer, firstLayer + layers).
  Stage(const ModelConfig &config, int index, int numStages, int firstLayer,
        int layers);
  ~Stage();
  Stage(Stage &&) noexcept;
  Stage &operator=(Stage &&) noexcept;

  /// The step whose data the first stage embeds.
  void setStep(int step) override;
  void setDataOffset(int first) override;
  void forward(int mb, const float *input, float *output) override;
  void backwardInput(int mb, const float *outputGrad,
                     float *inputGrad) override;
  void backwardWeight(int mb) override;
  /// Cross-entropy of microbatch \p mb (last stage, after its forward).
  double loss(int mb) const override;
  bool setMeter(ActivationMeter *meter) override;

  std::vector<Parameter> &parameters() override;

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

/// Makes layer-wise stages in some memory: the host's (the reference) or a
/// device's, with message buffers there and a way to wait for queued work.
struct StageFactory {
  std::function<llvm::Expected<std::unique_ptr<LayerStage>>(
      const ModelConfig &, int index, int numStages, int firstLayer,
      int layers)>
      make;
  /// A buffer of \p bytes where the stages read and write messages.
  std::function<float *(size_t bytes)> allocate;
  std::function<void(float *)> release;
  /// Waits for everything the stages have queued (nothing on the host).
  std::function<void()> synchronize;
  /// "host" or "cuda device N", for messages.
  std::string where;
};

/// The reference stages (kernels::Stage) on the host.
StageFactory hostStages();

/// A message buffer where a factory's stages compute, released with it.
using MessageBuffer = std::unique_ptr<float, std::function<void(float *)>>;
inline MessageBuffer allocateMessage(const StageFactory &where, size_t bytes) {
  return MessageBuffer(where.allocate(bytes), where.release);
}

/// The token and target of position \p t of microbatch \p mb in \p step.
int syntheticToken(const ModelConfig &config, int step, int mb, int t);
int syntheticTarget(const ModelConfig &config, int step, int mb, int t);

} // namespace stagecraft::kernels

#endif // STAGECRAFT_KERNELS_MODEL_H
