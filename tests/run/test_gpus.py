"""The GPUs of a run on injected NVML answers: selection, affinity, pinning, the plan (one guard verdict),
the sustained-FPS runner for 1..N GPUs (a tiny child program written here is the outermost edge), and
the rows."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import types
from pathlib import Path

import pytest

from clusterbench.errors import EnvironmentFailure, InputError, WorkloadProtocolError
from clusterbench.run import gpus as gpumod
from clusterbench.run import machine
from clusterbench.run import rows as rowmod
from clusterbench.run import supervisor as sup
from clusterbench.run import sustained as sus
from clusterbench.model.steady import SteadyRule, whole_runs_rule
from clusterbench.run.guards import NvmlReading
from clusterbench.io.results import load_results, merge_results
from clusterbench.model.measurement import SUSTAINED_FPS, Measurement
from clusterbench.model.results import EnvRecord, ResultRow, ResultSet, RowKey, RowRole


def _fps(values: list[float]) -> Measurement:
    return Measurement(SUSTAINED_FPS, tuple(values))

MIB = 1024 * 1024


# ----------------------------------------------------------------------------- --gpus


@pytest.mark.parametrize("text, indices", [("0", (0,)), ("0,2", (0, 2)), (" 3 , 1 ", (3, 1))])
def test_selection_lists_indices_in_the_order_given(text: str, indices: tuple[int, ...]) -> None:
    sel = machine.parse_gpu_selection(text)
    assert not sel.all and sel.indices == indices


def test_selection_all_is_case_blind() -> None:
    assert machine.parse_gpu_selection("ALL").all


@pytest.mark.parametrize("text, words", [
    ("", "empty"), ("  ", "empty"), ("0,,1", "empty entry"), ("a", "'a' is not a GPU index"),
    ("-1", "'-1' is negative"), ("0,1,0", "names GPU 0 twice"), ("1.5", "not a GPU index"),
])
def test_bad_selection_is_input_error_exit_2(text: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        machine.parse_gpu_selection(text)
    assert err.value.exit_code == 2
    assert words in str(err.value)
    assert "--gpus all" in (err.value.hint or "")


def _gpu(index: int, cpus: tuple[int, ...] | None = (0, 1), nodes: tuple[int, ...] | None = (0,),
         name: str = "NVIDIA H200") -> machine.GpuInfo:
    return machine.GpuInfo(index=index, uuid=f"GPU-{index:04d}", name=name, pci_bus_id=f"00000000:{index + 16:02X}:00.0",
                      cpus=cpus, mem_nodes=nodes,
                      cpu_source=machine.AffinitySource.NVML if cpus else machine.AffinitySource.NONE,
                      mem_source=machine.AffinitySource.NVML if nodes else machine.AffinitySource.NONE)


def test_resolve_all_and_listed() -> None:
    gpus = (_gpu(1), _gpu(0), _gpu(2))
    assert [g.index for g in machine.resolve_selection(machine.parse_gpu_selection("all"), gpus)] == [0, 1, 2]
    assert [g.index for g in machine.resolve_selection(machine.parse_gpu_selection("2,0"), gpus)] == [2, 0]


def test_unknown_index_names_what_exists() -> None:
    with pytest.raises(InputError) as err:
        machine.resolve_selection(machine.parse_gpu_selection("0,5,7"), (_gpu(0), _gpu(1)))
    assert err.value.exit_code == 2
    assert "GPU 5, 7 does not exist; NVML lists 0, 1" in str(err.value)


# ----------------------------------------------------------------------------- affinity


def test_decode_mask_numbers_bits_across_words() -> None:
    # word 0 = 0b1011 -> cpus 0, 1, 3; word 1 bit 0 -> cpu 64; bit 63 of word 1 -> 127
    assert machine.decode_mask([0b1011, 1 | (1 << 63)]) == (0, 1, 3, 64, 127)
    assert machine.decode_mask([0, 0]) == ()


def test_cpulist_round_trip() -> None:
    assert machine.format_cpulist((11, 0, 1, 2, 3, 8, 10)) == "0-3,8,10-11"
    assert machine.parse_cpulist("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    with pytest.raises(ValueError):
        machine.parse_cpulist("5-2")


def test_sysfs_path_uses_a_four_digit_domain(tmp_path: Path) -> None:
    assert machine.sysfs_pci_path("00000000:17:00.0", tmp_path) == tmp_path / "0000:17:00.0"
    assert machine.sysfs_pci_path("0001:C5:00.0", tmp_path) == tmp_path / "0001:c5:00.0"


def _sysfs(root: Path, bus: str, cpulist: str | None, node: str | None) -> None:
    dev = machine.sysfs_pci_path(bus, root)
    dev.mkdir(parents=True)
    if cpulist is not None:
        (dev / "local_cpulist").write_text(cpulist + "\n")
    if node is not None:
        (dev / "numa_node").write_text(node + "\n")


class FakeNVMLError(Exception):
    pass


def fake_pynvml(devices: list[dict], memory_affinity: bool = True) -> types.ModuleType:
    """The NVML calls read_gpu_topology makes, answering from ``devices`` (the outermost edge)."""
    m = types.ModuleType("pynvml")
    m.NVMLError = FakeNVMLError
    m.NVML_AFFINITY_SCOPE_NODE = 0
    m.calls = []
    m.nvmlInit = lambda: m.calls.append("init")
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: len(devices)
    m.nvmlDeviceGetHandleByIndex = lambda i: devices[i]
    m.nvmlDeviceGetName = lambda h: h["name"].encode()  # old bindings return bytes
    m.nvmlDeviceGetUUID = lambda h: h["uuid"]
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=h["bus"].encode())

    def cpu_affinity(h: dict, size: int) -> list[int]:
        m.calls.append(("cpu", size))
        if h.get("cpu") is None:
            raise FakeNVMLError("Not Supported")
        return h["cpu"] + [0] * (size - len(h["cpu"]))

    def mem_affinity(h: dict, size: int, scope: int) -> list[int]:
        assert scope == 0
        if h.get("mem") is None:
            raise FakeNVMLError("Not Supported")
        return h["mem"]

    m.nvmlDeviceGetCpuAffinity = cpu_affinity
    if memory_affinity:
        m.nvmlDeviceGetMemoryAffinity = mem_affinity
    return m


def test_topology_reads_nvml_affinity_and_falls_back_to_sysfs(tmp_path: Path) -> None:
    _sysfs(tmp_path, "00000000:41:00.0", "8-11", "1")
    _sysfs(tmp_path, "00000000:81:00.0", "", "-1")  # sysfs says nothing either
    nvml = fake_pynvml([
        {"name": "NVIDIA H200", "uuid": "GPU-a", "bus": "00000000:17:00.0", "cpu": [0x0F], "mem": [0b01]},
        {"name": "NVIDIA H200", "uuid": "GPU-b", "bus": "00000000:41:00.0", "cpu": None, "mem": None},
        {"name": "NVIDIA H200", "uuid": "GPU-c", "bus": "00000000:81:00.0", "cpu": None, "mem": None},
    ])
    gpus = machine.read_gpu_topology(nvml, cpu_count=130, sysfs_root=tmp_path)
    assert ("cpu", 3) in nvml.calls  # 130 CPUs need three 64-bit words
    assert nvml.calls[0] == "init" and nvml.calls[-1] == "shutdown"
    a, b, c = gpus
    assert (a.index, a.uuid, a.name, a.cpus, a.mem_nodes) == (0, "GPU-a", "NVIDIA H200", (0, 1, 2, 3), (0,))
    assert (a.cpu_source, a.mem_source, a.notes) == (machine.AffinitySource.NVML, machine.AffinitySource.NVML, ())
    assert (b.cpus, b.mem_nodes) == ((8, 9, 10, 11), (1,))
    assert (b.cpu_source, b.mem_source) == (machine.AffinitySource.SYSFS, machine.AffinitySource.SYSFS)
    assert any("nvmlDeviceGetCpuAffinity failed (Not Supported)" in n for n in b.notes)
    assert (c.cpus, c.mem_nodes) == (None, None)
    assert "CPU affinity unknown: the child is not pinned to cores" in c.notes
    assert "memory node unknown: host memory is not bound to a node" in c.notes
    assert a.key == "0:GPU-a"


def test_topology_says_when_the_bindings_lack_memory_affinity(tmp_path: Path) -> None:
    nvml = fake_pynvml([{"name": "X", "uuid": "GPU-x", "bus": "00000000:17:00.0", "cpu": [0x3]}],
                       memory_affinity=False)
    (g,) = machine.read_gpu_topology(nvml, cpu_count=2, sysfs_root=tmp_path)
    assert g.cpus == (0, 1) and g.mem_nodes is None
    assert "these NVML bindings lack nvmlDeviceGetMemoryAffinity" in g.notes


# ----------------------------------------------------------------------------- pinning


NUMACTL = machine.PinTools(numactl="/usr/bin/numactl", can_setaffinity=True, allowed_cpus=tuple(range(16)))
NO_NUMACTL = machine.PinTools(numactl=None, can_setaffinity=True, allowed_cpus=tuple(range(16)))


def test_numactl_binds_cores_and_memory_node() -> None:
    p = machine.plan_pinning(_gpu(0, cpus=(4, 5, 6, 7), nodes=(1,)), NUMACTL)
    assert p.method is machine.PinMethod.NUMACTL and p.reason == "numactl"
    assert p.argv_prefix == ("/usr/bin/numactl", "--physcpubind=4-7", "--membind=1")


def test_numactl_without_a_memory_node_binds_cores_only_and_says_so() -> None:
    p = machine.plan_pinning(_gpu(0, cpus=(0, 1), nodes=None), NUMACTL)
    assert p.reason == "numactl_cpus_only" and p.argv_prefix == ("/usr/bin/numactl", "--physcpubind=0-1")
    assert "not bound" in p.message


def test_without_numactl_sched_setaffinity_pins_cores_and_says_memory_is_not_bound() -> None:
    p = machine.plan_pinning(_gpu(2, cpus=(8, 9), nodes=(1,)), NO_NUMACTL)
    assert p.method is machine.PinMethod.SCHED_SETAFFINITY and p.cpus == (8, 9) and p.mem_nodes == ()
    assert p.argv_prefix == () and "memory node not bound" in p.message


def test_pinning_keeps_only_allowed_cores() -> None:
    tools = machine.PinTools(numactl=None, can_setaffinity=True, allowed_cpus=(2, 3, 4))
    assert machine.plan_pinning(_gpu(0, cpus=(0, 1, 2, 3)), tools).cpus == (2, 3)


@pytest.mark.parametrize("gpu, tools, reason", [
    (_gpu(0, cpus=None), NUMACTL, "no_cpu_affinity"),
    (_gpu(0, cpus=(20, 21)), NUMACTL, "outside_allowed"),
    (_gpu(0, cpus=(0, 1)), machine.PinTools(None, False, None), "no_tool"),
])
def test_no_pinning_is_said_plainly(gpu: machine.GpuInfo, tools: machine.PinTools, reason: str) -> None:
    p = machine.plan_pinning(gpu, tools)
    assert p.method is machine.PinMethod.NONE and not p.applied and p.reason == reason
    assert "not pinned" in p.message


def test_each_child_sees_only_its_gpu_by_uuid(tmp_path: Path) -> None:
    gpus = (_gpu(0, cpus=(0, 1), nodes=(0,)), _gpu(1, cpus=(2, 3), nodes=(1,)))
    children = sup.plan_gpu_children(gpus, NUMACTL, lambda g, r: ["prog", str(g.index), str(r)], tmp_path, "cfg",
                                    {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert [c.spec.env["CUDA_VISIBLE_DEVICES"] for c in children] == ["GPU-0000", "GPU-0001"]
    assert all(c.spec.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and c.spec.env["PATH"] == "/bin" for c in children)
    assert children[1].spec.argv == ("/usr/bin/numactl", "--physcpubind=2-3", "--membind=1", "prog", "1",
                                     str((tmp_path / "cfg.gpu1.json").resolve()))
    assert children[1].spec.log_path == tmp_path / "cfg.gpu1.log"
    assert children[1].spec.cpus == ()  # numactl pins it: no sched_setaffinity as well
    assert children[1].spec.header == "GPU 1:GPU-0001; pinning: GPU 1: numactl, CPUs 2-3, memory node 1"


# ----------------------------------------------------------------------------- readings


def _reading(index: int, util: tuple[float, ...] = (0.0, 1.0), procs: tuple = ()) -> NvmlReading:
    return NvmlReading(index=index, name="NVIDIA H200", uuid=f"GPU-{index:04d}", driver_version="580.1",
                       cuda_driver_version="13.0", util_pct=util, memory_used_bytes=600 * MIB,
                       memory_total_bytes=143_771 * MIB, sm_clock_mhz=345, max_sm_clock_mhz=1980,
                       throttle_reasons=("gpu_idle",), compute_processes=procs)


# ----------------------------------------------------------------------------- figures and rows


def test_scaling_summary_sums_takes_the_minimum_and_divides_by_n_solo() -> None:
    solo = _fps([98.0, 100.0, 102.0])  # median 100, spread 2
    conc = {0: _fps([90.0, 92.0, 94.0]), 1: _fps([80.0, 81.0, 82.0])}
    s = rowmod.scaling_summary(0, solo, conc)
    assert s.total_fps == pytest.approx(92.0 + 81.0)
    assert (s.min_fps, s.min_gpu, s.n) == (81.0, 1, 2)
    assert s.efficiency == pytest.approx(173.0 / (2 * 100.0))
    assert s.total_fps_spread == pytest.approx(2.0 + 1.0)
    assert (s.solo_fps, s.solo_fps_spread) == (100.0, 2.0)


def test_scaling_with_one_gpu_is_its_own_ratio() -> None:
    s = rowmod.scaling_summary(0, _fps([100.0]), {0: _fps([95.0])})
    assert (s.n, s.total_fps, s.min_fps, s.efficiency) == (1, 95.0, 95.0, pytest.approx(0.95))


FRAME_BYTES = 2 * 400 * 400  # uint16 400x400


def _base(fps: float, kernel_us: float | None = 1.0) -> ResultRow:
    return ResultRow(key=RowKey("3x3_s4"), cluster=3, cap=3000, streams=4, batch=2000, frames=20000,
                     kernel_us=kernel_us, roofline_us=6.0, binds="h2d", sustained_fps=fps, sustained_fps_spread=1.0,
                     sustained_repeats=3, sustained_gbps=fps * FRAME_BYTES / 1e9, tracer="none",
                     session="s1", timestamp="2026-12-01T00:00:00Z")


def test_rows_are_keyed_by_label_and_gpu_and_round_trip_through_the_store(tmp_path: Path) -> None:
    gpus = (_gpu(0), _gpu(1))
    solo = _fps([100.0])
    conc = {0: _fps([90.0]), 1: _fps([80.0])}
    summary = rowmod.scaling_summary(0, solo, conc)
    rows = [rowmod.gpu_row(_base(100.0), gpus[0], RowRole.SOLO, "node1"),
            rowmod.gpu_row(_base(90.0), gpus[0], RowRole.CONCURRENT, "node1"),
            rowmod.gpu_row(_base(80.0), gpus[1], RowRole.CONCURRENT, "node1"),
            rowmod.aggregate_row(_base(100.0), summary, "node1", gpus)]
    agg = rows[-1]
    assert agg.key == RowKey("3x3_s4", role=RowRole.AGGREGATE) and agg.label == "3x3_s4@all" and agg.gpus == 2
    assert agg.sustained_fps == 170.0 and agg.gpu_min_fps == 80.0 and agg.gpu_min_index == 1
    assert agg.scaling_efficiency == pytest.approx(170.0 / 200.0)
    assert agg.sustained_gbps == pytest.approx(170.0 * FRAME_BYTES / 1e9)
    assert agg.kernel_us is None and agg.roofline_us is None and agg.binds is None  # per-GPU figures
    assert agg.cluster == 3 and agg.frames == 20000
    merge_results(tmp_path, ResultSet(EnvRecord(tool_version="test", session_id="s1"), tuple(rows)))
    loaded = load_results(tmp_path)
    assert loaded.labels == ("3x3_s4@gpu0.solo", "3x3_s4@gpu0", "3x3_s4@gpu1", "3x3_s4@all")
    g1 = loaded.row(RowKey("3x3_s4", 1, RowRole.CONCURRENT))
    assert (g1.key.gpu, g1.gpu_uuid, g1.key.config, g1.key.role, g1.host) == (
        1, "GPU-0001", "3x3_s4", RowRole.CONCURRENT, "node1")
    # re-running GPU 1 replaces its own row only
    merge_results(tmp_path, ResultSet(rows=(rowmod.gpu_row(_base(85.0), gpus[1], RowRole.CONCURRENT, "node1"),)))
    again = load_results(tmp_path)
    assert again.labels == loaded.labels
    assert again.row("3x3_s4@gpu1").sustained_fps == 85.0
    assert again.row("3x3_s4@gpu0").sustained_fps == 90.0


# ----------------------------------------------------------------------------- the concurrent run

# The outermost edge: a stand-in workload. It waits at a barrier until every peer has started (so
# it fails unless the children really run at once), then writes a result record whose pass time
# it reads from its argv, and reports the GPU it was given and the cores it may run on.
FAKE_CHILD = textwrap.dedent("""
    import json, os, sys, time
    result, peers_dir, peers, frames, solo_s, shared_s, rc = sys.argv[1:8]
    result = os.path.abspath(result)
    solo = ".solo." in os.path.basename(result)
    peers = 1 if solo else int(peers)
    os.makedirs(peers_dir, exist_ok=True)
    me = os.environ["CUDA_VISIBLE_DEVICES"]
    tag = os.path.basename(result)
    open(os.path.join(peers_dir, tag + ".ready"), "w").close()
    stem = tag.split(".gpu")[0]
    deadline = time.monotonic() + 20
    while len([f for f in os.listdir(peers_dir) if f.startswith(stem + ".gpu")]) < peers:
        if time.monotonic() > deadline:
            print("peers never arrived: not run at once", flush=True)
            sys.exit(9)
        time.sleep(0.01)
    time.sleep(0.2)
    if int(rc):
        print("failing on purpose", flush=True)
        sys.exit(int(rc))
    pass_s = float(solo_s if solo else shared_s)
    doc = {"schema": "clusterbench.workload-result", "version": 2, "mode": "sustained", "frames": int(frames),
           "pass_s": [pass_s, pass_s], "clusters_found": 7,
           "extra": {"visible": me, "affinity": sorted(os.sched_getaffinity(0))}}
    with open(result, "w") as fh:
        json.dump(doc, fh)
