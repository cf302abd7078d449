#!/usr/bin/env bash
# The H200 measurements, in parts that each fit one 10-minute run on the GPU machine.
# usage: bash scripts/device_campaign.sh PART   (from the repo root, after `source .device/env.sh`)
# GPU only: needs an NVIDIA GPU, CuPy and Nsight Systems. Each part writes its logs to logs/ and a
# tarball of results (no traces but one) to $OUT (default /tmp/cb-out). The committed logs of each
# run are in docs/measurements/<date>_<part>/, and docs/results.md says what they show.
# Parts, with the date and git rev of the committed run:
#   first-checks                 GPU tests, the workload benchmark, the guards (real NVML, a busy GPU,
#                                a stale build, bad configs), make run (2026-11-29, f603bd9)
#   first-sweep                  make sweep (20,000 frames), rows against analyze, cupti against nsys,
#                                A/B of sustained FPS, compare smoke against sweep (2026-11-29, 3cc7501)
#   reference-sweep              the reference sweep: test suite, make sweep, rows against analyze,
#                                cupti against nsys, zerocopy, float64, compare f32 against f64
#                                (2026-11-29, cb597a5)
#   tracking-graph-path          graph-trace modes on tracking (test fixtures), the tracking probe,
#                                cupti on tracking, launch and grid-sync costs (2026-12-01, 2db9fec)
#   aa-three-sweeps              A/A: three full sweeps of one build, tags aa1..aa3 (2026-12-01, fb200a5)
#   aare-cuda-side-by-side       with aare installed by the user (docs/aare-cuda.md; found on sys.path or
#                                in $CLUSTERBENCH_AARE_PYTHON): the tracer GPU tests and the aare cluster
#                                check, probe configs/aare_cuda.toml and configs.toml, rows against
#                                analyze, compare ours against aare's, a side-by-side table (2026-12-01,
#                                30b726a)
#   aare-cuda-tracking           probe configs/tracking.toml and compare it against aare's (needs the
#                                results of aare-cuda-side-by-side)
#   aare-cuda                    both of the above (about 12 minutes, more than one run allows)
#   tracking-persistent-kernel   every GPU test, bench_workload.py --modes --quick, tracking on the
#                                fastest persistent kernel, --gpus all on one config (2026-12-01, d5b1ab9)
#   gpu-tests-and-make-run       every GPU test, make run on the GPU (2026-12-01, e568532)
#   tracking-separable-window    bench_workload.py --modes --quick, the tracking probe (tag
#                                tracking_coop2), bench_ablate.py --quick (2026-12-01, e568532)
#   frozen-two-columns-per-lane  the workload GPU tests, bench_ablate.py --only frozen --quick, the
#                                previous frozen_slide timed alike (OLD_TREE: a checkout of it),
#                                bench_workload.py --grid, make run (2026-12-01, 4dfa5e3)
#   frozen-slide-variants        bench_ablate.py --only slide (2026-12-01, a629963)
#   final-kernels                every GPU test, the shared-memory refusal on the GPU, bench_ablate.py
#                                --only slide, bench_workload.py --grid (2026-12-01, 104765b; again at
#                                f3cead9, in docs/measurements/2026-12-01_frozen-kernel-final/)
#   modes-and-default-bench      bench_workload.py --modes --quick and its default run of 2,000 frames
#                                (2026-12-01, 104765b)
#   reference-configs-slide      the reference configs on the default frozen kernel, tags slide and
#                                slide_aa (an A/A pair), compared with each other and with
#                                results/2026-12-01_f32 (2026-12-01, efa5d09)
#   register-bound-16-warps      the workload GPU tests, bench_ablate.py --only slide (2026-12-01, 119237f)
# Environment: OUT; PART_BUDGET_S bounds the parts that take it (default 500 s; 540 s for
# tracking-persistent-kernel); OLD_TREE (frozen-two-columns-per-lane).
# A copy of the checkout without .git states its revision through CLUSTERBENCH_GIT_REV; the caller
# writes it to .device/REVISION first (git rev-parse HEAD, plus -dirty for a dirty tree).
set -u
PARTS="first-checks first-sweep reference-sweep tracking-graph-path aa-three-sweeps aare-cuda-side-by-side
aare-cuda-tracking aare-cuda tracking-persistent-kernel gpu-tests-and-make-run tracking-separable-window
frozen-two-columns-per-lane frozen-slide-variants final-kernels modes-and-default-bench reference-configs-slide
register-bound-16-warps"
usage() {  # the header above, from its second line
    awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "${BASH_SOURCE[0]}"
}
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
esac
# GPU only: say so before any work (no logs, no $OUT)
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1 \
        || ! python3 -c "import cupy" >/dev/null 2>&1 || ! command -v nsys >/dev/null 2>&1; then
    why=$( { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; } || { echo "no NVIDIA GPU or driver"; exit; }
           python3 -c "import cupy" >/dev/null 2>&1 || { echo "python3 cannot import CuPy"; exit; }
           echo "nsys is not on PATH" )
    echo "Error: scripts/device_campaign.sh needs an NVIDIA GPU, CuPy and Nsight Systems: $why" >&2
    echo "Hint: run it on the GPU machine after 'source .device/env.sh' (bash scripts/device_campaign.sh --help)" >&2
    exit 1
