""".nsys-rep handling: finding nsys, exporting into a cache, and the error without nsys."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from clusterbench.analyzers import analyze_trace
from clusterbench.errors import EnvironmentFailure, TraceError
from clusterbench.io.nsys import export as nsys_export
from clusterbench.io.nsys.export import find_nsys

from fake_nsys import Kernel, Range, Trace, build


@pytest.fixture
def no_nsys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv(nsys_export.NSYS_ENV, raising=False)
    monkeypatch.setattr(nsys_export, "NSYS_GLOBS", ())


def fake_nsys(tmp_path: Path, source: Path, exit_code: int = 0) -> Path:
    """A stand-in nsys that 'exports' by copying ``source`` to the -o path and logs each call."""
    script = tmp_path / "bin" / "nsys"
    script.parent.mkdir(exist_ok=True)
    log = tmp_path / "nsys-calls.log"
    script.write_text(
        f"#!{sys.executable}\n"
        "import shutil, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"if {exit_code}:\n"
        "    print('failed to import the report', file=sys.stderr)\n"
        f"    sys.exit({exit_code})\n"
        f"shutil.copyfile({str(source)!r}, sys.argv[sys.argv.index('-o') + 1])\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def make_rep(tmp_path: Path) -> tuple[Path, Path]:
    src = build(tmp_path / "source.sqlite", Trace(kernels=[Kernel(0, 100)], ranges=[Range(0, 50, "pass frames=5")]))
    rep = tmp_path / "reports" / "run.nsys-rep"
    rep.parent.mkdir()
    rep.write_bytes(b"not really a report")
    return src, rep


def test_no_nsys_gives_a_clear_error(no_nsys: None, tmp_path: Path) -> None:
    _, rep = make_rep(tmp_path)
    assert find_nsys() is None
    with pytest.raises(TraceError) as info:
        analyze_trace(rep)
    assert "nsys was not found" in str(info.value) and "run.nsys-rep" in str(info.value)
    assert "nsys export --type sqlite" in (info.value.hint or "")
    assert not (rep.parent / nsys_export.CACHE_DIR).exists()


def test_export_goes_to_cache_and_is_reused(no_nsys: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    src, rep = make_rep(tmp_path)
    monkeypatch.setenv(nsys_export.NSYS_ENV, str(fake_nsys(tmp_path, src)))
    r = analyze_trace(rep)
    assert (r.primary.window.length_ns, r.primary.frames.count, r.primary.busy.engines["kernel"].busy_ns) == (50, 5, 50)
    cached = rep.parent / nsys_export.CACHE_DIR / "run.sqlite"
    assert cached.is_file()
    analyze_trace(rep)
    calls = (tmp_path / "nsys-calls.log").read_text().splitlines()
    assert len(calls) == 1  # the second analyze used the cache
    assert calls[0].startswith("export --type sqlite --force-overwrite=true -o ")  # the probe's command too
    # a newer report invalidates the cache
    os.utime(rep, (cached.stat().st_mtime + 10, cached.stat().st_mtime + 10))
    analyze_trace(rep)
    assert len((tmp_path / "nsys-calls.log").read_text().splitlines()) == 2


def test_fresh_sibling_export_is_used_without_nsys(no_nsys: None, tmp_path: Path) -> None:
    src, rep = make_rep(tmp_path)
    sibling = rep.with_name("run.sqlite")
    shutil.copyfile(src, sibling)
    os.utime(sibling, (rep.stat().st_mtime + 5, rep.stat().st_mtime + 5))
    assert analyze_trace(rep).primary.busy.engines["kernel"].busy_ns == 50


def test_failing_nsys_is_an_environment_failure(no_nsys: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    src, rep = make_rep(tmp_path)
    monkeypatch.setenv(nsys_export.NSYS_ENV, str(fake_nsys(tmp_path, src, exit_code=3)))
    with pytest.raises(EnvironmentFailure, match="nsys export exited 3.*failed to import the report"):
        analyze_trace(rep)


def test_find_nsys_prefers_path_then_newest_install(no_nsys: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for version in ("2024.5.1", "2025.3.2", "2025.10.1"):
        b = tmp_path / "opt" / f"nsight-systems-{version}" / "bin" / "nsys"
        b.parent.mkdir(parents=True)
        b.write_text("#!/bin/sh\n")
        b.chmod(0o755)
    monkeypatch.setattr(nsys_export, "NSYS_GLOBS", (str(tmp_path / "opt" / "nsight-systems-*" / "bin" / "nsys"),))
    assert find_nsys() == tmp_path / "opt" / "nsight-systems-2025.10.1" / "bin" / "nsys"
    on_path = tmp_path / "empty-bin" / "nsys"
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    assert find_nsys() == on_path


def test_qdrep_is_an_older_report_not_a_bad_database(tmp_path: Path, no_nsys: None) -> None:
    rep = tmp_path / "old.qdrep"
    rep.write_bytes(b"QDREP-ish report bytes")
    with pytest.raises(TraceError) as info:
        analyze_trace(rep)
    msg = str(info.value)
    assert "older nsys report (.qdrep" in msg and "not an SQLite database" not in msg
    assert "nsys export --type sqlite" in (info.value.hint or "")


def test_qdrep_is_exported_like_nsys_rep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = build(tmp_path / "src.sqlite", Trace(kernels=[Kernel(0, 100)], ranges=[Range(0, 100, "pass frames=4")]))
    nsys = fake_nsys(tmp_path, source)
    monkeypatch.setenv(nsys_export.NSYS_ENV, str(nsys))
    rep = tmp_path / "old.qdrep"
    rep.write_bytes(b"report")
    r = analyze_trace(rep)
    assert r.primary.frames.count == 4 and r.primary.busy.engines["kernel"].busy_ns == 100
    assert (tmp_path / nsys_export.CACHE_DIR / "old.sqlite").is_file()
