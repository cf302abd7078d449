"""`clusterbench analyze --json` of every export under tests/data (and of any traces named), saved or
compared byte for byte against a saved set: the check that a change to the reader or the analyzers
leaves every answer as it was.

    python benchmarks/compare_json.py --save benchmarks/out/json_before        # with the old code
    python benchmarks/compare_json.py --against benchmarks/out/json_before     # with the new code
    python benchmarks/compare_json.py --against DIR --extra benchmarks/out/big_1000000.sqlite

The JSON comes from the library (``analyze_trace``, over the trace's time slabs, or with --whole the
trace read whole: ``load_trace`` then ``analyze``; then ``render_json``) in this process, with the
environment as it is (CLUSTERBENCH_CHUNK_ROWS=64 runs it in 64-row chunks). Exit 0 when every file
matches, 3 when one differs (each difference named with its first differing line), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not os.environ.get("PYTHONPATH"):  # PYTHONPATH picks another checkout's code (the one before a change)
    sys.path.insert(0, str(ROOT))


def traces(extra: list[Path]) -> list[Path]:
    return sorted((ROOT / "tests" / "data").rglob("*.sqlite")) + list(extra)


def _name(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(ROOT)).replace("/", "__") + ".json"
    except ValueError:
        return p.name + ".json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--save", type=Path, help="write each trace's JSON into this folder")
    ap.add_argument("--against", type=Path, help="compare each trace's JSON with the one saved in this folder")
    ap.add_argument("--extra", type=Path, nargs="*", default=[], help="more traces (the benchmark's, say)")
    ap.add_argument("--whole", action="store_true", help="analyse each trace read whole (load_trace, analyze) instead of "
                    "through analyze_trace, which reads whole or over time slabs as CLUSTERBENCH_ANALYZE_PATH says "
                    "(auto: by size); --save with one way and --against with the other compares the two")
    args = ap.parse_args()
    if (args.save is None) == (args.against is None):
        print("Error: give one of --save DIR or --against DIR", file=sys.stderr)
        return 2
    from clusterbench.analyzers.analysis import analyze, analyze_trace, load_trace, request
    from clusterbench.errors import ClusterbenchError
    from clusterbench.render.analyze import render_json

    differ = 0
    for p in traces(args.extra):
        try:
            if args.whole:
                req, cache = request(), {}
                text = render_json(analyze(load_trace(p, req=req, cache=cache), req=req, trace_label=str(p), cache=cache))
            else:
                text = render_json(analyze_trace(p))
        except ClusterbenchError as exc:  # a trace analyze refuses: its message is the answer
            text = f"Error: {exc}\n"
        name = _name(p)
        if args.save is not None:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / name).write_text(text, encoding="utf-8")
            print(f"saved {name}")
            continue
        ref = args.against / name
        if not ref.exists():
            print(f"MISSING {name} (not in {args.against})")
            differ += 1
            continue
        old = ref.read_text(encoding="utf-8")
        if old == text:
            print(f"same    {name}")
        else:
            differ += 1
            first = next(difflib.unified_diff(old.splitlines(), text.splitlines(), lineterm="", n=0), None)
            lines = list(difflib.unified_diff(old.splitlines(), text.splitlines(), lineterm="", n=0))[2:6]
            print(f"DIFFERS {name}: " + " | ".join(lines) if first else f"DIFFERS {name}")
    if args.against is not None:
        print(f"{differ} of {len(traces(args.extra))} differ")
    return 3 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
