pipe.policy @zbp {
  "warmup ranks - rank - 1"
  "steady F I"
  "rule W when in_flight > 0"
  "cap ranks"
  "requires chunks == 1"
}

pipe.pipeline @p ranks(3) microbatches(5) latency(0.1) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.2, backward_weight = 0.7) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s2 cost(forward = 1.5, backward_input = 1.5, backward_weight = 1.5) memory(activation = 1.0, weight_grad = 0.5)
}
