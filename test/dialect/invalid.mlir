// RUN: stagecraft-opt %s -split-input-file -verify-diagnostics

// Tests that ranks must be at least 1.
// expected-error @below {{'pipe.pipeline' op attribute 'ranks' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
pipe.pipeline @p ranks(0) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that microbatches must be at least 1.
// expected-error @below {{'pipe.pipeline' op attribute 'microbatches' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
pipe.pipeline @p ranks(1) microbatches(-2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that latency must be non-negative.
// expected-error @below {{'pipe.pipeline' op latency must be finite and non-negative, got -1.0}}
pipe.pipeline @p ranks(1) microbatches(1) latency(-1.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that stage symbols are unique.
pipe.pipeline @p ranks(2) microbatches(1) {
  // expected-note @below {{see existing symbol definition here}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{redefinition of symbol named 's0'}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that costs must be non-negative.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op cost 'backward_input' must be finite and non-negative, got -0.5}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = -0.5, backward_weight = 1.0)
}

// -----

// Tests that costs must be finite.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op cost 'forward' must be finite and non-negative, got inf}}
  pipe.stage @s0 cost(forward = inf, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that NaN costs are rejected.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op cost 'backward_weight' must be finite and non-negative, got nan}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = nan)
}

// -----

// Tests that memory must be non-negative.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op memory 'activation' must be finite and non-negative, got -1.0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = -1.0, weight_grad = 0.0)
}

// -----

// Tests that a non-finite memory given as a hexadecimal bit pattern is rejected.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op memory 'weight_grad' must be finite and non-negative, got inf}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0x7FF0000000000000 : f64)
}

// -----

// Tests that weight_grad cannot exceed activation.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op memory 'weight_grad' (2.0) exceeds 'activation' (1.0)}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 2.0)
}

// -----

// Tests that a pinned rank must exist.
pipe.pipeline @p ranks(4) microbatches(1) {
  pipe.stage @s0 rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 rank(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 rank(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.stage' op rank(7) is out of range: pipeline @p has 4 ranks}}
  pipe.stage @s3 rank(7) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a negative pinned rank is rejected.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op rank(-1) is out of range: pipeline @p has 1 ranks}}
  pipe.stage @s0 rank(-1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that pins leave no rank empty.
// expected-error @below {{'pipe.pipeline' op rank 1 hosts no stage}}
pipe.pipeline @p ranks(3) microbatches(1) {
  pipe.stage @s0 rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 rank(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 rank(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that fewer stages than ranks leave a rank empty.
// expected-error @below {{'pipe.pipeline' op 3 stages cannot occupy 4 ranks: some rank would host no stage}}
pipe.pipeline @p ranks(4) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a pipeline needs stages.
// expected-error @below {{'pipe.pipeline' op pipeline has no stages}}
pipe.pipeline @p ranks(1) microbatches(1) {
}

// -----

// Tests that pins go on every stage or none.
pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.stage' op has no rank(K) while @s0 is pinned: pin every stage or none}}
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests an unknown cost name.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{unknown cost 'backward'; expected one of: forward, backward_input, backward_weight, forward_backward}}
  pipe.stage @s0 cost(forward = 1.0, backward = 1.0, backward_weight = 1.0)
}

// -----

// Tests a missing cost.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{cost(...) needs 'backward_weight'}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0)
}

// -----

// Tests a repeated memory entry.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'activation' appears twice in memory(...)}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, activation = 2.0)
}

// -----

// Tests that a schedule must name an existing pipeline.
// expected-error @below {{'pipe.schedule' op refers to unknown pipeline @missing}}
pipe.schedule @s for @missing {
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests that an action must name a stage of the pipeline.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    // expected-error @below {{'pipe.backward' op refers to unknown stage @s9 of pipeline @p}}
    pipe.backward @s9 mb 0
  }
  pipe.rank 1 stages [@s1] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests that a rank must list stages of the pipeline.
pipe.schedule @sched for @p {
  // expected-error @below {{'pipe.rank' op lists unknown stage @s7 of pipeline @p}}
  pipe.rank 0 stages [@s0, @s7] {
  }
  pipe.rank 1 stages [@s1] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests an action on a rank that does not host its stage.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    // expected-error @below {{'pipe.schedule' op forward @s1 mb 0 is on rank 0, but @s1 is hosted by rank 1}}
    pipe.forward @s1 mb 0
    pipe.backward @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    pipe.backward @s1 mb 0
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a duplicated action, with a note at the first one.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    // expected-note @below {{first occurrence here}}
    pipe.forward @s0 mb 0
    pipe.backward @s0 mb 0
    // expected-error @below {{'pipe.schedule' op duplicate forward @s0 mb 0}}
    pipe.forward @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests missing actions.
// expected-error @below {{'pipe.schedule' op missing forward @s0 mb 1 (and 3 more actions)}}
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.backward @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
  }
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a split backward missing its weight half.
// expected-error @below {{'pipe.schedule' op missing backward_weight @s0 mb 0}}
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.backward_input @s0 mb 0
  }
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a backward both fused and split.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    // expected-note @below {{full backward here}}
    pipe.backward @s0 mb 0
    // expected-error @below {{'pipe.schedule' op backward_input @s0 mb 0 splits a backward that backward @s0 mb 0 already runs in full}}
    pipe.backward_input @s0 mb 0
  }
}

