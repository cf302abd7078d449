#!/usr/bin/env bash
# The H200 campaign, in two parts that each fit one device call (10 minutes at most).
# Run from the repo root on the GPU machine after `source .device/env.sh`:
#   bash scripts/device_campaign.sh A   # GPU tests, workload benchmark, guards (real NVML, busy GPU,
#                                       # stale build, bad config), make run (the 2000-frame smoke)
#   bash scripts/device_campaign.sh B   # make sweep (20,000 frames), rows vs analyze, cupti vs nsys,
#                                       # compare smoke vs sweep
#   bash scripts/device_campaign.sh C   # the reference campaign on the final code: test suite, make sweep,
#                                       # rows vs analyze, cupti vs nsys, zerocopy, float64, compare f32 vs f64
# A copy of the checkout without .git states its revision through CLUSTERBENCH_GIT_REV; the caller
# writes it to .device/REVISION first (git rev-parse HEAD, plus -dirty for a dirty tree).
# Logs and a tarball of results (no traces but one) go to $OUT.
set -u
part=${1:?usage: device_campaign.sh A|B}
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

if [ "$part" = A ]; then
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

if [ "$part" = B ]; then
    step "the tracers' GPU tests"
    python3 -m pytest -m gpu -q -p no:cacheprovider tests/tracing 2>&1 | tee logs/pytest_tracing.log | tail -5
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

if [ "$part" = C ]; then
    step "test suite (CPU and GPU tests) on the final code"
    python3 -m pytest -q -p no:cacheprovider 2>&1 | tee logs/pytest.log | tail -8
    step "make sweep (the reference campaign: every config at 20,000 frames, float32)"
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

snap
ls -la "$OUT"
