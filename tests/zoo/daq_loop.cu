// daq_loop: a DAQ-like loop on one host thread, as a detector's event builder feeds a GPU. Per frame f, on
// stream f % S (--streams S, round-robin, each stream with its own buffers): cudaMemsetAsync of a 4-byte
// count, an H2D of the frame (--h2d-bytes, 320,000 bytes = 160,000 uint16 pixels, from a pinned ring of
// 8), cudaEventRecord, zoo_calib over the 160,000 pixels, cudaEventRecord, a D2H of --d2h-bytes (120,000
// bytes: the first 30,000 calibrated pixels) into the stream's pinned buffer; then cudaStreamSynchronize
// of the stream the next frame goes to (the frame of S - 1 frames before: with one stream, this frame).
// One synchronize per frame, and at most S frames in flight.
//
// Deliberate delays, for the delay test (clusterbench probe --what-binds, docs/probe.md):
//   --spin-us U    U µs of host spin before each frame's calls (the host);
//   --delay-us K   a zoo_spin kernel of K µs in the frame's stream before its first event (the GPU);
//   --h2d-bytes B  more bytes per H2D (the link; the kernel still reads the first 320,000 bytes).
// Every loop call is timed on steady_clock (calls.cuh's TIMED: the program's own figure of each call's
// host time; --no-timing leaves the timers out); the two events give the kernel's GPU time per frame.
// Prints "rate: <n> frames/s" over the loop, "throughput: <n> GB/s" (H2D bytes over the loop) and the ZOO
// line (tests/zoo/README.md).
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo daq_loop.cu -ldl   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv,
                   "[--frames N] [--streams S] [--spin-us U] [--delay-us K] [--h2d-bytes B] [--d2h-bytes D] [--no-timing]");
    const long frames = args.get("--frames", 5000, 1);
    const long streams_l = args.get("--streams", 1, 1, 16);
    const double spin_us = args.getd("--spin-us", 0.0, 0.0, 1e6);
    const double delay_us = args.getd("--delay-us", 0.0, 0.0, 1e5);
    const long h2d_bytes_l = args.get("--h2d-bytes", long(zoo::kFrameBytes), 4, 1L << 28);
    const long d2h_bytes_l = args.get("--d2h-bytes", 120000, 4, long(zoo::kNpix) * long(sizeof(float)));
    const bool timing = !args.flag("--no-timing");
    args.finish();
    const int S = int(streams_l);
    const size_t h2d_bytes = size_t(h2d_bytes_l), d2h_bytes = size_t(d2h_bytes_l);
    const int n = zoo::kNpix;
    const long long delay_ns = (long long)(delay_us * 1000.0);
    zoo::Report rep("daq_loop", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 8;
    const size_t in_bytes = std::max(h2d_bytes, zoo::kFrameBytes);
    uint16_t* h_in = nullptr;  // the ring: 8 slots of in_bytes, the first 320,000 bytes of each a frame
    CUDA_CHECK(cudaMallocHost(&h_in, in_bytes * ring));
    for (int s = 0; s < ring; ++s) zoo::fill_frame(reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(h_in) + in_bytes * size_t(s)), n, s);
    struct PerStream {
        cudaStream_t st;
        uint16_t* d_in;
        float* d_out;
        unsigned* d_count;
        float* h_out;
        long last_frame = -1;
    };
    std::vector<PerStream> ps(static_cast<size_t>(S));
    for (auto& p : ps) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&p.st, cudaStreamNonBlocking));
        CUDA_CHECK(cudaMalloc(&p.d_in, in_bytes));
        CUDA_CHECK(cudaMalloc(&p.d_out, size_t(n) * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&p.d_count, sizeof(unsigned)));
        CUDA_CHECK(cudaMemset(p.d_count, 0xff, sizeof(unsigned)));
        CUDA_CHECK(cudaMallocHost(&p.h_out, d2h_bytes));
    }
    unsigned* d_done = nullptr;
    CUDA_CHECK(cudaMalloc(&d_done, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(d_done, 0, sizeof(unsigned)));
    std::vector<cudaEvent_t> ev_a(static_cast<size_t>(frames)), ev_b(static_cast<size_t>(frames));
    for (long f = 0; f < frames; ++f) {
        CUDA_CHECK(cudaEventCreate(&ev_a[size_t(f)]));
        CUDA_CHECK(cudaEventCreate(&ev_b[size_t(f)]));
    }
    const unsigned grid = zoo::grid_for(n);
    // warm-up: one frame on every stream (the module load, the first copies)
    zoo::Calls setup, loop;
    zoo::Kind& w_any = setup.kind("warmup", "cuda*");
    for (auto& p : ps) {
        TIMED(w_any, cudaMemsetAsync(p.d_count, 0, sizeof(unsigned), p.st));
        TIMED(w_any, cudaMemcpyAsync(p.d_in, h_in, h2d_bytes, cudaMemcpyHostToDevice, p.st));
        TIMED(w_any, zoo::launch_calib(p.d_in, p.d_out, n, p.st));
        if (delay_ns > 0) TIMED(w_any, zoo::launch_spin(delay_ns, d_done, p.st));
        TIMED(w_any, cudaMemcpyAsync(p.h_out, p.d_out, d2h_bytes, cudaMemcpyDeviceToHost, p.st));
        TIMED(w_any, cudaStreamSynchronize(p.st));
    }
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "one warm-up frame per stream"));

    zoo::Kind& k_memset = loop.kind("memset", "cudaMemsetAsync");
    zoo::Kind& k_h2d = loop.kind("h2d", "cudaMemcpyAsync");
    zoo::Kind& k_rec = loop.kind("event_record", "cudaEventRecord");
    zoo::Kind& k_launch = loop.kind("launch", "cudaLaunchKernel");
    zoo::Kind& k_d2h = loop.kind("d2h", "cudaMemcpyAsync");
    zoo::Kind& k_sync = loop.kind("sync", "cudaStreamSynchronize");
    zoo::Spin spin;
    spin.us = spin_us;
    auto call = [&](zoo::Kind& k, auto&& fn) {
        if (timing) {
            const int64_t a = zoo::now_ns();
            const cudaError_t e = fn();
            k.add(zoo::now_ns() - a);
            zoo::check(e, k.api.c_str(), __FILE__, __LINE__);
        } else {
            zoo::check(fn(), k.api.c_str(), __FILE__, __LINE__);
        }
    };
    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        PerStream& p = ps[size_t(f % S)];
        const int slot = int(f % ring);
        const uint16_t* src = reinterpret_cast<const uint16_t*>(reinterpret_cast<const char*>(h_in) + in_bytes * size_t(slot));
        spin.run();
        call(k_memset, [&] { return cudaMemsetAsync(p.d_count, 0, sizeof(unsigned), p.st); });
        call(k_h2d, [&] { return cudaMemcpyAsync(p.d_in, src, h2d_bytes, cudaMemcpyHostToDevice, p.st); });
        if (delay_ns > 0) call(k_launch, [&] { return zoo::launch_spin(delay_ns, d_done, p.st); });
        call(k_rec, [&] { return cudaEventRecord(ev_a[size_t(f)], p.st); });
        call(k_launch, [&] { return zoo::launch_calib(p.d_in, p.d_out, n, p.st); });
        call(k_rec, [&] { return cudaEventRecord(ev_b[size_t(f)], p.st); });
        call(k_d2h, [&] { return cudaMemcpyAsync(p.h_out, p.d_out, d2h_bytes, cudaMemcpyDeviceToHost, p.st); });
        p.last_frame = f;
        PerStream& next = ps[size_t((f + 1) % S)];
        call(k_sync, [&] { return cudaStreamSynchronize(next.st); });
    }
    for (auto& p : ps) CUDA_CHECK(cudaStreamSynchronize(p.st));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", frames));

    // every stream's last frame: its D2H holds the calibration of its ring slot; its count was zeroed
    for (auto& p : ps) {
        if (p.last_frame < 0) continue;
        const int slot = int(p.last_frame % ring);
        const size_t floats = d2h_bytes / sizeof(float);
        for (size_t i = 0; i < floats; ++i)
            if (p.h_out[i] != zoo::expected_calib(int(i), slot))
                ZOO_FAIL("frame %ld: D2H float %zu is %g, expected %g", p.last_frame, i, double(p.h_out[i]),
                         double(zoo::expected_calib(int(i), slot)));
        unsigned count = 1;
        CUDA_CHECK(cudaMemcpy(&count, p.d_count, sizeof(unsigned), cudaMemcpyDeviceToHost));
        if (count != 0) ZOO_FAIL("the count of frame %ld was not zeroed by its memset (%u)", p.last_frame, count);
    }
    unsigned done = 0;
    CUDA_CHECK(cudaMemcpy(&done, d_done, sizeof(unsigned), cudaMemcpyDeviceToHost));
    const long spins_expected = delay_ns > 0 ? frames + S : 0;
    if (long(done) != spins_expected) ZOO_FAIL("%u zoo_spin runs counted, %ld launched", done, spins_expected);
    std::vector<int64_t> kernel_ns = zoo::event_spans(ev_a, ev_b);
    for (long f = 0; f < frames; ++f) {
        CUDA_CHECK(cudaEventDestroy(ev_a[size_t(f)]));
        CUDA_CHECK(cudaEventDestroy(ev_b[size_t(f)]));
    }
    for (auto& p : ps) {
        CUDA_CHECK(cudaStreamDestroy(p.st));
        CUDA_CHECK(cudaFree(p.d_in));
        CUDA_CHECK(cudaFree(p.d_out));
        CUDA_CHECK(cudaFree(p.d_count));
        CUDA_CHECK(cudaFreeHost(p.h_out));
    }
    CUDA_CHECK(cudaFree(d_done));
    CUDA_CHECK(cudaFreeHost(h_in));

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", S).i("threads", 1);
    rep.top.raw("kernels_per_frame", delay_ns > 0 ? zoo::kmap({{"zoo_calib", 1}, {"zoo_spin", 1}})
                                                  : zoo::kmap({{"zoo_calib", 1}}));
    rep.top.raw("launches", delay_ns > 0 ? zoo::Obj().i("zoo_calib", frames + S).i("zoo_spin", frames + S).str()
                                         : zoo::Obj().i("zoo_calib", frames + S).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", S).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(h2d_bytes)).i("d2h_bytes_per_frame", int64_t(d2h_bytes));
    rep.top.i("memsets_per_frame", 1).i("memset_bytes_per_frame", 4).d("host_spin_us_per_frame", spin_us);
    rep.top.d("gpu_delay_us_per_frame", delay_us).i("events_per_frame", 2);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + S).i("d2h", frames + S).i("memset", frames + S).str());
    rep.top.i("stream_syncs", frames + 2 * S).i("syncs_per_frame", 1).b("timed_calls", timing);
    rep.top.raw("setup_calls", setup.json());
    rep.top.raw("calls", loop.json());
    rep.top.raw("spin", spin.json().str());
    rep.top.raw("budget", zoo::loop_budget(l0, l1, loop, spin).str());
    rep.top.raw("gpu", zoo::Obj().o("kernel", zoo::span_stats(kernel_ns))
                           .s("between", "cudaEventRecord before and after zoo_calib of each frame").str());
    rep.top.s("binds", S == 1 ? "latency" : "unknown");
    rep.top.s("expect", "one stream: the host and the GPU take turns every frame, and the GPU's latency between "
                        "dependent ops and the synchronize's round trip set the frame; more streams overlap "
                        "them, until the host's calls or the link bind");
    rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str()})).str());
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(h2d_bytes));
    return 0;
}
