// clusterbench: aare's photon cluster finder on the GPU (see docs/workload.md and DESIGN.md).
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
