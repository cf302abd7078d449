import json
import subprocess
import sys

import pytest

from clusterbench.workloads.cupy import run


def test_bad_json_is_exit_2_without_traceback(capsys):
    assert run.main(["--params-json", "{cluster: 3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: --params-json is not valid JSON") and "Traceback" not in err


def test_bad_value_is_exit_2(capsys):
    assert run.main(["--params-json", json.dumps({"cluster": 4})]) == 2
    err = capsys.readouterr().err
    assert "workload parameter 'cluster': must be odd" in err and "Hint:" in err


def test_params_from_a_file(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"transfer": "dma"}))
    assert run.main(["--params-json", f"@{f}"]) == 2
    assert "workload parameter 'transfer': must be one of" in capsys.readouterr().err


def test_range_text_carries_the_frame_count():
    assert run.pass_range_text(20000) == "clusterbench:pass frames=20000"
    assert run.PEDESTAL_RANGE == "clusterbench:pedestal"


def test_without_cupy_the_process_says_so_and_exits_1():
    try:
        import cupy  # noqa: F401
        pytest.skip("CuPy is importable here")
    except Exception:
        pass
    proc = subprocess.run([sys.executable, "-m", "clusterbench.workloads.cupy.run", "--params-json",
                           json.dumps({"frames": 10, "rows": 8, "cols": 8, "pedestal_frames": 2, "batch": 5, "cap": 10})],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: CuPy is not importable") and "Traceback" not in proc.stderr
