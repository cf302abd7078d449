// clusterbench: aare's photon cluster finder on the GPU (see docs/workload.md and docs/facts.md).
//
// Compiled by CuPy's NVRTC with -DCB_T=<float|double> -DCB_K=<3..11> and --fmad=false, so that every
// multiply and add rounds on its own, exactly as the NumPy reference does (bit-identical results).
//
// Exactness of the fast path: the window max is computed separably (a row max, then a column max),
// which is exact because max is exact and associative. The window total is order-dependent, so it
// is summed in row-major order from 0, neighbour by neighbour, and only where it can matter: frozen
// mode needs it only at a pixel that equals its window max while that max is <= thr; tracking mode
// needs it at every pixel whose window max is <= thr (to know whether the pixel is pedestal-like).
//
// Output: per frame a slot = uint32 count (clusters found) + cap packed records
// {uint16 x, uint16 y, T data[K*K]} in row-major order of the centre pixel; records past the cap are
// counted, not stored. Records are written a warp at a time, one 32-bit word per lane, so writes
// coalesce both into device memory (copy mode) and into mapped host memory (zerocopy mode).

#ifndef CB_T
#define CB_T float
#endif
#ifndef CB_K
#define CB_K 3
#endif

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef unsigned char u8;
typedef CB_T T;

#define NT 512          // threads per block
#define NW (NT / 32)    // warps per block
#define ITEMS 4         // pixels per thread per emission round (a round is NT*ITEMS pixels)
#define FULL 0xffffffffu

static constexpr int K = CB_K;
static constexpr int H = CB_K / 2;
static constexpr int WPV = (int)sizeof(T) / 4;          // 32-bit words per value
static constexpr int REC_WORDS = 1 + K * K * WPV;       // x|y word, then the values
static constexpr int REC_BYTES = 4 * REC_WORDS;

enum { EMIT = 1, PED_LIKE = 2 };

__device__ __forceinline__ float neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double neg_inf(double) { return __longlong_as_double(0xfff0000000000000LL); }
__device__ __forceinline__ u32 word_of(float v, int) { return __float_as_uint(v); }
__device__ __forceinline__ u32 word_of(double v, int half) {
    u64 b = (u64)__double_as_longlong(v);
    return half ? (u32)(b >> 32) : (u32)(b & 0xffffffffu);  // little-endian: low word first
}

// ---------------------------------------------------------------------------------------------
// Pedestal (always float64): sums of dark frames, then mean/threshold in the pedestal type.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void pedestal_accumulate(const u16* __restrict__ dark, int n_frames, int npix,
                                               double* __restrict__ sum, double* __restrict__ sum2) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npix) return;
    double s = sum[p], s2 = sum2[p];
    for (int f = 0; f < n_frames; ++f) {
        double v = (double)dark[(size_t)f * npix + p];
        s = s + v;
        s2 = s2 + v * v;  // integers below 2**53: exact in any order
    }
    sum[p] = s;
    sum2[p] = s2;
}

extern "C" __global__ void pedestal_finish(const double* __restrict__ sum, const double* __restrict__ sum2,
                                           int n, double nsigma, int npix, T* __restrict__ mean,
                                           T* __restrict__ thr) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npix) return;
    double inv = 1.0 / (double)n;
    double m = sum[p] * inv;
    double var = fma(-m, m, sum2[p] * inv);
    double sd = sqrt(fmax(var, 0.0));
    mean[p] = (T)m;
    thr[p] = (T)(sd * nsigma);
}

// ---------------------------------------------------------------------------------------------
// The strip machinery shared by both modes. A strip is `strip` image rows; the block holds its
// corrected values with a halo of H on every side (tile, -inf outside the image) and the
// horizontal K-wide max of every tile row (hmax).
// ---------------------------------------------------------------------------------------------
struct Strip {
    T* tile;   // (strip + 2H) x tcols, tcols = cols + 2H
    T* hmax;   // (strip + 2H) x cols
    int rows, cols, tcols, strip;

    __device__ void load(const u16* __restrict__ frame, const T* __restrict__ mean, int r0) {
        const int trows = strip + 2 * H;
        const int n = trows * tcols;
        const T ninf = neg_inf(T(0));
        for (int i = threadIdx.x; i < n; i += NT) {
            int tr = i / tcols, tc = i - tr * tcols;
            int y = r0 - H + tr, x = tc - H;
            T v = ninf;
            if (y >= 0 && y < rows && x >= 0 && x < cols) {
                size_t idx = (size_t)y * cols + x;
                v = (T)frame[idx] - mean[idx];
            }
            tile[i] = v;
        }
    }

    __device__ void horizontal() {
        const int trows = strip + 2 * H;
        const int n = trows * cols;
        for (int i = threadIdx.x; i < n; i += NT) {
            int tr = i / cols, c = i - tr * cols;
            const T* t = tile + tr * tcols + c;
            T m = t[0];
#pragma unroll
            for (int d = 1; d < K; ++d) m = t[d] > m ? t[d] : m;
            hmax[i] = m;
        }
    }

    // The rules for the pixel at strip row ly, column x (image row y). TRACK: also decide
    // pedestal-likeness, which needs the total wherever the max is <= thr.
    template <bool TRACK>
    __device__ int classify(int ly, int x, int y, T th) const {
        const T v = tile[(ly + H) * tcols + x + H];
        if (v < -th) return 0;
        T wm = hmax[ly * cols + x];
#pragma unroll
        for (int d = 1; d < K; ++d) {
            T o = hmax[(ly + d) * cols + x];
            wm = o > wm ? o : wm;
        }
        const bool is_max = (v == wm);
        if (wm > th) return is_max ? EMIT : 0;
        if (!TRACK && !is_max) return 0;  // frozen: the total matters only at a window max
        T total = T(0);
        for (int dy = -H; dy <= H; ++dy) {
            const int yy = y + dy;
            for (int dx = -H; dx <= H; ++dx) {
                const int xx = x + dx;
                if (yy >= 0 && yy < rows && xx >= 0 && xx < cols) total = total + tile[(ly + H + dy) * tcols + x + H + dx];
            }
        }
        const T kthr = (T)K * th;
        if (total > kthr) return is_max ? EMIT : 0;
        return PED_LIKE;
    }

