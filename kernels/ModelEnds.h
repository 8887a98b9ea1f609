//===- ModelEnds.h - The embedding and the head of the model ----*- C++ -*-===//
//
// The first and last pieces of the reference model, shared by the layer-wise
// stages (Model.cpp) and the blocks cut at the attention boundary
// (HelixModel.cpp): token + position embedding, and final RMSNorm, LM head
// and cross-entropy, each with F, I and W as separate calls. Internal to
// kernels/.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_MODELENDS_H
#define STAGECRAFT_KERNELS_MODELENDS_H

#include "kernels/Model.h"

#include <vector>

namespace stagecraft::kernels::ends {

/// What the embedding keeps for its weight gradient.
struct EmbedStash {
  std::vector<int> tokens;
  /// The gradient of the embedded sum, set by the backward input.
  std::vector<float> dEmbedded;
};

/// What the head keeps between F, I and W.
struct HeadStash {
  std::vector<float> xhatf, invf, hf, dlogits, dhf;
};

/// x (tokens x hidden) = embedding[token] + position[t mod sequence] of
/// microbatch \p mb in \p step.
void embedForward(const ModelConfig &c, int step, int mb,
                  const Parameter &embedding, const Parameter &position,
                  EmbedStash &stash, float *x);

/// Accumulates the embedding gradients from stash.dEmbedded.
void embedBackwardWeight(const ModelConfig &c, const EmbedStash &stash,
                         Parameter &embedding, Parameter &position);

/// Final norm, head and cross-entropy of \p x; returns the mean loss over
/// tokens and keeps the logit gradient, scaled by 1 / (tokens x
/// microbatches) since the step's loss is the mean over microbatches.
double headForward(const ModelConfig &c, int step, int mb, const Parameter &gf,
                   const Parameter &head, const float *x, HeadStash &stash);

/// dx = the input gradient of the head (overwritten).
void headBackwardInput(const ModelConfig &c, const Parameter &gf,
                       const Parameter &head, HeadStash &stash, float *dx);

/// Accumulates the head's and the final norm's weight gradients.
void headBackwardWeight(const ModelConfig &c, const HeadStash &stash,
                        Parameter &gf, Parameter &head);

} // namespace stagecraft::kernels::ends

#endif // STAGECRAFT_KERNELS_MODELENDS_H
