// A model whose first stage carries the embedding (x1.3) and whose last
// stage carries the LM head and loss (x1.6), with link latency 0.1 and more
// activation memory on the first stage:
//   stagecraft-opt examples/heterogeneous.mlir --pipe-schedule="kind=1f1b" \
//     --pipe-simulate | stagecraft-translate --pipe-to-summary
pipe.pipeline @hetero ranks(4) microbatches(8) latency(0.1) {
  pipe.stage @embed cost(forward = 1.3, backward_input = 1.43, backward_weight = 1.17) memory(activation = 1.5, weight_grad = 0.75)
  pipe.stage @mid0 cost(forward = 1.0, backward_input = 1.1, backward_weight = 0.9) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @mid1 cost(forward = 1.0, backward_input = 1.1, backward_weight = 0.9) memory(activation = 1.0, weight_grad = 0.5)
  pipe.stage @head cost(forward = 1.6, backward_input = 1.76, backward_weight = 1.44) memory(activation = 1.2, weight_grad = 0.6)
}
