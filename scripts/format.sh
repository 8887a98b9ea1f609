#!/usr/bin/env bash
# The tree's C++ and CUDA sources in the style of .clang-format (LLVM's),
# with Debian's clang-format-19 (scripts/install-deps.sh installs it).
# Part of the test command: fails naming every file that differs.
#   bash scripts/format.sh          check
#   bash scripts/format.sh --fix    rewrite the files in place
set -euo pipefail
cd "$(dirname "$0")/.."
tool=clang-format-19
command -v "$tool" > /dev/null ||
  { echo "error: $tool not found; run bash scripts/install-deps.sh" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu')
if [ "${1:-}" = --fix ]; then
  "$tool" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$tool" --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted (bash scripts/format.sh --fix): %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files as .clang-format says"