    // One warp writes one record, a 32-bit word per lane (coalesced).
    __device__ void write_record(u32* __restrict__ dst, int ly, int x, int y, int lane) const {
        for (int wd = lane; wd < REC_WORDS; wd += 32) {
            u32 word;
            if (wd == 0) {
                word = (u32)x | ((u32)y << 16);
            } else {
                const int j = (wd - 1) / WPV, half = (wd - 1) % WPV;
                const int dy = j / K - H, dx = j % K - H;
                const int yy = y + dy, xx = x + dx;
                T val = T(0);
                if (yy >= 0 && yy < rows && xx >= 0 && xx < cols) val = tile[(ly + H + dy) * tcols + x + H + dx];
                word = word_of(val, half);
            }
            dst[wd] = word;
        }
    }
};

// Block-wide ordered emission for one round of NT*ITEMS pixels (pixel p = rb + i*NT + tid).
// `flags` bit i says pixel i of this thread emits. Records go to recs[base + rank] while that is
// below `cap`, in row-major order. Returns the new base (clusters found so far, kept or not).
__device__ __forceinline__ u32 emit_round(const Strip& s, unsigned flags, int rb, int r0, u32 base,
                                          u8* __restrict__ recs, u32 cap) {
    __shared__ u32 s_masks[ITEMS * NW];
    __shared__ u32 s_offs[ITEMS * NW];
    __shared__ u32 s_total;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        u32 b = __ballot_sync(FULL, (flags >> i) & 1u);
        if (lane == 0) s_masks[i * NW + w] = b;
    }
    if (!__syncthreads_or(flags != 0)) return base;  // the common case: nothing in this round
    if (w == 0) {
        constexpr int E = ITEMS * NW / 32;  // entries per lane, in (item, warp) order
        u32 c[E];
        u32 mine = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            c[e] = __popc(s_masks[lane * E + e]);
            mine += c[e];
        }
        u32 incl = mine;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            u32 n = __shfl_up_sync(FULL, incl, o);
            if (lane >= o) incl += n;
        }
        u32 excl = incl - mine;
#pragma unroll
        for (int e = 0; e < E; ++e) {
            s_offs[lane * E + e] = excl;
            excl += c[e];
        }
        if (lane == 31) s_total = incl;
    }
    __syncthreads();
#pragma unroll 1
    for (int i = 0; i < ITEMS; ++i) {
        const u32 all = s_masks[i * NW + w];
        u32 m = all;
        while (m) {  // warp-uniform
            const int bit = __ffs(m) - 1;
            m &= m - 1;
            const u32 pos = base + s_offs[i * NW + w] + __popc(all & ((1u << bit) - 1u));
            if (pos < cap) {
                const int p = rb + i * NT + w * 32 + bit;
                const int ly = p / s.cols, x = p - ly * s.cols;
                s.write_record(reinterpret_cast<u32*>(recs + (size_t)pos * REC_BYTES), ly, x, r0 + ly, lane);
            }
        }
    }
    const u32 total = s_total;
    __syncthreads();
    return base + total;
}

__device__ __forceinline__ Strip make_strip(int rows, int cols, int strip) {
    extern __shared__ __align__(16) u8 smem[];
    Strip s;
    s.rows = rows;
    s.cols = cols;
    s.tcols = cols + 2 * H;
    s.strip = strip;
    s.tile = reinterpret_cast<T*>(smem);
    s.hmax = s.tile + (strip + 2 * H) * s.tcols;
    return s;
}

// ---------------------------------------------------------------------------------------------
// Frozen pedestal: one block per frame, walking the frame strip by strip. Many frames per launch.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(NT, 2)
find_frozen(const u16* __restrict__ frames, int n_frames, const T* __restrict__ mean, const T* __restrict__ thr,
            u8* __restrict__ slots, long long slot_bytes, u64* __restrict__ totals,
            int rows, int cols, int strip, int cap) {
    const int f = blockIdx.x;
    if (f >= n_frames) return;
    const u16* frame = frames + (size_t)f * rows * cols;
    u8* slot = slots + (size_t)f * (size_t)slot_bytes;
    Strip s = make_strip(rows, cols, strip);
    u32 found = 0;
    for (int r0 = 0; r0 < rows; r0 += strip) {
        const int npx = min(strip, rows - r0) * cols;
        s.load(frame, mean, r0);
        __syncthreads();
        s.horizontal();
        __syncthreads();
        for (int rb = 0; rb < npx; rb += NT * ITEMS) {
            unsigned flags = 0;
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int p = rb + i * NT + threadIdx.x;
                if (p < npx) {
                    const int ly = p / cols, x = p - ly * cols, y = r0 + ly;
                    if (s.classify<false>(ly, x, y, thr[(size_t)y * cols + x]) & EMIT) flags |= 1u << i;
                }
            }
            found = emit_round(s, flags, rb, r0, found, slot + 4, (u32)cap);
        }
        __syncthreads();  // the next strip overwrites the tile
    }
    if (threadIdx.x == 0) {
        *reinterpret_cast<u32*>(slot) = found;
        atomicAdd(&totals[0], (u64)found);
        if (found > (u32)cap) atomicAdd(&totals[1], (u64)(found - (u32)cap));
    }
}

// ---------------------------------------------------------------------------------------------
// Frozen pedestal, two phases (the default; see docs/workload.md, "The two-phase frozen kernel").
//
// 1. frozen_classify: a 1-D grid of (tile, frame group) blocks. A block is CB_BY warps over a tile
//    of 32 columns x CB_TH rows, for `fpb` consecutive frames. It keeps the mean of its tile plus a
//    halo of H (shared memory) and the threshold of its own pixels (registers) across those frames,
//    so the maps cross L2 once per frame group. Per frame: corrected values with halo into shared
//    memory (double-buffered, -inf outside the image), the K-wide row max, then per pixel the
//    column max of the row maxima (the window max, exact) and the rules of Strip::classify<false>,
//    the total summed in row-major order only at a window max that is <= thr. A warp ballot over
//    its 32 columns gives one 32-bit word: masks[f][y][x / 32], bit x % 32 = "pixel (x, y) emits".
//    The next frame's raw values are loaded into registers while this one is classified.
// 2. frozen_compact: one block per frame. Each thread owns CB_WPT consecutive mask words; popcounts
//    and a block scan give every emitter its row-major rank (words are in row-major pixel order).
//    Emitters with rank < cap are listed in shared memory by rank, then one warp per record writes
//    it (x|y word, then the K*K corrected values recomputed from frame and mean, 0 outside the
//    image), a 32-bit word per lane as before. The slot's count is the number found. `mean_stride`
//    is 0 in frozen mode; the persistent tracking kernel (tracking_persistent.cu) keeps one mean per
//    frame, and passes the frame size, so that frame f's values use frame f's mean. `ow` is the number
//    of columns one mask word covers: 32 for frozen_classify and the tracking kernel, SOW (32 - H, or
//    31 - H for an odd H) for frozen_slide (word w of a row covers columns w*ow .. w*ow+ow-1, bit b column w*ow + b, so word
//    order then bit order is still row-major pixel order).
// Both are launched on the batch's stream: no host synchronization.
// ---------------------------------------------------------------------------------------------
#ifndef CB_TH
#define CB_TH 32    // tile rows (output pixels) per classify block
#endif
#ifndef CB_BY
#define CB_BY 8     // warps per classify block; each thread classifies CB_TH / CB_BY pixels per frame
#endif
#ifndef CB_NT2
#define CB_NT2 256  // threads per compact block
#endif
#ifndef CB_WPT
#define CB_WPT 24   // mask words per compact thread per chunk (a chunk is CB_NT2 * CB_WPT words)
#endif
#ifndef CB_LIST
#define CB_LIST 2048  // emitters listed per window in the compact block
#endif

