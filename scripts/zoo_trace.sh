#!/usr/bin/env bash
# Traces the zoo (tests/zoo/README.md) with Nsight Systems on a GPU machine and exports each
# report to SQLite: the fixtures for the analyzers' tests.
#   bash scripts/zoo_trace.sh OUTDIR [SET]
# SET picks the programs: zoo (the default: the six pattern programs), cp (the seven programs that
# time their own CUDA calls, for blocked time and the critical path) or all.
# Run from anywhere on a GPU machine with nsys on PATH. Steps, each timed:
#   1. build the set's programs (tests/zoo/build.sh OUTDIR/bin PROGRAM...)
#   2. run each distinct program invocation once untraced: zoo_<name>.untraced.stdout.txt
#   3. run each variant under nsys profile (the tool's options) and export it:
#        zoo_<name>.nsys-rep, zoo_<name>.sqlite, zoo_<name>.stdout.txt (+ .stderr.txt)
#      the stdout of a traced run also holds nsys's own lines ("Collecting data...", ...)
#   4. a summary: rows per table of each .sqlite, its size (fixtures must stay under 1 MB), and
#      whether each stdout has its "rate:" and "ZOO {...}" lines; for the cp set, a table of what
#      each program timed (its slow calls) and its own checks (the queue filled, the graph launch
#      blocked)
# A failing step is reported and the script goes on; the exit status is 1 when anything failed
# (a build, a run, a trace, an export, a missing ZOO line, a .sqlite of 1 MB or more, a cp program
# that did not show what it is for), else 0.
#
# Environment (optional): ZOO_BUDGET_S (zoo 210, cp 150, all 360): steps that would start after this
# many seconds are skipped (and count as failed); ZOO_EXPORT_PARALLEL (1): export each report in the
# background while the next variant is traced (0: one after the other); ZOO_CAPTURE_END (stop): the
# --capture-range-end of the two capture-range variants ("stop" lets the program finish and print
# its ZOO line; nsys's default, stop-shutdown, ends the program at the end of the range).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/gpu_script.sh"
case "${1:-}" in
    -h|--help) gpu_script_usage "${BASH_SOURCE[0]}" "bash scripts/zoo_trace.sh OUTDIR [zoo|cp|all]"; exit 0 ;;
esac
require_gpu_and_nsys scripts/zoo_trace.sh  # GPU only: say so before any work
if [ -z "${1:-}" ]; then
    echo "Error: no OUTDIR given" >&2
    echo "Hint: bash scripts/zoo_trace.sh OUTDIR [zoo|cp|all] (bash scripts/zoo_trace.sh --help)" >&2
    exit 2
fi
set_name=${2:-zoo}
case $set_name in
    zoo) zoo_set=1; cp_set=0; default_budget=210 ;;
    cp) zoo_set=0; cp_set=1; default_budget=150 ;;
    all) zoo_set=1; cp_set=1; default_budget=360 ;;
    *)
        echo "Error: unknown SET '$set_name'" >&2
        echo "Hint: SET is zoo, cp or all (bash scripts/zoo_trace.sh --help)" >&2
        exit 2 ;;
esac
out=$1
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
cd "$root" || exit 2
budget=${ZOO_BUDGET_S:-$default_budget}
parallel_export=${ZOO_EXPORT_PARALLEL:-1}
capture_end=${ZOO_CAPTURE_END:-stop}
bin="$out/bin"
t_start=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
elapsed() { since "$t_start"; }
over_budget() { awk -v e="$(elapsed)" -v b="$budget" 'BEGIN { exit !(e > b) }'; }
failures=()
fail() { failures+=("$1"); echo "zoo_trace: FAILED: $1" >&2; }
log() { echo "[$(elapsed) s] $*"; }

log "set: $set_name; nsys: $(nsys --version 2>&1 | head -n 1)"
command -v nvidia-smi >/dev/null 2>&1 && log "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n 1)"

# ---------------------------------------------------------------- 1. build
s=$(date +%s.%N)
progs=()
[ "$zoo_set" = 1 ] && progs+=(no_nvtx nvtx_domain multi_kernel threads device_graph host_bound)
[ "$cp_set" = 1 ] && progs+=(queue_fill pageable graph_block turns pipeline small_calls two_threads)
bash tests/zoo/build.sh "$bin" "${progs[@]}" || fail "build (see $bin/build_*.log)"
log "step build: $(since "$s") s"

