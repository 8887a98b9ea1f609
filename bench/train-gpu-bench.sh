#!/usr/bin/env bash
# GPU training benchmark: a ~110M-parameter model (12 layers, hidden 768,
# 12 heads, sequence 512, vocab 16384; 4 sequences per microbatch, 8
# microbatches) cut into 4 stages of 3 layers on 2 ranks sharing one GPU
# (the cuda backend, device-to-device copies). First --profile measures F,
# I and W of every stage on the GPU and writes them into the spec; then per
# kind, one step and 1 + N steps run, and the difference gives the steady
# step time (no warm-up, allocation or cuBLAS set-up in it): tokens/s, and
# measured / simulated step with the simulator fed the measured costs.
# Usage:
#   bench/train-gpu-bench.sh [BUILD_DIR]        (default: build)
# BACKEND (default cuda), MODEL (model flags) and STEPS (N, default 3)
# override; BACKEND=local with a small MODEL checks the script on a CPU.
set -euo pipefail
. "$(dirname "$0")/common.sh"
run=$(require_tool stagecraft-run)
backend=${BACKEND:-cuda}
read -r -a model <<< "${MODEL:---hidden=768 --heads=12 --seq=512 --vocab=16384 --batch=4}"
steps=${STEPS:-3}
pipeline_spec "gpu ranks(2) microbatches(8)" 4 \
  "layers(3) cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)" \
  > "$work/spec.mlir"
profile_backend=$backend
[ "$backend" = cuda ] || profile_backend=local
"$run" "$work/spec.mlir" --backend="$profile_backend" --train "${model[@]}" \
  --steps=2 --max-memory="${MAX_MEMORY:-100G}" --profile="$work/profiled.mlir"
echo "measured costs (ms per microbatch):"
grep "pipe.stage" "$work/profiled.mlir" | sed -E 's/^ +/  /'
echo
echo "| kind | tokens/s | step ms | simulated step ms | measured / simulated | loss after $((steps + 1)) steps |"
echo "|---|---|---|---|---|---|"
# wall ms of a run with $1 steps of kind $2 (or the reference).
timed() {
  local args=("$work/profiled.mlir" --backend="$backend" --train "${model[@]}"
    --time-unit=1ms --steps="$1")
  if [ "$2" = reference ]; then
    args+=(--schedule=1f1b --reference)
  else
    args+=(--schedule="$2")
  fi
  "$run" "${args[@]}" --max-memory="${MAX_MEMORY:-100G}"
}
for kind in reference gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zb-v dualpipev auto; do
  one=$(timed 1 "$kind")
  more=$(timed $((steps + 1)) "$kind")
  w1=$(echo "$one" | sed -nE 's/^all [0-9]+ steps: measured ([0-9.]+) ms$/\1/p')
  w2=$(echo "$more" | sed -nE 's/^all [0-9]+ steps: measured ([0-9.]+) ms$/\1/p')
  sim=$(echo "$more" | sed -nE 's/^per step .*, simulated ([0-9.]+) ms,.*/\1/p')
  [ -n "$sim" ] || sim=0
  tokens=$(echo "$more" | sed -nE 's/.* x ([0-9]+) microbatches x ([0-9]+) tokens.*/\1 \2/p')
  loss=$(echo "$more" | grep "^step $steps loss" | awk '{print $4}')
  read -r mbs tpm <<< "$tokens"
  awk -v w1="$w1" -v w2="$w2" -v n="$steps" -v sim="$sim" -v mbs="$mbs" \
    -v tpm="$tpm" -v kind="$kind" -v loss="$loss" 'BEGIN {
      step = (w2 - w1) / n
      ratio = (kind == "reference" || sim == 0) ? "-" : sprintf("%.3f", step / sim)
      printf "| %s | %.0f | %.1f | %s | %s | %s |\n", kind,
        mbs * tpm / (step / 1000), step,
        kind == "reference" ? "-" : sprintf("%.1f", sim), ratio, loss }'
done