""")


@pytest.fixture
def child(tmp_path: Path) -> Path:
    p = tmp_path / "fake_child.py"
    p.write_text(FAKE_CHILD)
    return p


def _command(child: Path, peers_dir: Path, peers: int, shared_s: dict[int, float], solo_s: float = 0.01,
             fail: dict[int, int] | None = None) -> sus.SustainedCommand:
    def command(g: machine.GpuInfo, result: Path) -> list[str]:
        return [sys.executable, str(child), str(result), str(peers_dir), str(peers), "1000", str(solo_s),
                str(shared_s[g.index]), str((fail or {}).get(g.index, 0))]
    # another program's sustained mode: its two passes are judged as they are (no warm-up, no more runs)
    return sus.SustainedCommand(command, SteadyRule(counted=2, min_warmups=0, max_runs=2), "sustained")


def _allowed() -> tuple[int, ...]:
    return tuple(sorted(os.sched_getaffinity(0)))


def _children(gpus, tools, command: sus.SustainedCommand, out_dir: Path, stem: str, timeout_s=None):
    return sup.plan_gpu_children(gpus, tools, command.argv, out_dir, stem, dict(os.environ), timeout_s=timeout_s)


def test_children_run_at_once_each_on_its_gpu_and_cores(tmp_path: Path, child: Path) -> None:
    allowed = _allowed()
    gpus = (_gpu(0, cpus=(allowed[0],)), _gpu(1, cpus=(allowed[-1],)))
    tools = machine.PinTools(numactl=None, can_setaffinity=True, allowed_cpus=allowed)
    children = _children(gpus, tools, _command(child, tmp_path / "peers", 2, {0: 0.02, 1: 0.04}), tmp_path, "cfg")
    outcomes = sus.run_round(children, "cfg", "sustained")
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    assert [o.result.extra["visible"] for o in outcomes] == ["GPU-0000", "GPU-0001"]
    assert [o.result.extra["affinity"] for o in outcomes] == [[allowed[0]], [allowed[-1]]]
    assert [o.result.fps for o in outcomes] == [(1000 / 0.02,) * 2, (1000 / 0.04,) * 2]
    assert sup.overlap_s(outcomes) > 0.1  # both slept 0.2 s after meeting at the barrier
    assert "pinning: GPU 0: CPUs" in (tmp_path / "cfg.gpu0.log").read_text()


def test_the_supervisor_reports_each_child_starting_and_finishing(tmp_path: Path) -> None:
    specs = [sup.ChildSpec((sys.executable, "-c", f"raise SystemExit({rc})"), tmp_path / f"c{rc}.log") for rc in (0, 3)]
    events: list[sup.ChildEvent] = []
    outcomes = sup.run_children(specs, on_event=events.append)
    assert [o.returncode for o in outcomes] == [0, 3]
    assert sorted((e.kind, e.index, e.returncode) for e in events) == [
        ("finished", 0, 0), ("finished", 1, 3), ("started", 0, None), ("started", 1, None)]


def test_a_failed_child_is_reported_with_its_log_and_the_others_kept(tmp_path: Path, child: Path) -> None:
    gpus = (_gpu(0, cpus=None), _gpu(1, cpus=None))
    tools = machine.PinTools(None, True, _allowed())
    children = _children(gpus, tools, _command(child, tmp_path / "p", 2, {0: 0.01, 1: 0.01}, fail={1: 4}), tmp_path,
                         "cfg")
    ok, bad = sus.run_round(children, "cfg", "sustained")
    assert ok.ok and not bad.ok and bad.child.returncode == 4 and not bad.protocol_error
    assert bad.error.startswith("GPU 1 failed with exit status 4; last lines of cfg.gpu1.log:\n")
    assert "failing on purpose" in bad.error
    with pytest.raises(EnvironmentFailure) as err:
        sus.require_all_ok((ok, bad), "the run")
    assert str(err.value).startswith("the run: 1 of 2 GPU processes failed:\nGPU 1 failed with exit status 4")
    assert err.value.exit_code == 1 and str(tmp_path / "cfg.gpu1.log") in err.value.hint


def test_a_child_past_its_timeout_has_its_process_group_ended(tmp_path: Path) -> None:
    # the child starts a grandchild in its own process group and both sleep: ending the group ends both
    prog = ("import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
            f"open({str(tmp_path / 'grandchild.pid')!r}, 'w').write(str(p.pid))\n"
            "time.sleep(30)\n")
    children = sup.plan_gpu_children((_gpu(0, cpus=None),), machine.PinTools(None, False, None),
                                     lambda g, r: [sys.executable, "-c", prog], tmp_path, "slow", dict(os.environ),
                                     timeout_s=1.0)
    (o,) = sus.run_round(children, "slow", "sustained")
    assert not o.ok and o.child.timed_out and o.child.timeout_s == 1.0 and o.child.ended_s < 15
    assert o.error.startswith("GPU 0 was still running at its time limit of 1 s: its process group was ended")
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert not _alive(grandchild)  # no orphan keeps the GPU busy


def _alive(pid: int) -> bool:
    import time

    deadline = time.monotonic() + 5  # the orphan is reaped by init shortly after SIGTERM
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except OSError:
            return False
        if state == "Z":
            return False
        time.sleep(0.05)
    return True


def test_a_missing_program_is_an_outcome_not_a_crash(tmp_path: Path) -> None:
    children = sup.plan_gpu_children((_gpu(0, cpus=None),), machine.PinTools(None, False, None),
                                     lambda g, r: [str(tmp_path / "no-such-program")], tmp_path, "x", {})
    (o,) = sus.run_round(children, "x", "sustained")
    assert not o.ok and o.child.returncode is None
    assert o.error.startswith(f"GPU 0 did not start: cannot start {tmp_path / 'no-such-program'}")


def test_a_child_that_writes_no_result_breaks_the_protocol(tmp_path: Path) -> None:
    children = sup.plan_gpu_children((_gpu(0, cpus=None),), machine.PinTools(None, False, None),
                                     lambda g, r: [sys.executable, "-c", "print('nothing written')"], tmp_path, "x",
                                     dict(os.environ))
    (o,) = sus.run_round(children, "x", "sustained")
    assert o.child.returncode == 0 and not o.ok and o.protocol_error
    assert o.error.startswith("config 'x': the workload wrote no result record x.gpu0.json; last lines of x.gpu0.log")
    with pytest.raises(WorkloadProtocolError) as err:
        sus.require_all_ok((o,), "the run")
    assert str(err.value) == o.error and "docs/workloads.md" in err.value.hint


def test_solo_then_concurrent_gives_the_aggregate(tmp_path: Path, child: Path) -> None:
    gpus = (_gpu(0, cpus=None), _gpu(1, cpus=None))
    shared = {0: 0.0125, 1: 0.02}  # 80,000 and 50,000 FPS at 1000 frames per pass
    rounds: list[tuple[str, int]] = []
    run = sus.measure_sustained(gpus, machine.PinTools(None, True, _allowed()),
                                _command(child, tmp_path / "peers", 2, shared, solo_s=0.01), tmp_path, "3x3_s4",
                                input_bytes_per_frame=FRAME_BYTES, base_env=dict(os.environ), timeout_s=60,
                                on_round=lambda phase, k: rounds.append((phase, k))).figures
    assert rounds == [("solo", 0), ("concurrent", 0)]
    assert run.solo_gpu == 0 and run.solo.median == pytest.approx(100_000.0)  # 1000 frames / 0.01 s
    expect = [1000 / shared[i] for i in range(2)]
    assert [run.concurrent[i].median for i in range(2)] == pytest.approx(expect)
    assert run.summary.total_fps == pytest.approx(sum(expect))
    assert run.summary.min_fps == pytest.approx(min(expect))
    assert run.summary.efficiency == pytest.approx(sum(expect) / (2 * 100_000.0))
    assert run.concurrent[0].input_gbps == pytest.approx(80_000.0 * FRAME_BYTES / 1e9)
    assert (tmp_path / "3x3_s4.solo.gpu0.json").is_file() and (tmp_path / "3x3_s4.concurrent.gpu1.json").is_file()


def test_one_gpu_runs_one_round_that_is_both_solo_and_concurrent(tmp_path: Path, child: Path) -> None:
    rounds: list[tuple[str, int]] = []
    run = sus.measure_sustained((_gpu(0, cpus=None),), machine.PinTools(None, True, _allowed()),
                                _command(child, tmp_path / "peers", 1, {0: 0.0125}), tmp_path, "3x3_s4",
                                base_env=dict(os.environ), timeout_s=60,
                                on_round=lambda phase, k: rounds.append((phase, k))).figures
    assert rounds == [("sustained", 0)]
    assert run.solo.median == pytest.approx(80_000.0)  # 1000 frames / 0.0125 s, the one round
    assert run.concurrent == {0: run.solo} and run.summary.efficiency == pytest.approx(1.0)
    assert run.solo_outcomes == run.concurrent_outcomes and len(run.solo_outcomes) == 1
    assert sorted(p.name for p in tmp_path.glob("3x3_s4.*")) == ["3x3_s4.sustained.gpu0.json",
                                                               "3x3_s4.sustained.gpu0.log"]


def test_a_program_run_whole_runs_until_its_last_runs_agree(tmp_path: Path, child: Path) -> None:
    command = _command(child, tmp_path / "peers", 1, {0: 0.02})
    run = sus.measure_sustained((_gpu(0, cpus=None),), machine.PinTools(None, True, _allowed()),
                                sus.SustainedCommand(command.argv, whole_runs_rule(3), "sustained", whole_runs=True),
                                tmp_path, "a", base_env=dict(os.environ), timeout_s=60).figures
    # the fake reports two passes per run, all at 50,000 FPS: after two runs the last three figures agree
    assert run.solo.repeats == 3 and run.solo.median == pytest.approx(50_000.0)
    assert [p.name for p in sorted(tmp_path.glob("a.sustained.r*.gpu0.json"))] == [
        "a.sustained.r0.gpu0.json", "a.sustained.r1.gpu0.json"]
    steady = run.solo.metadata["steady"]
    assert steady["steady"] is True and steady["warmups"] == 1 and len(steady["runs"]) == 4


# A stand-in for our finder's sustained mode: it runs the real steady rule over pass times given in its argv
# (the first ``slow`` passes take ``slow_s``, the others ``fast_s``), with the rule the probe passes it.
FAKE_STEADY_CHILD = textwrap.dedent("""
    import json, os, sys
    from clusterbench.model.steady import SteadyRule, run_until_steady
    result, slow, slow_s, fast_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    given = json.loads(os.environ.get("CLUSTERBENCH_STEADY") or "{}")
    rule = SteadyRule.from_json({"target_s": 0.02, **given, "counted": 3})
    state = {"passes": 0, "now": 0.0}
    def run_passes(n):
        s = 0.0
        for _ in range(n):
            state["passes"] += 1
            s += slow_s if state["passes"] <= slow else fast_s
        state["now"] += s
        return s
    v = run_until_steady(run_passes, 1000, rule, lambda: state["now"])
    counted = v.runs[len(v.runs) - len(v.values):]
    doc = {"schema": "clusterbench.workload-result", "version": 2, "mode": "sustained", "frames": 1000,
           "pass_s": [r.seconds / r.passes for r in counted], "clusters_found": 7,
           "extra": {"steady": v.to_json(), "rule_given": given}}
    json.dump(doc, open(result, "w"))
