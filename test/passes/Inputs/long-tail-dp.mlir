pipe.pipeline @tail ranks(4) microbatches(8) lengths(512, 512, 8192, 512, 1024, 512, 2048, 512) reference_length(1024) latency(0.02) data_parallel(degree = 8, latency = 0.01, bandwidth = 10.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5) gradient(20.0)
  pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5) gradient(20.0)
  pipe.stage @s2 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5) gradient(20.0)
  pipe.stage @s3 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 0.5) gradient(20.0)
}
