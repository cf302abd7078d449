// clusterbench: the tile load shared by frozen_classify (cluster_finder.cu) and track_persistent
// (tracking_persistent.cu). Each file includes it once; there is no include guard, because the CPU
// emulation of the kernels (tests/workload/cuda_emu) includes both files, each in its own namespace.
// The pipeline splices this text into the source it compiles (build.kernel_source), so that NVRTC
// needs no include path and CuPy's kernel cache, keyed by the source text, sees every change here.
//
// Needs u16, u32 and H (the cluster's half width) from the including file.
//
// The raw uint16 values of one frame's tile (TR x TC with its halo) into this thread's load slots:
// slot i is tile row i*BY + ty, column lane (lo[i]) and column lane + 32 (hi[i]; the right halo,
// lanes < 2H). `tb` points at the tile's top-left halo corner, image pixel (x0 - H, y0 - H), possibly
// outside the image (an address only; 0 is loaded outside). The values stay in their own registers,
// untouched until the caller converts them: nothing consumes a load right after it is issued, so all
// 2*NR loads of a frame are in flight together while the current frame is classified (packing two
// values into one register here made every load wait for the previous one: about NR memory latencies
// per frame instead of one).
template <int NR, int BY, int TR, int TC>
__device__ __forceinline__ void load_tile_raw(u32 (&lo)[NR], u32 (&hi)[NR], const u16* __restrict__ tb, int x0,
                                              int y0, int rows, int cols) {
    const int lane = threadIdx.x, ty = threadIdx.y;
    const int x = x0 - H + lane;
    const bool xin_lo = x >= 0 && x < cols;
    const bool xin_hi = lane + 32 < TC && x + 32 < cols;
#pragma unroll
    for (int i = 0; i < NR; ++i) {
        const int row = i * BY + ty;
        const int y = y0 - H + row;
        const bool yin = row < TR && y >= 0 && y < rows;
        const u16* rp = tb + row * cols;
        lo[i] = (yin && xin_lo) ? (u32)__ldg(rp + lane) : 0u;
        hi[i] = (yin && xin_hi) ? (u32)__ldg(rp + lane + 32) : 0u;
    }
}