static constexpr int TW = 32;                       // tile columns: one warp, one mask word
static constexpr int TH = CB_TH;
static constexpr int BY = CB_BY;
static constexpr int TR = TH + 2 * H;               // tile rows with the halo
static constexpr int TC = TW + 2 * H;               // tile columns with the halo
static constexpr int NR = (TR + BY - 1) / BY;       // tile rows loaded per thread
static constexpr int NO = TH / BY;                  // output rows per thread
static constexpr int CLS_MINB = 4;  // 4 blocks of 256 threads per SM: at most 64 registers
static_assert(TH % BY == 0, "CB_TH must be a multiple of CB_BY");
static_assert(2 * H <= 32, "the halo columns must fit one extra warp-wide load");

__device__ __forceinline__ float tmax(float a, float b) { return fmaxf(a, b); }    // exact: no NaN here
__device__ __forceinline__ double tmax(double a, double b) { return fmax(a, b); }

#include "tile_load.cuh"  // load_tile_raw: the raw values of a tile with halo, all loads in flight at once

extern "C" __global__ void __launch_bounds__(TW * BY, CLS_MINB)
frozen_classify(const u16* __restrict__ frames, int n_frames, int fpb, const T* __restrict__ mean,
                const T* __restrict__ thr, u32* __restrict__ masks, int rows, int cols, int wpr, int tiles) {
    __shared__ T s_v[2][TR][TC];  // corrected values, double-buffered by frame
    __shared__ T s_h[TR][TW];     // K-wide row max
    __shared__ T s_m[TR][TC];     // the mean of the tile with halo (0 outside the image)
    const int lane = threadIdx.x, ty = threadIdx.y;
    const int tile = (int)(blockIdx.x % (unsigned)tiles);
    const int group = (int)(blockIdx.x / (unsigned)tiles);
    const int tx = tile % wpr, tyi = tile / wpr;
    const int x0 = tx * TW, y0 = tyi * TH;
    const int f0 = group * fpb;
    const int f1 = min(n_frames, f0 + fpb);
    if (f0 >= f1) return;  // block-uniform
    const size_t npix = (size_t)rows * cols;
    const long long corner = (long long)(y0 - H) * cols + (x0 - H);  // may be negative: only an offset
    const T ninf = neg_inf(T(0));

    for (int e = ty * TW + lane; e < TR * TC; e += TW * BY) {
        const int row = e / TC, col = e - row * TC;
        const int y = y0 - H + row, x = x0 - H + col;
        s_m[row][col] = (y >= 0 && y < rows && x >= 0 && x < cols) ? mean[(size_t)y * cols + x] : T(0);
    }
    T th[NO];
#pragma unroll
    for (int j = 0; j < NO; ++j) {
        const int y = y0 + j * BY + ty, x = x0 + lane;
        th[j] = (y < rows && x < cols) ? thr[(size_t)y * cols + x] : T(0);
    }
    u32 lo[NR], hi[NR];
    load_tile_raw<NR, BY, TR, TC>(lo, hi, frames + (long long)((size_t)f0 * npix) + corner, x0, y0, rows, cols);
    __syncthreads();  // s_m

    int buf = 0;
    for (int f = f0; f < f1; ++f) {
        // corrected values (the same operation as Strip::load), -inf outside the image
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const int row = i * BY + ty;
            if (row < TR) {
                const int y = y0 - H + row;
                const bool yin = y >= 0 && y < rows;
                const int x = x0 - H + lane;
                s_v[buf][row][lane] = (yin && x >= 0 && x < cols) ? (T)lo[i] - s_m[row][lane] : ninf;
                if (lane + 32 < TC)
                    s_v[buf][row][lane + 32] = (yin && x + 32 < cols) ? (T)hi[i] - s_m[row][lane + 32] : ninf;
            }
        }
        if (f + 1 < f1)  // the next frame's loads are in flight while this one is classified
            load_tile_raw<NR, BY, TR, TC>(lo, hi, frames + (long long)((size_t)(f + 1) * npix) + corner, x0, y0, rows, cols);
        __syncthreads();
        // K-wide row max of every tile row
#pragma unroll
        for (int i = 0; i < NR; ++i) {
            const int row = i * BY + ty;
            if (row < TR) {
                T mx = s_v[buf][row][lane];
#pragma unroll
                for (int d = 1; d < K; ++d) mx = tmax(mx, s_v[buf][row][lane + d]);
                s_h[row][lane] = mx;
            }
        }
        __syncthreads();
        // classify (Strip::classify<false>) and ballot one mask word per output row
        u32* fmask = masks + (size_t)f * (size_t)rows * (size_t)wpr;
#pragma unroll
        for (int j = 0; j < NO; ++j) {
            const int r = j * BY + ty;
            const int y = y0 + r, x = x0 + lane;
            const T v = s_v[buf][r + H][lane + H];
            T wm = s_h[r][lane];
#pragma unroll
            for (int d = 1; d < K; ++d) wm = tmax(wm, s_h[r + d][lane]);
            const T t = th[j];
            const bool cand = (y < rows) && (x < cols) && !(v < -t) && (v == wm);
            bool emit = cand && (wm > t);
            if (cand && !(wm > t)) {  // a window max <= thr: the total decides
                T total = T(0);
                if (y >= H && y + H < rows && x >= H && x + H < cols) {
#pragma unroll
                    for (int dy = 0; dy < K; ++dy)
#pragma unroll
                        for (int dx = 0; dx < K; ++dx) total = total + s_v[buf][r + dy][lane + dx];
                } else {
                    for (int dy = 0; dy < K; ++dy) {
                        const int yy = y - H + dy;
                        for (int dx = 0; dx < K; ++dx) {
                            const int xx = x - H + dx;
                            if (yy >= 0 && yy < rows && xx >= 0 && xx < cols) total = total + s_v[buf][r + dy][lane + dx];
                        }
                    }
                }
                const T kthr = (T)K * t;
                emit = total > kthr;
            }
            const u32 word = __ballot_sync(FULL, emit);
            if (lane == 0 && y < rows) fmask[(size_t)y * wpr + tx] = word;
        }
        buf ^= 1;  // the next frame's tile goes to the other buffer: no third barrier needed
    }
}

