// examples/train.mlir inside 2-way data parallelism (its plan carries each
// stage's reduction).
pipe.pipeline @train ranks(2) microbatches(4) data_parallel(degree = 2, latency = 0.01, bandwidth = 1.0e6) {
  pipe.stage @s0 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(1.0e5)
  pipe.stage @s1 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(1.0e5)
  pipe.stage @s2 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(1.0e5)
  pipe.stage @s3 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) gradient(1.0e5)
}
