//===- HelixModel.h - The reference model cut at attention ------*- C++ -*-===//
//
// The same transformer as Model.h, cut as HelixPipe cuts it: parameter block
// j holds the post-attention part of layer j - 1 (output projection,
// residual, RMSNorm, MLP, residual) and the pre-attention part of layer j
// (RMSNorm, QKV projection); block 0 adds the embedding, block L the final
// norm, head and loss. Core attention of layer j is a separate,
// parameter-free piece. Parameters carry the same names and seeds as in
// Model.h, so a helix run and the layer-wise reference train the same model.
// Each piece has F, I and W (attention has no W).
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_HELIXMODEL_H
#define STAGECRAFT_KERNELS_HELIXMODEL_H

#include "kernels/Model.h"

namespace stagecraft::kernels {

class HelixBlock : public StageModel {
public:
  /// Block \p index of the \p layers + 1 blocks of a \p layers-layer model.
  /// Where \p recompute(mb) holds, the forward of microbatch mb keeps only
  /// its inputs and the backward computes the forward again first
  /// (HelixPipe's recomputation; attention is a separate piece and is never
  /// recomputed). Unset: nothing recomputes.
  HelixBlock(const ModelConfig &config, int index, int layers,
             std::function<bool(int mb)> recompute = nullptr);
  ~HelixBlock() override;
  HelixBlock(HelixBlock &&) noexcept;

  void setStep(int step) override;
  void setDataOffset(int first) override;
  std::vector<Parameter> &parameters() override;
  double loss(int mb) const override;

  /// F: \p residual and \p attention are layer index - 1's residual stream
  /// and attention output (null on block 0); writes the residual stream and
  /// Q, K, V of layer index (unless the last block).
  void forward(int mb, const float *residual, const float *attention,
               float *residualOut, float *qkvOut);
  /// I: from the gradients of the residual stream and of Q, K, V (null on the
  /// last block) to those of the inputs (unless block 0).
  void backwardInput(int mb, const float *residualGrad, const float *qkvGrad,
                     float *residualInGrad, float *attentionInGrad);
  void backwardWeight(int mb);

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

/// Core attention of one layer: Q, K, V (tokens x 3H) to its output.
class HelixAttention {
public:
  explicit HelixAttention(const ModelConfig &config) : config(config) {}
  void forward(int mb, const float *qkv, float *out);
  void backward(int mb, const float *outGrad, float *qkvGrad);

private:
  ModelConfig config;
  struct Kept {
    std::vector<float> qkv, probs;
  };
  std::map<int, Kept> kept;
};

} // namespace stagecraft::kernels

#endif // STAGECRAFT_KERNELS_HELIXMODEL_H
