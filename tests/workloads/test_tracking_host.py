"""Host-side logic of the persistent tracking kernel (no GPU): geometry, options, buffers, the
co-residency check, and that the .cu file carries what the pipeline passes to it."""

import re

import pytest

from clusterbench.errors import InputError
from clusterbench.workloads.cupy import build, pipeline
from clusterbench.workloads.cupy.pipeline import (TRACK_TILE_COLS, check_coresident, persistent_compile_options, persistent_fits,
                                            persistent_geometry, persistent_mean_bytes, persistent_min_blocks,
                                            persistent_warps)


def test_geometry_of_a_400x400_frame():
    # 400 columns: 12 full tiles of 32 and one of 16; 400 rows: 25 tiles of 16, or 13 of 32 (the last of 16)
    assert persistent_geometry(400, 400, 16) == (13, 25, 325)
    assert persistent_geometry(400, 400, 32) == (13, 13, 169)
    assert persistent_geometry(400, 400, 20) == (13, 20, 260)
    assert persistent_geometry(400, 400, 40) == (13, 10, 130)


def test_geometry_of_partial_tiles():
    # the coarse GPU test frames: 53 columns = 32 + 21, 37 rows = 16 + 16 + 5
    assert persistent_geometry(37, 53, 16) == (2, 3, 6)
    assert persistent_geometry(1, 1, 8) == (1, 1, 1)


def test_tile_rows_must_be_even_and_at_most_64():
    for bad in (0, 7, 13, 66):
        with pytest.raises(InputError, match="even number from 2 to 64"):
            persistent_geometry(400, 400, bad)


def test_two_own_pixels_per_thread():
    assert [persistent_warps(r) for r in (2, 8, 16, 20, 40, 64)] == [1, 4, 8, 10, 20, 32]


def test_the_h200_holds_every_tile_of_a_400x400_frame():
    # 132 SMs (H200): 325 tiles of 16 rows need 3 resident blocks per SM (396 >= 325), 260 of 20 rows 2,
    # 130 of 40 rows 1, 169 of 32 rows 2 (worked out by hand: ceil(tiles / 132))
    assert [persistent_min_blocks(t, 132) for t in (325, 260, 130, 169, 650, 132, 133)] == [3, 2, 1, 2, 5, 1, 2]
    check_coresident(325, persistent_min_blocks(325, 132), 132)
    with pytest.raises(InputError, match="needs 325 resident blocks"):
        check_coresident(325, 2, 132)


def test_residency_is_bounded_by_threads_per_sm():
    # threads per SM = ceil(tiles / SMs) * 32 * rows / 2: 3 * 256 = 768, 2 * 320 = 640, 1 * 640, 2 * 512 = 1024
    for rows in (8, 16, 20, 32, 40):
        assert persistent_fits(persistent_geometry(400, 400, rows)[2], rows, 132)
    # 64-row tiles: 7 x 13 = 91 tiles, 1 per SM, 1024 threads: fits; on 40 SMs 3 per SM, 3072 threads: no
    assert persistent_fits(91, 64, 132) and not persistent_fits(91, 64, 40)
    assert not persistent_fits(325, 16, 60)  # 6 blocks of 256 threads per SM


def test_compile_options_keep_the_workload_options_and_add_the_geometry():
    opts = persistent_compile_options("float64", 11, 32, 2)
    assert "--fmad=false" in opts and "-DCB_T=double" in opts and "-DCB_K=11" in opts
    assert "-DCB_PTH=32" in opts and "-DCB_PBY=16" in opts and "-DCB_PMINB=2" in opts
    assert "-DCB_PBY=10" in persistent_compile_options("float32", 3, 20, 2)


def test_per_frame_means_per_stream():
    # batch 500 of 400x400 float32 means: 500 * 160,000 * 4 B = 320 MB per stream
    assert persistent_mean_bytes(500, 400, 400, 4) == 320_000_000


def test_mask_words_match_the_persistent_tiles():
    # frozen_compact reads one 32-bit mask word per 32 columns: the persistent tiles must be as wide
    assert TRACK_TILE_COLS == build.CLASSIFY_TILE_COLS
    for cols in (1, 31, 32, 33, 400, 1024):
        assert persistent_geometry(8, cols, 8)[0] * 8 == build.mask_words(8, cols)


def test_tracking_kernels_and_default():
    assert pipeline.TRACKING_KERNELS == ("graph", "coop", "flags")
    assert pipeline.DEFAULT_TRACKING_KERNEL in pipeline.TRACKING_KERNELS


