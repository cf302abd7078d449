// turns: a loop that synchronizes every frame, so that the host and the GPU take turns. Per frame, on
// one stream: the host spins --spin-us (30 µs) of "host work", then cudaEventRecord, an H2D of a
// 320,000-byte frame (pinned), zoo_calib, zoo_spin (--kernel-us, 20 µs of GPU time), a D2H of 1,024
// bytes, cudaEventRecord, and cudaStreamSynchronize. Nothing overlaps: the GPU idles while the host
// works and the host waits while the GPU works, so the frame time is the sum of the two (the
// critical path runs through both every frame), and shortening either shortens the frame. The two
// events give the GPU's span per frame; every loop call is timed (steady_clock), the syncs one by
// one (each_ns, in order).
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo turns.cu   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--spin-us U] [--kernel-us K]");
    const long frames = args.get("--frames", 600, 1);
    const double spin_us = args.getd("--spin-us", 30.0, 0.0, 1e6);
    const double kernel_us = args.getd("--kernel-us", 20.0, 0.0, 1e5);
    args.finish();
    const long long kernel_ns = (long long)(kernel_us * 1000.0);
    const int n = zoo::kNpix;
    zoo::Report rep("turns", args);

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
    unsigned* d_done = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, zoo::kFrameBytes));
    CUDA_CHECK(cudaMalloc(&d_out, size_t(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_done, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(d_done, 0, sizeof(unsigned)));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::vector<cudaEvent_t> ev_a(static_cast<size_t>(frames)), ev_b(static_cast<size_t>(frames));
    for (long f = 0; f < frames; ++f) {
        CUDA_CHECK(cudaEventCreate(&ev_a[size_t(f)]));
        CUDA_CHECK(cudaEventCreate(&ev_b[size_t(f)]));
    }
    zoo::Calls setup, loop;
    zoo::Kind& w_h2d = setup.kind("h2d", "cudaMemcpyAsync");
    zoo::Kind& w_launch = setup.kind("launch", "cudaLaunchKernel");
    zoo::Kind& w_sync = setup.kind("sync", "cudaStreamSynchronize");
    TIMED(w_h2d, cudaMemcpyAsync(d_in, h_in, zoo::kFrameBytes, cudaMemcpyHostToDevice, st));
    TIMED(w_launch, zoo::launch_calib(d_in, d_out, n, st));
    TIMED(w_launch, zoo::launch_spin(kernel_ns, d_done, st));
    TIMED(w_sync, cudaStreamSynchronize(st));
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "one warm-up H2D, zoo_calib and zoo_spin"));

    zoo::Kind& rec = loop.kind("event_record", "cudaEventRecord");
    zoo::Kind& h2d = loop.kind("h2d", "cudaMemcpyAsync");
    zoo::Kind& launch = loop.kind("launch", "cudaLaunchKernel");
    zoo::Kind& d2h = loop.kind("d2h", "cudaMemcpyAsync");
    zoo::Kind& sync = loop.kind("sync", "cudaStreamSynchronize", true, size_t(frames));
    zoo::Spin spin;
    spin.us = spin_us;
    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        const int slot = int(f % ring);
        spin.run();
        TIMED(rec, cudaEventRecord(ev_a[size_t(f)], st));
        TIMED(h2d, cudaMemcpyAsync(d_in, h_in + size_t(slot) * n, zoo::kFrameBytes, cudaMemcpyHostToDevice, st));
        TIMED(launch, zoo::launch_calib(d_in, d_out, n, st));
        TIMED(launch, zoo::launch_spin(kernel_ns, d_done, st));
        TIMED(d2h, cudaMemcpyAsync(h_out + size_t(f) * zoo::kPreviewFloats, d_out, zoo::kPreviewBytes,
                                   cudaMemcpyDeviceToHost, st));
        TIMED(rec, cudaEventRecord(ev_b[size_t(f)], st));
        TIMED(sync, cudaStreamSynchronize(st));
    }
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", frames));

    for (long f = 0; f < frames; ++f)
        if (!zoo::preview_ok(h_out + size_t(f) * zoo::kPreviewFloats, int(f % ring)))
            ZOO_FAIL("frame %ld: the D2H preview differs from the expected calibration", f);
    unsigned done = 0;
    CUDA_CHECK(cudaMemcpy(&done, d_done, sizeof(unsigned), cudaMemcpyDeviceToHost));
    if (done != unsigned(frames + 1)) ZOO_FAIL("%u zoo_spin runs counted, %ld launched", done, frames + 1);
    std::vector<int64_t> gpu_ns = zoo::event_spans(ev_a, ev_b);
    for (long f = 0; f < frames; ++f) {
        CUDA_CHECK(cudaEventDestroy(ev_a[size_t(f)]));
        CUDA_CHECK(cudaEventDestroy(ev_b[size_t(f)]));
    }
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_done));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}, {"zoo_spin", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).i("zoo_spin", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).i("zoo_spin", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(zoo::kFrameBytes)).i("d2h_bytes_per_frame", int64_t(zoo::kPreviewBytes));
    rep.top.i("memsets_per_frame", 0).d("host_spin_us_per_frame", spin_us).d("kernel_us", kernel_us);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames + 1).i("memset", 1).str());
    rep.top.i("stream_syncs", frames + 1).i("slow_call_ns", zoo::kSlowCallNs);
    rep.top.raw("setup_calls", setup.json());
    rep.top.raw("calls", loop.json());
    rep.top.raw("spin", spin.json().str());
    rep.top.raw("budget", zoo::loop_budget(l0, l1, loop, spin).str());
    rep.top.raw("gpu", zoo::Obj().o("frame", zoo::span_stats(gpu_ns))
                           .s("between", "cudaEventRecord before the H2D and after the D2H of each frame").str());
    rep.top.s("binds", "sum");
    rep.top.s("expect", "host and GPU take turns every frame: the frame time is their sum; the critical path "
                        "holds both the host and the GPU's steps");
    rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str()})).str());
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(zoo::kFrameBytes));
    return 0;
}
