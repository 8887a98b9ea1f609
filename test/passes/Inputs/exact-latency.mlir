// Uniform half stages with latency 0.1 on 4 ranks, 8 microbatches.
pipe.pipeline @lat ranks(4) microbatches(8) latency(0.1) {
  pipe.stage @s0 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s1 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s2 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s3 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s4 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s5 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s6 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s7 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 0.5, weight_grad = 0.25)
}