// ---------------------------------------------------------------------------------------------
// Frozen pedestal, register sliding window (frozen_slide; docs/workload.md, "Step 4" and "Step 6").
// No block barrier per frame: a warp owns one frame of a tile at a time.
//
// Lane L of a warp holds two adjacent image columns, xp = x0 + 2L ("p") and xp + 1 ("q"), so a warp
// spans 64 columns: the tile's 2 * SOW output columns and SJ0 halo columns on each side (SJ0 = H, or
// H + 1 for an odd H so that x0 is even and a lane's pair is one aligned 32-bit load). One shuffle of
// a neighbour lane's value serves both pixels of a lane, so a row costs about half the shuffles,
// loads and per-row instructions of one column per lane. A block of CB_SNW warps shares one tile:
// it loads the tile's mean (with halo rows), thresholds and K * thresholds into shared memory once
// (the only __syncthreads), then warp w walks frames f0 + w, f0 + w + CB_SNW, ... of its frame group.
// Per frame a warp:
//   - loads its two columns of raw values for all CB_STH + 2H rows at once, then v = T(raw) - mean;
//     outside the image raw and mean are 0, so v = +0 there: the reference's zero padding of the total;
//   - per row, the K-wide row max of p and of q from the shuffled neighbour values, with -inf for
//     columns and rows outside the image (the reference's padding of the max);
//   - per output row, the window max (exact: separable; from 7x7 up by prefix and suffix maxima over
//     blocks of K rows, about 3 max per row in place of K - 1), the rules of Strip::classify<false>,
//     and the total where a window max <= thr decides, summed in row-major order. K <= 5: from the
//     shuffled values in registers, in every row. K >= 7: few pixels need it (about 1 in K*K) but each
//     costs K*K adds, so the warp queues them (row, column) in shared memory, keeps its values in a
//     per-warp shared tile, and then sums one queued pixel per lane;
//   - two ballots per output row (the p and the q pixels). Lane r keeps row r's two words; at the end
//     of the frame it interleaves them into the warp's 64 column bits and stores the row's two mask
//     words of SOW columns: word 2 * tx covers columns 2 * tx * SOW .. + SOW - 1, so frozen_compact with
//     ow = SOW decodes word w, bit b as column w * SOW + b (row-major order).
// ---------------------------------------------------------------------------------------------
#ifndef CB_STH
#define CB_STH 16   // output rows per slide tile
#endif
#ifndef CB_SNW
#define CB_SNW 8    // warps per slide block
#endif
#ifndef CB_SROWS
#define CB_SROWS 0  // the frame's rows and columns known when compiling (the pipeline's frames); 0: the kernel argument
#endif
#ifndef CB_SCOLS
#define CB_SCOLS 0
#endif
#ifndef CB_SQ
#define CB_SQ 160   // K >= 7: queued pixels per warp before the queue is summed (a row adds up to 64)
#endif
static constexpr int STH = CB_STH;
static constexpr int SNW = CB_SNW;
static constexpr int STR = STH + 2 * H;          // rows with the halo
static constexpr int SPAD = H & 1;               // odd H: one more halo column on each side (x0 even)
static constexpr int SOW = 32 - H - SPAD;        // output columns per mask word; a tile is two words wide
static constexpr int SJ0 = H + SPAD;             // bit (column - x0) of the tile's first output column
static constexpr bool SREG = K <= 5;             // the total from the shuffled values in registers
static constexpr bool SPAIR = CB_SCOLS > 0 && CB_SCOLS % 2 == 0;  // a lane's two raw values in one 32-bit load
static constexpr int SQ = CB_SQ;
static_assert(SQ > 64, "a row adds up to 64 queued pixels");
static constexpr int SWW = SREG ? 1 : SNW;       // K >= 7: per-warp shared tiles
static constexpr int SWR = SREG ? 1 : STR;
static_assert(STH <= 32, "one lane per output row writes the mask words");
static_assert(SJ0 + 2 * SOW + SJ0 == 64, "a warp spans 64 columns");
// Static shared memory per block (the arrays of frozen_slide) and the blocks of it one SM holds (227 KiB,
// 1 KiB reserved per block).
static constexpr int SSMEM = (int)(2 * sizeof(T) * 32 * (STR + 2 * STH + SWW * SWR)) +
                             4 * SWW * ((SREG ? 1 : SQ) + 2 * (SREG ? 1 : STH));
static constexpr int SFIT = (227 * 1024) / (SSMEM + 1024);
// Resident blocks per SM the register allocation must allow: 24 warps up to 5x5 (80 registers), 16 from
// 7x7 up (128 registers; at 9x9 f32 0.735 against 0.753-0.759 µs with 20 warps), or as many as fit.
static constexpr int SWARPS_SM = SREG ? 24 : 16;
#ifndef CB_SMINB
#define CB_SMINB ((SWARPS_SM / SNW) < SFIT ? (SWARPS_SM / SNW) : SFIT)
#endif

struct alignas(2 * sizeof(T)) T2 { T x, y; };  // the values of a lane's two columns

// Bits 0..15 of x to the even bits 0, 2, ..., 30.
__device__ __forceinline__ u32 spread16(u32 x) {
    x &= 0xffffu;
    x = (x | (x << 8)) & 0x00ff00ffu;
    x = (x | (x << 4)) & 0x0f0f0f0fu;
    x = (x | (x << 2)) & 0x33333333u;
    x = (x | (x << 1)) & 0x55555555u;
    return x;
}

