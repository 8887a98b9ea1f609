// A two-branch multimodal toy model: an image branch (@img0 embeds the
// image's patch codes, then encoder layers in @img0 and @img1) and a text
// embedding (@text, with one layer) feed the backbone side by side: @llm0
// takes both outputs concatenated along the sequence (image first), and
// @llm1, @llm2 go on to the loss. Four ranks; costs per layer.
pipe.pipeline @mm ranks(4) microbatches(6) {
  pipe.stage @img0 inputs() layers(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
  pipe.stage @img1 layers(1) cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5)
  pipe.stage @text inputs() layers(1) cost(forward = 0.5, backward_input = 0.5, backward_weight = 0.5)
  pipe.stage @llm0 inputs(@img1, @text) layers(2) cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0)
  pipe.stage @llm1 layers(2) cost(forward = 2.0, backward_input = 2.0, backward_weight = 2.0)
  pipe.stage @llm2 layers(1) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}