// -----

pipe.pipeline @p ranks(1) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a microbatch out of range.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    // expected-error @below {{'pipe.schedule' op forward @s0 mb 2: microbatch 2 is out of range, pipeline @p has 2 microbatches}}
    pipe.forward @s0 mb 2
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a rank out of range.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0, @s1] {
  }
  // expected-error @below {{'pipe.rank' op rank 2 is out of range: pipeline @p has 2 ranks}}
  pipe.rank 2 stages [] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a missing rank.
// expected-error @below {{'pipe.schedule' op has no pipe.rank 1 (pipeline @p has 2 ranks)}}
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0, @s1] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a rank listed twice.
pipe.schedule @sched for @p {
  // expected-note @below {{first occurrence here}}
  pipe.rank 0 stages [@s0] {
  }
  // expected-error @below {{'pipe.rank' op rank 0 appears twice}}
  pipe.rank 0 stages [@s1] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a stage hosted by two ranks.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0, @s1] {
  }
  // expected-error @below {{'pipe.rank' op lists stage @s1, which rank 0 already hosts}}
  pipe.rank 1 stages [@s1] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a stage hosted by no rank.
// expected-error @below {{'pipe.schedule' op hosts stage @s1 on no rank}}
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
  }
  pipe.rank 1 stages [] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 rank(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 rank(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a schedule that moves a pinned stage.
pipe.schedule @sched for @p {
  // expected-error @below {{'pipe.rank' op lists stage @s0, which the pipeline pins to rank 1}}
  pipe.rank 0 stages [@s0] {
  }
  pipe.rank 1 stages [@s1] {
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests an overlapped action whose backward half is on another rank.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    // expected-error @below {{'pipe.schedule' op forward_backward @s0 mb 0, @s1 mb 0 is on rank 0, but @s1 is hosted by rank 1}}
    pipe.forward_backward @s0 mb 0, @s1 mb 0
  }
  pipe.rank 1 stages [@s1] {
  }
}

// -----

pipe.pipeline @p ranks(1) microbatches(2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests an overlapped action repeating a forward.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    // expected-note @below {{first occurrence here}}
    pipe.forward @s0 mb 1
    pipe.forward @s0 mb 0
    // expected-error @below {{'pipe.schedule' op duplicate forward @s0 mb 1}}
    pipe.forward_backward @s0 mb 1, @s0 mb 0
  }
}

// -----

// Tests that the overlapped cost must be finite and non-negative.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op cost 'forward_backward' must be finite and non-negative, got -1.0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, forward_backward = -1.0)
}

// -----

// Tests that attention costs must be non-negative.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op attention 'backward' must be finite and non-negative, got -2.0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) attention(forward = 1.0, backward = -2.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that attention needs a following stage.
// expected-error @below {{'pipe.pipeline' op stage @s1: attention after the last stage has no stage to feed}}
pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) attention(forward = 1.0, backward = 1.0)
}

// -----

// Tests that attention(...) needs its costs.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{attention(...) needs 'backward'}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) attention(forward = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests an attention action on a stage without attention.
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0, @s1] {
    pipe.forward @s0 mb 0
    // expected-error @below {{'pipe.schedule' op attention_forward @s0 mb 0: @s0 has no attention(...) to run}}
    pipe.attention_forward @s0 mb 0
  }
}

// -----

pipe.pipeline @p ranks(2) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) attention(forward = 1.0, backward = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// Tests a missing attention backward (attention may run on any rank).
// expected-error @below {{'pipe.schedule' op missing attention_backward @s0 mb 0}}
pipe.schedule @sched for @p {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.backward @s0 mb 0
  }
  pipe.rank 1 stages [@s1] {
    pipe.attention_forward @s0 mb 0
    pipe.forward @s1 mb 0
    pipe.backward @s1 mb 0
  }
}

// -----

