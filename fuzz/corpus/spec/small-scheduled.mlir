module {
  pipe.pipeline @small ranks(2) microbatches(2) {
    pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 1.0)
    pipe.stage @s1 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) memory(activation = 1.0, weight_grad = 1.0)
  }
  pipe.schedule @small_zb_h1 for @small attributes {kind = "zb-h1"} {
    pipe.rank 0 stages [@s0] {
      pipe.forward @s0 mb 0
      pipe.forward @s0 mb 1
      pipe.backward_input @s0 mb 0
      pipe.backward_weight @s0 mb 0
      pipe.backward_input @s0 mb 1
      pipe.backward_weight @s0 mb 1
    }
    pipe.rank 1 stages [@s1] {
      pipe.forward @s1 mb 0
      pipe.backward_input @s1 mb 0
      pipe.forward @s1 mb 1
      pipe.backward_input @s1 mb 1
      pipe.backward_weight @s1 mb 0
      pipe.backward_weight @s1 mb 1
    }
  }
}

