// RUN: stagecraft-opt %s -split-input-file -verify-diagnostics --pipe-partition=stages=3

// Tests the errors of --pipe-partition: more stages than layers, a rank
// whose memory holds no layer (naming the stage and what the smallest slice
// needs), and a cut that fits only with recomputation (a remark).

// expected-error @below {{cannot cut pipeline @p's 2 layers into 3 stages: each stage needs at least one layer}}
pipe.pipeline @p ranks(3) microbatches(2) {
  pipe.layer @l count(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// expected-error @below {{cannot cut pipeline @p into 3 stages within the ranks' memory: stage 2 (rank 2) cannot fit even one layer: the smallest it can hold, layer 2 (@l), needs 3 (params plus 1 forwards' activations), above its 2}}
pipe.pipeline @p ranks(3) microbatches(4) devices(@big x 2, @small) {
  pipe.device @big memory(100.0)
  pipe.device @small memory(2.0)
  pipe.layer @l count(6) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) params(2.0)
}

// -----

// 1F1B keeps 3 forwards in flight on rank 0 (needs 2 + 3 = 5 per layer):
// only with one per stage (3 per layer) does a cut fit.
// expected-remark @below {{no cut keeps 1F1B's in-flight activations within the capacities}}
pipe.pipeline @p ranks(3) microbatches(4) capacity(4.0) {
  pipe.layer @l count(3) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) params(2.0)
}
