// pipeline: a pinned multi-stream pipeline in which the engines overlap and one, the H2D link, binds.
// Four streams: one copy stream c and three compute streams k0, k1, k2. Frame f uses c, compute stream
// k(f % 3) and ring slot f % --slots (8), which has its own device buffers, its pinned count and three
// events:
//   if the slot was used before: cudaEventSynchronize(done[slot]) and check its count (recycling)
//   c: cudaEventRecord(start[slot]); H2D of a --mib (4 MiB) frame from a pinned ring; cudaEventRecord(up[slot])
//   k: cudaStreamWaitEvent(k, up[slot]) (the event edge between two streams), cudaMemsetAsync of the
//      4-byte count, zoo_calib, zoo_reduce, D2H of the count, cudaEventRecord(done[slot])
// The copies follow each other on c (so that the link's order is the stream's order) and the H2D of
// frame f+1 runs under the kernels of frame f; the copies (about 75 µs a frame at ~55 GB/s) are the
// tallest bar, far above the kernels and the host's issue time. The events give
// each frame's H2D time (start -> up) and its latency (start -> done); every loop call is timed.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo pipeline.cu   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--mib M] [--slots S]");
    const long frames = args.get("--frames", 400, 1);
    const long mib = args.get("--mib", 4, 1, 256);
    const long slots = args.get("--slots", 8, 2, 64);
    args.finish();
    const int n = int(mib * (1 << 20) / 2);
    const size_t bytes = size_t(n) * sizeof(uint16_t);
    zoo::Report rep("pipeline", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 4;
    uint16_t* h_in = zoo::pinned_ring(ring, n);
    unsigned* h_count = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_count, size_t(slots) * sizeof(unsigned)));
    cudaStream_t cs, ks[3];
    unsigned long long ids[4];
    CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamGetId(cs, &ids[0]));
    for (int i = 0; i < 3; ++i) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&ks[i], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamGetId(ks[i], &ids[1 + i]));
    }
    const size_t S = size_t(slots);
    std::vector<uint16_t*> d_in(S);
    std::vector<float*> d_out(S);
    std::vector<unsigned*> d_count(S);
    std::vector<cudaEvent_t> ev_start(S), ev_up(S), ev_done(S);
    for (size_t s = 0; s < S; ++s) {
        CUDA_CHECK(cudaMalloc(&d_in[s], bytes));
        CUDA_CHECK(cudaMalloc(&d_out[s], size_t(n) * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_count[s], sizeof(unsigned)));
        CUDA_CHECK(cudaEventCreate(&ev_start[s]));
        CUDA_CHECK(cudaEventCreate(&ev_up[s]));
        CUDA_CHECK(cudaEventCreate(&ev_done[s]));
    }
    std::vector<unsigned> want(ring);
    for (int r = 0; r < ring; ++r) want[size_t(r)] = zoo::expected_count(n, r);
    zoo::Calls setup, loop;
    {  // warm-up: one frame through both kernels on k0 (loads the module)
        zoo::Kind& w_memset = setup.kind("memset", "cudaMemsetAsync");
        zoo::Kind& w_h2d = setup.kind("h2d", "cudaMemcpyAsync");
        zoo::Kind& w_launch = setup.kind("launch", "cudaLaunchKernel");
        zoo::Kind& w_sync = setup.kind("sync", "cudaStreamSynchronize");
        TIMED(w_memset, cudaMemsetAsync(d_count[0], 0, sizeof(unsigned), ks[0]));
        TIMED(w_h2d, cudaMemcpyAsync(d_in[0], h_in, bytes, cudaMemcpyHostToDevice, ks[0]));
        TIMED(w_launch, zoo::launch_calib(d_in[0], d_out[0], n, ks[0]));
        TIMED(w_launch, zoo::launch_reduce(d_out[0], n, d_count[0], ks[0]));
        TIMED(w_sync, cudaStreamSynchronize(ks[0]));
    }
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "one warm-up frame on k0"));

    zoo::Kind& esync = loop.kind("event_sync", "cudaEventSynchronize");
    zoo::Kind& rec = loop.kind("event_record", "cudaEventRecord");
    zoo::Kind& h2d = loop.kind("h2d", "cudaMemcpyAsync");
    zoo::Kind& wait = loop.kind("stream_wait_event", "cudaStreamWaitEvent");
    zoo::Kind& memset = loop.kind("memset", "cudaMemsetAsync");
    zoo::Kind& launch = loop.kind("launch", "cudaLaunchKernel");
    zoo::Kind& d2h = loop.kind("d2h", "cudaMemcpyAsync");
    zoo::Kind& sync = loop.kind("sync", "cudaStreamSynchronize");
    zoo::Kind& elapsed = loop.kind("event_elapsed", "cudaEventElapsedTime");
    zoo::Calls after;  // the frames retired after the loop
    zoo::Kind& elapsed_after = after.kind("event_elapsed", "cudaEventElapsedTime");
    zoo::Spin spin;
    std::vector<int64_t> h2d_ns, frame_ns;  // per frame, from the events, read when a slot is recycled
    long checked = 0;
    auto retire = [&](long f_old, zoo::Kind& el) {  // the slot's previous frame is done: its count and GPU times
        const size_t s = size_t(f_old % slots);
        if (h_count[s] != want[size_t(f_old % ring)])
            ZOO_FAIL("frame %ld: count %u, expected %u", f_old, h_count[s], want[size_t(f_old % ring)]);
        float a = 0, b = 0;
        TIMED(el, cudaEventElapsedTime(&a, ev_start[s], ev_up[s]));
        TIMED(el, cudaEventElapsedTime(&b, ev_start[s], ev_done[s]));
        h2d_ns.push_back(int64_t(double(a) * 1e6 + 0.5));
        frame_ns.push_back(int64_t(double(b) * 1e6 + 0.5));
        ++checked;
    };
    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        const size_t s = size_t(f % slots);
        cudaStream_t c = cs, k = ks[f % 3];
        if (f >= slots) {
            TIMED(esync, cudaEventSynchronize(ev_done[s]));
            retire(f - slots, elapsed);
        }
        TIMED(rec, cudaEventRecord(ev_start[s], c));
        TIMED(h2d, cudaMemcpyAsync(d_in[s], h_in + size_t(f % ring) * n, bytes, cudaMemcpyHostToDevice, c));
        TIMED(rec, cudaEventRecord(ev_up[s], c));
        TIMED(wait, cudaStreamWaitEvent(k, ev_up[s], 0));
        TIMED(memset, cudaMemsetAsync(d_count[s], 0, sizeof(unsigned), k));
        TIMED(launch, zoo::launch_calib(d_in[s], d_out[s], n, k));
        TIMED(launch, zoo::launch_reduce(d_out[s], n, d_count[s], k));
        TIMED(d2h, cudaMemcpyAsync(h_count + s, d_count[s], sizeof(unsigned), cudaMemcpyDeviceToHost, k));
        TIMED(rec, cudaEventRecord(ev_done[s], k));
    }
    TIMED(sync, cudaStreamSynchronize(cs));
    for (int i = 0; i < 3; ++i) TIMED(sync, cudaStreamSynchronize(ks[i]));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", frames));
    for (long f = std::max(0L, frames - slots); f < frames; ++f) retire(f, elapsed_after);
    if (checked != frames) ZOO_FAIL("%ld frames checked of %ld", checked, frames);

    for (size_t s = 0; s < S; ++s) {
        CUDA_CHECK(cudaFree(d_in[s]));
        CUDA_CHECK(cudaFree(d_out[s]));
        CUDA_CHECK(cudaFree(d_count[s]));
        CUDA_CHECK(cudaEventDestroy(ev_start[s]));
        CUDA_CHECK(cudaEventDestroy(ev_up[s]));
        CUDA_CHECK(cudaEventDestroy(ev_done[s]));
    }
    CUDA_CHECK(cudaStreamDestroy(cs));
    for (int i = 0; i < 3; ++i) CUDA_CHECK(cudaStreamDestroy(ks[i]));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_count));

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", 4).i("threads", 1).i("slots", slots);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}, {"zoo_reduce", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).i("zoo_reduce", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).i("zoo_reduce", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(bytes)).i("d2h_bytes_per_frame", int64_t(sizeof(unsigned)));
    rep.top.i("memsets_per_frame", 1).d("host_spin_us_per_frame", 0.0);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames).i("memset", frames + 1).str());
    rep.top.raw("cuda_stream_ids", zoo::Obj().i("c", int64_t(ids[0])).i("k0", int64_t(ids[1]))
                                       .i("k1", int64_t(ids[2])).i("k2", int64_t(ids[3])).str());
    rep.top.s("stream_assignment", "frame f: H2D on c, kernels and D2H on k(f % 3), slot f % slots");
    rep.top.raw("event_edges", zoo::Obj().i("stream_wait_event", frames).i("event_sync", std::max(0L, frames - slots))
                                   .s("edge", "cudaEventRecord(up) on c -> cudaStreamWaitEvent(k, up)").str());
    rep.top.i("stream_syncs", 5).i("slow_call_ns", zoo::kSlowCallNs);
    rep.top.raw("setup_calls", setup.json());
    rep.top.raw("calls", loop.json());
    rep.top.raw("after_calls", after.json());
    rep.top.raw("spin", spin.json().str());
    rep.top.raw("budget", zoo::loop_budget(l0, l1, loop, spin).str());
    rep.top.raw("gpu", zoo::Obj().o("h2d", zoo::span_stats(h2d_ns)).o("frame", zoo::span_stats(frame_ns))
                           .s("between", "h2d: start -> up (the copy stream); frame: start -> done").str());
    rep.top.s("binds", "h2d");
    rep.top.s("expect", "the engines overlap; the H2D copies are the tallest bar and hold most of the critical path");
    rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str()})).str());
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(bytes));
    return 0;
}
