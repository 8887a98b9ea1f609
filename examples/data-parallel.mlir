// An 8B-like model's pipeline (4 ranks, 8 stages of 4 layers, the embedding
// on the first and the LM head on the last, 16 microbatches of 4096 tokens)
// inside 32-way data parallelism, in seconds and bytes: 400 TFLOP/s a GPU,
// bf16 gradients, 50 GB/s data-parallel links with 10 us a ring step, an
// optimizer step of 5 ps per gradient byte (docs/data-parallel.md).
//   stagecraft-opt examples/data-parallel.mlir --pipe-schedule=kind=auto --pipe-simulate | stagecraft-translate --pipe-to-summary
pipe.pipeline @llama8b ranks(4) microbatches(16) data_parallel(degree = 32, latency = 1.0e-5, bandwidth = 5.0e10, optimizer = 5.0e-12) {
  pipe.stage @s0 cost(forward = 0.0180, backward_input = 0.0180, backward_weight = 0.0180) memory(activation = 2.1e9) gradient(2.75e9)
  pipe.stage @s1 cost(forward = 0.0180, backward_input = 0.0180, backward_weight = 0.0180) memory(activation = 2.1e9) gradient(1.7e9)
  pipe.stage @s2 cost(forward = 0.0180, backward_input = 0.0180, backward_weight = 0.0180) memory(activation = 2.1e9) gradient(1.7e9)
  pipe.stage @s3 cost(forward = 0.0180, backward_input = 0.0180, backward_weight = 0.0180) memory(activation = 2.1e9) gradient(1.7e9)
  pipe.stage @s4 cost(forward = 0.0180, backward_input = 0.0180, backward_weight = 0.0180) memory(activation = 2.1e9) gradient(1.7e9)
  pipe.stage @s5 cost(forward = 0.0180, backward_input = 0.0180, backward_weight = 0.0180) memory(activation = 2.1e9) gradient(1.7e9)
  pipe.stage @s6 cost(forward = 0.0180, backward_input = 0.0180, backward_weight = 0.0180) memory(activation = 2.1e9) gradient(1.7e9)
  pipe.stage @s7 cost(forward = 0.0287, backward_input = 0.0287, backward_weight = 0.0287) memory(activation = 2.1e9) gradient(2.75e9)
}
