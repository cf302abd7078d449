// clusterbench: the tracking pedestal in one persistent launch per batch (see docs/workload.md,
// "Tracking at the link").
//
// Compiled by CuPy's NVRTC with the same -DCB_T / -DCB_K / --fmad=false as cluster_finder.cu, plus
// -DCB_PTH (tile rows) and -DCB_PBY (warps per block), as a cooperative module: the launch must
// keep every block resident at once (the pipeline checks the occupancy before it launches).
//
// Geometry: one block per tile of 32 columns x CB_PTH rows, for every frame of the batch. Each thread
// owns CB_PTH / CB_PBY pixels of one column and keeps their tracking state in registers across the
// whole batch: sum and sum2 (float64), the current mean and the threshold (pedestal type).
//
// Per frame i of the batch:
//   1. the mean of the tile plus a halo of H is read from M_i (frame 0: mean_in; frame i > 0:
//      means[i], which the neighbouring blocks wrote during frame i-1);
//   2. corrected values v = T(raw) - mean into shared memory (-inf outside the image), the raw
//      values of the block's own pixels beside them; the next frame's raw values are loaded into
//      registers meanwhile;
//   3. the K-wide row max, then per own pixel the window max (exact: separable), and, wherever
//      v >= -thr and max <= thr, the window total in row-major order from 0 with 0 for out-of-image
//      neighbours (the NumPy reference adds exactly those zeros). Two shortcuts, both exact:
//      CB_PDIRECT (3x3 f32): no row-max pass; each pixel reads its K*K values once for the max and
//      the total, which saves a block barrier. CB_PSEP (5x5 and up): the total is first summed
//      separably (row sums, then their column sum) with the sum of |values| A; it decides wherever
//      it lies farther from K*thr than 2*K*K*u*A (u the unit roundoff), a bound on its difference
//      from the row-major total (docs/workload.md, "Step 5"); elsewhere the row-major sum decides;
//   4. emit bit (a warp ballot: masks[i][y][x / 32], as the frozen two-phase kernel) and, for a
//      pedestal-like pixel, aare's update sum += val - sum*inv, sum2 += val^2 - sum2*inv,
//      mean = T(sum*inv); every own pixel's mean for frame i+1 is written to M_{i+1} (means[i+1],
//      or mean_out after the last frame);
//   5. one dependency step before frame i+1 (sync_mode 0: cooperative grid.sync(); sync_mode 1: a
//      per-tile flag, released after the block's stores and acquired by its <= 8 neighbours).
// Each frame's mean has its own buffer, so no block ever overwrites a mean that another block may
// still read: the step only has to order "written" before "read" (no write-after-read hazard), and
// an update takes effect from the next frame by construction.
// frozen_compact (cluster_finder.cu, mean_stride = npix) then turns the masks into slots, reading
// M_i for frame i's values. sum and sum2 go back to global memory once, after the last frame.

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#ifndef CB_T
#define CB_T float
#endif
#ifndef CB_K
#define CB_K 3
#endif
#ifndef CB_PTH
#define CB_PTH 20   // tile rows (own pixels) per block: 13 x 20 = 260 tiles at 400x400, 2 per SM on 132 SMs
#endif
#ifndef CB_PBY
#define CB_PBY 10   // warps per block: 2 own pixels per thread
#endif
#ifndef CB_PMINB
#define CB_PMINB 2  // resident blocks per SM the register allocation must allow (pipeline: tiles / SMs, rounded up)
#endif
#ifndef CB_PSEP
#define CB_PSEP (CB_K >= 5)  // the window total by a separable filter, with the exact row-major sum where it may decide
#endif
#ifndef CB_PDIRECT
#define CB_PDIRECT (CB_K <= 3 && sizeof(CB_T) == 4)  // window max and total from the K*K values read once: no
                                                       // row-max pass, one barrier less (f64: more registers, slower)
#endif
#ifndef CB_PSEP_SLACK
#define CB_PSEP_SLACK 2  // the filter's margin in units of K*K*u (u: the unit roundoff); tests: huge = always exact
#endif
#ifndef CB_ABL
#define CB_ABL 0  // benchmark only (benchmarks/bench_ablate.py): leave-one-out timings; the results are then wrong
#endif

typedef unsigned short u16;
typedef unsigned int u32;
typedef CB_T T;
#define FULL 0xffffffffu

