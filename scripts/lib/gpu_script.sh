# Sourced by the GPU-only shell scripts (scripts/zoo_trace.sh, scripts/device_*.sh): their usage
# from their header comment, and one Error/Hint refusal, before any work, where there is no GPU or no nsys.

# gpu_script_usage SCRIPT SYNOPSIS: the synopsis, then the script's header comment (its second line on)
gpu_script_usage() {
    echo "usage: $2  (GPU only: needs an NVIDIA GPU and Nsight Systems)"
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"
}

# require_gpu_and_nsys NAME: exit 1 with one Error line and a Hint unless nsys and an NVIDIA GPU are here
require_gpu_and_nsys() {
    if ! command -v nsys >/dev/null 2>&1 || ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
        echo "Error: $1 needs an NVIDIA GPU and Nsight Systems: $(command -v nsys >/dev/null 2>&1 \
            && echo 'no NVIDIA GPU or driver (nvidia-smi -L failed)' || echo 'nsys is not on PATH')" >&2
        echo "Hint: run it on a GPU machine with nsys on PATH" >&2
        exit 1
    fi
}

# The device scripts' steps (scripts/device_steady.sh, device_untraced.sh, device_verdicts.sh). Set `out` (the
# OUT folder) first; `gpu_steps_start` starts the clock. `run NAME COMMAND...` prints the command, runs it
# (its output on the terminal and in OUT/NAME.log), times it, adds "NAME|exit|seconds" to `rows` and a line to
# OUT/steps.txt, sets `failed=1` when it fails, and returns its exit status.
gpu_steps_start() {
    t_start=$(date +%s.%N)
    rows=()
    failed=0
}

since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

run() {
    local name=$1
    shift
    echo
    echo "=== $name ($(since "$t_start") s in)"
    printf '$'; printf ' %q' "$@"; echo
    local s rc
    s=$(date +%s.%N)
    "$@" 2>&1 | tee "$out/$name.log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || failed=1
    rows+=("$name|$rc|$(since "$s")")
    printf '%-14s exit %-4s %8s s\n' "$name" "$rc" "$(since "$s")" >> "$out/steps.txt"
    return "$rc"
}
