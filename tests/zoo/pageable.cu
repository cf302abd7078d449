// pageable: a copy loop from pageable (malloc'd) host memory. Per frame, on one stream: the host
// spins --spin-us (20 µs) of "host work", then cudaMemcpyAsync H2D of a --mib (4 MiB) frame from a
// malloc'd ring of 4 frames, zoo_calib over it, and a D2H of 1,024 bytes (the first 256 calibrated
// pixels) into pinned memory. An H2D from pageable memory is staged by the driver through pinned
// buffers: the call returns only when the data has been staged, so it blocks the thread for about
// the copy's time although it is "async". cudaEventRecord before and after each H2D gives the
// copy's GPU time per frame. One cudaStreamSynchronize at the end. Every loop call is timed
// (steady_clock); the H2D calls are kept one by one (each_ns, in order).
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo pageable.cu   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--mib M] [--spin-us U]");
    const long frames = args.get("--frames", 300, 1);
    const long mib = args.get("--mib", 4, 1, 1024);
    const double spin_us = args.getd("--spin-us", 20.0, 0.0, 1e6);
    args.finish();
    const int n = int(mib * (1 << 20) / 2);  // uint16 pixels
    const size_t bytes = size_t(n) * sizeof(uint16_t);
    zoo::Report rep("pageable", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 4;
    // pageable input: malloc'd and written once (every page touched before the loop)
    uint16_t* h_in = static_cast<uint16_t*>(std::malloc(size_t(ring) * bytes));
    if (!h_in) ZOO_FAIL("malloc of %zu bytes failed", size_t(ring) * bytes);
    for (int s = 0; s < ring; ++s) zoo::fill_frame(h_in + size_t(s) * n, n, s);
    float* h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_out, size_t(frames) * zoo::kPreviewBytes));
    uint16_t* d_in = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, size_t(n) * sizeof(float)));
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
    TIMED(w_h2d, cudaMemcpyAsync(d_in, h_in, bytes, cudaMemcpyHostToDevice, st));
    TIMED(w_launch, zoo::launch_calib(d_in, d_out, n, st));
    TIMED(w_sync, cudaStreamSynchronize(st));
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "one warm-up H2D (pageable) and zoo_calib"));

    zoo::Kind& rec = loop.kind("event_record", "cudaEventRecord");
    zoo::Kind& h2d = loop.kind("h2d", "cudaMemcpyAsync", true, size_t(frames));
    zoo::Kind& launch = loop.kind("launch", "cudaLaunchKernel");
    zoo::Kind& d2h = loop.kind("d2h", "cudaMemcpyAsync");
    zoo::Kind& sync = loop.kind("sync", "cudaStreamSynchronize");
    zoo::Spin spin;
    spin.us = spin_us;

    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        const int slot = int(f % ring);
        spin.run();
        TIMED(rec, cudaEventRecord(ev_a[size_t(f)], st));
        TIMED(h2d, cudaMemcpyAsync(d_in, h_in + size_t(slot) * n, bytes, cudaMemcpyHostToDevice, st));
        TIMED(rec, cudaEventRecord(ev_b[size_t(f)], st));
        TIMED(launch, zoo::launch_calib(d_in, d_out, n, st));
        TIMED(d2h, cudaMemcpyAsync(h_out + size_t(f) * zoo::kPreviewFloats, d_out, zoo::kPreviewBytes,
                                   cudaMemcpyDeviceToHost, st));
    }
    TIMED(sync, cudaStreamSynchronize(st));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", frames));

    for (long f = 0; f < frames; ++f)
        if (!zoo::preview_ok(h_out + size_t(f) * zoo::kPreviewFloats, int(f % ring)))
            ZOO_FAIL("frame %ld: the D2H preview differs from the expected calibration", f);
    std::vector<int64_t> copy_ns = zoo::event_spans(ev_a, ev_b);
    for (long f = 0; f < frames; ++f) {
        CUDA_CHECK(cudaEventDestroy(ev_a[size_t(f)]));
        CUDA_CHECK(cudaEventDestroy(ev_b[size_t(f)]));
    }
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFreeHost(h_out));
    std::free(h_in);

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(bytes)).i("d2h_bytes_per_frame", int64_t(zoo::kPreviewBytes));
    rep.top.i("memsets_per_frame", 0).d("host_spin_us_per_frame", spin_us);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames).i("memset", 0).str());
    rep.top.raw("host_memory", zoo::Obj().s("h2d_source", "pageable (malloc)").s("d2h_target", "pinned").str());
    rep.top.i("stream_syncs", 2).i("slow_call_ns", zoo::kSlowCallNs);
    rep.top.raw("setup_calls", setup.json());
    rep.top.raw("calls", loop.json());
    rep.top.raw("spin", spin.json().str());
    rep.top.raw("budget", zoo::loop_budget(l0, l1, loop, spin).str());
    rep.top.raw("gpu", zoo::Obj().o("h2d", zoo::span_stats(copy_ns)).raw("h2d_each_ns", zoo::jarr_num(copy_ns))
                           .s("between", "cudaEventRecord before and after each loop H2D").str());
    rep.top.s("binds", "h2d");
    rep.top.s("expect", "every H2D call blocks for its copy (pageable_blocks); the copy binds");
    rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str()})).str());
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(bytes));
    return 0;
}