static constexpr int K = CB_K;
static constexpr int H = CB_K / 2;
static constexpr int PW = 32;                   // tile columns: one warp across, one mask word per row
static constexpr int PTH = CB_PTH;
static constexpr int PBY = CB_PBY;
static constexpr int PTR = PTH + 2 * H;         // tile rows with the halo
static constexpr int PTC = PW + 2 * H;          // tile columns with the halo
static constexpr int PNR = (PTR + PBY - 1) / PBY;  // tile rows loaded per thread
static constexpr int PNO = PTH / PBY;           // own rows per thread
static_assert(PTH % PBY == 0, "CB_PTH must be a multiple of CB_PBY");
static_assert(2 * H <= 32, "the halo columns must fit one extra warp-wide load");
static_assert(H <= PTH, "a tile's halo must lie within its 8 neighbouring tiles");
static constexpr bool PSEP = CB_PSEP;
static constexpr bool PDIRECT = CB_PDIRECT && !CB_PSEP;
// Leave-one-out timing variants (CB_ABL bits; never in a pipeline run): 1 the dependency step becomes a
// block barrier, 2 the halo means are read once (frame 0) instead of per frame, 4 no per-frame mean store,
// 8 no window total (every pixel under its threshold is pedestal-like).
static constexpr int ABL = CB_ABL;

