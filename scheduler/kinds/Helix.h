//===- Helix.h - HelixPipe attention-parallel schedules ---------*- C++ -*-===//
//
// HelixPipe (Geng et al., 2025) as a task graph: every transformer layer is
// cut at the attention boundary. Parameter block j (post-attention part of
// layer j - 1 and pre-attention part of layer j; block 0 adds the embedding,
// block L the head and loss) lives on rank j mod p; core attention of layer j
// is a parameter-free task that microbatch offset d of its group runs on rank
// (j mod p + d + 1) mod p, so the p attentions of a layer run on p ranks at
// once. Microbatches go in groups of p; `folds` groups interleave layer by
// layer so that one group's transfers overlap another's compute. All
// forwards run first, then the backwards in exact reverse order. With
// recomputation, blocks keep only their input and recompute their forward
// before the backward; attention keeps its output and is never recomputed.
//
// `helixTaskGraph` models the transfers by their bytes (for the benchmark);
// `generateHelix` makes a `pipe` schedule with attention actions, which the
// verifier, simulator, communication lowering and runtime handle.
//
//===----------------------------------------------------------------------===//

#ifndef STAGECRAFT_SCHEDULER_KINDS_HELIX_H
#define STAGECRAFT_SCHEDULER_KINDS_HELIX_H

#include "scheduler/model/Simulator.h"

namespace stagecraft::pipe::sched {

/// A decoder-only transformer and the hardware it runs on.
struct TransformerShape {
  int layers = 32;
  int hidden = 4096;
  int heads = 32;
  int sequence = 8192;
  /// Sequences per microbatch.
  int batch = 1;
  int vocab = 32000;
  /// Sustained FLOP/s of one device.
  double flops = 4e14;
  /// Bytes per activation element (bf16: 2).
  int elementBytes = 2;
};

/// Per layer and microbatch: seconds of compute and bytes kept or moved.
struct LayerCosts {
  double blockForward, blockBackward;         // linear part of a layer
  double headForward, headBackward;           // LM head + loss
  double attentionForward, attentionBackward; // causal core attention
  double hiddenBytes;                         // one hidden state (b x S x h)
  double qkvBytes;                            // Q, K and V
  /// Activations a layer keeps for its backward without recomputation
  /// (FlashAttention: no S^2 term; Korthikanti et al.'s 34 b S h bytes).
  double storedBytes;
  /// What HelixPipe keeps: a block its input, attention its output + LSE.
  double blockInputBytes, attentionKeptBytes;
  /// The MLP's 4h-wide intermediate (its input to GELU and the GELU
  /// output, 16 b S h bytes): what chunking the MLP shrinks.
  double mlpIntermediateBytes;
  /// Weights, gradients and Adam state of one layer (16 bytes per
  /// parameter, 12 h^2 parameters) and of the embedding or the head.
  double layerParamBytes, embeddingParamBytes;
};

/// Costs from FLOP counts: linear 24 b S h^2 per layer forward, causal
/// attention 2 b S^2 h forward, backwards twice their forwards.
LayerCosts layerCosts(const TransformerShape &shape);

/// Per-GPU costs of \p c with \p tensor-way tensor + sequence parallelism
/// inside a pipeline rank: compute, activations, messages and parameters
/// divided by \p tensor, plus the collectives (per layer, 2 all-gathers and
/// 2 reduce-scatters of one hidden state each way, each moving
/// (tensor - 1) / tensor of it) at \p bandwidth bytes/s on the linear parts.
LayerCosts tensorParallelCosts(const LayerCosts &c, int tensor,
                               double bandwidth);

struct Link {
  double latency = 1e-5;   // seconds
  double bandwidth = 1e11; // bytes per second
  double transfer(double bytes) const { return latency + bytes / bandwidth; }
};

struct HelixOptions {
  int folds = 2;
  bool recompute = true;
  /// With recomputation, the MLP runs in this many chunks of the sequence
  /// during the re-run and backward, so only 1/chunks of its intermediate
  /// is live at once (HelixPipe's chunked MLP).
  int mlpChunks = 1;
};

/// What a block of HelixPipe re-materializes during its backward when it
/// recomputes: the linear part of a layer's activation (what attention
/// keeps is not re-derived), with the MLP intermediate in \p mlpChunks
/// chunks.
double helixRematerializedBytes(const LayerCosts &costs, int mlpChunks);

/// The HelixPipe task graph for \p ranks and \p microbatches. Fails when the
/// layers are not a multiple of the ranks (naming both), as block ownership
/// k p + r requires. Microbatches need not divide p x folds: the last group
/// is shorter.
llvm::Expected<TaskGraph> helixTaskGraph(const TransformerShape &shape,
                                         const LayerCosts &costs,
                                         const Link &link, int ranks,
                                         int microbatches,
                                         const HelixOptions &options);

/// The pipeline problem for the usual kinds on the same model: \p stages
/// stages of layers / stages layers (attention inside them), split backward
/// I = attention backward + half the linear backward, W = the other half;
/// memory in bytes; latency one hidden-state transfer. Full recomputation
/// keeps each layer's input; selective recomputation re-derives the
/// attention output (keeps all but it, re-runs the attention forward);
/// params are the layers' (and the embedding's or head's) weight and
/// optimizer bytes.
llvm::Expected<Problem> layerPipelineProblem(const TransformerShape &shape,
                                             const LayerCosts &costs,
                                             const Link &link, int ranks,
                                             int stages, int microbatches);

/// HelixPipe on a `pipe` problem: stage j is parameter block j on rank
/// j mod p, every stage but the last is followed by its `attention`, which
/// microbatch offset d of a group runs on rank (j mod p + d + 1) mod p; B is
/// the full backward, with the stage's forward recomputed when \p recompute.
/// Any layer and microbatch count works (the last group may be shorter).
llvm::Expected<Schedule> generateHelix(const Problem &problem, int folds,
                                       bool recompute);

} // namespace stagecraft::pipe::sched

#endif // STAGECRAFT_SCHEDULER_KINDS_HELIX_H
