#!/usr/bin/env bash
# On the GPU machine: probe programs as they are (no NVTX ranges of ours, no result record) and time
# `make run`. Every step prints its command first; the last thing printed is a table of every step.
#   bash scripts/device_probe_checks.sh ZOO_DIR
# ZOO_DIR holds the zoo built by `bash tests/zoo/build.sh ZOO_DIR` (tests/zoo/README.md). Steps:
#   1. each zoo program probed as it is, with the --frames and --window (or --capture) it needs and
#      its own printed rate (--rate), checked against the trace: one results dir each;
#   2. a scan of multi_kernel's streams (--scan streams=1,2,4 with {streams} in its command): each
#      point's sustained FPS against its roofline (the tallest bar) and the sum of its bars;
#   3. `make run` timed, with its breakdown (benchmarks/bench_probe_time.py).
# Results dirs go to WORK (default build/device_probe_checks); their probes.csv and env.json (no
# traces) are copied into $OUT (default WORK/out), with each step's log. A failing step is reported
# and the others go on; the exit status is 1 when any step failed.
# Environment (optional): WORK, OUT, PYTHON (python3), REPEAT (untraced runs per probe, 2).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/gpu_script.sh"
case "${1:-}" in
    -h|--help) gpu_script_usage "${BASH_SOURCE[0]}" "bash scripts/device_probe_checks.sh ZOO_DIR"; exit 0 ;;
esac
require_gpu_and_nsys scripts/device_probe_checks.sh  # GPU only: say so before any work
if [ -z "${1:-}" ]; then
    echo "Error: no ZOO_DIR given" >&2
    echo "Hint: bash tests/zoo/build.sh ZOO_DIR, then bash scripts/device_probe_checks.sh ZOO_DIR" >&2
    exit 2
fi
zoo=$(cd "$1" 2>/dev/null && pwd) || { echo "Error: ZOO_DIR $1 does not exist" >&2; \
    echo "Hint: bash tests/zoo/build.sh $1 builds it" >&2; exit 2; }
for prog in no_nvtx nvtx_domain multi_kernel threads device_graph host_bound; do
    if [ ! -x "$zoo/$prog" ]; then
        echo "Error: $zoo/$prog is not there: the zoo is not built in ZOO_DIR" >&2
        echo "Hint: bash tests/zoo/build.sh $zoo" >&2
        exit 2
    fi
done
cd "$root" || exit 2
PYTHON=${PYTHON:-python3}
REPEAT=${REPEAT:-2}
work=${WORK:-$root/build/device_probe_checks}
out=${OUT:-$work/out}
mkdir -p "$work/results" "$work/logs" "$out" || exit 2
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
cb=("$PYTHON" -m clusterbench)
t_start=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
rows=()     # name|exit status|seconds|results dir
failed=0

# run NAME RESULTS_DIR_TAG COMMAND...: print the command, run it (its output on the terminal and in a log)
run() {
    local name=$1 tag=$2
    shift 2
    echo
    echo "=== $name"
    printf '$'; printf ' %q' "$@"; echo
    local s rc
    s=$(date +%s.%N)
    "$@" 2>&1 | tee "$work/logs/$name.log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || failed=1
    rows+=("$name|$rc|$(since "$s")|$tag")
    return 0
}

rate='rate: ([0-9.]+) frames/s'
probe=("${cb[@]}" probe --results-dir "$work/results" --repeat "$REPEAT" --rate "$rate")

# ---------------------------------------------------------------- 1. the zoo, as it is
run no_nvtx zoo-no_nvtx "${probe[@]}" --tag zoo-no_nvtx --label no_nvtx --frames 'kernel:zoo_calib_jit' \
    -- "$zoo/no_nvtx"
run nvtx_domain zoo-nvtx_domain "${probe[@]}" --tag zoo-nvtx_domain --label nvtx_domain \
    --window 'range:event loop@zoo_daq' --frames kernel:zoo_calib -- "$zoo/nvtx_domain"
run nvtx_domain_nvtxrange zoo-nvtx_domain_nvtxrange "${probe[@]}" --tag zoo-nvtx_domain_nvtxrange \
    --label nvtx_domain_nvtxrange --capture 'nvtx:event loop@zoo_daq' --frames kernel:zoo_calib -- "$zoo/nvtx_domain"
run nvtx_domain_profilerapi zoo-nvtx_domain_profilerapi "${probe[@]}" --tag zoo-nvtx_domain_profilerapi \
    --label nvtx_domain_profilerapi --capture cudaProfilerApi --frames kernel:zoo_calib -- "$zoo/nvtx_domain"