def test_the_kernel_file_has_the_entry_point_and_defaults_of_the_host():
    src = (build.kernel_dir() / pipeline.TRACK_KERNEL_FILE).read_text()
    assert 'extern "C" __global__' in src and "track_persistent(" in src
    assert re.search(r"#define CB_PTH %d\b" % pipeline.TRACK_TILE_ROWS, src)
    assert re.search(r"#define CB_PBY %d\b" % persistent_warps(pipeline.TRACK_TILE_ROWS), src)
    # the kernel's 17 parameters, in the order _launch_persistent passes them
    sig = src[src.index("track_persistent("):src.index(")", src.index("int sync_mode"))]
    names = [re.split(r"[\s*]+", a.strip())[-1] for a in sig[len("track_persistent("):].split(",")]
    assert names == ["frames", "n_frames", "mean_in", "mean_out", "means", "sum", "sum2", "thr", "inv", "masks",
                     "rows", "cols", "wpr", "tile_rows_n", "flags", "flag_base", "sync_mode"]


def test_frozen_compact_takes_a_mean_stride():
    src = (build.kernel_dir() / build.KERNEL_FILE).read_text()
    head = src[src.index("frozen_compact(const u32"):]
    head = head[:head.index(")")]
    assert "const T* __restrict__ mean, long long mean_stride, u8* __restrict__ slots" in head


# -- frozen_slide (the register sliding window) ---------------------------------------------------------
def test_slide_geometry_two_words_per_tile_of_64_columns():
    from clusterbench.workloads.cupy.pipeline import slide_geometry, slide_tile_rows

    # 3x3 (H = 1, odd: 2 halo columns each side): 60 output columns per 64-column warp, words of 30;
    # 400 columns need 7 tiles (420), 14 words per row; 25 tiles of 16 rows
    assert slide_geometry(400, 400, 3) == (30, 14, 7 * 25)
    # 9x9 (H = 4, even): 56 output columns, words of 28, 8 tiles (448)
    assert slide_geometry(400, 400, 9) == (28, 16, 8 * 25)
    # 5x5 (H = 2): 60 columns; 7x7 (H = 3, odd): 64 - 2 * 4 = 56
    assert slide_geometry(400, 400, 5)[0] == 30 and slide_geometry(400, 400, 7)[0] == 28
    # 11x11 (H = 5, odd: 6 halo columns each side): 52 columns, words of 26; the coarse test frames 53 wide:
    # 2 tiles, 4 words; 37 rows: 3 tiles of 16 (the last partial)
    assert slide_geometry(37, 53, 11) == (26, 4, 6)
    assert {slide_tile_rows(k) for k in (3, 5, 7, 9, 11)} == {16}


def test_slide_warps_keep_the_shared_tiles_within_48_kib():
    from clusterbench.workloads.cupy.pipeline import slide_tile_rows, slide_warps

    for dtype, itemsize in (("float32", 4), ("float64", 8)):
        for k in (3, 5, 7, 9, 11):
            # the mean (rows with halo), thresholds and K * thresholds, 64 columns each; from 7x7 up each warp's
            # (16 + 2H) x 64 values, a queue of 160 pixels and two ballots per output row
            h, th, nw = k // 2, slide_tile_rows(k), slide_warps(dtype, k)
            smem = ((th + 2 * h) + 2 * th) * 64 * itemsize
            if k >= 7:
                smem += nw * ((th + 2 * h) * 64 * itemsize + 160 * 4 + th * 2 * 4)
            assert smem <= build.STATIC_SMEM_MAX_BYTES, (dtype, k, smem)
    assert slide_warps("float32", 5) == 8 and slide_warps("float32", 9) == 4 and slide_warps("float64", 9) == 1


def test_slide_frames_per_block_is_capped_and_fills_the_gpu():
    from clusterbench.workloads.cupy.pipeline import SLIDE_MAX_FRAMES_PER_BLOCK, slide_frames_per_block

    assert slide_frames_per_block(2000, 350, 132) == SLIDE_MAX_FRAMES_PER_BLOCK
    # 7 frames x 6 tiles: too few for 8 blocks per SM, so one frame per block
    assert slide_frames_per_block(7, 6, 132) == 1


def test_slide_mask_bits_are_row_major():
    """Word w of a row covers columns w*ow .. w*ow+ow-1 (bit b: column w*ow + b), as frozen_compact
    decodes them: walking words then bits visits the columns 0, 1, 2, ... in order, and the two words of
    tile t cover its output columns t*2*ow .. t*2*ow + 2*ow - 1."""
    from clusterbench.workloads.cupy.pipeline import slide_geometry

    for k in (3, 5, 7, 9, 11):
        ow, wpr, _ = slide_geometry(1, 400, k)
        assert wpr % 2 == 0 and (wpr - 2) * ow < 400 <= wpr * ow
        cols = [w * ow + b for w in range(wpr) for b in range(ow) if w * ow + b < 400]
        assert cols == list(range(400))


