#!/usr/bin/env bash
# "Did my change help?" on one freshly started GPU machine, as a user asks it, with no --session and no floors
# file for the model: about 4 to 5 minutes on an H100.
#   bash scripts/device_verdicts.sh OUT [--what STEPS]
# Steps (each prints its command first and logs to OUT/<step>.log; a failing step is reported, the others go on):
#   make_run  `make run` timed whole (the first thing on the fresh machine: make's set-up, the guards, the unit's
#             link, four configs traced and each measured in 3 untraced processes); its dir becomes aa1;
#   aa2       the same probe again (clusterbench probe --config configs/smoke.toml): the A/A pair of this machine;
#   delay5    3x3_s1_uncontended probed plainly, then right after with configs/smoke_delay5.toml (5 % of GPU delay);
#   delay20   the same with configs/smoke_delay20.toml (20 %);
#   f64       configs/smoke_f64.toml: the one-stream configs with a float64 pedestal (against aa2's float32);
#   zoo       tests/zoo/build.sh turns, then the zoo's turns program probed as it is (--rate, 20,000 frames) twice
#             (A/A), then with 5 % more host work per frame (its own --spin-us flag, which runs while the GPU
#             idles: 5 % of the frame time the first probe measured; a longer GPU spin moved the frame by 1.5 % on
#             an H200 and by 9 % on an H100, through the synchronize's wake-up, docs/compare.md);
#   compare   every pair: aa1 -> aa1 (itself), aa1 -> aa2, base5 -> delay5, base20 -> delay20, aa2 -> f64,
#             zoo_a -> zoo_b, zoo_a -> zoo_delay5; text, --json, and the exit status of --gate 3 for each;
#   gpu_tests the GPU tests of the unit's link and of the sustained processes (pytest -m gpu, about 30 s).
# STEPS: a comma list of the step names above (default: all, in that order; compare only compares what exists).
# Outputs under OUT: the step logs (and steps.txt: each step's exit and time); results/ (every results dir made here, renamed <date>_<dtype>_<what>_<unit>,
# without traces: probes.csv, env.json, samples.json, the logs); compare/ (each compare's text, JSON and gate
# exit); summary.txt (wall times, the unit block, the verdicts, the gate exits); results.tgz (results/ for the
# lead: clusterbench floors and scripts/bounds_table.py read the dirs of several machines).
# Environment (optional): PYTHON (python3), ZOO_ARCH (tests/zoo/build.sh's default).
# The exit status is 1 when any step failed (a compare's gate exit is a result, not a failure).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/gpu_script.sh"
case "${1:-}" in
    -h|--help) gpu_script_usage "${BASH_SOURCE[0]}" "bash scripts/device_verdicts.sh OUT [--what STEPS]"; exit 0 ;;
esac
all="make_run,aa2,delay5,delay20,f64,zoo,compare,gpu_tests"
what=$all
out_arg=""
while [ $# -gt 0 ]; do
    case "$1" in
        --what) what=${2:-}; shift 2 || { echo "Error: --what needs a value" >&2; exit 2; } ;;
        --what=*) what=${1#--what=}; shift ;;
        -*) echo "Error: unknown option $1" >&2; echo "Hint: bash scripts/device_verdicts.sh OUT [--what STEPS]" >&2; exit 2 ;;
        *) [ -z "$out_arg" ] || { echo "Error: one OUT folder, got $out_arg and $1" >&2; exit 2; }; out_arg=$1; shift ;;
    esac
done
IFS=',' read -r -a steps <<< "$what"
for s in "${steps[@]}"; do
    case ",$all," in *",$s,"*) ;; *) echo "Error: --what: unknown step '$s'" >&2; echo "Hint: steps: $all" >&2; exit 2 ;; esac
done
if [ -z "$out_arg" ]; then
    echo "Error: no OUT folder given" >&2; echo "Hint: bash scripts/device_verdicts.sh OUT [--what STEPS]" >&2; exit 2
