// The timing case of the heterogeneity benchmark: 64 layers (embedding,
// 62 blocks, LM head) on 4 full-speed and 4 half-speed ranks, 32
// microbatches. time build/bin/stagecraft-opt bench/hetero-64.mlir --pipe-schedule=kind=auto
pipe.pipeline @llm ranks(8) microbatches(32) devices(@fast x 4, @slow x 4) {
  pipe.device @fast speed(1.0) memory(80.0)
  pipe.device @slow speed(0.5) memory(40.0)
  pipe.layer @embed cost(forward = 0.05, backward_input = 0.05, backward_weight = 0.05) memory(activation = 0.1) params(2.6)
  pipe.layer @block count(62) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0) params(1.0)
  pipe.layer @head cost(forward = 2.2, backward_input = 2.2, backward_weight = 2.2) memory(activation = 4.0) params(2.6)
}
