// The zero-bubble paper's costs on 4 ranks, 8 microbatches and 8 half
// stages: the exact search does not finish here in a fraction of a second.
pipe.pipeline @open ranks(4) microbatches(8) latency(0.0324) {
  pipe.stage @s0 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s1 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s2 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s3 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s4 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s5 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s6 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
  pipe.stage @s7 cost(forward = 0.5, backward_input = 0.48825, backward_weight = 0.25205) memory(activation = 0.5, weight_grad = 0.25)
}
