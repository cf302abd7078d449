#!/usr/bin/env bash
# What binds without the profiler, on one GPU machine, in about 5 minutes: the injection library's own cost,
# probe --what-binds (the delay test, the untraced frame and host bar, the latency program with and without
# nsys, the untraced split and the causes of idle) on the zoo's host_bound, turns and daq_loop (at 1, 2 and 4
# streams) and, where built, NVIDIA's asyncAPI and jacobiCudaGraphs, and the daq_loop's own delay flags.
#   bash scripts/device_untraced.sh OUT
# Environment (optional): CB_SAMPLES_DIR, a folder holding built cuda-samples binaries asyncAPI and
# jacobiCudaGraphs (found anywhere under it); PROCESSES, the processes per point of each delay test (3).
# Steps (each prints its command first and is timed; a failing step is reported and the others go on):
#   a_build       tests/zoo/build.sh OUT/zoo host_bound turns daq_loop; the injection library and the latency
#                 program (clusterbench.run.inject, into OUT/cache)
#   b_cost        scripts/untraced_steps.py cost: daq_loop at 1 and 4 streams, bare and with the library
#                 (no delay), by its own rate (limit 2 %)
#   c_host_bound  probe --what-binds on host_bound (3,000 frames)
#   d_turns       probe --what-binds on turns (1,500 frames, window range:loop)
#   e_daq_loop    probe --what-binds --scan streams=1,2,4 on daq_loop (10,000 frames, window range:loop)
#   f_own_flags   scripts/untraced_steps.py own-flags: daq_loop's own --spin-us/--delay-us/--h2d-bytes at 1 stream
#   g_asyncAPI    probe --what-binds on asyncAPI (its one frame: slopes by its own printed GPU time)
#   h_jacobi      probe --what-binds on jacobiCudaGraphs (frames: its graph launches)
#   z_summary     scripts/untraced_steps.py summary: OUT/summary.md
# Outputs under OUT: one log per step (OUT/<step>.log), OUT/results/<dir>/ (probes.csv, env.json,
# <label>.untraced.json, the delay test's and the latency program's logs and reports; the traces are
# deleted), OUT/cost.json, OUT/own_flags.json, OUT/summary.md and OUT/steps.txt (each step's exit and time).
# The exit status is 1 when any step failed.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/gpu_script.sh"
case "${1:-}" in
    -h|--help) gpu_script_usage "${BASH_SOURCE[0]}" "bash scripts/device_untraced.sh OUT"; exit 0 ;;
    "") echo "Error: no OUT folder given" >&2; echo "Hint: bash scripts/device_untraced.sh OUT" >&2; exit 2 ;;
esac
if [ -f "$root/.device/env.sh" ] && command -v nvidia-smi >/dev/null 2>&1; then . "$root/.device/env.sh"; fi
require_gpu_and_nsys scripts/device_untraced.sh
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
cd "$root" || exit 2
PYTHON=${PYTHON:-python3}
P=${PROCESSES:-3}
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
export CLUSTERBENCH_CACHE_DIR="$out/cache"
zoo="$out/zoo"
res="$out/results"
gpu_steps_start


skip() {  # skip NAME WHY
    echo
    echo "=== $1: skipped: $2"
    rows+=("$1|skipped|0")
    printf '%-14s skipped (%s)\n' "$1" "$2" >> "$out/steps.txt"
}

probe() {  # probe NAME TAG ARGS...: clusterbench probe --what-binds into OUT/results
    local name=$1 tag=$2
    shift 2
    run "$name" "$PYTHON" -m clusterbench probe --what-binds --delay-processes "$P" --repeat 3 --force \
        --results-dir "$res" --tag "$tag" "$@"
}

: > "$out/steps.txt"
run a_build bash -c "bash tests/zoo/build.sh '$zoo' host_bound turns daq_loop && \
    '$PYTHON' -c 'from clusterbench.run import inject; print(inject.build(inject.INJECT_LIB)); print(inject.build(inject.LATENCY_BIN))'"
rate='rate: ([0-9.]+) frames/s'
if [ -x "$zoo/daq_loop" ]; then
    run b_cost "$PYTHON" scripts/untraced_steps.py cost "$zoo" "$out" --processes "$P"
else
    skip b_cost "daq_loop was not built (a_build.log)"
fi
if [ -x "$zoo/host_bound" ]; then
    probe c_host_bound host_bound --label host_bound --frames kernel:zoo_calib --rate "$rate" \
        -- "$zoo/host_bound" --frames 3000
else
    skip c_host_bound "not built"
fi
if [ -x "$zoo/turns" ]; then
    probe d_turns turns --label turns --window range:loop --frames kernel:zoo_calib --rate "$rate" \
        -- "$zoo/turns" --frames 1500
else
    skip d_turns "not built"
fi
if [ -x "$zoo/daq_loop" ]; then
    probe e_daq_loop daq_loop --label daq_loop --window range:loop --frames kernel:zoo_calib --rate "$rate" \
        --scan streams=1,2,4 -- "$zoo/daq_loop" --frames 10000 --streams '{streams}'
    run f_own_flags "$PYTHON" scripts/untraced_steps.py own-flags "$zoo" "$out" --processes "$P" --k-us 10
else
    skip e_daq_loop "not built"
    skip f_own_flags "not built"
fi
find_sample() {  # find_sample NAME: the first executable NAME under $CB_SAMPLES_DIR
    [ -n "${CB_SAMPLES_DIR:-}" ] && [ -d "$CB_SAMPLES_DIR" ] || return 1
    find "$CB_SAMPLES_DIR" -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1 | grep .
}
if a=$(find_sample asyncAPI); then
    probe g_asyncAPI asyncAPI --label asyncAPI --frames kernel:increment_kernel \
        --rate 'time spent executing by the GPU: ([0-9.]+)' --rate-unit ms/frame -- "$a"
else
    skip g_asyncAPI "no asyncAPI under CB_SAMPLES_DIR (${CB_SAMPLES_DIR:-unset})"
fi
if j=$(find_sample jacobiCudaGraphs); then
    probe h_jacobi jacobi --label jacobiCudaGraphs --frames graph -- "$j"
else
    skip h_jacobi "no jacobiCudaGraphs under CB_SAMPLES_DIR (${CB_SAMPLES_DIR:-unset})"
fi
find "$res" \( -name '*.sqlite' -o -name '*.nsys-rep' \) -delete 2>/dev/null
run z_summary "$PYTHON" scripts/untraced_steps.py summary "$out"

{
    echo
    echo "=== steps (scripts/device_untraced.sh, $(since "$t_start") s in all)"
    printf '%-14s %-10s %8s\n' step "exit" seconds
    for r in "${rows[@]}"; do
        IFS='|' read -r name rc secs <<< "$r"
        printf '%-14s %-10s %8s\n' "$name" "$rc" "$secs"
    done
    echo "summary: $out/summary.md"
} | tee -a "$out/steps.txt"
exit "$failed"
