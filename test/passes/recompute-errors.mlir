// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b recompute=none" -verify-diagnostics

// Tests recompute=none over the capacity: located at the pipeline, naming
// the rank, its peak and capacity, and saying that auto would fit.
// expected-error @below {{cannot schedule pipeline @p as 1f1b: with recompute=none, rank 0 peaks at 5 (params 1 + activations 4), above its capacity 4; recompute=auto fits (3 of 8 forwards recompute in full)}}
// expected-note @below {{drop recompute= (auto is the default with a capacity) or pass recompute=auto}}
pipe.pipeline @p ranks(2) microbatches(4) capacity(4.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.5) params(1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0) params(1.0)
}

// -----

// Tests recompute=none where nothing fits: what every forward recomputed
// would still need.
// expected-error @below {{cannot schedule pipeline @q as 1f1b: with recompute=none, rank 0 peaks at 5 (params 1 + activations 4), above its capacity 3; no recomputation fits: recomputing every forward, rank 0 still needs 3.5, 0.5 more than its capacity}}
pipe.pipeline @q ranks(2) microbatches(4) capacity(3.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.5) params(1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0) params(1.0)
}
