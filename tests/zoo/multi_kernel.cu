// multi_kernel: two kernels per frame over several streams, the shape of aare's ClusterFinderCUDA
// and of most detector pipelines: per frame a cudaMemsetAsync of a 4-byte count, an H2D of
// 320,000 bytes, zoo_calib, zoo_reduce (counts the pixels above threshold into the count), and a
// D2H of the 4-byte count. Frames go round-robin over --streams S streams (4); each stream has
// its own device buffers. Host input comes from a pinned ring of 8 frames that is only read, and
// each frame's count lands in its own pinned slot, so no host buffer is recycled and no event is
// needed. One synchronization of every stream at the end of the loop.
//
// --rate-bug: the program's own "throughput:" line reports 10x the true H2D GB/s (as if it counted
// bytes wrong); the ZOO line says "rate_bug": true and carries the true figure.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo multi_kernel.cu   (tests/zoo/build.sh)
#include "zoo.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--streams S] [--rate-bug]");
    const long frames = args.get("--frames", 600, 1);
    const long nstreams = args.get("--streams", 4, 1, 64);
    const bool rate_bug = args.flag("--rate-bug");
    args.finish();
    const double bug_factor = rate_bug ? 10.0 : 1.0;
    zoo::Report rep("multi_kernel", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 8;
    const int n = zoo::kNpix;
    uint16_t* h_in = zoo::pinned_ring(ring, n);
    unsigned* h_count = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_count, size_t(frames) * sizeof(unsigned)));
    std::vector<cudaStream_t> st(static_cast<size_t>(nstreams));
    std::vector<uint16_t*> d_in(static_cast<size_t>(nstreams));
    std::vector<float*> d_out(static_cast<size_t>(nstreams));
    std::vector<unsigned*> d_count(static_cast<size_t>(nstreams));
    std::vector<unsigned long long> stream_ids(static_cast<size_t>(nstreams));
    for (long s = 0; s < nstreams; ++s) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&st[size_t(s)], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamGetId(st[size_t(s)], &stream_ids[size_t(s)]));
        CUDA_CHECK(cudaMalloc(&d_in[size_t(s)], zoo::kFrameBytes));
        CUDA_CHECK(cudaMalloc(&d_out[size_t(s)], size_t(n) * sizeof(float)));
        CUDA_CHECK(cudaMalloc(&d_count[size_t(s)], sizeof(unsigned)));
    }
    const unsigned grid = zoo::grid_for(n);
    // warm-up on stream 0: one frame through both kernels (loads the module)
    CUDA_CHECK(cudaMemsetAsync(d_count[0], 0, sizeof(unsigned), st[0]));
    CUDA_CHECK(cudaMemcpyAsync(d_in[0], h_in, zoo::kFrameBytes, cudaMemcpyHostToDevice, st[0]));
    zoo_calib<<<grid, zoo::kBlock, 0, st[0]>>>(d_in[0], d_out[0], n, zoo::kPedestal, zoo::kThreshold);
    LAUNCH_CHECK();
    zoo_reduce<<<grid, zoo::kBlock, 0, st[0]>>>(d_out[0], n, d_count[0]);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaStreamSynchronize(st[0]));
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "warm-up frame on stream 0"));

    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        const size_t s = size_t(f % nstreams);
        const int slot = int(f % ring);
        CUDA_CHECK(cudaMemsetAsync(d_count[s], 0, sizeof(unsigned), st[s]));
        CUDA_CHECK(cudaMemcpyAsync(d_in[s], h_in + size_t(slot) * n, zoo::kFrameBytes, cudaMemcpyHostToDevice, st[s]));
        zoo_calib<<<grid, zoo::kBlock, 0, st[s]>>>(d_in[s], d_out[s], n, zoo::kPedestal, zoo::kThreshold);
        LAUNCH_CHECK();
        zoo_reduce<<<grid, zoo::kBlock, 0, st[s]>>>(d_out[s], n, d_count[s]);
        LAUNCH_CHECK();
        CUDA_CHECK(cudaMemcpyAsync(h_count + f, d_count[s], sizeof(unsigned), cudaMemcpyDeviceToHost, st[s]));
    }
    for (long s = 0; s < nstreams; ++s) CUDA_CHECK(cudaStreamSynchronize(st[size_t(s)]));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    rep.phase("loop", l0, zoo::now_ns(), zoo::Obj().i("frames", frames));

    std::vector<unsigned> want(ring);
    for (int s = 0; s < ring; ++s) want[size_t(s)] = zoo::expected_count(n, s);
    for (long f = 0; f < frames; ++f)
        if (h_count[f] != want[size_t(f % ring)])
            ZOO_FAIL("frame %ld: count %u, expected %u", f, h_count[f], want[size_t(f % ring)]);

    std::vector<long> per_stream(static_cast<size_t>(nstreams), 0);
    for (long f = 0; f < frames; ++f) per_stream[size_t(f % nstreams)]++;
    for (long s = 0; s < nstreams; ++s) {
        CUDA_CHECK(cudaStreamDestroy(st[size_t(s)]));
        CUDA_CHECK(cudaFree(d_in[size_t(s)]));
        CUDA_CHECK(cudaFree(d_out[size_t(s)]));
        CUDA_CHECK(cudaFree(d_count[size_t(s)]));
    }
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_count));

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", nstreams).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}, {"zoo_reduce", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).i("zoo_reduce", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).i("zoo_reduce", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(zoo::kFrameBytes)).i("d2h_bytes_per_frame", int64_t(sizeof(unsigned)));
    rep.top.i("memsets_per_frame", 1).i("memset_bytes_per_frame", int64_t(sizeof(unsigned)));
    rep.top.d("host_spin_us_per_frame", 0.0);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames).i("memset", frames + 1).str());
    rep.top.raw("stream_frames", zoo::jarr_num(per_stream));
    rep.top.raw("cuda_stream_ids", zoo::jarr_num(stream_ids));
    rep.top.s("stream_assignment", "frame f -> stream f % streams");
    rep.top.i("stream_syncs", nstreams + 1);
    rep.top.b("rate_bug", rate_bug).d("rate_bug_factor", bug_factor);
    rep.top.raw("nvtx", "null");
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(zoo::kFrameBytes), bug_factor);
    return 0;
}