run multi_kernel zoo-multi_kernel "${probe[@]}" --tag zoo-multi_kernel --label multi_kernel \
    --frames kernel:zoo_calib -- "$zoo/multi_kernel"
# its throughput line is 10x what it moves: the check must say so (the table's "rate check": disagree)
run multi_kernel_ratebug zoo-multi_kernel_ratebug "${cb[@]}" probe --results-dir "$work/results" --repeat "$REPEAT" \
    --tag zoo-multi_kernel_ratebug --label multi_kernel_ratebug --frames kernel:zoo_calib \
    --rate 'throughput: ([0-9.]+) GB/s' -- "$zoo/multi_kernel" --rate-bug
run threads_t2s2 zoo-threads_t2s2 "${probe[@]}" --tag zoo-threads_t2s2 --label threads_t2s2 --frames kernel:zoo_calib \
    -- "$zoo/threads" --threads 2 --streams 2
run threads_t1s4 zoo-threads_t1s4 "${probe[@]}" --tag zoo-threads_t1s4 --label threads_t1s4 --frames kernel:zoo_calib \
    -- "$zoo/threads" --threads 1 --streams 4
# device-launched graphs: the node-level trace loses their work, so probe traces again at graph level
run device_graph zoo-device_graph "${probe[@]}" --tag zoo-device_graph --label device_graph --frames graph \
    -- "$zoo/device_graph" --events 2000
run device_graph_host zoo-device_graph_host "${probe[@]}" --tag zoo-device_graph_host --label device_graph_host \
    --frames kernel:zoo_calib -- "$zoo/device_graph" --host-launch --events 2000
run host_bound zoo-host_bound "${probe[@]}" --tag zoo-host_bound --label host_bound --frames kernel:zoo_calib \
    -- "$zoo/host_bound"

# ---------------------------------------------------------------- 2. a scan of streams
run scan_streams zoo-scan "${probe[@]}" --tag zoo-scan --label multi_kernel --frames kernel:zoo_calib \
    --scan streams=1,2,4 -- "$zoo/multi_kernel" --frames 2400 --streams '{streams}'

# ---------------------------------------------------------------- 3. make run, timed
run make_run_timed smoke "$PYTHON" benchmarks/bench_probe_time.py --json "$out/bench_probe_time.json"

# ---------------------------------------------------------------- copies and the table
for d in "$work"/results/*/ "$root"/results/"$(date +%F)"_f32_smoke/; do
    [ -f "$d/probes.csv" ] || continue
    name=$(basename "$d")
    mkdir -p "$out/$name"
    cp "$d/probes.csv" "$d/env.json" "$out/$name/" 2>/dev/null
    [ -f "$d/samples.json" ] && cp "$d/samples.json" "$out/$name/"
done
cp "$work"/logs/*.log "$out/" 2>/dev/null

echo
echo "=== summary ($(since "$t_start") s in all)"
"$PYTHON" - "$work/results" "$root/results" "${rows[@]}" <<'PY'
import csv, glob, os, sys
results, repo_results, rows = sys.argv[1], sys.argv[2], sys.argv[3:]
def dir_of(tag):
    found = sorted(glob.glob(os.path.join(results, f"*_{tag}"))) or sorted(glob.glob(os.path.join(repo_results, f"*_{tag}")))
    return found[-1] if found else None
print(f"{'step':<24}{'exit':>5}{'s':>7}  {'row':<26}{'frames':>8}{'binds':>7}{'sust. FPS':>12}{'from':>9}{'rate':>10}")
for r in rows:
    name, rc, secs, tag = r.split("|")
    d = dir_of(tag) if tag != "-" else None
    lines = []
    if d and os.path.exists(os.path.join(d, "probes.csv")):
        with open(os.path.join(d, "probes.csv"), newline="") as fh:
            lines = [row for row in csv.DictReader(fh) if not row.get("role")]
    if not lines:
        print(f"{name:<24}{rc:>5}{secs:>7}")
        continue
    for k, row in enumerate(lines):
        fps = row.get("sustained_fps") or ""
        fps = f"{float(fps):,.0f}" if fps else ("failed" if row.get("error") else "-")
        head = f"{name:<24}{rc:>5}{secs:>7}" if k == 0 else " " * 36
        print(f"{head}  {row['label'][:26]:<26}{row['frames'] or '-':>8}{row['binds'] or '-':>7}{fps:>12}"
              f"{row.get('sustained_source') or '-':>9}{row.get('rate_check') or '-':>10}")
PY
echo "copies of the results dirs (probes.csv, env.json) and the logs: $out"
exit "$failed"