// K >= 7: each lane sums one queued pixel's window (row-major from the first term, as the K <= 5 path
// does) from the warp's values, 0 outside the image, so no bounds tests; a total above K * thr sets the
// pixel's bit. Out of line: called from every row of the unrolled frame, it would otherwise be copied
// into each of them.
__device__ __noinline__ void slide_sum_queue(const T* w, const T* kq, const u32* q, u32 (*k)[2], int qn, int lane) {
    __syncwarp();  // the queue, the values and lane 0's ballots are written
    for (int b = 0; b < qn; b += 32) {
        if (b + lane < qn) {
            const u32 item = q[b + lane];
            const int qr = (int)(item >> 6), qj = (int)(item & 63u);
            const T* wq0 = w + qr * 64 + qj - H;  // w: [STR][64]
            T total = wq0[0];
#pragma unroll
            for (int dx = 1; dx < K; ++dx) total = total + wq0[dx];
#pragma unroll 1
            for (int dy = 1; dy < K; ++dy) {
#pragma unroll
                for (int dx = 0; dx < K; ++dx) total = total + wq0[dy * 64 + dx];
            }
            if (total > kq[qr * 64 + qj]) atomicOr(&k[qr][qj & 1], 1u << (qj >> 1));  // kq: [STH][64]
        }
    }
    __syncwarp();
}