# ---------------------------------------------------------------- 2. untraced runs
# name | program | args
untraced=()
[ "$zoo_set" = 1 ] && untraced+=(
    "no_nvtx|no_nvtx|"
    "nvtx_domain|nvtx_domain|"
    "multi_kernel|multi_kernel|"
    "multi_kernel_ratebug|multi_kernel|--rate-bug"
    "threads_t2s2|threads|--threads 2 --streams 2"
    "threads_t1s4|threads|--threads 1 --streams 4"
    "host_bound|host_bound|"
    "device_graph_host|device_graph|--host-launch --events 2000"
    "device_graph|device_graph|--events 2000"
)
[ "$cp_set" = 1 ] && untraced+=(
    "queue_fill|queue_fill|"
    "pageable|pageable|"
    "graph_block_h2d|graph_block|--pageable h2d"
    "graph_block_d2h|graph_block|--pageable d2h"
    "graph_block_pinned|graph_block|--pageable none"
    "turns|turns|"
    "pipeline|pipeline|"
    "small_calls|small_calls|"
    "two_threads|two_threads|"
)
for row in "${untraced[@]}"; do
    IFS='|' read -r name prog pargs <<< "$row"
    if over_budget; then fail "untraced $name: skipped, over the ${budget} s budget"; continue; fi
    if [ ! -x "$bin/$prog" ]; then fail "untraced $name: $bin/$prog was not built"; continue; fi
    s=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout 30 "$bin/$prog" $pargs > "$out/zoo_$name.untraced.stdout.txt" 2> "$out/zoo_$name.untraced.stderr.txt"
    rc=$?
    log "step untraced $name ($prog $pargs): rc=$rc, $(since "$s") s: $(grep -h '^rate:\|^throughput:' "$out/zoo_$name.untraced.stdout.txt" | tr '\n' ' ')"
    if [ $rc -ne 0 ]; then
        fail "untraced $name: exit $rc"
        sed 's/^/    /' "$out/zoo_$name.untraced.stderr.txt" | tail -n 20 >&2
    fi
done

# ---------------------------------------------------------------- 3. traced runs
export_pids=()
export_names=()
do_export() {  # do_export NAME: nsys export of zoo_NAME.nsys-rep -> zoo_NAME.sqlite
    local name=$1 s rc
    s=$(date +%s.%N)
    timeout 120 nsys export --type sqlite --force-overwrite=true -o "$out/zoo_$name.sqlite" "$out/zoo_$name.nsys-rep" \
        > "$out/zoo_$name.export.log" 2>&1
    rc=$?
    log "step export $name: rc=$rc, $(since "$s") s"
    return $rc
}
# trace NAME PROGRAM GRAPH_LEVEL [PROGRAM ARGS...]; the arrays NSYS_EXTRA and RUN_ENV add nsys
# options and environment variables for this one variant
trace() {
    local name=$1 prog=$2 level=$3 s rc
    shift 3
    if over_budget; then fail "trace $name: skipped, over the ${budget} s budget"; return; fi
    if [ ! -x "$bin/$prog" ]; then fail "trace $name: $bin/$prog was not built"; return; fi
    local cmd=(nsys profile -t cuda,nvtx -s none --cpuctxsw=none "--cuda-graph-trace=$level" --force-overwrite=true
               ${NSYS_EXTRA[@]+"${NSYS_EXTRA[@]}"} -o "$out/zoo_$name" "$bin/$prog" "$@")
    rm -f "$out/zoo_$name.sqlite" "$out/zoo_$name.nsys-rep"
    s=$(date +%s.%N)
    echo "+ ${RUN_ENV[*]+${RUN_ENV[*]} }${cmd[*]}" > "$out/zoo_$name.stderr.txt"
    env ${RUN_ENV[@]+"${RUN_ENV[@]}"} timeout 90 "${cmd[@]}" > "$out/zoo_$name.stdout.txt" 2>> "$out/zoo_$name.stderr.txt"
    rc=$?
    log "step trace $name: rc=$rc, $(since "$s") s: $(grep -h '^rate:\|^throughput:' "$out/zoo_$name.stdout.txt" | tr '\n' ' ')"
    if [ $rc -ne 0 ] || [ ! -f "$out/zoo_$name.nsys-rep" ]; then
        fail "trace $name: exit $rc$([ -f "$out/zoo_$name.nsys-rep" ] || echo ', no report')"
        tail -n 20 "$out/zoo_$name.stderr.txt" | sed 's/^/    /' >&2
        [ -f "$out/zoo_$name.nsys-rep" ] || return
    fi
    if [ "$parallel_export" = 1 ]; then
        do_export "$name" &
        export_pids+=($!)
        export_names+=("$name")
    else
        do_export "$name" || fail "export $name (see $out/zoo_$name.export.log)"
    fi
}