fi
# nsys on PATH on the GPU machine (only there: elsewhere the refusal below comes first)
if [ -f "$root/.device/env.sh" ] && command -v nvidia-smi >/dev/null 2>&1; then . "$root/.device/env.sh"; fi
require_gpu_and_nsys scripts/device_verdicts.sh
mkdir -p "$out_arg/results" "$out_arg/compare" || exit 2
out=$(cd "$out_arg" && pwd)
cd "$root" || exit 2
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
export COLUMNS=${COLUMNS:-100}
gpu_steps_start
wants() { case ",$what," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 2>/dev/null | head -1 | tr -d ' ')
unit=${uuid:0:12}
unit=${unit:-unknown}
today=$(date +%F)
res="$out/results"
{
    echo "device_verdicts: $(hostname), GPU 0 $(nvidia-smi --query-gpu=name,uuid,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader -i 0 2>/dev/null)"
    echo "device_verdicts: uptime $(cut -d' ' -f1 /proc/uptime) s; git $(git rev-parse --short=12 HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo ' dirty'); steps $what"
} | tee "$out/machine.txt"


probe() {  # probe NAME TAG ARGS...: clusterbench probe into OUT/results with --tag TAG_<unit>
    local name=$1 tag=$2
    shift 2
    run "$name" "$PYTHON" -m clusterbench probe --results-dir "$res" --tag "${tag}_$unit" "$@"
}

dir_of() {  # dir_of DTYPE TAG: the results dir a probe of that tag wrote today
    echo "$res/${today}_${1}_${2}_$unit"
}