def test_main_compile_options_add_the_slide_geometry():
    from clusterbench.workloads.cupy.pipeline import SLIDE_WARPS, main_compile_options

    opts = main_compile_options("float32", 3)
    assert "--fmad=false" in opts and "-DCB_K=3" in opts and "-DCB_STH=16" in opts and f"-DCB_SNW={SLIDE_WARPS}" in opts
    assert not any(o.startswith(("-DCB_SROWS", "-DCB_SCOLS")) for o in opts)
    assert "-DCB_SNW=4" in main_compile_options("float32", 9) and "-DCB_SNW=1" in main_compile_options("float64", 11)
    shaped = main_compile_options("float32", 9, frame=(400, 401))
    assert "-DCB_SROWS=400" in shaped and "-DCB_SCOLS=401" in shaped


def test_frozen_kernels_keep_the_default_and_add_slide():
    assert pipeline.FROZEN_KERNELS[:len(build.FROZEN_KERNELS)] == tuple(build.FROZEN_KERNELS)
    assert "slide" in pipeline.FROZEN_KERNELS and build.DEFAULT_FROZEN_KERNEL != "slide"  # float64's default


def test_measured_defaults_follow_dtype_and_residency():
    # The defaults the H200 measured (docs/workload.md): the sliding window for a float32 frozen pedestal
    # and for float64 at 3x3, twophase for float64 from 5x5 up; the persistent "coop" kernel for tracking
    # when every tile can be resident.
    from clusterbench.model.params import WorkloadParams
    from clusterbench.workloads.cupy.pipeline import choose_kernels

    p = WorkloadParams()
    assert choose_kernels(p, 132) == ("slide", "coop")
    assert choose_kernels(p.replace(cluster=9), 132)[0] == "slide"
    assert choose_kernels(p.replace(pedestal_dtype="float64"), 132)[0] == "slide"
    assert choose_kernels(p.replace(pedestal_dtype="float64", cluster=5), 132)[0] == "twophase"
    # 400x400 in the default 32x20 tiles: ceil(400/32) = 13 tiles across, 400/20 = 20 down, 260 tiles of
    # 320 threads; at most 1024 persistent threads per SM, i.e. 3 blocks: they fit on 87 SMs (261 places)
    # but not on 86 (258)
    assert choose_kernels(p, 87)[1] == "coop"
    assert choose_kernels(p, 86)[1] == "graph"
    # 16-row tiles (325 of 256 threads, 4 per SM at most): 82 SMs hold 328, 81 only 324
    assert choose_kernels(p, 82, track_tile_rows=16)[1] == "coop"
    assert choose_kernels(p, 81, track_tile_rows=16)[1] == "graph"
    # an explicit choice, or the params record's, wins over every default
    assert choose_kernels(p, 8, tracking_kernel="flags") == ("slide", "flags")
    assert choose_kernels(p.replace(tracking_kernel="graph", frozen_kernel="strip"), 132) == ("strip", "graph")
    assert choose_kernels(p, 132, frozen_kernel="twophase")[0] == "twophase"


def test_persistent_tiles_that_overflow_shared_memory_are_refused_before_compiling():
    from clusterbench.errors import InputError
    from clusterbench.workloads.cupy.pipeline import check_persistent_shared, persistent_shared_bytes

    # float64 9x9, 40-row tiles: 48 x 40 values, 48 x 32 row maxima, 2 x 48 x 32 row sums (8 B each), and
    # 40 x 32 raw values (2 B): 15,360 + 12,288 + 24,576 + 2,560 = 54,784 B
    assert persistent_shared_bytes("float64", 9, 40) == 54_784
    with pytest.raises(InputError, match="54,784 B"):
        check_persistent_shared("float64", 9, 40)
    # 3x3 float32, the default 20 rows: 22 x 34 values (4 B), no row maxima (CB_PDIRECT) and no sums, 20 x 32 raw
    assert persistent_shared_bytes("float32", 3, 20) == 22 * 34 * 4 + 20 * 32 * 2
    for dtype in ("float32", "float64"):
        for k in (3, 5, 7, 9, 11):
            check_persistent_shared(dtype, k, 20)  # the default tiles always fit