NSYS_EXTRA=()
RUN_ENV=()
if [ "$cp_set" = 1 ]; then
    trace queue_fill queue_fill node
    trace pageable pageable node
    trace graph_block_h2d_node graph_block node --pageable h2d
    trace graph_block_h2d_graph graph_block graph --pageable h2d
    trace graph_block_d2h_node graph_block node --pageable d2h
    trace graph_block_pinned_node graph_block node --pageable none
    trace turns turns node
    trace pipeline pipeline node
    trace small_calls small_calls node
    trace two_threads two_threads node
fi
if [ "$zoo_set" = 1 ]; then
    trace no_nvtx no_nvtx node
    trace nvtx_domain nvtx_domain node
    NSYS_EXTRA=(--capture-range=cudaProfilerApi "--capture-range-end=$capture_end")
    trace nvtx_domain_profilerapi nvtx_domain node
    NSYS_EXTRA=(--capture-range=nvtx "--nvtx-capture=event loop@zoo_daq" "--capture-range-end=$capture_end")
    RUN_ENV=(NSYS_NVTX_PROFILER_REGISTER_ONLY=0)
    trace nvtx_domain_nvtxrange nvtx_domain node
    NSYS_EXTRA=()
    RUN_ENV=()
    trace multi_kernel multi_kernel node
    trace multi_kernel_ratebug multi_kernel node --rate-bug
    trace threads_t2s2 threads node --threads 2 --streams 2
    trace threads_t1s4 threads node --threads 1 --streams 4
    trace host_bound host_bound node
    # the device-launched graph last: the variant most likely to trip the profiler (a hang costs only it)
    trace device_graph_host_node device_graph node --host-launch --events 2000
    trace device_graph_host_graph device_graph graph --host-launch --events 2000
    trace device_graph_graph device_graph graph --events 2000
    trace device_graph_node device_graph node --events 2000
fi

for i in "${!export_pids[@]}"; do
    wait "${export_pids[$i]}" || fail "export ${export_names[$i]} (see $out/zoo_${export_names[$i]}.export.log)"
done

# ---------------------------------------------------------------- 4. summary
log "summary (fixtures must stay under 1 MB):"
for f in "$out"/zoo_*.stdout.txt; do
    [ -f "$f" ] || continue
    z=$(grep -c '^ZOO {' "$f")
    r=$(grep -c '^rate: [0-9.]* frames/s$' "$f")
    if [ "$z" != 1 ] || [ "$r" != 1 ]; then fail "$(basename "$f"): $z ZOO lines and $r rate lines (want 1 and 1)"; fi
done
for f in "$out"/zoo_*.sqlite; do
    [ -f "$f" ] || continue
    size=$(stat -c %s "$f")
    printf '  %-40s %9d bytes%s\n' "$(basename "$f")" "$size" "$([ "$size" -ge 1048576 ] && echo '  OVER 1 MB')"
    [ "$size" -ge 1048576 ] && fail "$(basename "$f") is $size bytes, over 1 MB: lower --frames/--events"
done
if command -v python3 >/dev/null 2>&1; then
    python3 - "$out" <<'EOF'
import glob, os, sqlite3, sys
tables = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "CUPTI_ACTIVITY_KIND_MEMCPY",
          "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER",
          "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "NVTX_EVENTS"]
short = ["kernel", "graph", "memcpy", "memset", "runtime", "driver", "sync", "event", "nvtx"]
print("  rows per table:")
print("  %-40s" % "" + "".join("%9s" % s for s in short) + "  kernels by name")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "zoo_*.sqlite"))):
    try:
        c = sqlite3.connect(f)
        have = {r[0] for r in c.execute("select name from sqlite_master where type='table'")}
        n = [c.execute("select count(*) from %s" % t).fetchone()[0] if t in have else 0 for t in tables]
        names = ""
        if "CUPTI_ACTIVITY_KIND_KERNEL" in have:
            rows = c.execute("select s.value, count(*) from CUPTI_ACTIVITY_KIND_KERNEL k "
                             "join StringIds s on s.id = k.shortName group by 1 order by 1").fetchall()
            names = ", ".join("%s %d" % r for r in rows)
        print("  %-40s" % os.path.basename(f) + "".join("%9d" % x for x in n) + "  " + names)
    except Exception as exc:
        print("  %-40s could not read: %s" % (os.path.basename(f), exc))