""")


def test_our_finders_steady_runs_count_and_a_concurrent_round_runs_the_solo_plan(tmp_path: Path) -> None:
    child = tmp_path / "steady_child.py"
    child.write_text(FAKE_STEADY_CHILD)

    def argv(g: machine.GpuInfo, result: Path) -> list[str]:
        return [sys.executable, str(child), str(result), "4", "0.011", "0.010"]

    command = sus.SustainedCommand(argv, SteadyRule(counted=3), "sustained", own_steady=True, go=True,
                                   metadata={"source": "result"})
    gpus = (_gpu(0, cpus=None), _gpu(1, cpus=None))
    run = sus.measure_sustained(gpus, machine.PinTools(None, True, _allowed()), command, tmp_path, "c",
                                base_env=dict(os.environ), timeout_s=60).figures
    # as worked out in tests/model/test_steady.py: 1 pass of 11 ms, then runs of 2 passes at 90,909, 95,238 and
    # 100,000 FPS, then 100,000 twice more: three warm-ups, three counted runs at 100,000
    solo = run.solo
    assert solo.samples == (100_000.0,) * 3 and solo.metadata["source"] == "result"
    assert solo.metadata["steady"]["warmups"] == 3 and solo.metadata["steady"]["steady"] is True
    assert sus.steadiness_of(solo).warmup_s == pytest.approx(0.054)
    # the concurrent round: the solo plan, fixed: 3 warm-ups, runs of 2 passes, 3 counted
    given = json.loads((tmp_path / "c.concurrent.gpu1.json").read_text())["extra"]["rule_given"]
    assert (given["fixed"], given["min_warmups"], given["passes"], given["counted"]) == (True, 3, 2, 3)
    solo_given = json.loads((tmp_path / "c.solo.gpu0.json").read_text())["extra"]["rule_given"]
    assert solo_given == {}  # the solo round runs the default rule
    conc = run.concurrent[1].metadata["steady"]
    assert conc["reason"] == "fixed" and len(conc["runs"]) == 6 and conc["runs"][1]["passes"] == 2
    # passes 1-7 of the concurrent child: 11 ms x 4, then 10 ms; its counted runs 4-6 are 2 x 10 ms each
    assert run.concurrent[1].samples == (100_000.0,) * 3


def test_multi_gpu_env_records_affinity_and_pinning() -> None:
    gpus = (_gpu(0, cpus=(0, 1)), _gpu(1, cpus=None))
    pins = {g.index: machine.plan_pinning(g, NO_NUMACTL) for g in gpus}
    summary = rowmod.scaling_summary(0, _fps([10.0]), {0: _fps([9.0])})
    env = gpumod.multi_gpu_env(machine.parse_gpu_selection("all"), gpus, pins, {"a": summary}, {"a": 1.5})
    json.dumps(env, allow_nan=False)  # JSON-ready
    assert env["version"] == 2 and env["selection"] == "all" and "guard" not in env
    assert env["gpus"][0]["cpus"] == "0-1" and env["gpus"][0]["pinning"]["method"] == "sched_setaffinity"
    assert env["gpus"][1]["pinning"]["reason"] == "no_cpu_affinity"
    assert env["pinning_applied"] == {"0": True, "1": False}
    assert env["configs"]["a"]["scaling_efficiency"] == pytest.approx(0.9)
    assert env["configs"]["a"]["concurrent_overlap_s"] == 1.5
    assert "solo" in env["solo_definition"]


@pytest.mark.parametrize("module", ["clusterbench.run.gpus", "clusterbench.run.sustained",
                                    "clusterbench.run.supervisor", "clusterbench.run.campaign"])
def test_new_core_modules_import_no_ui_gpu_or_scheduler_library(module: str) -> None:
    import subprocess

    code = (f"import sys, importlib; importlib.import_module({module!r}); "
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('typer', 'rich', 'cupy', 'click', 'pynvml', 'submitit'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} pulled in {out.stdout.strip()}"


def test_visible_gpus_follow_cuda_visible_devices() -> None:
    gpus = (_gpu(0), _gpu(1), _gpu(2))
    assert machine.visible_gpus(gpus, None) == gpus
    assert [g.index for g in machine.visible_gpus(gpus, "2,0")] == [2, 0]  # Slurm's integers: NVML indices
    assert [g.index for g in machine.visible_gpus(gpus, "GPU-0001")] == [1]
    assert [g.index for g in machine.visible_gpus(gpus, "gpu-0002,1")] == [2, 1]


@pytest.mark.parametrize("value, words", [
    ("", "is empty"), ("7", "'7' matches no GPU"), ("GPU-000", "matches 3 GPUs"), ("MIG-abc", "MIG instance"),
])
def test_visible_gpus_refuses_what_it_cannot_map(value: str, words: str) -> None:
    with pytest.raises(EnvironmentFailure) as err:
        machine.visible_gpus((_gpu(0), _gpu(1), _gpu(2)), value)
    assert err.value.exit_code == 1 and words in str(err.value)


# ----------------------------------------------------------------------------- the plan


def test_plan_gpus_reads_each_gpu_once_and_judges_them_together(tmp_path: Path) -> None:
    topology = (_gpu(0, cpus=(0, 1), nodes=(0,)), _gpu(1, cpus=(2, 3), nodes=(1,)), _gpu(2, cpus=(4, 5), nodes=(1,)))
    readings = [_reading(0), _reading(2, util=(70.0,))]  # the injected NVML readings of the GPUs selected
    plan = gpumod.plan_gpus(machine.parse_gpu_selection("all"), max_util_pct=5.0, window_s=0.5, force=True,
                            environ={"CUDA_VISIBLE_DEVICES": "GPU-0002,GPU-0000"},
                            read_topology=lambda: topology, readings=readings, tools=NUMACTL)
    assert [g.index for g in plan.gpus] == [0, 2]  # all = what CUDA_VISIBLE_DEVICES allows, in index order
    assert [g.index for g in plan.run_gpus] == [0] and plan.verdict.refused_indices == (2,)
    assert plan.verdict.reason == "forced_dropped" and plan.verdict.settings["gpus"] == [0, 2]
    assert plan.pinnings[2].argv_prefix == ("/usr/bin/numactl", "--physcpubind=4-5", "--membind=1")
    assert [g["index"] for g in plan.env_block()["gpus"]] == [0, 2]
    with pytest.raises(InputError):
        gpumod.plan_gpus(machine.parse_gpu_selection("1"), environ={"CUDA_VISIBLE_DEVICES": "0"},
                         read_topology=lambda: topology, readings=readings, tools=NUMACTL)


def test_without_a_selection_the_plan_takes_the_first_gpu_this_process_may_use(tmp_path: Path) -> None:
    topology = (_gpu(0), _gpu(1), _gpu(2))
    assert [g.index for g in gpumod.select_gpus(None, {}, lambda: topology)] == [0]
    assert [g.index for g in gpumod.select_gpus(None, {"CUDA_VISIBLE_DEVICES": "2,1"}, lambda: topology)] == [2]
    plan = gpumod.plan_gpus(None, environ={"CUDA_VISIBLE_DEVICES": "GPU-0001"}, read_topology=lambda: topology,
                            readings=[_reading(1)], tools=NUMACTL)
    assert [g.index for g in plan.run_gpus] == [1] and plan.verdict.status.value == "pass"


def test_bad_limits_are_refused_before_any_nvml_call() -> None:
    def no_nvml():
        raise AssertionError("the limits must be checked before NVML is asked")

    with pytest.raises(InputError, match="--max-util must be between 0 and 100 %, got 150 %"):
        gpumod.plan_gpus(None, max_util_pct=150, read_topology=no_nvml)
    with pytest.raises(InputError, match=r"--sample-window must be in \(0, 60\] s, got 0 s"):
        gpumod.plan_gpus(None, window_s=0, read_topology=no_nvml)


def test_config_rows_build_solo_per_gpu_and_aggregate(tmp_path: Path, child: Path) -> None:
    gpus = (_gpu(0, cpus=None), _gpu(1, cpus=None))
    run = sus.measure_sustained(gpus, machine.PinTools(None, True, _allowed()),
                                _command(child, tmp_path / "peers", 2, {0: 0.02, 1: 0.025}, solo_s=0.0125),
                                tmp_path, "3x3_s4", input_bytes_per_frame=FRAME_BYTES, base_env=dict(os.environ),
                                timeout_s=60).figures
    rows = rowmod.config_rows(lambda s: _base(s.median), run, gpus, "node7")
    assert [r.label for r in rows] == ["3x3_s4@gpu0.solo", "3x3_s4@gpu0", "3x3_s4@gpu1", "3x3_s4@all"]
    assert [r.sustained_fps for r in rows[:3]] == pytest.approx([80_000.0, 50_000.0, 40_000.0])
    agg = rows[-1]
    assert agg.sustained_fps == pytest.approx(90_000.0) and agg.gpu_min_fps == pytest.approx(40_000.0)
    assert agg.scaling_efficiency == pytest.approx(90_000.0 / (2 * 80_000.0))
    assert {r.host for r in rows} == {"node7"} and rows[1].pinning == "none"


def test_a_pinning_the_kernel_refuses_is_a_start_error(tmp_path: Path) -> None:
    bad = machine.Pinning(machine.PinMethod.SCHED_SETAFFINITY, "sched_setaffinity", "GPU 0: CPUs 100000", (100_000,))
    spec = sup.ChildSpec((sys.executable, "-c", "pass"), tmp_path / "r.log", env=dict(os.environ), cpus=(100_000,))
    (o,) = sus.run_round([sup.GpuChild(_gpu(0), bad, spec, tmp_path / "r.json")], "r", "sustained")
    assert not o.ok and o.error.startswith("GPU 0 did not start: cannot start")


class _Workload:
    """Stands in for a clusterbench.workloads workload: the two members workload_command uses."""

    kind = "command"

    def __init__(self, runs_sustained: bool) -> None:
        self.runs_sustained = runs_sustained

    def argv(self, label: str, params: object, result: Path, mode: str, repeat: int = 1) -> tuple[str, ...]:
        return ("prog", label, str(result), mode, str(repeat))


def test_workload_command_runs_sustained_once_or_passes_in_rounds(tmp_path: Path) -> None:
    cmd = sus.workload_command(_Workload(True), "a", None, 5)
    result = tmp_path / "r.json"
    # another program's sustained mode: one process, its 5 passes judged as they are
    assert (cmd.whole_runs, cmd.mode, cmd.own_steady, cmd.go) == (False, "sustained", False, False)
    assert (cmd.rule.counted, cmd.rule.min_warmups, cmd.rule.max_runs) == (5, 0, 5)
    assert cmd.argv(_gpu(0), result) == ("prog", "a", str(result), "sustained", "5")
    cmd = sus.workload_command(_Workload(False), "a", None, 5)
    assert (cmd.whole_runs, cmd.mode) == (True, "pass") and cmd.argv(_gpu(0), tmp_path / "r.json")[3:] == ("pass", "1")
    assert (cmd.rule.counted, cmd.rule.max_runs, cmd.rule.min_warmups) == (5, 7, 0)  # whole runs: 2 more at most


def test_workload_command_speaks_the_real_workload_protocol(tmp_path: Path) -> None:
    from clusterbench.model.params import WorkloadParams
    from clusterbench.workloads.protocol import workload_for

    params = WorkloadParams(cluster=3, cap=10, streams=1, batch=10, frames=10)
    cmd = sus.workload_command(workload_for("cupy", None, tmp_path), "a", params, 3)
    argv = cmd.argv(_gpu(0), tmp_path / "r.json")
    assert not cmd.whole_runs and "clusterbench.workloads.cupy.run" in argv and str(tmp_path / "r.json") in argv
    # our finder runs the steady rule itself and waits for the probe's go
    assert cmd.own_steady and cmd.go and (cmd.rule.counted, cmd.rule.min_warmups) == (3, 1)
