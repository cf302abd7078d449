// host_bound: a pipeline whose host thread is the bottleneck. Per frame, on one stream, the host
// first busy-waits (spins on steady_clock) for --spin-us U microseconds (40) of "host work"
// (decoding, event building), then issues an async H2D of a small frame (--pixels P, 32,768 uint16
// pixels = 65,536 bytes), zoo_calib and a D2H of 1,024 bytes; a cudaStreamSynchronize every
// --sync-every (32) frames. The GPU's work per frame is a few microseconds, far shorter than U, so
// the GPU idles between frames and the frame period is about U plus the launch overhead: the host
// binds.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo host_bound.cu   (tests/zoo/build.sh)
#include "zoo.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--spin-us U] [--pixels P] [--sync-every K]");
    const long frames = args.get("--frames", 1000, 1);
    const double spin = args.getd("--spin-us", 40.0, 0.0, 1e6);
    const long npix_l = args.get("--pixels", 32768, zoo::kPreviewFloats, zoo::kNpix);
    const long sync_every = args.get("--sync-every", 32, 1);
    args.finish();
    const int n = int(npix_l);
    const size_t frame_bytes = size_t(n) * sizeof(uint16_t);
    zoo::Report rep("host_bound", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 8;
    uint16_t* h_in = zoo::pinned_ring(ring, n);
    float* h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_out, size_t(frames) * zoo::kPreviewBytes));
    uint16_t* d_in = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, frame_bytes));
    CUDA_CHECK(cudaMalloc(&d_out, size_t(n) * sizeof(float)));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const unsigned grid = zoo::grid_for(n);
    CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, frame_bytes, cudaMemcpyHostToDevice, st));
    zoo_calib<<<grid, zoo::kBlock, 0, st>>>(d_in, d_out, n, zoo::kPedestal, zoo::kThreshold);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaStreamSynchronize(st));
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "warm-up frame"));
    int64_t syncs = 1;

    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        zoo::spin_us(spin);
        const int slot = int(f % ring);
        CUDA_CHECK(cudaMemcpyAsync(d_in, h_in + size_t(slot) * n, frame_bytes, cudaMemcpyHostToDevice, st));
        zoo_calib<<<grid, zoo::kBlock, 0, st>>>(d_in, d_out, n, zoo::kPedestal, zoo::kThreshold);
        LAUNCH_CHECK();
        CUDA_CHECK(cudaMemcpyAsync(h_out + size_t(f) * zoo::kPreviewFloats, d_out, zoo::kPreviewBytes,
                                   cudaMemcpyDeviceToHost, st));
        if ((f + 1) % sync_every == 0) {
            CUDA_CHECK(cudaStreamSynchronize(st));
            ++syncs;
        }
    }
    if (frames % sync_every != 0) {
        CUDA_CHECK(cudaStreamSynchronize(st));
        ++syncs;
    }
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    rep.phase("loop", l0, zoo::now_ns(), zoo::Obj().i("frames", frames));

    for (long f = 0; f < frames; ++f)
        if (!zoo::preview_ok(h_out + size_t(f) * zoo::kPreviewFloats, int(f % ring)))
            ZOO_FAIL("frame %ld: the D2H preview differs from the expected calibration", f);

    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(frame_bytes)).i("d2h_bytes_per_frame", int64_t(zoo::kPreviewBytes));
    rep.top.i("memsets_per_frame", 0).d("host_spin_us_per_frame", spin);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames).i("memset", 0).str());
    rep.top.i("sync_every", sync_every).i("stream_syncs", syncs);
    rep.top.s("binds", "host");
    rep.top.d("host_spin_s_total", spin * 1e-6 * double(frames));
    rep.top.raw("nvtx", "null");
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(frame_bytes));
    return 0;
}
