#!/usr/bin/env bash
# Runtime benchmark: 8 ranks x 32 microbatches, 16 uniform stages (two per
# rank, so every placement applies), every action 2 ms (cost 1, time unit
# 2ms). For each kind and backend: measured step time / simulated makespan,
# and the runtime's own overhead per instruction. Usage:
#   bench/runtime-bench.sh [BUILD_DIR]        (default: build)
# BACKENDS="local mpi" (default) picks the backends; bench/gpu-check.sh runs
# it with BACKENDS=cuda.
set -euo pipefail
. "$(dirname "$0")/common.sh"
run=$(require_tool stagecraft-run)
pipeline_spec "bench ranks(8) microbatches(32)" 16 \
  "cost(forward = 1.0, backward_input = 1.0, backward_weight = 1.0)" \
  > "$work/spec.mlir"

mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe -np 8)
echo "| kind | backend | simulated ms | measured ms | measured / simulated | overhead us/instr |"
echo "|---|---|---|---|---|---|"
for kind in 1f1b interleaved-1f1b zb-h1 zb-h2 zb-v dualpipev; do
  for backend in ${BACKENDS:-local mpi}; do
    if [ "$backend" = mpi ]; then
      out=$("${mpirun_cmd[@]}" "$run" --backend=mpi "$work/spec.mlir" \
        --schedule="$kind" --time-unit=2ms)
    else
      out=$("$run" --backend="$backend" "$work/spec.mlir" --schedule="$kind" \
        --time-unit=2ms)
    fi
    line=$(echo "$out" | grep "^one step: ")
    measured=$(echo "$line" | sed -E 's/one step: measured ([0-9.]+) ms.*/\1/')
    simulated=$(echo "$line" | sed -E 's/.*simulated ([0-9.]+) ms,.*/\1/')
    ratio=$(echo "$line" | sed -E 's/.*measured \/ simulated ([0-9.]+).*/\1/')
    overhead=$(echo "$out" | grep "^runtime overhead" |
      sed -E 's/runtime overhead ([0-9.]+) us.*/\1/; s/runtime overhead not measured.*/n\/a/')
    echo "| $kind | $backend | $simulated | $measured | $ratio | $overhead |"
  done
done
