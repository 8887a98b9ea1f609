// examples/train.mlir with twice the microbatches: the whole batch of two
// replicas of examples/train.mlir, for the data-parallel tests.
pipe.pipeline @train ranks(2) microbatches(8) {
  pipe.stage @s0 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s1 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s2 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @s3 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
