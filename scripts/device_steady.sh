#!/usr/bin/env bash
# On a freshly started GPU machine, in one go (about 190 s): how long the machine takes to reach a steady
# sustained FPS, nsys's cost per CUDA call, make run timed with the steady-state method, the GPU tests of the
# sustained runs, the deliberate delay and the host bar, and a host-bound scan whose host bar is estimated
# without the profiler.
#   bash scripts/device_steady.sh OUT
# Steps (each prints its command first; a failing step is reported and the others go on):
#   a. series: scripts/steady_series.py: back-to-back runs of 3x3_s4 (12 s), 3x3_s1_uncontended (12 s) and
#      3x3_s4 again (4 s), each run's FPS and time, and where the steady rule would have stopped (run first:
#      the machine is fresh);
#   b. calls: scripts/nsys_call_cost.py --repeat 3 --save: nsys's cost per call, three times, and its spread;
#   c. make_run: benchmarks/bench_probe_time.py (make run timed, with each config's phases and each
#      process's parts: the sustained process's wait for the go shows how much of its set-up nsys's finish hid);
#   d. gpu_tests: the GPU tests of the steady runner, the delay and the call costs;
#   e. host_bound: configs/host_bound.toml scanned over streams=1,2,4, and the zoo's host_bound probed as it
#      is (built with tests/zoo/build.sh): every point's host bar traced and estimated without the profiler.
# Outputs under OUT: one log per step (and steps.txt: each step's exit and time), series/ (series.json), calls.json, bench_probe_time.json, the results
# dirs' probes.csv, samples.json and env.json (no traces), and summary.txt (the table printed last).
# The exit status is 1 when any step failed.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/gpu_script.sh"
case "${1:-}" in
    -h|--help) gpu_script_usage "${BASH_SOURCE[0]}" "bash scripts/device_steady.sh OUT"; exit 0 ;;
    "") echo "Error: no OUT folder given" >&2; echo "Hint: bash scripts/device_steady.sh OUT" >&2; exit 2 ;;
esac
# nsys on PATH on the GPU machine (only there: elsewhere the refusal below comes first)
if [ -f "$root/.device/env.sh" ] && command -v nvidia-smi >/dev/null 2>&1; then . "$root/.device/env.sh"; fi
require_gpu_and_nsys scripts/device_steady.sh
mkdir -p "$1" || exit 2
out=$(cd "$1" && pwd)
cd "$root" || exit 2
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
export CLUSTERBENCH_CACHE_DIR="$out/cache"  # the calibration step b saves is the one steps c-e read
work="$out/work"
mkdir -p "$work"
gpu_steps_start


keep() {  # keep DIR...: copy each results dir's files (no traces) under OUT/results
    local d
    for d in "$@"; do
        [ -f "$d/probes.csv" ] || continue
        mkdir -p "$out/results/$(basename "$d")"
        cp "$d"/probes.csv "$d"/env.json "$d"/samples.json "$out/results/$(basename "$d")/" 2>/dev/null
    done
}

run a_series "$PYTHON" scripts/steady_series.py "$out/series" --seconds 12
run b_calls "$PYTHON" scripts/nsys_call_cost.py --repeat 3 --save --json "$out/calls.json"
run c_make_run "$PYTHON" benchmarks/bench_probe_time.py --json "$out/bench_probe_time.json"
keep "$root"/results/"$(date +%F)"_f32_smoke
run d_gpu_tests "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider \
    tests/workloads/test_delay_gpu.py tests/run/test_callcost_gpu.py tests/run/test_tracers_gpu.py \
    tests/workloads/test_gpu.py::test_run_config_ranges_and_result \
    tests/workloads/test_gpu.py::test_run_entry_point_writes_result_json
run e_host_bound_scan "$PYTHON" -m clusterbench probe --config configs/host_bound.toml --scan streams=1,2,4 \
    --results-dir "$work/results" --tag hostbound --force
if bash tests/zoo/build.sh "$work/zoo" host_bound > "$out/e_zoo_build.log" 2>&1; then
    run e_zoo_host_bound "$PYTHON" -m clusterbench probe --results-dir "$work/results" --tag zoo-host_bound \
        --label host_bound --frames kernel:zoo_calib --rate 'rate: ([0-9.]+) frames/s' --force \
        -- "$work/zoo/host_bound" --frames 4000
else
    echo "e_zoo_host_bound: tests/zoo/build.sh failed (its log: $out/e_zoo_build.log)"
    rows+=("e_zoo_host_bound|not built|0")
    failed=1
fi
keep "$work"/results/*/

{
    echo
    echo "=== summary (scripts/device_steady.sh, $(since "$t_start") s in all)"
    printf '%-22s %-10s %8s\n' step "exit" seconds
    for r in "${rows[@]}"; do
        IFS='|' read -r name rc secs <<< "$r"
        printf '%-22s %-10s %8s\n' "$name" "$rc" "$secs"
    done
    echo
    echo "a. how long the fresh machine took to settle:"
    awk '/^series +runs/ { on = 1 } on' "$out/a_series.log" 2>/dev/null || true
    echo
    echo "b. nsys's cost per call:"
    grep -E '^(kind|launch|copy|event|µs per call)' "$out/b_calls.log" || true
    echo
    echo "c. make run:"
    grep -E 'make run: .* limit|sustained' "$out/c_make_run.log" | tail -n 12 || true
    echo
    echo "d. GPU tests:"
    tail -n 1 "$out/d_gpu_tests.log" 2>/dev/null
    echo
    echo "e. host-bound points (sustained against the bound without the profiler):"
    grep -E 'host bar|nearer|above|host_bound' "$out/e_host_bound_scan.log" "$out/e_zoo_host_bound.log" 2>/dev/null \
        | tail -n 20 || true
} | tee "$out/summary.txt"
exit "$failed"