EOF
fi

if [ "$cp_set" = 1 ] && command -v python3 >/dev/null 2>&1; then
    # what each cp program timed, and its own checks: the launch queue filled, the graph launch blocked
    # with a pageable input and not with pinned buffers (the control)
    cp_report=$(python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
print("  what the cp programs timed (traced runs; the untraced rate in brackets): each kind of call as")
print("  slow/all (slow: 20 us or more) and the slow calls' total in ms")
print("  %-24s %15s %9s %8s  %s" % ("variant", "rate /s", "loop ms", "spin ms", "calls"))
def zoo(path):
    try:
        with open(path, errors="replace") as fh:
            lines = [ln for ln in fh.read().splitlines() if ln.startswith("ZOO {")]
        return json.loads(lines[0][4:]) if len(lines) == 1 else None
    except (OSError, ValueError):
        return None
def kinds(t):
    rows = []
    for th in [t] + list(t.get("per_thread") or []):
        for k in th.get("calls") or []:
            tag = (th["name"] + ":" if th is not t else "") + k["label"]
            rows.append("%s %d/%d (%.2f)" % (tag, k["slow_n"], k["n"], k["slow_ns"] / 1e6))
    return rows
checks = {  # variant -> (what must hold in its traced ZOO line, what it means when it does not)
    "queue_fill": (lambda t: t.get("queue_filled") is True, "the launch queue did not fill"),
    "graph_block_h2d_node": (lambda t: t.get("launch_blocked") is True, "cudaGraphLaunch did not block"),
    "graph_block_h2d_graph": (lambda t: t.get("launch_blocked") is True, "cudaGraphLaunch did not block"),
    "graph_block_pinned_node": (lambda t: t.get("launch_blocked") is False, "cudaGraphLaunch blocked with pinned buffers"),
}
variants = [("queue_fill", "queue_fill"), ("pageable", "pageable"), ("graph_block_h2d_node", "graph_block_h2d"),
            ("graph_block_h2d_graph", "graph_block_h2d"), ("graph_block_d2h_node", "graph_block_d2h"),
            ("graph_block_pinned_node", "graph_block_pinned"), ("turns", "turns"), ("pipeline", "pipeline"),
            ("small_calls", "small_calls"), ("two_threads", "two_threads")]
for v, plain in variants:
    t = zoo(os.path.join(out, "zoo_%s.stdout.txt" % v))
    u = zoo(os.path.join(out, "zoo_%s.untraced.stdout.txt" % plain))
    if t is None:
        print("  %-24s no ZOO line" % v)
        print("CHECK-FAILED: %s: no ZOO line in its traced stdout" % v)
        continue
    spin = sum(th.get("spin", {}).get("total_ns", 0) for th in [t] + list(t.get("per_thread") or []))
    rate = "%.0f" % t["true_rate"] + (" [%.0f]" % u["true_rate"] if u else "")
    ks = kinds(t)
    for i in range(0, max(len(ks), 1), 3):
        head = ("  %-24s %15s %9.2f %8.2f" % (v, rate, t["loop_s"] * 1e3, spin / 1e6)) if i == 0 else "  " + " " * 59
        print(head + "  " + "; ".join(ks[i:i + 3]))
    if v in checks and not checks[v][0](t):
        print("CHECK-FAILED: %s: %s" % (v, checks[v][1]))
EOF
)
    printf '%s\n' "$cp_report" | grep -v '^CHECK-FAILED: '
    while IFS= read -r line; do
        fail "${line#CHECK-FAILED: }"
    done < <(printf '%s\n' "$cp_report" | grep '^CHECK-FAILED: ')
fi

log "done in $(elapsed) s"
if [ ${#failures[@]} -gt 0 ]; then
    echo "zoo_trace: ${#failures[@]} failure(s):" >&2
    printf '  - %s\n' "${failures[@]}" >&2
    exit 1
fi
echo "zoo_trace: all steps passed"
exit 0
