// The CPU emulation's driver (tests/workload/test_cuda_emu.py builds and runs it): frozen_slide +
// frozen_compact, or track_persistent + frozen_compact, over a sequence of batches, exactly as the
// pipeline launches them (mean ping-pong per batch, flags that only grow, per-frame means).
// Inputs and outputs are raw little-endian files in the directory given as the first argument.
#include "fake_cuda.h"
#include "kernels.inc"
#include <fstream>
#include <string>

template <class X> static X* load(const std::string& path, size_t n) {
    X* p = (X*)dalloc(n * sizeof(X));
    std::ifstream f(path, std::ios::binary);
    f.read((char*)p, n * sizeof(X));
    if (!f) { fprintf(stderr, "cannot read %s\n", path.c_str()); exit(1); }
    return p;
}
template <class X> static void save(const std::string& path, const X* p, size_t n) {
    std::ofstream f(path, std::ios::binary);
    f.write((const char*)p, n * sizeof(X));
}

int main(int argc, char** argv) {
    // argv: dir mode(slide|coop|flags) rows cols n_frames batch cap inv tile_rows
    std::string dir = argv[1], mode = argv[2];
    int rows = atoi(argv[3]), cols = atoi(argv[4]), F = atoi(argv[5]), B = atoi(argv[6]), cap = atoi(argv[7]);
    double inv = atof(argv[8]);
    const size_t npix = (size_t)rows * cols;
    const u16* frames = load<u16>(dir + "/frames.bin", (size_t)F * npix);
    T* mean[2] = {load<T>(dir + "/mean.bin", npix), (T*)dalloc(npix * sizeof(T))};
    const T* thr = load<T>(dir + "/thr.bin", npix);
    double* sum = load<double>(dir + "/sum.bin", npix);
    double* sum2 = load<double>(dir + "/sum2.bin", npix);
    const long long slot_bytes = 4 + (long long)cap * REC_BYTES;
    u8* slots = (u8*)dalloc((size_t)F * slot_bytes);
    u64* totals = (u64*)dalloc(16);
    int mi = 0;
    if (mode == "slide") {
        // two mask words of SOW columns per tile and row (pipeline.slide_geometry)
        const int ow = SOW, tiles_x = (cols + 2 * ow - 1) / (2 * ow), wpr = 2 * tiles_x;
        const int tiles = tiles_x * ((rows + STH - 1) / STH);
        u32* masks = (u32*)dalloc((size_t)B * rows * wpr * 4);
        const int fpb = atoi(argv[9]);
        for (int b0 = 0; b0 < F; b0 += B) {
            const int n = min(B, F - b0);
            const u16* fr = frames + (size_t)b0 * npix;
            launch_seq(tiles * ((n + fpb - 1) / fpb), dim3{32 * SNW, 1, 1},
                       [&] { frozen_slide(fr, n, fpb, mean[0], thr, masks, rows, cols, wpr, tiles); });
            launch_seq(n, dim3{CB_NT2, 1, 1}, [&] {
                frozen_compact(masks, fr, n, mean[0], 0, slots + (size_t)b0 * slot_bytes, slot_bytes, totals, rows, cols,
                               wpr, ow, cap);
            });
        }
    } else {
        const int wpr = (cols + 31) / 32, trows = (rows + PTH - 1) / PTH, tiles = wpr * trows;
        u32* masks = (u32*)dalloc((size_t)B * rows * wpr * 4);
        T* means = (T*)dalloc((size_t)B * npix * sizeof(T));
        u32* flags = (u32*)dalloc(tiles * 4);
        u32 base = 0;
        const int sm = mode == "coop" ? 0 : 1;
        for (int b0 = 0; b0 < F; b0 += B) {
            const int n = min(B, F - b0);
            const u16* fr = frames + (size_t)b0 * npix;
            T* cur = mean[mi];
            T* nxt = mean[1 - mi];
            launch_coop(tiles, dim3{32, PBY, 1}, [&] {
                track_persistent(fr, n, cur, nxt, means, sum, sum2, thr, inv, masks, rows, cols, wpr, trows, flags, base, sm);
            });
            base += n + 1;
            mi = 1 - mi;
            launch_seq(n, dim3{CB_NT2, 1, 1}, [&] {
                frozen_compact(masks, fr, n, means, (long long)npix, slots + (size_t)b0 * slot_bytes, slot_bytes, totals,
                               rows, cols, wpr, 32, cap);
            });
        }
    }
    save(dir + "/slots.bin", slots, (size_t)F * slot_bytes);
    save(dir + "/mean_out.bin", mean[mi], npix);
    save(dir + "/sum_out.bin", sum, npix);
    save(dir + "/sum2_out.bin", sum2, npix);
    save(dir + "/totals.bin", totals, 2);
    return 0;
}