slim() {  # slim DIR: drop the traces (large; kept out of the tarball), keep rows, env, samples and logs
    rm -f "$1"/*.sqlite "$1"/*.nsys-rep "$1"/*.qdrep 2>/dev/null
}

if wants make_run; then
    # make run as a user runs it, first on the fresh machine; its dir (results/<date>_f32_smoke) becomes aa1
    rm -rf "$root/results/${today}_f32_smoke"
    run make_run make run
    if [ -d "$root/results/${today}_f32_smoke" ]; then
        rm -rf "$(dir_of f32 aa1)"
        mv "$root/results/${today}_f32_smoke" "$(dir_of f32 aa1)"
    fi
fi
wants aa2 && probe aa2 aa2 --config configs/smoke.toml
if wants delay5; then
    probe base5 base5 --config configs/smoke.toml --only 3x3_s1_uncontended
    probe delay5 delay5 --config configs/smoke_delay5.toml
fi
if wants delay20; then
    probe base20 base20 --config configs/smoke.toml --only 3x3_s1_uncontended
    probe delay20 delay20 --config configs/smoke_delay20.toml
fi
wants f64 && probe f64 f64 --config configs/smoke_f64.toml
if wants zoo; then
    zoo="$out/zoo_programs"
    if run zoo_build bash tests/zoo/build.sh "$zoo" turns; then
        turns=(--label turns --frames kernel:zoo_calib --rate 'rate: ([0-9.]+) frames/s')
        probe zoo_a zoo_a "${turns[@]}" -- "$zoo/turns" --frames 20000 --spin-us 30 --kernel-us 20
        probe zoo_b zoo_b "${turns[@]}" -- "$zoo/turns" --frames 20000 --spin-us 30 --kernel-us 20
        # 5 % of the frame time zoo_a measured, added to the host work of each frame (in series with the GPU's)
        extra=$("$PYTHON" - "$(dir_of exec zoo_a)" <<'EOF'
import sys
from clusterbench.io.results import load_results
r = load_results(sys.argv[1]).rows[0]
print(f"{30 + 0.05 * 1e6 / r.sustained_fps:.3f}")
EOF
)
        echo "zoo: the 5 % delay: --spin-us ${extra:-?} (30 µs + 5 % of zoo_a's frame time)" | tee -a "$out/zoo_build.log"
        [ -n "$extra" ] && probe zoo_delay5 zoo_delay5 "${turns[@]}" -- "$zoo/turns" --frames 20000 \
            --spin-us "$extra" --kernel-us 20
    fi
fi
for d in "$res"/*/; do slim "$d"; done

compare() {  # compare NAME BEFORE AFTER: the text, the JSON, and --gate 3's exit status
    local name=$1 a=$2 b=$3
    [ -d "$a" ] && [ -d "$b" ] || { echo "compare $name: $(basename "$a") or $(basename "$b") missing: skipped"; return; }
    echo
    echo "=== compare $name: $(basename "$a") -> $(basename "$b")"
    "$PYTHON" -m clusterbench compare "$a" "$b" > "$out/compare/$name.txt" 2> "$out/compare/$name.err"
    "$PYTHON" -m clusterbench compare "$a" "$b" --json > "$out/compare/$name.json" 2>/dev/null
    "$PYTHON" -m clusterbench compare "$a" "$b" --gate 3 > /dev/null 2> "$out/compare/$name.gate3.err"
    local gate=$?
    echo "$gate" > "$out/compare/$name.gate3.exit"
    cat "$out/compare/$name.txt" "$out/compare/$name.err"
    echo "--gate 3: exit $gate: $(grep -m1 '^Error:' "$out/compare/$name.gate3.err" || echo 'passed')"
}
if wants compare; then
    {
        compare itself "$(dir_of f32 aa1)" "$(dir_of f32 aa1)"
        compare aa "$(dir_of f32 aa1)" "$(dir_of f32 aa2)"
        compare delay5 "$(dir_of f32 base5)" "$(dir_of f32 delay5)"
        compare delay20 "$(dir_of f32 base20)" "$(dir_of f32 delay20)"
        compare f64 "$(dir_of f32 aa2)" "$(dir_of f64 f64)"
        compare zoo_aa "$(dir_of exec zoo_a)" "$(dir_of exec zoo_b)"
        compare zoo_delay5 "$(dir_of exec zoo_a)" "$(dir_of exec zoo_delay5)"
    } 2>&1 | tee "$out/compare.log"
fi

if wants gpu_tests; then
    run gpu_tests "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider tests/run/test_unit.py \
        tests/run/test_tracers_gpu.py
fi
(cd "$out" && tar czf results.tgz results) || failed=1
{
    echo
    echo "=== summary (scripts/device_verdicts.sh, $(since "$t_start") s in all)"
    cat "$out/machine.txt"
    printf '%-12s %-6s %8s\n' step "exit" seconds
    for r in "${rows[@]}"; do
        IFS='|' read -r name rc secs <<< "$r"
        printf '%-12s %-6s %8s\n' "$name" "$rc" "$secs"
    done
    echo
    echo "the unit (env.json's unit block of aa1):"
    "$PYTHON" - "$(dir_of f32 aa1)" <<'EOF' || true
import json, sys
u = json.load(open(sys.argv[1] + "/env.json")).get("unit") or {}
link = u.get("link") or {}
print(f"  {u.get('unit_id')}: {u.get('gpu_name')}, CPU {u.get('cpu_model')}")
for k in ("h2d", "d2h", "duplex_h2d", "duplex_d2h"):
    r = link.get(k) or {}
    print(f"  {k:11} {r.get('gbps', float('nan')):7.2f} GB/s  samples {r.get('samples_gbps')}")
print(f"  pcie {u.get('pcie')}; numa {u.get('numa')}; clocks {u.get('clocks')}; problem {u.get('link_problem')}")
EOF
    echo
    echo "verdicts (sustained FPS and end to end per row; --gate 3's exit):"
    for j in "$out"/compare/*.json; do
        [ -f "$j" ] || continue
        n=$(basename "$j" .json)
        "$PYTHON" - "$j" "$n" "$(cat "$out/compare/$n.gate3.exit" 2>/dev/null)" <<'EOF' || true
import json, sys
doc = json.load(open(sys.argv[1]))
print(f"  {sys.argv[2]} (--gate 3: exit {sys.argv[3]}):")
for r in doc["rows"]:
    m = r["metrics"].get("sustained_fps") or {}
    k = r["metrics"].get("kernel_us") or {}
    fmt = lambda x: "-" if x is None else f"{x:+.2f} %"
    print(f"    {r['label']:20} kernel {fmt(k.get('delta_pct')):>9} {k.get('verdict', '-'):14} sustained "
          f"{fmt(m.get('delta_pct')):>9} {m.get('verdict', '-')}{' prov.' if m.get('provisional') else ''} "
          f"({m.get('reason_code', '-')}, noise {fmt(m.get('noise_pct')).lstrip('+')}); end to end "
          f"{r['end_to_end']['verdict']}")
EOF
    done
    echo
    echo "probe wall times (s): $(for r in "${rows[@]}"; do IFS='|' read -r n c s <<< "$r"; printf '%s %s; ' "$n" "$s"; done)"
    echo "bring back: $out/results.tgz (and summary.txt, compare/)"
} | tee "$out/summary.txt"
exit "$failed"