// Tests that finite costs whose step overflows are refused, naming the
// largest (1e308 used to give makespan = inf and bubble_ratio = nan).
// expected-error @below {{'pipe.pipeline' op the step's time overflows: 4 microbatches x the costs of 2 stages sum to inf (largest: stage @s0's forward = 1e+308)}}
pipe.pipeline @p ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0e308, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that activations whose sum overflows are refused.
// expected-error @below {{'pipe.pipeline' op the step's memory overflows: 4 microbatches x the activations of 2 stages sum to inf}}
pipe.pipeline @p ranks(2) microbatches(4) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0e308, weight_grad = 0.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that counts beyond the scheduler's int are refused (they used to
// wrap to a negative microbatch count).
// expected-error @below {{'pipe.pipeline' op ranks(2) and microbatches(3000000000) must each be at most 2147483647}}
pipe.pipeline @p ranks(2) microbatches(3000000000) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that capacity must be positive.
// expected-error @below {{'pipe.pipeline' op capacity must be finite and positive, got 0.0}}
pipe.pipeline @p ranks(1) microbatches(1) capacity(0.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that capacity is given once.
pipe.pipeline @p ranks(1) microbatches(1) capacity(2.0)
// expected-error @below {{capacity(...) appears twice}}
    capacity(3.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that params are non-negative.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op params must be finite and non-negative, got -1.0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) params(-1.0)
}

// -----

// Tests that selective recomputation needs its cost too.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op selective recomputation needs both memory(selective = S) and cost(selective = C); only the memory is given}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 2.0, selective = 1.0)
}

// -----

// Tests that a forward cannot keep more than it makes.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op memory 'selective' (3.0) exceeds 'activation' (2.0): a forward cannot keep more than it makes}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0, selective = 0.5) memory(activation = 2.0, selective = 3.0)
}

// -----

// Tests that params(...) is given once.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{params(...) appears twice}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) params(1.0) params(2.0)
}

// -----

// Tests that a pipeline holds stages or layers, not both.
pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  // expected-error @below {{'pipe.layer' op cannot share a pipeline with pipe.stage ops: a pipeline holds stages or layers (cut into stages by --pipe-partition)}}
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that devices(...) names declared devices.
// expected-error @below {{'pipe.pipeline' op devices(...) names @gpu, which is not a pipe.device of this pipeline}}
pipe.pipeline @p ranks(1) microbatches(1) devices(@gpu) {
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that devices(...) assigns every rank.
// expected-error @below {{devices(...) assigns 2 ranks; the pipeline has 3}}
pipe.pipeline @p ranks(3) microbatches(1) devices(@gpu x 2) {
  pipe.device @gpu
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that devices(...) assigns no more ranks than there are.
// expected-error @below {{devices(...) assigns more than the pipeline's 2 ranks}}
pipe.pipeline @p ranks(2) microbatches(1) devices(@gpu, @gpu x 2) {
  pipe.device @gpu
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a device's speed is positive.
pipe.pipeline @p ranks(1) microbatches(1) devices(@gpu) {
  // expected-error @below {{'pipe.device' op speed must be finite and positive, got 0.0}}
  pipe.device @gpu speed(0.0)
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a device's memory is positive and finite.
pipe.pipeline @p ranks(1) microbatches(1) devices(@gpu) {
  // expected-error @below {{'pipe.device' op memory must be finite and positive, got inf}}
  pipe.device @gpu memory(inf)
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a layer's count is at least 1.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.layer' op attribute 'count' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  pipe.layer @l count(0) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a layer's costs are all given.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{cost(...) needs 'backward_weight'}}
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0)
}

// -----

// Tests that a layer's params are non-negative.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.layer' op params must be finite and non-negative, got -1.0}}
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) params(-1.0)
}

// -----

// Tests that output(...) appears once.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{output(...) appears twice}}
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(1.0) output(2.0)
}

// -----

// Tests that links(...) and latency(X) are not both given.
// expected-error @below {{'pipe.pipeline' op latency(X) and links(...) both give transfer times; keep one}}
pipe.pipeline @p ranks(2) microbatches(1) latency(1.0) links(node = 1, intra = (latency = 0.0, bandwidth = 1.0), inter = (latency = 0.0, bandwidth = 1.0)) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a link's bandwidth is positive.
// expected-error @below {{'pipe.pipeline' op links: inter bandwidth must be finite and positive, got 0.0}}
pipe.pipeline @p ranks(2) microbatches(1) links(node = 1, intra = (latency = 0.0, bandwidth = 1.0), inter = (latency = 0.0, bandwidth = 0.0)) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that links(...) gives every part.
// expected-error @below {{links(...) needs node = N, intra = (latency = L, bandwidth = B) and inter = (latency = L, bandwidth = B)}}
pipe.pipeline @p ranks(2) microbatches(1) links(node = 1, intra = (latency = 0.0, bandwidth = 1.0)) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that links(...) entries are known.
// expected-error @below {{unknown links entry 'nodes'; expected one of: node, intra, inter}}
pipe.pipeline @p ranks(2) microbatches(1) links(nodes = 1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that a stage's output is non-negative.
pipe.pipeline @p ranks(1) microbatches(1) {
  // expected-error @below {{'pipe.stage' op output must be finite and non-negative, got -2.0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) output(-2.0)
}