// One frame of a slide tile for one warp. EDGE = false: the warp's 64 columns and the tile's rows with
// halo lie inside the image (most tiles), so no load or value needs a bounds test; EDGE = true: every test.
template <bool EDGE>
__device__ __forceinline__ void slide_frame(const u16* __restrict__ fr, u32* __restrict__ fmask, const T2 (&s_m)[STR][32],
                                            const T2 (&s_t)[STH][32], const T2 (&s_kt)[STH][32], T2 (&s_w)[SWR][32],
                                            u32 (&s_q)[SREG ? 1 : SQ], u32 (&s_k)[SREG ? 1 : STH][2], int x0, int y0,
                                            int tx, int rows, int cols, int wpr) {
    const int lane = threadIdx.x & 31;
    const T ninf = neg_inf(T(0));
    const int xp = x0 + 2 * lane;  // column of p; q is xp + 1 (x0 is even)
    const bool inp = !EDGE || (xp >= 0 && xp < cols);
    const bool inq = !EDGE || (xp >= 0 && xp + 1 < cols);
    const bool outp = 2 * lane >= SJ0 && 2 * lane < 64 - SJ0 && (!EDGE || xp < cols);
    const bool outq = 2 * lane + 1 >= SJ0 && 2 * lane + 1 < 64 - SJ0 && (!EDGE || xp + 1 < cols);
    // the lane's p in the tile's first row with halo (an address only: read where it lies in the image);
    // row offsets are multiples of cols, immediate offsets when the frame width is known at compile time
    const u16* __restrict__ base = fr + ((y0 - H) * cols + xp);
    u32 raw[STR];  // p in the low half, q in the high half (little-endian, as one 32-bit load reads them)
#pragma unroll
    for (int row = 0; row < STR; ++row) {
        const int y = y0 - H + row;
        const bool yin = !EDGE || (y >= 0 && y < rows);
        const u16* __restrict__ rp = base + row * cols;
        if (SPAIR) {  // an even frame width: the pair is either wholly inside the image or wholly outside
            raw[row] = (yin && inp) ? __ldg(reinterpret_cast<const u32*>(rp)) : 0u;
        } else {
            const u32 lo = (yin && inp) ? (u32)__ldg(rp) : 0u;
            const u32 hi = (yin && inq) ? (u32)__ldg(rp + 1) : 0u;
            raw[row] = lo | (hi << 16);
        }
    }
    // EDGE, K <= 5: which of the lane's window columns xp - H + u (u = 0 .. 2H + 1) lie in the image
    bool cin[2 * H + 2];
#pragma unroll
    for (int u = 0; u < 2 * H + 2; ++u) cin[u] = !EDGE || (xp - H + u >= 0 && xp - H + u < cols);
    T vp_[STR], vq_[STR];   // values (the centre rows are read by the rules)
    T hp[STR], hq[STR];     // K-wide row maxima
    T sp[STR], sq[STR];     // K >= 7: suffix maxima within blocks of K rows
    T pp[STR], pq[STR];     //          and prefix maxima
    T sh[SREG ? STR : 1][SREG ? 2 * H + 2 : 1];  // K <= 5: columns xp - H .. xp + H + 1 of each row, 0 outside
    u32 myE = 0u, myO = 0u;  // lane r: row r's ballots of the p and the q pixels
    int qn = 0;              // K >= 7: queued pixels (warp-uniform)
#pragma unroll
    for (int row = 0; row < STR; ++row) {
        const int y = y0 - H + row;
        const bool yin = !EDGE || (y >= 0 && y < rows);
        const T2 m = s_m[row][lane];
        const T vp = (T)(raw[row] & 0xffffu) - m.x;  // +0 outside the image: raw 0, mean 0
        const T vq = (T)(raw[row] >> 16) - m.y;
        vp_[row] = vp;
        vq_[row] = vq;
        if (SREG) {
            T c[2 * H + 2];
#pragma unroll
            for (int u = 0; u < 2 * H + 2; ++u) {
                const int o = u - H;  // column offset from p: lane + floor(o / 2), its p (o even) or q (o odd)
                if (o == 0) c[u] = vp;
                else if (o == 1) c[u] = vq;
                else c[u] = __shfl_sync(FULL, (o & 1) ? vq : vp, (lane + (o >> 1)) & 31);  // wraps only on halo lanes
                sh[SREG ? row : 0][SREG ? u : 0] = c[u];
                if (EDGE) c[u] = (yin && cin[u]) ? c[u] : ninf;
            }
            T inner = c[1];
#pragma unroll
            for (int u = 2; u <= 2 * H; ++u) inner = tmax(inner, c[u]);
            hp[row] = tmax(inner, c[0]);
            hq[row] = tmax(inner, c[2 * H + 1]);
        } else {
            s_w[SREG ? 0 : row][lane] = T2{vp, vq};
            const T mp = (EDGE && !(yin && inp)) ? ninf : vp;
            const T mq = (EDGE && !(yin && inq)) ? ninf : vq;
            const T pm = tmax(mp, mq);
            T cm = pm;  // the columns both windows share
            if (H % 2 == 0) {  // H = 2M: p's window is pm[L-M], pm[L-M+1 .. L+M-1], p[L+M]; q's q[L-M], ..., pm[L+M]
                constexpr int M = H / 2;
#pragma unroll
                for (int d = 1; d < M; ++d) {
                    cm = tmax(cm, __shfl_sync(FULL, pm, (lane + d) & 31));
                    cm = tmax(cm, __shfl_sync(FULL, pm, (lane - d) & 31));
                }
                hp[row] = tmax(tmax(cm, __shfl_sync(FULL, pm, (lane - M) & 31)), __shfl_sync(FULL, mp, (lane + M) & 31));
                hq[row] = tmax(tmax(cm, __shfl_sync(FULL, mq, (lane - M) & 31)), __shfl_sync(FULL, pm, (lane + M) & 31));
            } else {  // H = 2M + 1: p's window is q[L-M-1], pm[L-M .. L+M]; q's pm[L-M .. L+M], p[L+M+1]
                constexpr int M = (H - 1) / 2;
#pragma unroll
                for (int d = 1; d <= M; ++d) {
                    cm = tmax(cm, __shfl_sync(FULL, pm, (lane + d) & 31));
                    cm = tmax(cm, __shfl_sync(FULL, pm, (lane - d) & 31));
                }
                hp[row] = tmax(cm, __shfl_sync(FULL, mq, (lane - M - 1) & 31));
                hq[row] = tmax(cm, __shfl_sync(FULL, mp, (lane + M + 1) & 31));
            }
            // prefix maxima from each block start, suffix maxima once the block (rows b .. b+K-1) is complete
            pp[row] = (row % K == 0) ? hp[row] : tmax(pp[row > 0 ? row - 1 : 0], hp[row]);
            pq[row] = (row % K == 0) ? hq[row] : tmax(pq[row > 0 ? row - 1 : 0], hq[row]);
            if (row % K == K - 1) {
                sp[row] = hp[row];
                sq[row] = hq[row];
#pragma unroll
                for (int i = row - 1; i > row - K; --i) {
                    sp[i] = tmax(hp[i], sp[i + 1]);
                    sq[i] = tmax(hq[i], sq[i + 1]);
                }
            }
        }
        if (row >= 2 * H) {
            const int r = row - 2 * H;  // output row, image row y0 + r
            const int yo = y0 + r;
            T wp, wq;  // window maxima
            if (SREG) {
                wp = hp[r];
                wq = hq[r];
#pragma unroll
                for (int d = 1; d < K; ++d) {
                    wp = tmax(wp, hp[r + d]);
                    wq = tmax(wq, hq[r + d]);
                }
            } else if (r % K == 0) {  // the window is one block
                wp = sp[r];
                wq = sq[r];
            } else {  // the suffix of r's block and the prefix of the next
                wp = tmax(sp[r], pp[r + K - 1]);
                wq = tmax(sq[r], pq[r + K - 1]);
            }
            const T2 t = s_t[r][lane];
            const T cp = vp_[r + H], cq = vq_[r + H];
            const bool yok = !EDGE || yo < rows;
            const bool candp = outp && yok && !(cp < -t.x) && (cp == wp);
            const bool candq = outq && yok && !(cq < -t.y) && (cq == wq);
            bool ep = candp && (wp > t.x), eq = candq && (wq > t.y);
            const bool np = candp && !(wp > t.x), nq = candq && !(wq > t.y);  // a window max <= thr: the total decides
            if (SREG) {
                // Row-major from the first term: the reference's 0 + a equals a, since no value is -0
                // (T(raw) - mean is never -0 and the padding is +0), and adding +0 is the padding's term.
                const T2 kt = s_kt[r][lane];
                T tp = sh[SREG ? r : 0][0], tq = sh[SREG ? r : 0][SREG ? 1 : 0];
#pragma unroll
                for (int dy = 0; dy < K; ++dy)
#pragma unroll
                    for (int dx = (dy == 0 ? 1 : 0); dx < K; ++dx) {
                        tp = tp + sh[SREG ? r + dy : 0][SREG ? dx : 0];
                        tq = tq + sh[SREG ? r + dy : 0][SREG ? dx + 1 : 0];
                    }
                ep = ep || (np && tp > kt.x);
                eq = eq || (nq && tq > kt.y);
                const u32 E = __ballot_sync(FULL, ep), O = __ballot_sync(FULL, eq);
                if (lane == r) {
                    myE = E;
                    myO = O;
                }
            } else {
                const u32 E = __ballot_sync(FULL, ep), O = __ballot_sync(FULL, eq);
                const u32 NP = __ballot_sync(FULL, np), NQ = __ballot_sync(FULL, nq);
                if (lane == 0) {
                    s_k[SREG ? 0 : r][0] = E;
                    s_k[SREG ? 0 : r][1] = O;
                }
                const u32 lt = (1u << lane) - 1u;
                if (np) s_q[SREG ? 0 : qn + __popc(NP & lt)] = ((u32)r << 6) | (u32)(2 * lane);
                if (nq) s_q[SREG ? 0 : qn + __popc(NP) + __popc(NQ & lt)] = ((u32)r << 6) | (u32)(2 * lane + 1);
                qn += __popc(NP) + __popc(NQ);
                if (qn > SQ - 64) {  // warp-uniform and rare: the queue is full before the frame's end
                    slide_sum_queue(&s_w[0][0].x, &s_kt[0][0].x, s_q, s_k, qn, lane);
                    qn = 0;
                }
            }
        }
    }
    if (!SREG) slide_sum_queue(&s_w[0][0].x, &s_kt[0][0].x, s_q, s_k, qn, lane);
    if (!SREG && lane < STH) {
        myE = s_k[SREG ? 0 : lane][0];
        myO = s_k[SREG ? 0 : lane][1];
    }
    if (lane < STH && (!EDGE || y0 + lane < rows)) {
        // column bit j = 2i + parity (j = column - x0): the two words of row y0 + lane
        const u32 lo = spread16(myE) | (spread16(myO) << 1);
        const u32 hi = spread16(myE >> 16) | (spread16(myO >> 16) << 1);
        const u32 wa = lo >> SJ0;                   // bits SJ0 .. 31: SOW columns
        const u32 wb = hi & ((1u << SOW) - 1u);     // bits 32 .. 32 + SOW - 1
        *reinterpret_cast<u64*>(fmask + (size_t)(y0 + lane) * wpr + 2 * tx) = (u64)wa | ((u64)wb << 32);
    }
    if (!SREG) __syncwarp();  // s_w, s_q and s_k are rewritten by the warp's next frame
}

