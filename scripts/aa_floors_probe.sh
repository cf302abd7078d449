#!/usr/bin/env bash
# Probes one build again and again on this machine, for clusterbench floors: the A/A dirs of one machine.
#   bash scripts/aa_floors_probe.sh OUTDIR [PROBES]
# Run it on each of several freshly started machines of one GPU model (4 or more: 4 units make 6 pairs of
# units, the least a floor needs), from a clean checkout of one git rev. Steps:
#   1. say which GPU unit (UUID) and host this is;
#   2. PROBES times (default 2), one after the other, each its own session (as a user probes a baseline,
#      then again): clusterbench probe --config configs/smoke.toml --tag aa<i>_<unit>, into OUTDIR/results/
#      (AA_ONE_SESSION=1: all of them in one session, --session aa_<unit>, for within-session floors);
#   3. a summary: each dir, its session, and per config sustained FPS and whether it reached steady state.
# Then, with the dirs of every machine gathered under results/:
#   clusterbench floors results/*_aa*_GPU-* [other A/A dirs of the model] [--force]
#   python3 benchmarks/aa_false_positives.py --held-out --markdown
#   python3 scripts/floors_table.py results/floors/<GPU model>.json
# Time: about 30 s per probe on an H200 (make run's smoke configs), so about 1 minute for 2 probes.
# Exit status 1 when a probe failed or wrote no dir, else 0.
#
# Environment (optional): PYTHON (python3), AA_ONE_SESSION (0).
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/scripts/lib/gpu_script.sh"
case "${1:-}" in
    -h|--help) gpu_script_usage "${BASH_SOURCE[0]}" "bash scripts/aa_floors_probe.sh OUTDIR [PROBES]"; exit 0 ;;
esac
require_gpu_and_nsys scripts/aa_floors_probe.sh  # GPU only: say so before any work
if [ -z "${1:-}" ]; then
    echo "Error: no OUTDIR given" >&2
    echo "Hint: bash scripts/aa_floors_probe.sh OUTDIR [PROBES] (bash scripts/aa_floors_probe.sh --help)" >&2
    exit 2
fi
probes=${2:-2}
case "$probes" in
    ''|*[!0-9]*|0|1) echo "Error: PROBES must be a whole number of 2 or more, got '$probes'" >&2
                     echo "Hint: an A/A needs two probes of one build at least (default 2)" >&2; exit 2 ;;
esac
out=$1
mkdir -p "$out/results" || exit 2
out=$(cd "$out" && pwd)
cd "$root" || exit 2
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"

uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0 2>/dev/null | head -1 | tr -d ' ')
unit=${uuid:0:12}
unit=${unit:-unknown}
echo "aa_floors_probe: GPU 0 is ${uuid:-of unknown UUID} on host $(hostname); git $(git rev-parse --short=12 HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ' (dirty: floors will refuse these dirs)')"
session_args=()
if [ "${AA_ONE_SESSION:-0}" = 1 ]; then
    session_args=(--session "aa_$unit")
fi
status=0
for i in $(seq 1 "$probes"); do
    tag="aa${i}_${unit}"
    echo "aa_floors_probe: probe $i of $probes: clusterbench probe --config configs/smoke.toml --tag $tag ${session_args[*]:-}" >&2
    t0=$(date +%s)
    if ! "$PYTHON" -m clusterbench probe --config configs/smoke.toml --tag "$tag" --results-dir "$out/results" \
            "${session_args[@]}"; then
        echo "aa_floors_probe: probe $i failed" >&2
        status=1
    fi
    echo "aa_floors_probe: probe $i took $(( $(date +%s) - t0 )) s" >&2
done

echo
echo "summary (OUTDIR/results):"
"$PYTHON" - "$out/results" "$unit" "$probes" <<'EOF' || status=1
import sys
from pathlib import Path

from clusterbench.io.results import load_results
from clusterbench.model import units

root, unit, probes = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
dirs = sorted(d for d in root.iterdir() if d.is_dir() and d.name.endswith(f"_{unit}") and "_aa" in d.name)
for d in dirs:
    res = load_results(d)
    env = res.env
    print(f"{d.name}: session {env.session_id if env else '?'}, GPU {env.gpu_uuid if env else '?'}")
    for r in res.rows:
        steady = r.value("sustained_steady")
        print(f"  {r.label:<22} sustained {units.fps(r.sustained_fps):>14}  steady: {steady if steady is not None else '?'}")
if len(dirs) != probes:
    print(f"Error: {len(dirs)} A/A dirs written for this unit, {probes} expected", file=sys.stderr)
    raise SystemExit(1)
EOF
exit $status
