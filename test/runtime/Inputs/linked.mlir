pipe.pipeline @linked ranks(2) microbatches(4) devices(@fast x 1, @slow x 1) links(node = 1, intra = (latency = 0.0, bandwidth = 4.0), inter = (latency = 0.0, bandwidth = 1.0)) {
  pipe.device @fast speed(1.0) memory(40.0)
  pipe.device @slow speed(0.5)
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) output(2.0)
  pipe.stage @s1 cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5) memory(activation = 1.0) output(2.0)
}