__device__ __forceinline__ float p_ninf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double p_ninf(double) { return __longlong_as_double(0xfff0000000000000LL); }
__device__ __forceinline__ float p_max(float a, float b) { return fmaxf(a, b); }  // exact: no NaN here
__device__ __forceinline__ double p_max(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float p_abs(float a) { return fabsf(a); }
__device__ __forceinline__ double p_abs(double a) { return fabs(a); }
__device__ __forceinline__ float p_unit(float) { return 5.9604644775390625e-8f; }    // u = 2^-24
__device__ __forceinline__ double p_unit(double) { return 1.1102230246251565e-16; }  // u = 2^-53
__device__ __forceinline__ float p_tiny(float) { return 1.17549435082228751e-38f; }  // the smallest normal
__device__ __forceinline__ double p_tiny(double) { return 2.2250738585072014e-308; }

__device__ __forceinline__ u32 ld_acquire(const u32* p) {
#ifdef __CUDA_ARCH__
    u32 v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#else  // the CPU emulation of the kernels (tests/workload/cuda_emu)
    sched_yield();
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

#include "tile_load.cuh"  // load_tile_raw, shared with cluster_finder.cu

extern "C" __global__ void __launch_bounds__(PW * PBY, CB_PMINB)
track_persistent(const u16* __restrict__ frames, int n_frames, const T* mean_in, T* mean_out,
                 T* means, double* __restrict__ sum, double* __restrict__ sum2,
                 const T* __restrict__ thr, double inv, u32* __restrict__ masks, int rows, int cols, int wpr,
                 int tile_rows_n, u32* __restrict__ flags, u32 flag_base, int sync_mode) {
    __shared__ T s_v[PTR][PTC];    // corrected values of the tile with halo (-inf outside the image)
    __shared__ T s_h[PDIRECT ? 1 : PTR][PW];  // K-wide row max (not PDIRECT)
    __shared__ T s_hs[PSEP ? PTR : 1][PW];  // PSEP: K-wide row sum (0 for out-of-image values), left to right
    __shared__ T s_ha[PSEP ? PTR : 1][PW];  // PSEP: K-wide row sum of the absolute values
    __shared__ u16 s_raw[PTH][PW]; // raw values of the block's own pixels
    const int lane = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * PW + lane;
    const int tile = blockIdx.x;
    const int tx = tile % wpr, tyi = tile / wpr;
    const int x0 = tx * PW, y0 = tyi * PTH;
    const size_t npix = (size_t)rows * cols;
    const long long corner = (long long)(y0 - H) * cols + (x0 - H);  // may be negative: only an offset
    const T ninf = p_ninf(T(0));
    const T kf = (T)K;
    // PSEP margin: |row-major total - separable total| <= (gamma(K*K-1) + gamma(2K-2)) / (1 - gamma(2K-2)) * A,
    // A the separable sum of |values|; 2*K*K*u bounds that factor with room for the rounding of the test itself
    const T sep_c = (T)(CB_PSEP_SLACK * K * K) * p_unit(T(0));

    // The state of the own pixels, in registers for the whole batch. means[0] gets frame 0's mean
    // (frozen_compact reads M_i for frame i).
    double s_sum[PNO], s_sq[PNO];
    T s_mean[PNO], s_thr[PNO];
#pragma unroll
    for (int j = 0; j < PNO; ++j) {
        const int y = y0 + j * PBY + ty, x = x0 + lane;
        s_sum[j] = 0.0;
        s_sq[j] = 0.0;
        s_mean[j] = T(0);
        s_thr[j] = T(0);
        if (y < rows && x < cols) {
            const size_t idx = (size_t)y * cols + x;
            s_sum[j] = sum[idx];
            s_sq[j] = sum2[idx];
            s_mean[j] = __ldcg(mean_in + idx);
            s_thr[j] = thr[idx];
            means[idx] = s_mean[j];
        }
    }
    // neighbour tiles whose own pixels lie in this tile's halo (flag mode): thread t < 9 watches one
    int watch = -1;
    if (tid < 9 && tid != 4) {
        const int ntx = tx + tid % 3 - 1, nty = tyi + tid / 3 - 1;
        if (ntx >= 0 && ntx < wpr && nty >= 0 && nty < tile_rows_n) watch = nty * wpr + ntx;
    }

    u32 lo[PNR], hi[PNR];
    load_tile_raw<PNR, PBY, PTR, PTC>(lo, hi, frames + corner, x0, y0, rows, cols);

    T mlo[PNR], mhi[PNR];
    for (int f = 0; f < n_frames; ++f) {
        const T* M = (f == 0) ? mean_in : means + (size_t)f * npix;  // no __restrict__: other blocks write it
        // 1-2. the mean of the tile with halo (L2: written by other blocks in this launch), corrected values
#pragma unroll
        for (int i = 0; i < PNR; ++i) {
            if ((ABL & 2) && f > 0) break;
            const int row = i * PBY + ty;
            const int y = y0 - H + row, x = x0 - H + lane;
            const bool yin = row < PTR && y >= 0 && y < rows;
            const T* mp = M + (corner + (long long)row * cols);
            mlo[i] = (yin && x >= 0 && x < cols) ? __ldcg(mp + lane) : T(0);
            mhi[i] = (yin && lane + 32 < PTC && x + 32 < cols) ? __ldcg(mp + lane + 32) : T(0);
        }
#pragma unroll
        for (int i = 0; i < PNR; ++i) {
            const int row = i * PBY + ty;
            if (row < PTR) {
                const int y = y0 - H + row;
                const bool yin = y >= 0 && y < rows;
                const int x = x0 - H + lane;
                s_v[row][lane] = (yin && x >= 0 && x < cols) ? (T)lo[i] - mlo[i] : ninf;
                if (lane + 32 < PTC)
                    s_v[row][lane + 32] = (yin && x + 32 < cols) ? (T)hi[i] - mhi[i] : ninf;
                const int orow = row - H;  // own rows: tile rows H .. H+PTH-1, columns H .. H+31
                if (orow >= 0 && orow < PTH) {
                    if (lane >= H) s_raw[orow][lane - H] = (u16)lo[i];
                    if (lane + 32 < PTC && lane + 32 - H < PW) s_raw[orow][lane + 32 - H] = (u16)hi[i];
                }
            }
        }
        if (f + 1 < n_frames)  // the next frame's raw values are in flight while this one is classified
            load_tile_raw<PNR, PBY, PTR, PTC>(lo, hi, frames + (long long)((size_t)(f + 1) * npix) + corner, x0, y0, rows, cols);
        __syncthreads();
        // 3. K-wide row max of every tile row (PDIRECT: none, each pixel reads its K*K values)
#pragma unroll
        for (int i = 0; i < PNR; ++i) {
            const int row = i * PBY + ty;
            if (!PDIRECT && row < PTR) {
                T mx = s_v[row][lane];
                if (PSEP) {  // out-of-image values (-inf) add 0: the reference's zero padding
                    const T a = (mx == ninf) ? T(0) : mx;
                    T rs = T(0) + a, ra = T(0) + p_abs(a);
#pragma unroll
                    for (int d = 1; d < K; ++d) {
                        const T b = s_v[row][lane + d];
                        mx = p_max(mx, b);
                        const T c = (b == ninf) ? T(0) : b;
                        rs = rs + c;
                        ra = ra + p_abs(c);
                    }
                    s_hs[PSEP ? row : 0][lane] = rs;
                    s_ha[PSEP ? row : 0][lane] = ra;
                } else {
#pragma unroll
                    for (int d = 1; d < K; ++d) mx = p_max(mx, s_v[row][lane + d]);
                }
                s_h[PDIRECT ? 0 : row][lane] = mx;
            }
        }
        if (!PDIRECT) __syncthreads();
        // 3-4. classify the own pixels, update their state, publish their mean for frame f+1
        u32* fmask = masks + (size_t)f * (size_t)rows * (size_t)wpr;
        T* Mn = (f + 1 < n_frames) ? means + (size_t)(f + 1) * npix : mean_out;
#pragma unroll
        for (int j = 0; j < PNO; ++j) {
            const int r = j * PBY + ty;
            const int y = y0 + r, x = x0 + lane;
            const bool own = y < rows && x < cols;
            const T v = s_v[r + H][lane + H];
            T wm;
            T wv[PDIRECT ? K : 1][PDIRECT ? K : 1];  // PDIRECT: the window's values, -inf outside the image
            if (PDIRECT) {
                wm = ninf;
#pragma unroll
                for (int dy = 0; dy < K; ++dy)
#pragma unroll
                    for (int dx = 0; dx < K; ++dx) {
                        wv[PDIRECT ? dy : 0][PDIRECT ? dx : 0] = s_v[r + dy][lane + dx];
                        wm = p_max(wm, wv[PDIRECT ? dy : 0][PDIRECT ? dx : 0]);
                    }
            } else {
                wm = s_h[PDIRECT ? 0 : r][lane];
#pragma unroll
                for (int d = 1; d < K; ++d) wm = p_max(wm, s_h[PDIRECT ? 0 : r + d][lane]);
            }
            const T t = s_thr[j];
            bool emit = false, ped = false;
            if (own && !(v < -t)) {
                if (wm > t) {
                    emit = (v == wm);
                } else if (ABL & 8) {
                    ped = true;
                } else {
                    const T t0 = kf * t;
                    bool by_total = false, exact = true;
                    if (PSEP) {  // the separable total decides wherever it lies farther from t0 than the margin
                        T cs = T(0), ca = T(0);
#pragma unroll
                        for (int d = 0; d < K; ++d) {
                            cs = cs + s_hs[PSEP ? r + d : 0][lane];
                            ca = ca + s_ha[PSEP ? r + d : 0][lane];
                        }
                        const T dd = cs - t0;
                        const T ee = p_max(ca * sep_c, p_tiny(T(0)));
                        if (dd > ee) {
                            by_total = true;
                            exact = false;
                        } else if (dd < -ee) {
                            exact = false;
                        }
                    }
                    if (exact) {
                        T total = T(0);
                        if (y >= H && y + H < rows && x >= H && x + H < cols) {
#pragma unroll
                            for (int dy = 0; dy < K; ++dy)
#pragma unroll
                                for (int dx = 0; dx < K; ++dx)
                                    total = total + (PDIRECT ? wv[PDIRECT ? dy : 0][PDIRECT ? dx : 0] : s_v[r + dy][lane + dx]);
                        } else {  // out-of-image neighbours (-inf in s_v) add 0: the reference's zero padding
#pragma unroll
                            for (int dy = 0; dy < K; ++dy)
#pragma unroll
                                for (int dx = 0; dx < K; ++dx) {
                                    const T a = PDIRECT ? wv[PDIRECT ? dy : 0][PDIRECT ? dx : 0] : s_v[r + dy][lane + dx];
                                    total = total + (a == ninf ? T(0) : a);
                                }
                        }
                        by_total = total > t0;
                    }
                    emit = by_total && (v == wm);
                    ped = !by_total;
                }
            }
            if (ped) {
                const double val = (double)s_raw[r][lane];
                const double ns = s_sum[j] + (val - s_sum[j] * inv);
                const double nq = s_sq[j] + (val * val - s_sq[j] * inv);
                s_sum[j] = ns;
                s_sq[j] = nq;
                s_mean[j] = (T)(ns * inv);
            }
            const u32 word = __ballot_sync(FULL, emit);
            if (own && !(ABL & 4)) Mn[(size_t)y * cols + x] = s_mean[j];
            if (lane == 0 && y < rows) fmask[(size_t)y * wpr + tx] = word;
        }
        // 5. the dependency step: frame f+1 reads the means its neighbours wrote for it
        if (f + 1 < n_frames) {
            if (ABL & 1) {
                __syncthreads();
            } else if (sync_mode == 0) {
                cg::this_grid().sync();
            } else {
                __syncthreads();  // every store of this block is issued; the shared tiles are free
                if (tid == 0) {
                    __threadfence();
                    atomicExch(&flags[tile], flag_base + (u32)f + 1u);
                }
                if (watch >= 0) {
                    const u32 want = flag_base + (u32)f + 1u;
                    while ((int)(ld_acquire(&flags[watch]) - want) < 0) {
                    }
                    __threadfence();
                }
                __syncthreads();
            }
        }
    }
#pragma unroll
    for (int j = 0; j < PNO; ++j) {
        const int y = y0 + j * PBY + ty, x = x0 + lane;
        if (y < rows && x < cols) {
            const size_t idx = (size_t)y * cols + x;
            sum[idx] = s_sum[j];
            sum2[idx] = s_sq[j];
        }
    }
}
