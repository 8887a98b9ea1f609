// Tests that lengths(...) gives one length per microbatch.
// expected-error @below {{'pipe.pipeline' op lengths(...) gives 2 lengths for 3 microbatches; give one per microbatch}}
pipe.pipeline @p ranks(1) microbatches(3) lengths(1.0, 2.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that every length is positive.
// expected-error @below {{'pipe.pipeline' op lengths(...): microbatch 1's length must be finite and positive, got 0.0}}
pipe.pipeline @p ranks(1) microbatches(2) lengths(1.0, 0.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that reference_length(X) needs lengths(...).
// expected-error @below {{'pipe.pipeline' op reference_length(X) needs lengths(...)}}
pipe.pipeline @p ranks(1) microbatches(2) reference_length(2.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that the reference length is positive.
// expected-error @below {{'pipe.pipeline' op reference_length must be finite and positive, got -1.0}}
pipe.pipeline @p ranks(1) microbatches(2) lengths(1.0, 2.0) reference_length(-1.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

// Tests that lengths(...) is given once.
// expected-error @below {{lengths(...) appears twice}}
pipe.pipeline @p ranks(1) microbatches(2) lengths(1.0, 2.0) lengths(1.0, 2.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(2) lengths(1.0, 2.0) {
  // Tests that a scaling grows with the length.
  // expected-error @below {{'pipe.stage' op scaling(...) needs 'linear' or 'quadratic' above 0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 0.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(2) lengths(1.0, 2.0) {
  // Tests that scaling factors are non-negative.
  // expected-error @below {{'pipe.stage' op scaling 'quadratic' must be finite and non-negative, got -1.0}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(linear = 1.0, quadratic = -1.0)
}

// -----

pipe.pipeline @p ranks(1) microbatches(2) lengths(1.0, 2.0) {
  // Tests that scaling(...) takes only linear and quadratic.
  // expected-error @below {{unknown scaling 'cubic'; expected one of: linear, quadratic}}
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(cubic = 1.0)
}

// -----

// Tests that a length whose square overflows is refused, not turned into
// infinite or NaN costs.
// expected-error @below {{'pipe.pipeline' op stage @s0: microbatch 0 (length 1e+300, reference 5e+299) scales its costs by}}
pipe.pipeline @p ranks(1) microbatches(2) lengths(1.0e300, 1.0) {
  pipe.stage @s0 cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0) scaling(quadratic = 1.0)
}
