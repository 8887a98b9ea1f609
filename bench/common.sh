# Sourced by the bench scripts with their arguments: $build (the first
# argument, default build), a scratch directory $work removed on exit,
# require_tool and pipeline_spec.
build=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# require_tool NAME: the path of $build/bin/NAME, or exit naming it.
require_tool() {
  local tool="$build/bin/$1"
  [ -x "$tool" ] || { echo "error: $tool not found; build first" >&2; exit 1; }
  echo "$tool"
}

# pipeline_spec HEADER STAGES STAGE_TEXT: "pipe.pipeline @HEADER {" and
# STAGES lines "pipe.stage @sK STAGE_TEXT".
pipeline_spec() {
  echo "pipe.pipeline @$1 {"
  for ((s = 0; s < $2; s++)); do
    echo "  pipe.stage @s$s $3"
  done
  echo "}"
}
