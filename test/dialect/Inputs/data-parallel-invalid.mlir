// Bad data_parallel(...) clauses and gradient(X) values, each named at the op.

// expected-error @below {{data_parallel(...) needs 'degree'}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(latency = 1.0) {
}

// -----

// expected-error @below {{unknown data_parallel entry 'replicas'; expected one of: degree, sharding, shard_group, latency, bandwidth, inter_latency, inter_bandwidth, optimizer}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(replicas = 2) {
}

// -----

// expected-error @below {{'degree' appears twice in data_parallel(...)}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 2, degree = 4) {
}

// -----

// expected-error @below {{attribute 'dp_degree' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 0) {
}

// -----

// expected-error @below {{data_parallel: sharding 'zero3' is not one of none, full, hybrid}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 2, sharding = zero3) {
}

// -----

// expected-error @below {{data_parallel: shard_group is for sharding = hybrid (shard within groups, all-reduce across them); sharding is full}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 4, sharding = full, shard_group = 2) {
}

// -----

// expected-error @below {{data_parallel: sharding = hybrid needs shard_group = G (replicas a shard group)}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 4, sharding = hybrid) {
}

// -----

// expected-error @below {{data_parallel: shard_group = 3 must divide degree = 8 and lie strictly between 1 and it (1 is sharding = none, the degree is sharding = full)}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 8, sharding = hybrid, shard_group = 3) {
}

// -----

// expected-error @below {{data_parallel: inter_latency and inter_bandwidth are the link across hybrid's shard groups; sharding is none}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 8, inter_bandwidth = 2.0) {
}

// -----

// expected-error @below {{data_parallel: bandwidth must be finite and positive, got 0.0}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 8, bandwidth = 0.0) {
}

// -----

// expected-error @below {{data_parallel: latency must be finite and non-negative, got -1.0}}
pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 8, latency = -1.0) {
}

// -----

pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(1.0)
  // expected-error @below {{'pipe.stage' op needs gradient(X), the bytes of its gradient: pipeline @p has data_parallel(...)}}
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

pipe.pipeline @p ranks(2) microbatches(2) {
  // expected-error @below {{'pipe.stage' op gradient must be finite and non-negative, got -1.0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(-1.0)
}

// -----

pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 2) {
  pipe.layer @l0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(4.0)
  // expected-error @below {{'pipe.layer' op needs gradient(X), the bytes of one layer's gradient: pipeline @p has data_parallel(...)}}
  pipe.layer @l1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

pipe.pipeline @p ranks(2) microbatches(2) data_parallel(degree = 2) {
  // expected-error @below {{'pipe.layer' op gradient must be finite and non-negative, got -1.0}}
  pipe.layer @l cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(-1.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
// expected-error @below {{dp_placement: pipeline @p has no data_parallel(...)}}
pipe.schedule @x for @p attributes {dp_placement = "torch"} {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.backward @s0 mb 0
  }
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) data_parallel(degree = 2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(1.0)
}
// expected-error @below {{dp_placement 'megatron' is not one of torch, bucketed}}
pipe.schedule @x for @p attributes {dp_placement = "megatron"} {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.backward @s0 mb 0
  }
}

// -----

pipe.pipeline @p ranks(1) microbatches(1) data_parallel(degree = 2) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(1.0)
}
// expected-error @below {{dp_bucket is for dp_placement = "bucketed"}}
pipe.schedule @x for @p attributes {dp_placement = "torch", dp_bucket = 4.0} {
  pipe.rank 0 stages [@s0] {
    pipe.forward @s0 mb 0
    pipe.backward @s0 mb 0
  }
}
