"""The one process supervisor: logs, exit statuses, time limits and Ctrl-C ending a child's whole process
group. The children are tiny Python programs written here (the outermost edge)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import types
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentFailure, InputError
from clusterbench.run import supervisor as sup


def _spawner(pid_file: Path, *, ignore_term: bool = False) -> tuple[str, ...]:
    """A child that starts a grandchild (in the child's process group), writes the grandchild's pid,
    and sleeps; with ``ignore_term`` it ignores SIGTERM."""
    code = ("import signal, subprocess, sys, time\n"
            + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
            + "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            + f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
            + "time.sleep(60)\n")
    return (sys.executable, "-c", code)


def _gone(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` has exited (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def _wait_for(path: Path, within_s: float = 20.0) -> None:
    deadline = time.monotonic() + within_s
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.01)


def test_a_child_runs_with_its_output_in_a_log_under_a_header(tmp_path: Path) -> None:
    log = tmp_path / "sub" / "c.log"
    out = sup.run_child(sup.ChildSpec((sys.executable, "-c", "print('hello')"), log, header="what runs"))
    assert out.ok and out.returncode == 0 and out.status_text == "exit status 0" and not out.timed_out
    assert log.read_text() == f"# what runs\n$ {sys.executable} -c 'print('\"'\"'hello'\"'\"')'\nhello\n"
    assert out.tail.splitlines()[-1] == "hello" and out.ended_s >= out.started_s


def test_a_child_runs_in_a_session_of_its_own(tmp_path: Path) -> None:
    code = "import os; print(os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid(), os.getpgid(0))"
    out = sup.run_child(sup.ChildSpec((sys.executable, "-c", code), tmp_path / "s.log"))
    own_session, own_group, group = out.tail.splitlines()[-1].split()
    assert (own_session, own_group) == ("True", "True")  # it leads its own session and group: both can be ended
    assert int(group) != os.getpgid(0)  # not this process's group: ending it leaves this process alone


def test_a_child_ended_by_a_signal_says_which(tmp_path: Path) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    out = sup.run_child(sup.ChildSpec((sys.executable, "-c", code), tmp_path / "k.log"))
    assert out.returncode == -signal.SIGKILL and not out.ok and out.status_text == "ended by signal SIGKILL"
    with pytest.raises(EnvironmentFailure) as err:
        sup.require_ok(out, "the killed child")
    assert str(err.value).startswith("the killed child was ended by signal SIGKILL; last lines of k.log:\n")


def test_a_stubborn_child_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    out = sup.run_child(sup.ChildSpec(_spawner(pid_file, ignore_term=True), tmp_path / "t.log", timeout_s=1.0,
                                      grace_s=0.5))
    assert time.monotonic() - started < 20
    assert out.timed_out and out.returncode == -signal.SIGKILL and out.timeout_s == 1.0
    assert out.status_text == "stopped at its time limit of 1 s"
    assert out.describe("the run").startswith("the run was still running at its time limit of 1 s: its process "
                                              "group was ended; last lines of t.log:\n")
    assert _gone(int(pid_file.read_text()))  # SIGKILL went to the whole group


def test_ctrl_c_ends_every_childs_group_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pids = [tmp_path / "a.pid", tmp_path / "b.pid"]

    def sleep_until_ctrl_c(seconds: float) -> None:  # the user presses Ctrl-C once both grandchildren run
        if all(p.exists() and p.read_text() for p in pids):
            raise KeyboardInterrupt
        time.sleep(seconds)

    monkeypatch.setattr(sup, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=sleep_until_ctrl_c))
    specs = [sup.ChildSpec(_spawner(p), tmp_path / f"{p.stem}.log") for p in pids]
    with pytest.raises(KeyboardInterrupt):
        sup.run_children(specs)
    for p in pids:
        assert _gone(int(p.read_text())), p  # no orphan keeps a GPU busy


def test_a_missing_program_is_an_outcome(tmp_path: Path) -> None:
    out = sup.run_child(sup.ChildSpec((str(tmp_path / "nope"),), tmp_path / "n.log"))
    assert out.returncode is None and not out.ok and out.start_error.startswith(f"cannot start {tmp_path / 'nope'}")
    assert out.describe("the tool") == f"the tool did not start: {out.start_error}"
    assert f"cannot start {tmp_path / 'nope'}" in (tmp_path / "n.log").read_text()


def test_the_outcome_round_trips_through_json(tmp_path: Path) -> None:
    out = sup.ChildOutcome(("a", "b"), tmp_path / "x.log", -15, 0.5, 2.0, timeout_s=1.5, timed_out=True,
                           tail="last\nlines", output_start=12, output_end=40, marks=((0.25, 1.5), ()))
    doc = json.loads(json.dumps(out.to_json()))
    assert doc["version"] == 2 and doc["timed_out"] is True and doc["returncode"] == -15
    assert sup.ChildOutcome.from_json(doc) == out
    # a version-1 outcome (no output range, no marks) reads with none
    old = {k: v for k, v in doc.items() if k not in ("output_start", "output_end", "marks")}
    assert sup.ChildOutcome.from_json({**old, "version": 1}) == sup.ChildOutcome(
        ("a", "b"), tmp_path / "x.log", -15, 0.5, 2.0, timeout_s=1.5, timed_out=True, tail="last\nlines")
    with pytest.raises(InputError, match="child outcome: version 3"):
        sup.ChildOutcome.from_json({**doc, "version": 3})


def test_watched_lines_are_timed_and_the_output_is_the_childs_own(tmp_path: Path) -> None:
    # the child prints 'start', sleeps 0.3 s, prints 'end': the marks are 0.3 s apart (give or take the poll)
    code = "import time\nprint('start', flush=True)\ntime.sleep(0.3)\nprint('end', flush=True)"
    out = sup.run_child(sup.ChildSpec((sys.executable, "-c", code), tmp_path / "w.log", header="watched",
                                      watch=("^start", "^end")))
    assert out.ok and len(out.marks) == 2 and len(out.marks[0]) == 1 and len(out.marks[1]) == 1
    assert 0.25 <= out.marks[1][0] - out.marks[0][0] <= 1.0
    assert out.output() == "start\nend\n"  # without the header and command lines of the log
    assert (tmp_path / "w.log").read_text().startswith("# watched\n$ ")


def test_log_tail_quotes_the_last_non_empty_lines(tmp_path: Path) -> None:
    log = tmp_path / "l.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(20)))
    assert sup.log_tail(log, 3) == "line 17\nline 18\nline 19"
    assert sup.log_tail(log).splitlines()[0] == "line 5"  # 15 lines by default
    assert sup.log_tail(tmp_path / "none.log") == "(no log)"
    (tmp_path / "empty.log").write_text("\n \n")
    assert sup.log_tail(tmp_path / "empty.log") == "(empty log)"