extern "C" __global__ void __launch_bounds__(32 * SNW, CB_SMINB)
frozen_slide(const u16* __restrict__ frames, int n_frames, int fpb, const T* __restrict__ mean,
             const T* __restrict__ thr, u32* __restrict__ masks, int rows_arg, int cols_arg, int wpr, int tiles) {
    __shared__ T2 s_m[STR][32];                 // mean of the warp's 64 columns, all rows with halo (0 outside)
    __shared__ T2 s_t[STH][32];                 // thresholds of the output rows
    __shared__ T2 s_kt[STH][32];                // K * thresholds
    __shared__ T2 s_w[SWW][SWR][32];            // K >= 7: each warp's values
    __shared__ u32 s_q[SWW][SREG ? 1 : SQ];     // K >= 7: queued (row << 6 | column - x0) that need the total
    __shared__ u32 s_k[SWW][SREG ? 1 : STH][2]; // K >= 7: the ballots of the p and q pixels being completed
    const int rows = CB_SROWS > 0 ? CB_SROWS : rows_arg;
    const int cols = CB_SCOLS > 0 ? CB_SCOLS : cols_arg;
    const int w = threadIdx.x >> 5;
    const int tiles_x = wpr >> 1;  // two mask words per tile and row
    const int tile = (int)(blockIdx.x % (unsigned)tiles);
    const int group = (int)(blockIdx.x / (unsigned)tiles);
    const int tx = tile % tiles_x, tyi = tile / tiles_x;
    const int x0 = tx * 2 * SOW - SJ0, y0 = tyi * STH;
    const int f0 = group * fpb;
    const int f1 = min(n_frames, f0 + fpb);
    if (f0 >= f1) return;  // block-uniform
    const size_t npix = (size_t)rows * cols;
    const T kf = (T)K;
    for (int e = threadIdx.x; e < STR * 32; e += 32 * SNW) {
        const int row = e >> 5, l = e & 31;
        const int y = y0 - H + row, xa = x0 + 2 * l;
        const bool yin = y >= 0 && y < rows;
        T2 m;
        m.x = (yin && xa >= 0 && xa < cols) ? mean[(size_t)y * cols + xa] : T(0);
        m.y = (yin && xa >= 0 && xa + 1 < cols) ? mean[(size_t)y * cols + xa + 1] : T(0);
        s_m[row][l] = m;
    }
    for (int e = threadIdx.x; e < STH * 32; e += 32 * SNW) {
        const int row = e >> 5, l = e & 31;
        const int y = y0 + row, xa = x0 + 2 * l;
        T2 t;
        t.x = (y < rows && xa >= 0 && xa < cols) ? thr[(size_t)y * cols + xa] : T(0);
        t.y = (y < rows && xa >= 0 && xa + 1 < cols) ? thr[(size_t)y * cols + xa + 1] : T(0);
        s_t[row][l] = t;
        s_kt[row][l] = T2{kf * t.x, kf * t.y};  // the same product as Strip::classify's (T)K * thr
    }
    __syncthreads();  // the only block barrier
    const int sw = SREG ? 0 : w;
    // the warp's 64 columns and the tile's rows with halo inside the image: no bounds tests (block-uniform)
    const bool interior = x0 >= 0 && x0 + 64 <= cols && y0 - H >= 0 && y0 + STH + H <= rows;
    for (int f = f0 + w; f < f1; f += SNW) {  // warp-uniform
        const u16* __restrict__ fr = frames + (size_t)f * npix;
        u32* __restrict__ fmask = masks + (size_t)f * (size_t)rows * (size_t)wpr;
        if (interior)
            slide_frame<false>(fr, fmask, s_m, s_t, s_kt, s_w[sw], s_q[sw], s_k[sw], x0, y0, tx, rows, cols, wpr);
        else
            slide_frame<true>(fr, fmask, s_m, s_t, s_kt, s_w[sw], s_q[sw], s_k[sw], x0, y0, tx, rows, cols, wpr);
    }
}

// One warp writes the record of pixel (x, y), a 32-bit word per lane, values recomputed from the
// frame and the mean exactly as the classify load computes them (0 outside the image).
__device__ __forceinline__ void write_record_global(u32* __restrict__ dst, const u16* __restrict__ frame,
                                                    const T* __restrict__ mean, int x, int y, int rows,
                                                    int cols, int lane) {
    for (int wd = lane; wd < REC_WORDS; wd += 32) {
        u32 word;
        if (wd == 0) {
            word = (u32)x | ((u32)y << 16);
        } else {
            const int j = (wd - 1) / WPV, half = (wd - 1) % WPV;
            const int yy = y + j / K - H, xx = x + j % K - H;
            T val = T(0);
            if (yy >= 0 && yy < rows && xx >= 0 && xx < cols) {
                const size_t idx = (size_t)yy * cols + xx;
                val = (T)frame[idx] - mean[idx];
            }
            word = word_of(val, half);
        }
        dst[wd] = word;
    }
}