fi
part=${1:-}
case " $(echo $PARTS) " in
    *" $part "*) ;;
    *) echo "Error: unknown part '$part'" >&2
       echo "Hint: one of: $(echo $PARTS) (bash scripts/device_campaign.sh --help)" >&2
       exit 2 ;;
esac
OUT=${OUT:-/tmp/cb-out}
[ -f .device/REVISION ] && export CLUSTERBENCH_GIT_REV=$(cat .device/REVISION)
mkdir -p "$OUT" logs
day=$(date +%F)
cb() { python3 -m clusterbench "$@"; }
# snapshot what exists so far: a command cut off at its time limit still returns these
snap() { tar czf "$OUT/results_$part.tgz" --exclude='*.sqlite' --exclude='*.nsys-rep' --exclude='*.qdstrm' results logs 2>/dev/null; }
step() { snap; echo; echo "=== $* ($(date +%T))"; }
expect() {  # expect CODE CMD...: run CMD, report whether its exit code is CODE
    local want=$1; shift
    "$@"; local rc=$?
    if [ "$rc" = "$want" ]; then echo "expect: exit $rc as expected: $*"; else echo "expect: UNEXPECTED exit $rc (wanted $want): $*"; fi
}

if [ "$part" = first-checks ]; then
    step "machine"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.max.sm --format=csv
    python3 -c "import cupy, sys; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"
    nsys --version

    step "test suite (CPU and GPU tests)"
    python3 -m pytest -q -p no:cacheprovider 2>&1 | tee logs/pytest.log | tail -25

    step "workload benchmark"
    python3 benchmarks/bench_workload.py --quick --json logs/bench_workload.json 2>&1 | tee logs/bench_workload.log | tail -40

    step "guard on the idle GPU (real NVML)"
    expect 0 cb guard
    cb guard --json > logs/guard.json

    step "busy GPU: a matrix-product load in the background, then guard and probe must refuse (exit 3)"
    python3 -c "
import cupy as cp, time
a = cp.random.rand(8192, 8192, dtype=cp.float32)
t = time.time()
while time.time() - t < 20:
    a @ a
    cp.cuda.Device().synchronize()
" & load=$!
    sleep 6
    expect 3 cb guard
    expect 3 cb probe --only 3x3_s1_uncontended --frames 2000 --tag busy
    kill $load 2>/dev/null; wait $load 2>/dev/null
    sleep 2

    step "stale external build: artifact older than its source (exit 3)"
    mkdir -p /tmp/stale && echo 'int main(){}' > /tmp/stale/finder.cu && touch -d '2020-01-01' /tmp/stale/finder && touch /tmp/stale/finder.cu
    sed 's/^\[defaults\]/[build]\nartifact = "\/tmp\/stale\/finder"\nsources = ["\/tmp\/stale\/finder.cu"]\n\n[defaults]/' configs.toml > /tmp/stale/configs.toml
    expect 3 cb guard --config /tmp/stale/configs.toml
    expect 3 cb probe --config /tmp/stale/configs.toml --only 3x3_s4 --frames 2000 --tag stale

    step "bad configs (exit 2, before any GPU call)"
    sed 's/cluster = 9/cluster = 8/; s/streams = 4/stream = 4/' configs.toml > /tmp/bad.toml
    expect 2 cb probe --config /tmp/bad.toml
    expect 2 cb probe --config /tmp/missing.toml

    step "make run (the newcomer's command: probe --frames 2000 --tag smoke)"
    make run 2>&1 | tee logs/make_run.log
    python3 scripts/verify_probes.py "results/${day}_f32_smoke" 2>&1 | tee logs/verify_smoke.log

    step "the CUPTI tracer, one config at 2000 frames"
    cb probe --only 9x9_s1_uncontended --frames 2000 --tracer cupti --tag cuptismoke --repeat 1 2>&1 | tee logs/probe_cupti_smoke.log
    python3 scripts/verify_probes.py "results/${day}_f32_cuptismoke" 2>&1 | tee logs/verify_cupti_smoke.log
