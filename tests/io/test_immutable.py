"""A trace on a network file system is opened with immutable=1 (no file locks), read-only either way:
the mount that holds a path and its type come from mountinfo; CLUSTERBENCH_IMMUTABLE forces it on or
off; the answers are the same, and nothing is written beside the trace."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from clusterbench.analyzers.analysis import analyze_trace
from clusterbench.io.nsys import reader as R
from clusterbench.render.analyze import render_json

DEV = Path(__file__).resolve().parents[1] / "data" / "h200" / "dev_7x7_s3_b250_async.sqlite"

MOUNTINFO = """\
22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
40 22 0:45 / /mnt/data rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2
41 22 0:46 / /mnt/data/local rw,relatime shared:21 - xfs /dev/vdb rw
42 22 0:47 / /mnt/my\\040share rw,relatime shared:22 - cifs //srv/share rw
"""


@pytest.fixture
def mountinfo(tmp_path: Path) -> str:
    p = tmp_path / "mountinfo"
    p.write_text(MOUNTINFO)
    return str(p)


@pytest.mark.parametrize(("path", "kind"), [
    ("/mnt/data/run.sqlite", "nfs4"), ("/mnt/data", "nfs4"), ("/mnt/data/local/run.sqlite", "xfs"),
    ("/mnt/database/run.sqlite", "ext4"), ("/home/u/run.sqlite", "ext4"), ("/mnt/my share/a.sqlite", "cifs"),
])  # fmt: skip
def test_the_mount_holding_a_path(path: str, kind: str, mountinfo: str) -> None:
    assert R._mount_type(Path(path), mountinfo) == kind


def test_no_mountinfo_means_unknown(tmp_path: Path) -> None:
    assert R._mount_type(Path("/x"), str(tmp_path / "absent")) is None


def test_the_setting_and_the_file_system_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(R.IMMUTABLE_ENV, raising=False)
    monkeypatch.setattr(R, "_mount_type", lambda p, *a: "nfs4")
    assert R.immutable(Path("/x"))
    monkeypatch.setattr(R, "_mount_type", lambda p, *a: "ext4")
    assert not R.immutable(Path("/x"))
    monkeypatch.setenv(R.IMMUTABLE_ENV, "1")
    assert R.immutable(Path("/x"))
    monkeypatch.setenv(R.IMMUTABLE_ENV, "0")
    monkeypatch.setattr(R, "_mount_type", lambda p, *a: "nfs4")
    assert not R.immutable(Path("/x"))


def test_immutable_reads_the_same_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "t.sqlite"
    shutil.copyfile(DEV, trace)
    monkeypatch.setenv(R.IMMUTABLE_ENV, "0")
    plain = render_json(analyze_trace(trace))
    uris: list[str] = []
    real = sqlite3.connect

    def spy(database, *a, **k):  # noqa: ANN001, ANN002, ANN003
        uris.append(str(database))
        return real(database, *a, **k)

    monkeypatch.setattr(R.sqlite3, "connect", spy)
    monkeypatch.setenv(R.IMMUTABLE_ENV, "1")
    assert render_json(analyze_trace(trace)) == plain
    assert uris and all(u.endswith("?mode=ro&immutable=1") for u in uris)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.sqlite"]  # no journal, WAL or shared-memory file
    with pytest.raises(sqlite3.OperationalError):
        R.connect_read_only(trace).execute("CREATE TABLE x (a)")
