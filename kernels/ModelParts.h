//===- ModelParts.h - The pieces of the reference model ----------*- C++
//-*-===//
//
// What the layer-wise stages (Model.cpp) and the blocks cut at the attention
// boundary (HelixModel.cpp) are made of: token + position embedding; the
// two halves of a layer around its core attention (RMSNorm + QKV
// projection before it; output projection + residual, RMSNorm and GELU MLP
// + residual after it); final RMSNorm, LM head and cross-entropy. Each has
// F, I and W as separate calls. Internal to kernels/.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_KERNELS_MODELPARTS_H
#define STAGECRAFT_KERNELS_MODELPARTS_H

#include "kernels/Model.h"

#include <vector>

namespace stagecraft::kernels::parts {

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

/// The parameters of one layer.
struct LayerParams {
  Parameter *g1 = nullptr, *wqkv = nullptr, *wo = nullptr, *g2 = nullptr,
            *w1 = nullptr, *w2 = nullptr;
};

/// What the pre-attention half keeps: its input x, the norm, and the
/// gradients W needs.
struct PreStash {
  std::vector<float> x, xhat1, inv1, h1, dqkv, dh1;
};

/// What the post-attention half keeps besides its inputs (the residual and
/// the attention output, kept by the caller).
struct PostStash {
  std::vector<float> x1, xhat2, inv2, h2, u, act, dy1, dh2, du, dy2;
};

/// qkv (tokens x 3 hidden) = RMSNorm(x) Wqkv; keeps x.
void preForward(const ModelConfig &c, const LayerParams &w, PreStash &s,
                const float *x, float *qkv);
/// dx += the input gradient given \p dqkv (kept for W).
void preBackwardInput(const ModelConfig &c, const LayerParams &w, PreStash &s,
                      const float *dqkv, float *dx);
void preBackwardWeight(const ModelConfig &c, const LayerParams &w,
                       const PreStash &s);

/// out = x1 + GELU(RMSNorm(x1) W1) W2 with x1 = residual + attn Wo.
void postForward(const ModelConfig &c, const LayerParams &w, PostStash &s,
                 const float *residual, const float *attn, float *out);
/// Given dout: the gradients of the residual (dResidual) and of the
/// attention output (dAttn), both overwritten.
void postBackwardInput(const ModelConfig &c, const LayerParams &w, PostStash &s,
                       const float *dout, float *dResidual, float *dAttn);
/// \p attn is the attention output the forward read.
void postBackwardWeight(const ModelConfig &c, const LayerParams &w,
                        const PostStash &s, const float *attn);

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

} // namespace stagecraft::kernels::parts

#endif // STAGECRAFT_KERNELS_MODELPARTS_H