fi

if [ "$part" = first-sweep ]; then
    step "the tracers' GPU tests"
    python3 -m pytest -m gpu -q -p no:cacheprovider tests/run/test_tracers_gpu.py 2>&1 | tee logs/pytest_tracing.log | tail -5
    step "make sweep (every config at 20,000 frames)"
    make sweep 2>&1 | tee logs/make_sweep.log
    step "probes.csv rows against analyze by hand"
    python3 scripts/verify_probes.py "results/${day}_f32" 2>&1 | tee logs/verify_sweep.log
    step "analyze by hand, one trace"
    cb analyze "results/${day}_f32/9x9_s1_uncontended.sqlite" 2>&1 | tee logs/analyze_9x9_s1.txt
    cb analyze "results/${day}_f32/3x3_s4.sqlite" 2>&1 | tee logs/analyze_3x3_s4.txt
    step "A/B of sustained FPS: strip vs two-phase at 8 and up to 32 frames per block"
    python3 benchmarks/ab_sustained.py 2>&1 | tee logs/ab_sustained.log
    step "the CUPTI tracer on two configs"
    cb probe --only 9x9_s1_uncontended --only 3x3_s1_uncontended --tracer cupti --tag cupti 2>&1 | tee logs/probe_cupti.log
    python3 scripts/verify_probes.py "results/${day}_f32_cupti" 2>&1 | tee logs/verify_cupti.log
    step "compare: nsys sweep vs cupti, smoke vs sweep"
    cb compare "results/${day}_f32" "results/${day}_f32_cupti" 2>&1 | tee logs/compare_nsys_cupti.txt
    if [ -d "results/${day}_f32_smoke" ]; then
        cb compare "results/${day}_f32_smoke" "results/${day}_f32" --markdown 2>&1 | tee logs/compare_smoke_sweep.md
        cb compare "results/${day}_f32_smoke" "results/${day}_f32" --plot "$OUT/compare_smoke_sweep.png" > /dev/null
    fi
    # one small trace comes back for the tests: the 1-stream 9x9 run
    cp "results/${day}_f32/9x9_s1_uncontended.sqlite" "$OUT/" 2>/dev/null
fi

if [ "$part" = reference-sweep ]; then
    step "test suite (CPU and GPU tests) on the final code"
    python3 -m pytest -q -p no:cacheprovider 2>&1 | tee logs/pytest.log | tail -8
    step "make sweep (the reference sweep: every config at 20,000 frames, float32)"
    make sweep 2>&1 | tee logs/make_sweep.log
    python3 scripts/verify_probes.py "results/${day}_f32" 2>&1 | tee logs/verify_sweep.log
    cb analyze "results/${day}_f32/3x3_s4.sqlite" > logs/analyze_3x3_s4.txt 2>&1
    cb analyze "results/${day}_f32/9x9_s1_uncontended.sqlite" > logs/analyze_9x9_s1.txt 2>&1
    cp "results/${day}_f32/3x3_s4.sqlite" "$OUT/" 2>/dev/null
    step "the CUPTI tracer on the 1-stream configs"
    cb probe --only 3x3_s1_uncontended --only 9x9_s1_uncontended --tracer cupti --tag cupti 2>&1 | tee logs/probe_cupti.log
    python3 scripts/verify_probes.py "results/${day}_f32_cupti" 2>&1 | tee logs/verify_cupti.log
    cb compare "results/${day}_f32" "results/${day}_f32_cupti" > logs/compare_nsys_cupti.txt 2>&1
    cb compare "results/${day}_f32" "results/${day}_f32_cupti" --json > logs/compare_nsys_cupti.json 2>/dev/null
    step "zerocopy variant"
    cb probe --config configs/zerocopy.toml --tag zerocopy 2>&1 | tee logs/probe_zerocopy.log
    step "float64 variant"
    cb probe --config configs/float64.toml 2>&1 | tee logs/probe_f64.log
    python3 scripts/verify_probes.py "results/${day}_f64" 2>&1 | tee logs/verify_f64.log
    step "compare float32 vs float64"
    cb compare "results/${day}_f32" "results/${day}_f64" > logs/compare_f32_f64.txt 2>&1
    cb compare "results/${day}_f32" "results/${day}_f64" --markdown > logs/compare_f32_f64.md 2>&1
    cb compare "results/${day}_f32" "results/${day}_f64" --plot "$OUT/compare_f32_f64.png" > /dev/null 2>&1
