#!/usr/bin/env bash
# Times whole stagecraft-opt runs (parse, schedule, verify, simulate, print)
# on generated specs and prints a Markdown table. Usage:
#   bench/opt-bench.sh [BUILD_DIR]        (default: build)
set -euo pipefail
. "$(dirname "$0")/common.sh"
opt=$(require_tool stagecraft-opt)

spec() { # ranks microbatches stages
  pipeline_spec "bench ranks($1) microbatches($2) latency(0.05)" "$3" \
    "cost(forward = 1.0, backward_input = 1.1, backward_weight = 0.9)"
}

echo "| kind | ranks | microbatches | chunks | output ops | wall s |"
echo "|---|---|---|---|---|---|"
for cfg in "1f1b 8 32 1" "interleaved-1f1b 8 32 2" "1f1b 64 1024 1" \
           "interleaved-1f1b 64 1024 2"; do
  set -- $cfg
  kind=$1 p=$2 m=$3 v=$4
  spec "$p" "$m" $((p * v)) > "$work/spec.mlir"
  start=$(date +%s%N)
  "$opt" "$work/spec.mlir" --pipe-schedule="kind=$kind" --pipe-verify-schedule \
    --pipe-simulate -o "$work/out.mlir"
  end=$(date +%s%N)
  ops=$(grep -c "pipe\.\(forward\|backward\)" "$work/out.mlir")
  ms=$(( (end - start) / 1000000 ))
  printf "| %s | %s | %s | %s | %s | %d.%02d |\n" "$kind" "$p" "$m" "$v" "$ops" \
    $((ms / 1000)) $(((ms % 1000) / 10))
done
