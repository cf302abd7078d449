import hashlib
from pathlib import Path

import numpy as np

from clusterbench.workload import build
from clusterbench.workload.layout import cluster_dtype, read_slots


def test_record_dtype_is_packed():
    assert cluster_dtype(3, "float32").itemsize == 40
    assert cluster_dtype(9, "float32").itemsize == 328
    assert cluster_dtype(3, "float64").itemsize == 76  # packed: doubles at byte offset 4


def test_read_slots_parses_counts_and_records_by_hand():
    cap = 2
    rec = cluster_dtype(3, "float64")
    slot = 4 + cap * rec.itemsize
    buf = np.zeros(2 * slot, np.uint8)
    # frame 0: 3 found (one over the cap), records (1, 2) and (3, 4)
    buf[0:4] = np.frombuffer(np.uint32(3).tobytes(), np.uint8)
    r = np.zeros(2, rec)
    r["x"], r["y"] = [1, 3], [2, 4]
    r["data"][0] = np.arange(9) * 0.5
    r["data"][1] = -1.25
    buf[4:4 + 2 * rec.itemsize] = np.frombuffer(r.tobytes(), np.uint8)
    # frame 1: 1 found
    buf[slot:slot + 4] = np.frombuffer(np.uint32(1).tobytes(), np.uint8)
    out = read_slots(buf, 2, 3, cap, "float64")
    assert out[0].found == 3 and out[0].dropped == 1
    assert list(out[0].records["x"]) == [1, 3] and list(out[0].records["y"]) == [2, 4]
    assert out[0].records["data"][0][4] == 2.0 and out[0].records["data"][1][8] == -1.25
    assert out[1].found == 1 and len(out[1].records) == 1 and out[1].dropped == 0


def test_kernel_sources_hash_the_cu_files():
    shas = build.kernel_sources()
    assert "cluster_finder.cu" in shas
    path = Path(build.kernel_dir()) / "cluster_finder.cu"
    assert shas["cluster_finder.cu"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_compile_options_disable_fma():
    opts = build.compile_options("float64", 9)
    assert "--fmad=false" in opts and "-DCB_T=double" in opts and "-DCB_K=9" in opts


def test_strip_fits_the_shared_memory_budget():
    for k in (3, 5, 7, 9, 11):
        for itemsize in (4, 8):
            s = build.strip_rows(400, 400, k, itemsize)
            assert s >= 1
            assert s == 1 or build.shared_bytes(s, 400, k, itemsize) <= build.SMEM_BUDGET_BYTES
    assert build.strip_rows(7, 400, 3, 4) == 7