fi

if [ "$part" = tracking-graph-path ]; then
    # nsys graph-trace modes on the tracking pedestal (which launches through CUDA graphs), the
    # tracking probe (node-level), cupti on it; launch and grid-sync costs
    step "machine"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.max.sm --format=csv
    nsys --version
    nsys profile --help 2>&1 | grep -n -A8 -- "--cuda-graph-trace" | head -20
    step "launch and sync costs (benchmarks/bench_sync.py)"
    python3 benchmarks/bench_sync.py --json logs/bench_sync.json 2>&1 | tee logs/bench_sync.log
    step "small tracking traces in both graph-trace modes (fixtures)"
    pj=$(python3 -c "
import dataclasses
from clusterbench.run.config import load_configs, select, with_frames
c = select(load_configs('configs/tracking.toml'), ['3x3_s1_uncontended'])[0]
import json
print(json.dumps(with_frames(c, 2000).params.replace(batch=500).to_json(), sort_keys=True))")
    echo "$pj"
    for mode in graph node; do
        nsys profile -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=$mode --force-overwrite=true \
            -o /tmp/trk_$mode python3 -m clusterbench.workloads.cupy.run --params-json "$pj" --result-json /tmp/trk_$mode.json > logs/trk_$mode.log 2>&1
        nsys export --type sqlite --force-overwrite=true -o "$OUT/tracking_3x3_s1_b500_f2000_$mode.sqlite" /tmp/trk_$mode.nsys-rep >> logs/trk_$mode.log 2>&1
        cb analyze "$OUT/tracking_3x3_s1_b500_f2000_$mode.sqlite" 2>&1 | tee logs/analyze_trk_$mode.txt
    done
    step "tracking probe: probe --config configs/tracking.toml --tag tracking (nsys, node-level)"
    cb probe --config configs/tracking.toml --tag tracking 2>&1 | tee logs/probe_tracking.log
    python3 scripts/verify_probes.py "results/${day}_f32_tracking" 2>&1 | tee logs/verify_tracking.log
    step "the same 3x3 s1 config traced at graph level (nsys default) for the graph-vs-node check"
    pj=$(python3 -c "
import json
from clusterbench.run.config import load_configs, select
print(json.dumps(select(load_configs('configs/tracking.toml'), ['3x3_s1_uncontended'])[0].params.to_json()))")
    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --force-overwrite=true -o /tmp/trk_full_graph \
        python3 -m clusterbench.workloads.cupy.run --params-json "$pj" --result-json /tmp/trk_full_graph.json > logs/trk_full_graph.log 2>&1
    nsys export --type sqlite --force-overwrite=true -o /tmp/trk_full_graph.sqlite /tmp/trk_full_graph.nsys-rep >> logs/trk_full_graph.log 2>&1
    cb analyze /tmp/trk_full_graph.sqlite --json > logs/analyze_trk_full_graph.json 2>logs/analyze_trk_full_graph.err
    python3 - <<'PY' 2>&1 | tee logs/graph_union_check.txt
import sqlite3
con = sqlite3.connect("/tmp/trk_full_graph.sqlite")
tabs = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
print("tables:", sorted(t for t in tabs if "GRAPH" in t or "KERNEL" in t))
for t in sorted(t for t in tabs if "GRAPH" in t):
    print(t, [r[1] for r in con.execute(f"pragma table_info({t})")], con.execute(f"select count(*) from {t}").fetchone())
PY
    step "the CUPTI tracer on tracking (graph kernel nodes must be kernel rows)"
    cb probe --config configs/tracking.toml --only 3x3_s1_uncontended --only 9x9_s1_uncontended --tracer cupti --tag tracking_cupti 2>&1 | tee logs/probe_tracking_cupti.log
    cb compare "results/${day}_f32_tracking" "results/${day}_f32_tracking_cupti" > logs/compare_tracking_nsys_cupti.txt 2>&1
fi

if [ "$part" = aa-three-sweeps ]; then
    # A/A: three full sweeps of one build, one after the other
    for i in 1 2 3; do
        step "A/A sweep $i: clusterbench probe --tag aa$i"
        cb probe --tag aa$i 2>&1 | tee logs/probe_aa$i.log
    done
fi

if [ "$part" = aare-cuda ] || [ "$part" = aare-cuda-side-by-side ]; then
    # About 6 minutes. aare is the user's own install (docs/aare-cuda.md): this script builds nothing;
    # without it the cluster check skips and the aare probe fails, each saying why.
    step "machine"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.max.sm --format=csv
    nsys --version
    step "aare as installed (sys.path, or \$CLUSTERBENCH_AARE_PYTHON)"
    python3 -c "
import importlib.util
spec = importlib.util.spec_from_file_location('p', 'probes/aare_cuda.py'); p = importlib.util.module_from_spec(spec)
spec.loader.exec_module(p); a = p.import_aare(); print('aare', a.__file__, 'cuda', a._cuda_available())" \
        || echo "aare is not importable here: install it as docs/aare-cuda.md says (the aare steps below fail)"
    step "GPU tests: the tracers through the workload protocol; the aare cluster check (own process: aare exits on a CUDA error)"
    python3 -m pytest -q -p no:cacheprovider tests/run/test_tracers_gpu.py 2>&1 | tee logs/pytest_tracers_gpu.log | tail -4
    CLUSTERBENCH_CHECK_OUT=logs python3 -m pytest -q -s -p no:cacheprovider tests/workloads/test_aare_cuda_gpu.py 2>&1 | tee logs/aare_cluster_check.log | tail -70
    step "probe configs/aare_cuda.toml (nsys) into results/${day}_f32_aare-cuda"
    cb probe --config configs/aare_cuda.toml --tag aare-cuda 2>&1 | tee logs/probe_aare_cuda.log
    python3 scripts/verify_probes.py "results/${day}_f32_aare-cuda" 2>&1 | tee logs/verify_aare_cuda.log
    for l in 3x3_s1_uncontended 9x9_s1_uncontended 3x3_s4; do
        cb analyze "results/${day}_f32_aare-cuda/$l.sqlite" > "logs/analyze_aare_$l.txt" 2>&1
    done
    cp "results/${day}_f32_aare-cuda/3x3_s4.pass.json" logs/aare_3x3_s4_pass.json 2>/dev/null
    cp "results/${day}_f32_aare-cuda/3x3_s1_uncontended.sqlite" "$OUT/aare_3x3_s1_uncontended.sqlite" 2>/dev/null
    step "probe configs.toml (ours, frozen pedestal, same frames) into results/${day}_f32"
    cb probe 2>&1 | tee logs/probe_f32.log
    python3 scripts/verify_probes.py "results/${day}_f32" 2>&1 | tee logs/verify_f32.log
    step "compare ours (frozen) against aare's ClusterFinderCUDA"
    cb compare "results/${day}_f32" "results/${day}_f32_aare-cuda" 2>&1 | tee logs/compare_f32_aare.txt
    cb compare "results/${day}_f32" "results/${day}_f32_aare-cuda" --markdown > logs/compare_f32_aare.md 2>&1
    cb compare "results/${day}_f32" "results/${day}_f32_aare-cuda" --json > logs/compare_f32_aare.json 2>/dev/null
    python3 scripts/side_by_side.py "results/${day}_f32" "results/${day}_f32_aare-cuda" 2>&1 | tee logs/side_by_side.md
fi

if [ "$part" = aare-cuda ] || [ "$part" = aare-cuda-tracking ]; then
    # About 4 minutes: our tracking pedestal, aare's only mode, on the same frames. It compares against
    # the results/<day>_f32_aare-cuda of aare-cuda-side-by-side: if the machine did not keep it, extract
    # that part's $OUT/results_aare-cuda-side-by-side.tgz into the checkout first.
    if [ ! -f "results/${day}_f32_aare-cuda/probes.csv" ]; then
        echo "part aare-cuda-tracking: results/${day}_f32_aare-cuda is missing: run aare-cuda-side-by-side first, or extract its results_aare-cuda-side-by-side.tgz here"
    fi
    step "probe configs/tracking.toml (ours, tracking pedestal) into results/${day}_f32_tracking"
    cb probe --config configs/tracking.toml --tag tracking 2>&1 | tee logs/probe_tracking.log
    python3 scripts/verify_probes.py "results/${day}_f32_tracking" 2>&1 | tee logs/verify_tracking.log
    step "compare ours (tracking) against aare's ClusterFinderCUDA"
    cb compare "results/${day}_f32_tracking" "results/${day}_f32_aare-cuda" 2>&1 | tee logs/compare_tracking_aare.txt
    cb compare "results/${day}_f32_tracking" "results/${day}_f32_aare-cuda" --markdown > logs/compare_tracking_aare.md 2>&1
    cb compare "results/${day}_f32_tracking" "results/${day}_f32_aare-cuda" --plot "$OUT/compare_tracking_aare.png" > /dev/null 2>&1
    python3 scripts/side_by_side.py "results/${day}_f32" "results/${day}_f32_tracking" "results/${day}_f32_aare-cuda" \
        2>&1 | tee logs/side_by_side.md
fi

if [ "$part" = tracking-persistent-kernel ]; then
    # Every GPU test, the workload benchmark (both modes, every kernel, streams x batch), the tracking
    # probe on the fastest exact persistent kernel, and a one-config --gpus all probe. Each step gets
    # what is left of a fixed budget, so the run ends in time.
    DEADLINE=$((SECONDS + ${PART_BUDGET_S:-540}))
    budget() { local cap=$1 left=$((DEADLINE - SECONDS)); [ "$left" -lt "$cap" ] && cap=$left; [ "$cap" -lt 5 ] && cap=5; echo "$cap"; }
    step "machine"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.max.sm --format=csv
    step "GPU tests of the workload (every kernel against the NumPy reference)"
    timeout "$(budget 230)" python3 -m pytest -m gpu -q -rf --tb=short -p no:cacheprovider --durations=10 tests/workloads \
        > logs/pytest_gpu_workload.log 2>&1; echo "pytest exit $?" >> logs/pytest_gpu_workload.log
    tail -25 logs/pytest_gpu_workload.log
    step "workload benchmark: python3 benchmarks/bench_workload.py --modes --quick"
    timeout "$(budget 170)" python3 benchmarks/bench_workload.py --modes --quick --json logs/bench_modes.json \
        > logs/bench_modes.log 2>&1; echo "bench exit $?" >> logs/bench_modes.log
    tail -45 logs/bench_modes.log
    step "tracking probe on the fastest persistent kernel that matched the graph path byte for byte"
    best=$(python3 -c "
import json, sys
try:
    rows = json.load(open('logs/bench_modes.json'))['kernel']
except Exception:
    print('coop'); sys.exit()
t = {}
for r in rows:
    if r.get('dtype') == 'float32' and r.get('mode') == 'tracking' and r.get('kernel') in ('coop', 'flags') \
            and r.get('tile_rows') in (None, 16) and r.get('same_as_ref') is True:
        t.setdefault(r['kernel'], []).append(r['kernel_us_per_frame'])
ok = {k: sum(v) for k, v in t.items() if len(v) == 2}
print(min(ok, key=ok.get) if ok else 'coop')")
    echo "picked: tracking_kernel = $best"
    timeout "$(budget 130)" python3 -m clusterbench probe --config "configs/tracking_$best.toml" --tag "tracking_$best" 2>&1 \
        | tee logs/probe_tracking_best.log | tail -14
    python3 scripts/verify_probes.py "results/${day}_f32_tracking_$best" 2>&1 | tail -2
    step "the other GPU tests (tracers, aare cluster check, multi-GPU)"
    CLUSTERBENCH_CHECK_OUT=logs timeout "$(budget 80)" python3 -m pytest -m gpu -q -rf --tb=short -p no:cacheprovider tests \
        --ignore=tests/workloads > logs/pytest_gpu_other.log 2>&1; echo "pytest exit $?" >> logs/pytest_gpu_other.log
    tail -15 logs/pytest_gpu_other.log
    step "probe --gpus all on one GPU against a plain probe of the same config"
    timeout "$(budget 60)" python3 -m clusterbench probe --gpus all --only 3x3_s1_uncontended --tag gpus_all 2>&1 \
        | tee logs/probe_gpus_all.log | tail -12
fi

case "$part" in gpu-tests-and-make-run|tracking-separable-window|frozen-two-columns-per-lane|frozen-slide-variants|\
        final-kernels|modes-and-default-bench|reference-configs-slide|register-bound-16-warps)
    # PART_BUDGET_S bounds the whole part, so that it ends within one 10-minute run.
    DEADLINE=$((SECONDS + ${PART_BUDGET_S:-500}))
    budget() { local cap=$1 left=$((DEADLINE - SECONDS)); [ "$left" -lt "$cap" ] && cap=$left; [ "$cap" -lt 5 ] && cap=5; echo "$cap"; }
    # The steps the parts share; each takes its time cap in seconds.
    gpu_tests_workload() {
        step "GPU tests of the workload (every kernel against the NumPy reference)"
        timeout "$(budget "$1")" python3 -m pytest -m gpu -q -rf --tb=short -p no:cacheprovider --durations=5 \
            tests/workloads > logs/pytest_gpu_workload.log 2>&1; echo "pytest exit $?" >> logs/pytest_gpu_workload.log
        tail -12 logs/pytest_gpu_workload.log
    }
    gpu_tests_other() {
        step "the other GPU tests (tracers, aare cluster check without an aare build, multi-GPU)"
        timeout "$(budget "$1")" python3 -m pytest -m gpu -q -rf --tb=short -p no:cacheprovider tests \
            --ignore=tests/workloads > logs/pytest_gpu_other.log 2>&1; echo "pytest exit $?" >> logs/pytest_gpu_other.log
        tail -6 logs/pytest_gpu_other.log
    }
    make_run_gpu() {
        step "make run (a GPU is present: the probe of configs/smoke.toml)"
        ( time timeout "$(budget "$1")" make run ) > logs/make_run.log 2>&1; echo "make run exit $?" >> logs/make_run.log
        tail -32 logs/make_run.log
    }
    bench() {  # bench NAME CAP SCRIPT [ARGS...]: logs/NAME.log and logs/NAME.json, then its figures
        local name=$1 cap=$2; shift 2
        step "python3 $*"
        timeout "$(budget "$cap")" python3 "$@" --json "logs/$name.json" > "logs/$name.log" 2>&1
        echo "bench exit $?" >> "logs/$name.log"
        tail -34 "logs/$name.log"  # the figures and, last, the summary table
    }
    step "machine"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.max.sm --format=csv
    ;;
esac

if [ "$part" = gpu-tests-and-make-run ]; then
    gpu_tests_workload 250
    gpu_tests_other 90
    make_run_gpu 120
fi

if [ "$part" = tracking-separable-window ]; then
    bench bench_modes 200 benchmarks/bench_workload.py --modes --quick
    step "tracking probe on the default persistent kernel: configs/tracking_coop.toml"
    timeout "$(budget 130)" python3 -m clusterbench probe --config configs/tracking_coop.toml --tag tracking_coop2 2>&1 \
        | tee logs/probe_tracking_coop.log | tail -16
    python3 scripts/verify_probes.py "results/${day}_f32_tracking_coop2" 2>&1 | tail -2
    bench bench_ablate 120 benchmarks/bench_ablate.py --quick
fi

if [ "$part" = frozen-two-columns-per-lane ]; then
    gpu_tests_workload 200
    bench bench_ablate_frozen 150 benchmarks/bench_ablate.py --only frozen --quick
    if [ -n "${OLD_TREE:-}" ] && [ -d "$OLD_TREE" ]; then
        step "the previous frozen_slide (OLD_TREE), the same timing: 1 stream, CUDA events, 500 frames, median of 5"
        ( cd "$OLD_TREE" && PYTHONPATH="$PWD" timeout "$(budget 60)" python3 -c "
from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.cupy.pipeline import Pipeline
from clusterbench.workloads.synth import build_frames
base = WorkloadParams(frames=2000)
frames = build_frames(base)
for k, cap in ((3, 3000), (9, 1700)):
    p = base.replace(cluster=k, cap=cap, streams=1, batch=500, pedestal_dtype='float32', pedestal='frozen')
    with Pipeline(p, frames, frozen_kernel='slide') as pipe:
        pipe.compute_pedestal()
        a, b = pipe.time_kernel(500, repeats=5), pipe.time_kernel(500, repeats=5, compact=False)
    print(f'previous slide {k}x{k} float32: {a:.3f} us per frame (find only {b:.3f})')
" ) 2>&1 | tee logs/previous_slide.log | tail -4
    fi
    bench bench_grid 100 benchmarks/bench_workload.py --grid
    make_run_gpu 120
fi

if [ "$part" = frozen-slide-variants ]; then
    bench bench_ablate_slide 200 benchmarks/bench_ablate.py --only slide
fi

if [ "$part" = final-kernels ]; then
    gpu_tests_workload 200
    gpu_tests_other 90
    step "a persistent tile too large for shared memory: an InputError before compiling, not a traceback"
    timeout "$(budget 60)" python3 -c "
from clusterbench.errors import InputError
from clusterbench.model.params import WorkloadParams
from clusterbench.workloads.cupy.pipeline import Pipeline
from clusterbench.workloads.synth import build_frames
p = WorkloadParams(cluster=9, cap=1700, pedestal='tracking', pedestal_dtype='float64', frames=100, pool=10,
                   pedestal_frames=20, batch=50, streams=1)
try:
    Pipeline(p, build_frames(p), track_tile_rows=40).close()
    print('UNEXPECTED: no error')
except InputError as exc:
    print('InputError:', exc, '| hint:', exc.hint)
" 2>&1 | tail -3
    bench bench_ablate_slide 120 benchmarks/bench_ablate.py --only slide
    bench bench_grid 100 benchmarks/bench_workload.py --grid
fi

if [ "$part" = modes-and-default-bench ]; then
    bench bench_modes 330 benchmarks/bench_workload.py --modes --quick
    bench bench_default 200 benchmarks/bench_workload.py --frames 2000
fi

if [ "$part" = reference-configs-slide ]; then
    for tag in slide slide_aa; do
        step "the reference configs on the default kernels: clusterbench probe --config configs.toml --tag $tag"
        timeout "$(budget 200)" python3 -m clusterbench probe --config configs.toml --tag "$tag" 2>&1 \
            | tee "logs/probe_$tag.log" | tail -24
        python3 scripts/verify_probes.py "results/${day}_f32_$tag" 2>&1 | tail -2
    done
    step "A/A: clusterbench compare results/${day}_f32_slide results/${day}_f32_slide_aa"
    python3 -m clusterbench compare "results/${day}_f32_slide" "results/${day}_f32_slide_aa" 2>&1 | tee logs/compare_aa.log
    python3 -m clusterbench compare "results/${day}_f32_slide" "results/${day}_f32_slide_aa" --json > logs/compare_aa.json
    step "against twophase: clusterbench compare results/2026-12-01_f32 results/${day}_f32_slide"
    python3 -m clusterbench compare results/2026-12-01_f32 "results/${day}_f32_slide" 2>&1 | tee logs/compare_twophase.log
    python3 -m clusterbench compare results/2026-12-01_f32 "results/${day}_f32_slide" --json > logs/compare_twophase.json
fi

if [ "$part" = register-bound-16-warps ]; then
    gpu_tests_workload 200
    bench bench_ablate_slide 150 benchmarks/bench_ablate.py --only slide
fi

snap
ls -la "$OUT"
