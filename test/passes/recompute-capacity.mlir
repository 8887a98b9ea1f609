// RUN: stagecraft-opt %s --split-input-file --pipe-schedule="kind=1f1b" --pipe-verify-schedule -verify-diagnostics

// Tests a capacity no recomputation meets (recompute=auto, the default with
// a capacity): one error at the pipeline with what would be needed.
// expected-error @below {{cannot schedule pipeline @p as 1f1b: nothing fits: even recomputing every forward, rank 0 peaks at 3.5 (params 1 + activations 2.5), above its capacity 3; it needs a capacity of at least 3.5 (0.5 more), fewer microbatches in flight (another kind) or less memory per stage}}
// expected-note @below {{raise capacity(X), give stages a smaller memory(recomputed = R) or selective option, or use kind=auto, which searches kinds with fewer microbatches in flight}}
pipe.pipeline @p ranks(2) microbatches(4) capacity(3.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0, recomputed = 0.5) params(1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, weight_grad = 1.0) params(1.0)
}

// -----

// Tests that a written schedule is held to the capacity too: the verifier
// names the rank and points at the capacity.
// expected-note @below {{capacity declared here}}
pipe.pipeline @h ranks(1) microbatches(2) capacity(3.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, recomputed = 0.5) params(0.5)
}
// expected-error @below {{'pipe.schedule' op rank 0 peaks at 4.5 (params 0.5 + activations 4), above its capacity 3 (1.5 more than fits)}}
pipe.schedule @h_hand for @h {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.forward @s0 mb 1
    pipe.backward @s0 mb 1
    pipe.backward @s0 mb 0
  }
}

// -----

// Tests that the same schedule fits once mb 0 recomputes: 0.5 + 0.5 + 2.
pipe.pipeline @h ranks(1) microbatches(2) capacity(3.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, recomputed = 0.5) params(0.5)
}
pipe.schedule @h_hand for @h {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0 recompute full
    pipe.forward @s0 mb 1
    pipe.backward @s0 mb 1
    pipe.backward @s0 mb 0
  }
}

// -----

// Tests that selective recomputation needs the stage to offer it.
pipe.pipeline @v ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
pipe.schedule @v_hand for @v {
  pipe.rank 0 stages [@s0] {
    // expected-error @below {{'pipe.schedule' op forward @s0 mb 0 recomputes selectively, but @s0 declares no selective recomputation (memory(selective = S) and cost(selective = C))}}
    pipe.forward @s0 mb 0 recompute selective
    pipe.backward @s0 mb 0
  }
}
