// The reference transformer in eight one-layer stages on four ranks, its
// eight microbatches of different lengths (a long tail: most short, one
// four times the reference), for training on unequal lengths: each
// microbatch runs at its own sequence length, and each stage's cost grows
// with the length and its square (attention).
pipe.pipeline @train ranks(4) microbatches(8) lengths(8, 12, 32, 8, 16, 4, 24, 8) reference_length(8) {
  pipe.stage @s0 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
  pipe.stage @s1 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
  pipe.stage @s2 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
  pipe.stage @s3 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
  pipe.stage @s4 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
  pipe.stage @s5 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
  pipe.stage @s6 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
  pipe.stage @s7 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = 0.05)
}