extern "C" __global__ void __launch_bounds__(CB_NT2)
frozen_compact(const u32* __restrict__ masks, const u16* __restrict__ frames, int n_frames,
               const T* __restrict__ mean, long long mean_stride, u8* __restrict__ slots, long long slot_bytes,
               u64* __restrict__ totals, int rows, int cols, int wpr, int ow, int cap) {
    constexpr int NW2 = CB_NT2 / 32;
    constexpr int CHUNK = CB_NT2 * CB_WPT;
    __shared__ u32 s_list[CB_LIST];
    __shared__ u32 s_warp[NW2];
    __shared__ u32 s_tot;
    const int f = blockIdx.x;
    if (f >= n_frames) return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int nw = rows * wpr;
    const u32* fmask = masks + (size_t)f * (size_t)nw;
    const u16* frame = frames + (size_t)f * rows * cols;
    const T* fmean = mean + (size_t)f * (size_t)mean_stride;  // frozen: stride 0; tracking: frame f's own mean
    u8* slot = slots + (size_t)f * (size_t)slot_bytes;
    u8* recs = slot + 4;
    u32 found = 0;  // emitters in the chunks before this one
    for (int c0 = 0; c0 < nw; c0 += CHUNK) {
        const int w0 = c0 + threadIdx.x * CB_WPT;
        u32 wd[CB_WPT];
        u32 cnt = 0;
#pragma unroll
        for (int i = 0; i < CB_WPT; ++i) {
            wd[i] = (w0 + i < nw) ? fmask[w0 + i] : 0u;
            cnt += __popc(wd[i]);
        }
        // block-wide exclusive scan of cnt (thread order = word order = row-major pixel order)
        u32 incl = cnt;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const u32 n = __shfl_up_sync(FULL, incl, o);
            if (lane >= o) incl += n;
        }
        if (lane == 31) s_warp[w] = incl;
        __syncthreads();
        if (w == 0) {
            const u32 x = lane < NW2 ? s_warp[lane] : 0u;
            u32 a = x;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const u32 n = __shfl_up_sync(FULL, a, o);
                if (lane >= o) a += n;
            }
            if (lane < NW2) s_warp[lane] = a - x;
            if (lane == NW2 - 1) s_tot = a;
        }
        __syncthreads();
        const u32 first = found + s_warp[w] + incl - cnt;  // rank of this thread's first emitter
        const u32 tot = s_tot;
        const u32 hi = min(found + tot, (u32)cap);         // ranks [found, hi) are stored
        for (u32 wb = found; wb < hi; wb += CB_LIST) {      // block-uniform; usually one window
            const u32 we = min(wb + (u32)CB_LIST, hi);
            if (cnt != 0u && first < we && first + cnt > wb) {
                u32 r = first;
#pragma unroll
                for (int i = 0; i < CB_WPT; ++i) {
                    u32 mm = wd[i];
                    while (mm) {
                        const int bit = __ffs(mm) - 1;
                        mm &= mm - 1u;
                        if (r >= wb && r < we) {
                            const int gw = w0 + i;
                            const int yy = gw / wpr;
                            const int xx = (gw - yy * wpr) * ow + bit;
                            s_list[r - wb] = (u32)xx | ((u32)yy << 16);
                        }
                        ++r;
                    }
                }
            }
            __syncthreads();
            for (u32 e = (u32)w; e < we - wb; e += NW2) {
                const u32 px = s_list[e];
                write_record_global(reinterpret_cast<u32*>(recs + (size_t)(wb + e) * REC_BYTES), frame, fmean,
                                    (int)(px & 0xffffu), (int)(px >> 16), rows, cols, lane);
            }
            __syncthreads();
        }
        found += tot;
        __syncthreads();  // s_warp and s_tot are rewritten by the next chunk
    }
    if (threadIdx.x == 0) {
        *reinterpret_cast<u32*>(slot) = found;
        atomicAdd(&totals[0], (u64)found);
        if (found > (u32)cap) atomicAdd(&totals[1], (u64)(found - (u32)cap));
    }
}

// ---------------------------------------------------------------------------------------------
// Tracking pedestal (aare's running update): one launch per frame, one block per strip. Each block
// reads mean_cur (halo included) and writes mean_next, sum and sum2 of its own pixels only, so the
// update takes effect from the next frame and no block races another. Each strip's clusters go to
// a scratch area; the last block to finish (a ticket on `done`) copies them into the slot in
// row-major order, keeping the first `cap`.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(NT, 2)
find_tracking(const u16* __restrict__ frame, const T* __restrict__ mean_cur, T* __restrict__ mean_next,
              double* __restrict__ sum, double* __restrict__ sum2, const T* __restrict__ thr, double inv,
              u8* __restrict__ scratch, u32* __restrict__ strip_counts, u32* __restrict__ done, int strip_cap,
              u8* __restrict__ slot, u64* __restrict__ totals, int rows, int cols, int strip, int cap) {
    __shared__ bool s_last;
    const int sidx = blockIdx.x;
    const int r0 = sidx * strip;
    const int npx = min(strip, rows - r0) * cols;
    Strip s = make_strip(rows, cols, strip);
    s.load(frame, mean_cur, r0);
    __syncthreads();
    s.horizontal();
    __syncthreads();
    u8* recs = scratch + (size_t)sidx * (size_t)strip_cap * REC_BYTES;
    u32 found = 0;
    for (int rb = 0; rb < npx; rb += NT * ITEMS) {
        unsigned flags = 0;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int p = rb + i * NT + threadIdx.x;
            if (p < npx) {
                const int ly = p / cols, x = p - ly * cols, y = r0 + ly;
                const size_t idx = (size_t)y * cols + x;
                const int c = s.classify<true>(ly, x, y, thr[idx]);
                if (c & EMIT) flags |= 1u << i;
                if (c & PED_LIKE) {
                    const double val = (double)frame[idx];
                    const double s0 = sum[idx], q0 = sum2[idx];
                    const double ns = s0 + (val - s0 * inv);
                    const double nq = q0 + (val * val - q0 * inv);
                    sum[idx] = ns;
                    sum2[idx] = nq;
                    mean_next[idx] = (T)(ns * inv);
                } else {
                    mean_next[idx] = mean_cur[idx];
                }
            }
        }
        found = emit_round(s, flags, rb, r0, found, recs, (u32)strip_cap);
    }
    if (threadIdx.x == 0) strip_counts[sidx] = found;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = (atomicAdd(done, 1u) == gridDim.x - 1);
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    // Gather. Strip counts are loaded in parallel into shared memory (the tile is free now), a
    // prefix is taken there, and each warp copies whole strips: no chain of dependent global loads.
    const int ns = (int)gridDim.x;
    u32* s_cnt = reinterpret_cast<u32*>(s.tile);
    u32* s_off = s_cnt + ns;  // fits: 2*ns words <= the tile (checked on the host)
    for (int t = threadIdx.x; t < ns; t += NT) s_cnt[t] = __ldcg(&strip_counts[t]);
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 acc = 0;
        for (int t = 0; t < ns; ++t) {
            s_off[t] = acc;
            acc += s_cnt[t];
        }
        s_off[ns] = acc;  // total found in the frame
    }
    __syncthreads();
    const int lane = threadIdx.x & 31;
    for (int t = threadIdx.x >> 5; t < ns; t += NW) {
        const u32 first = s_off[t];
        u32 keep = 0;
        if (first < (u32)cap) keep = min(min(s_cnt[t], (u32)strip_cap), (u32)cap - first);
        const u32* src = reinterpret_cast<const u32*>(scratch + (size_t)t * (size_t)strip_cap * REC_BYTES);
        u32* dst = reinterpret_cast<u32*>(slot + 4 + (size_t)first * REC_BYTES);
        const size_t nw = (size_t)keep * REC_WORDS;
        for (size_t wd = lane; wd < nw; wd += 32) dst[wd] = __ldcg(&src[wd]);
    }
    const u32 prefix = s_off[ns];
    if (threadIdx.x == 0) {
        *reinterpret_cast<u32*>(slot) = prefix;
        atomicAdd(&totals[0], (u64)prefix);
        if (prefix > (u32)cap) atomicAdd(&totals[1], (u64)(prefix - (u32)cap));
        *done = 0u;  // ready for the next frame (launches on the pass are serialized)
    }
}
