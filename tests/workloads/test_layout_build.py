import hashlib
from pathlib import Path

import numpy as np

from clusterbench.workloads.cupy import build
from clusterbench.model.layout import cluster_dtype, read_slots


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


def test_compile_options_carry_the_two_phase_geometry():
    opts = build.compile_options("float32", 3)
    assert f"-DCB_TH={build.classify_tile_rows('float32')}" in opts
    assert f"-DCB_BY={build.CLASSIFY_WARPS}" in opts and f"-DCB_NT2={build.COMPACT_THREADS}" in opts
    assert f"-DCB_WPT={build.COMPACT_WORDS_PER_THREAD}" in opts and f"-DCB_LIST={build.COMPACT_LIST}" in opts
    assert "-DCB_TH=16" in build.compile_options("float64", 9, tile_rows=16)


def test_kernel_defaults_match_the_build_constants():
    # the .cu falls back to its own #defines when compiled without -D: they must say the same thing
    src = (Path(build.kernel_dir()) / "cluster_finder.cu").read_text()
    for macro, value in (("CB_BY", build.CLASSIFY_WARPS), ("CB_NT2", build.COMPACT_THREADS),
                         ("CB_WPT", build.COMPACT_WORDS_PER_THREAD), ("CB_LIST", build.COMPACT_LIST),
                         ("CB_TH", build.classify_tile_rows("float32"))):
        assert f"#define {macro} {value} " in src or f"#define {macro} {value}\n" in src, macro


def test_mask_words_by_hand():
    assert build.mask_words(400, 400) == 400 * 13  # 400 columns = 12 full words + 16 bits
    assert build.mask_words(37, 53) == 37 * 2
    assert build.mask_words(1, 32) == 1 and build.mask_words(1, 33) == 2


def test_classify_tiles_fit_static_shared_memory():
    # 3 tiles of (rows + 2h) x (32 + 2h) values plus the (rows + 2h) x 32 row maxima, worked out for 9x9 f32
    assert build.classify_shared_bytes(32, 9, 4) == (3 * 40 * 40 + 40 * 32) * 4
    for k in (3, 5, 7, 9, 11):
        for dtype, itemsize in (("float32", 4), ("float64", 8)):
            assert build.classify_shared_bytes(build.classify_tile_rows(dtype), k, itemsize) <= build.STATIC_SMEM_MAX_BYTES


def test_pipeline_rejects_an_unknown_frozen_kernel_before_touching_the_gpu():
    import pytest

    from clusterbench.errors import InputError
    from clusterbench.model.params import WorkloadParams
    from clusterbench.workloads.cupy.pipeline import Pipeline
    from clusterbench.workloads.synth import FrameSet

    frames = FrameSet(dark=np.zeros((1, 4, 4), np.uint16), pool=np.zeros((1, 4, 4), np.uint16), source="t")
    small = WorkloadParams(rows=4, cols=4, cap=8)
    with pytest.raises(InputError, match="unknown frozen kernel 'fast'"):
        Pipeline(small, frames, frozen_kernel="fast")
    with pytest.raises(InputError, match="multiple of 8"):
        Pipeline(small, frames, tile_rows=12)
    with pytest.raises(InputError, match="unknown tracking kernel 'fast'"):
        Pipeline(small.replace(pedestal="tracking"), frames, tracking_kernel="fast")
    assert build.DEFAULT_FROZEN_KERNEL in build.FROZEN_KERNELS


def test_kernel_source_splices_the_shared_header_once_per_file():
    from clusterbench.workloads.cupy import pipeline

    for name in (build.KERNEL_FILE, pipeline.TRACK_KERNEL_FILE):
        raw = (build.kernel_dir() / name).read_text()
        assert raw.count('#include "tile_load.cuh"') == 1
        text = build.kernel_source(name)
        assert '#include "tile_load.cuh"' not in text
        assert text.count("void load_tile_raw(") == 1  # the header's text, spliced where the include was
        assert text.index("void load_tile_raw(") < text.index("load_tile_raw<")
    assert "tile_load.cuh" in build.kernel_sources()  # hashed with the kernels (the fresh-build guard)
