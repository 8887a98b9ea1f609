pipe.pipeline @open ranks(3) microbatches(4) latency(0.1) {
  pipe.stage @s0 cost(forward = 1.29, backward_input = 1.22, backward_weight = 1.01) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s1 cost(forward = 1.47, backward_input = 2.58, backward_weight = 0.33) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.72, backward_weight = 0.47) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s3 cost(forward = 0.83, backward_input = 1.45, backward_weight = 0.85) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s4 cost(forward = 0.6, backward_input = 0.98, backward_weight = 1.15) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @s5 cost(forward = 1.17, backward_input = 1.3, backward_weight = 1.01) memory(activation = 1.0, weight_grad = 0.5)
}
