#!/usr/bin/env bash
# CPU training throughput: tokens/s of the reference transformer per schedule
# kind on the local backend with 2 ranks (4 stages of 2 layers, hidden 128,
# 4 heads, sequence 64, batch 2, 8 microbatches, 3 steps, all timed), and
# the sequential reference for comparison. Usage:
#   bench/train-bench.sh [BUILD_DIR]        (default: build)
set -euo pipefail
. "$(dirname "$0")/common.sh"
run=$(require_tool stagecraft-run)
pipeline_spec "cpu ranks(2) microbatches(8)" 4 \
  "layers(2) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)" \
  > "$work/spec.mlir"
model=(--hidden=128 --heads=4 --seq=64 --batch=2 --steps=3)
echo "| kind | tokens/s | final loss |"
echo "|---|---|---|"
for kind in reference gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zb-v dualpipev; do
  if [ "$kind" = reference ]; then
    out=$("$run" "$work/spec.mlir" --schedule=1f1b --train --reference "${model[@]}")
  else
    out=$("$run" "$work/spec.mlir" --schedule="$kind" --train "${model[@]}")
  fi
  tps=$(echo "$out" | sed -nE 's/.*: ([0-9]+) tokens\/s/\1/p')
  loss=$(echo "$out" | grep "^step 2 loss" | awk '{print $4}')
  echo "| $kind | $tps | $loss |"
done
