// small_calls: a host-bound loop of many small CUDA calls, the shape of aare's ClusterFinderCUDA: one
// thread feeds --streams (4) streams round-robin, nine CUDA calls a frame, each a few µs of host
// time, for a few µs of GPU work. Frame f goes to stream f % S and ring slot f % --slots (16), which
// has its own device buffers and an event:
//   cudaEventQuery(ev[slot]) (is the slot's previous frame done?; if not, cudaEventSynchronize: the
//     program counts how often), cudaMemsetAsync of the 4-byte count, cudaMemsetAsync of the
//     calibrated output, H2D of a --pixels (32,768 pixels, 65,536 bytes) frame from a pinned ring,
//     zoo_calib, zoo_reduce, zoo_store (copies the count into the slot's result), D2H of the count,
//     cudaEventRecord(ev[slot])
// The GPU runs each frame in a few µs and the streams overlap, so the GPU waits for the host: the
// thread's issue time (the nine calls and the loop's own code) binds. Every loop call is timed.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo small_calls.cu   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--streams S] [--slots K] [--pixels P] [--spin-us U]");
    const long frames = args.get("--frames", 400, 1);
    const long nstreams = args.get("--streams", 4, 1, 64);
    const long slots = args.get("--slots", 16, 1, 256);
    const long npix_l = args.get("--pixels", 32768, zoo::kPreviewFloats, zoo::kNpix);
    const double spin_us = args.getd("--spin-us", 0.0, 0.0, 1e6);
    args.finish();
    const int n = int(npix_l);
    const size_t bytes = size_t(n) * sizeof(uint16_t);
    zoo::Report rep("small_calls", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 8;
    uint16_t* h_in = zoo::pinned_ring(ring, n);
    unsigned* h_count = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_count, size_t(frames) * sizeof(unsigned)));
    std::vector<cudaStream_t> st(static_cast<size_t>(nstreams));
    std::vector<unsigned long long> stream_ids(static_cast<size_t>(nstreams));
    for (long s = 0; s < nstreams; ++s) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&st[size_t(s)], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamGetId(st[size_t(s)], &stream_ids[size_t(s)]));
    }
    const size_t K = size_t(slots);
    std::vector<uint16_t*> d_in(K);
    std::vector<float*> d_out(K);
    std::vector<unsigned*> d_count(K);
    std::vector<cudaEvent_t> ev(K);
    unsigned* d_results = nullptr;
    CUDA_CHECK(cudaMalloc(&d_results, size_t(frames) * sizeof(unsigned)));
    for (size_t k = 0; k < K; ++k) {
        CUDA_CHECK(cudaMalloc(&d_in[k], bytes));
        CUDA_CHECK(cudaMalloc(&d_out[k], size_t(n) * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_count[k], sizeof(unsigned)));
        CUDA_CHECK(cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming));
    }
    zoo::Calls setup, loop;
    {  // warm-up on stream 0: one frame through the three kernels (loads the module)
        zoo::Kind& w_memset = setup.kind("memset", "cudaMemsetAsync");
        zoo::Kind& w_h2d = setup.kind("h2d", "cudaMemcpyAsync");
        zoo::Kind& w_launch = setup.kind("launch", "cudaLaunchKernel");
        zoo::Kind& w_sync = setup.kind("sync", "cudaStreamSynchronize");
        TIMED(w_memset, cudaMemsetAsync(d_count[0], 0, sizeof(unsigned), st[0]));
        TIMED(w_h2d, cudaMemcpyAsync(d_in[0], h_in, bytes, cudaMemcpyHostToDevice, st[0]));
        TIMED(w_launch, zoo::launch_calib(d_in[0], d_out[0], n, st[0]));
        TIMED(w_launch, zoo::launch_reduce(d_out[0], n, d_count[0], st[0]));
        TIMED(w_launch, zoo::launch_store(d_count[0], d_results, 0, st[0]));
        TIMED(w_sync, cudaStreamSynchronize(st[0]));
    }
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "one warm-up frame on stream 0"));

    zoo::Kind& query = loop.kind("event_query", "cudaEventQuery");
    zoo::Kind& esync = loop.kind("event_sync", "cudaEventSynchronize");
    zoo::Kind& memset = loop.kind("memset", "cudaMemsetAsync");
    zoo::Kind& h2d = loop.kind("h2d", "cudaMemcpyAsync");
    zoo::Kind& launch = loop.kind("launch", "cudaLaunchKernel");
    zoo::Kind& d2h = loop.kind("d2h", "cudaMemcpyAsync");
    zoo::Kind& rec = loop.kind("event_record", "cudaEventRecord");
    zoo::Kind& sync = loop.kind("sync", "cudaStreamSynchronize");
    zoo::Spin spin;
    spin.us = spin_us;
    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        const size_t k = size_t(f % slots);
        cudaStream_t s = st[size_t(f % nstreams)];
        spin.run();
        // cudaEventQuery returns cudaErrorNotReady while the slot's previous frame runs (not an error)
        const int64_t q0 = zoo::now_ns();
        cudaError_t q = cudaEventQuery(ev[k]);
        query.add(zoo::now_ns() - q0);
        if (q == cudaErrorNotReady) {
            TIMED(esync, cudaEventSynchronize(ev[k]));
        } else {
            zoo::check(q, "cudaEventQuery(ev[k])", __FILE__, __LINE__);
        }
        TIMED(memset, cudaMemsetAsync(d_count[k], 0, sizeof(unsigned), s));
        TIMED(memset, cudaMemsetAsync(d_out[k], 0, size_t(n) * sizeof(float), s));
        TIMED(h2d, cudaMemcpyAsync(d_in[k], h_in + size_t(f % ring) * n, bytes, cudaMemcpyHostToDevice, s));
        TIMED(launch, zoo::launch_calib(d_in[k], d_out[k], n, s));
        TIMED(launch, zoo::launch_reduce(d_out[k], n, d_count[k], s));
        TIMED(launch, zoo::launch_store(d_count[k], d_results, int(f), s));
        TIMED(d2h, cudaMemcpyAsync(h_count + f, d_count[k], sizeof(unsigned), cudaMemcpyDeviceToHost, s));
        TIMED(rec, cudaEventRecord(ev[k], s));
    }
    for (long s = 0; s < nstreams; ++s) TIMED(sync, cudaStreamSynchronize(st[size_t(s)]));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", frames));

    std::vector<unsigned> results(static_cast<size_t>(frames));
    CUDA_CHECK(cudaMemcpy(results.data(), d_results, size_t(frames) * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (long f = 0; f < frames; ++f) {
        const unsigned want = zoo::expected_count(n, int(f % ring));
        if (h_count[f] != want || results[size_t(f)] != want)
            ZOO_FAIL("frame %ld: count %u, stored %u, expected %u", f, h_count[f], results[size_t(f)], want);
    }
    std::vector<long> per_stream(static_cast<size_t>(nstreams), 0);
    for (long f = 0; f < frames; ++f) per_stream[size_t(f % nstreams)]++;
    for (size_t k = 0; k < K; ++k) {
        CUDA_CHECK(cudaFree(d_in[k]));
        CUDA_CHECK(cudaFree(d_out[k]));
        CUDA_CHECK(cudaFree(d_count[k]));
        CUDA_CHECK(cudaEventDestroy(ev[k]));
    }
    for (long s = 0; s < nstreams; ++s) CUDA_CHECK(cudaStreamDestroy(st[size_t(s)]));
    CUDA_CHECK(cudaFree(d_results));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_count));

    const double calls_per_frame = double(loop.count() - sync.n) / double(frames);
    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", nstreams).i("threads", 1).i("slots", slots);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}, {"zoo_reduce", 1}, {"zoo_store", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).i("zoo_reduce", frames + 1).i("zoo_store", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).i("zoo_reduce", 1).i("zoo_store", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(bytes)).i("d2h_bytes_per_frame", int64_t(sizeof(unsigned)));
    rep.top.i("memsets_per_frame", 2).d("host_spin_us_per_frame", spin_us);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames + 1).i("memset", 2 * frames + 1).str());
    rep.top.raw("stream_frames", zoo::jarr_num(per_stream));
    rep.top.raw("cuda_stream_ids", zoo::jarr_num(stream_ids));
    rep.top.s("stream_assignment", "frame f -> stream f % streams, slot f % slots");
    rep.top.d("calls_per_frame", calls_per_frame);
    rep.top.i("event_syncs", esync.n).i("stream_syncs", nstreams + 1).i("slow_call_ns", zoo::kSlowCallNs);
    rep.top.raw("setup_calls", setup.json());
    rep.top.raw("calls", loop.json());
    rep.top.raw("spin", spin.json().str());
    rep.top.raw("budget", zoo::loop_budget(l0, l1, loop, spin).str());
    rep.top.s("binds", "host");
    rep.top.s("expect", "the host thread's nine calls a frame bind; the GPU waits for it");
    rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str()})).str());
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(bytes));
    return 0;
}
