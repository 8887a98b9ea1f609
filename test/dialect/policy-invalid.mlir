// RUN: stagecraft-opt %s -split-input-file -verify-diagnostics

// Tests that an unknown action in a pattern is an error at its statement.
pipe.policy @p {
  "warmup ranks - rank - 1"
  // expected-error @below {{'Q' is not an action (F, B, I, W or X)}}
  "steady F Q"
}

// -----

// Tests that an expression's error points at its column: an unknown name.
pipe.policy @p {
  // expected-error @below {{unknown name 'rnak'}}
  "warmup ranks - rnak - 1"
  "steady F B"
}

// -----

// Tests that an unknown statement is named.
pipe.policy @p {
  // expected-error @below {{unknown statement 'order' (policy, placement, group, forwards, backwards, warmup, steady, defer, rule, param, cap, requires)}}
  "order F B"
  "steady F B"
}

// -----

// Tests that a policy needs phases or rules.
// expected-error @below {{policy p: no order: give 'warmup' and 'steady', or 'rule' lines}}
pipe.policy @p {
  "placement loop"
}

// -----

// Tests that an empty parameter range is refused.
pipe.policy @p {
  // expected-error @below {{parameter 'k' has an empty range 3..1}}
  "param k 3..1"
  "rule F"
  "rule B"
}

// -----

// Tests that a statement names itself once.
pipe.policy @p {
  "warmup 1"
  "steady F B"
  // expected-error @below {{'warmup' given twice (first on statement 1)}}
  "warmup 2"
}

// -----

// Tests that beside phases, a rule orders only a kind the pattern leaves
// out.
pipe.policy @p {
  "warmup 1"
  "steady F I"
  "rule W"
  // expected-error @below {{'rule I': the phases order I (warmup, steady 'F I'); beside phases, rules order only the kinds the pattern leaves out}}
  "rule I"
}

// -----

// Tests that an order key is 'forwards by EXPR' and reads only the shape,
// stage, microbatch and chunk: a rule's counter is unknown there.
pipe.policy @p {
  // expected-error @below {{expected 'forwards by EXPR'}}
  "forwards in-order"
  "warmup 0"
  "steady F B"
}

// -----

pipe.policy @p {
  // expected-error @below {{unknown name 'in_flight'}}
  "backwards by in_flight"
  "warmup 0"
  "steady F B"
}

// -----

// Tests that `defer` names the action it defers.
pipe.policy @p {
  "warmup 0"
  "steady F I W"
  // expected-error @below {{expected 'defer W EXPR'}}
  "defer I rank"
}

// -----

// Tests that `defer W` needs a W in the pattern.
pipe.policy @p {
  "warmup 0"
  "steady F B"
  // expected-error @below {{'defer W' needs a steady pattern with W}}
  "defer W rank"
}
