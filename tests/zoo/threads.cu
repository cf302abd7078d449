// threads: several host threads feed the GPU, each into its own stream(s), the way a DAQ with one
// reader thread per detector module does.
//
// --threads T --streams S (S >= T): T std::threads named zoo-feed-0 .. zoo-feed-(T-1) with
// pthread_setname_np before each thread's first CUDA call (--nvtx-names also names them through
// nvtxNameOsThreadA; off by default, so that the trace has no NVTX at all). Thread t owns the
// streams s with s % T == t and the frames f with f % T == t; its k-th frame goes to its
// (k mod #owned)-th stream. Per frame: H2D of 320,000 bytes, zoo_calib, D2H of 1,024 bytes; each
// thread synchronizes its streams after every --sync-every (100) of its frames and at its end. The main thread sets up (buffers, one warm-up
// zoo_calib on stream 0), starts the threads together and joins them; the rate is timed from the
// start signal to the last join.
//   Mode A: --threads 2 --streams 2   (each thread one stream)
//   Mode B: --threads 1 --streams 4   (one thread feeding 4 streams round-robin)
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo threads.cu -lpthread -ldl   (tests/zoo/build.sh)
#include "zoo.cuh"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <sys/syscall.h>

#include <atomic>
#include <thread>

struct ThreadOut {
    std::string name;
    long tid = 0;
    long frames = 0;
    long syncs = 0;
    std::vector<long> streams;
    int64_t start_ns = 0, end_ns = 0;
};

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--threads T] [--streams S] [--sync-every K] [--nvtx-names]");
    const long frames = args.get("--frames", 1000, 1);
    const long nthreads = args.get("--threads", 2, 1, 64);
    const long nstreams = args.get("--streams", 2, 1, 64);
    const long sync_every = args.get("--sync-every", 100, 1);
    const bool nvtx_names = args.flag("--nvtx-names");
    args.finish();
    if (nstreams < nthreads) {
        std::fprintf(stderr, "%s: --streams (%ld) must be >= --threads (%ld): each thread owns its streams\n", argv[0],
                     nstreams, nthreads);
        return 2;
    }
    zoo::Report rep("threads", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 8;
    const int n = zoo::kNpix;
    uint16_t* h_in = zoo::pinned_ring(ring, n);
    float* h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_out, size_t(frames) * zoo::kPreviewBytes));
    std::vector<cudaStream_t> st(static_cast<size_t>(nstreams));
    std::vector<uint16_t*> d_in(static_cast<size_t>(nstreams));
    std::vector<float*> d_out(static_cast<size_t>(nstreams));
    std::vector<unsigned long long> stream_ids(static_cast<size_t>(nstreams));
    for (long s = 0; s < nstreams; ++s) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&st[size_t(s)], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamGetId(st[size_t(s)], &stream_ids[size_t(s)]));
        CUDA_CHECK(cudaMalloc(&d_in[size_t(s)], zoo::kFrameBytes));
        CUDA_CHECK(cudaMalloc(&d_out[size_t(s)], size_t(n) * sizeof(float)));
    }
    const unsigned grid = zoo::grid_for(n);
    CUDA_CHECK(cudaMemcpyAsync(d_in[0], h_in, zoo::kFrameBytes, cudaMemcpyHostToDevice, st[0]));
    zoo_calib<<<grid, zoo::kBlock, 0, st[0]>>>(d_in[0], d_out[0], n, zoo::kPedestal, zoo::kThreshold);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaStreamSynchronize(st[0]));
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "warm-up zoo_calib on stream 0"));

    std::vector<ThreadOut> outs(static_cast<size_t>(nthreads));
    std::atomic<long> ready{0};
    std::atomic<bool> go{false};
    auto feed = [&](long t) {
        ThreadOut& o = outs[size_t(t)];
        o.name = "zoo-feed-" + std::to_string(t);
        pthread_setname_np(pthread_self(), o.name.c_str());  // <= 15 characters
        o.tid = long(syscall(SYS_gettid));
        if (nvtx_names) nvtxNameOsThreadA(uint32_t(o.tid), o.name.c_str());  // opt-in: the same name via NVTX
        CUDA_CHECK(cudaSetDevice(0));
        for (long s = t; s < nstreams; s += nthreads) o.streams.push_back(s);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        o.start_ns = zoo::now_ns();
        long k = 0;
        for (long f = t; f < frames; f += nthreads, ++k) {
            const size_t s = size_t(o.streams[size_t(k) % o.streams.size()]);
            const int slot = int(f % ring);
            CUDA_CHECK(cudaMemcpyAsync(d_in[s], h_in + size_t(slot) * n, zoo::kFrameBytes, cudaMemcpyHostToDevice, st[s]));
            zoo_calib<<<grid, zoo::kBlock, 0, st[s]>>>(d_in[s], d_out[s], n, zoo::kPedestal, zoo::kThreshold);
            LAUNCH_CHECK();
            CUDA_CHECK(cudaMemcpyAsync(h_out + size_t(f) * zoo::kPreviewFloats, d_out[s], zoo::kPreviewBytes,
                                       cudaMemcpyDeviceToHost, st[s]));
            if ((k + 1) % sync_every == 0)
                for (long s2 : o.streams) {
                    CUDA_CHECK(cudaStreamSynchronize(st[size_t(s2)]));
                    ++o.syncs;
                }
        }
        if (k % sync_every != 0)
            for (long s2 : o.streams) {
                CUDA_CHECK(cudaStreamSynchronize(st[size_t(s2)]));
                ++o.syncs;
            }
        o.frames = k;
        o.end_ns = zoo::now_ns();
    };
    std::vector<std::thread> pool;
    for (long t = 0; t < nthreads; ++t) pool.emplace_back(feed, t);
    while (ready.load() < nthreads) std::this_thread::yield();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    rep.phase("loop", l0, zoo::now_ns(), zoo::Obj().i("frames", frames));
    for (auto& o : outs)
        rep.phase("thread", o.start_ns, o.end_ns, zoo::Obj().s("name", o.name).i("frames", o.frames));

    for (long f = 0; f < frames; ++f)
        if (!zoo::preview_ok(h_out + size_t(f) * zoo::kPreviewFloats, int(f % ring)))
            ZOO_FAIL("frame %ld: the D2H preview differs from the expected calibration", f);

    std::vector<long> per_stream(static_cast<size_t>(nstreams), 0);
    std::vector<std::string> tlist;
    long syncs = 1;
    for (long t = 0; t < nthreads; ++t) {
        const ThreadOut& o = outs[size_t(t)];
        long k = 0;
        for (long f = t; f < frames; f += nthreads, ++k) per_stream[size_t(o.streams[size_t(k) % o.streams.size()])]++;
        syncs += o.syncs;
        tlist.push_back(zoo::Obj()
                            .s("name", o.name)
                            .i("tid", o.tid)
                            .i("frames", o.frames)
                            .raw("streams", zoo::jarr_num(o.streams))
                            .i("stream_syncs", o.syncs)
                            .i("start_ns", o.start_ns)
                            .i("end_ns", o.end_ns)
                            .str());
    }
    for (long s = 0; s < nstreams; ++s) {
        CUDA_CHECK(cudaStreamDestroy(st[size_t(s)]));
        CUDA_CHECK(cudaFree(d_in[size_t(s)]));
        CUDA_CHECK(cudaFree(d_out[size_t(s)]));
    }
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));

    rep.frame_info(n);
    rep.top.s("mode", nthreads == 1 ? "one thread, several streams" : "one thread per stream group");
    rep.top.i("frames", frames).i("streams", nstreams).i("threads", nthreads);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(zoo::kFrameBytes)).i("d2h_bytes_per_frame", int64_t(zoo::kPreviewBytes));
    rep.top.i("memsets_per_frame", 0).d("host_spin_us_per_frame", 0.0);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames).i("memset", 0).str());
    rep.top.raw("per_thread", zoo::jarr(tlist));
    rep.top.raw("stream_frames", zoo::jarr_num(per_stream));
    rep.top.raw("cuda_stream_ids", zoo::jarr_num(stream_ids));
    rep.top.s("main_thread", "sets up, warms up (1 zoo_calib on stream 0), joins; launches nothing in the loop");
    rep.top.i("main_tid", long(syscall(SYS_gettid)));
    rep.top.i("sync_every", sync_every).i("stream_syncs", syncs);
    if (nvtx_names) {
        rep.top.raw("nvtx", zoo::Obj().raw("ranges", "[]").s("thread_names", "nvtxNameOsThreadA").str());
        rep.top.raw("thread_naming", zoo::jarr({zoo::jstr("pthread_setname_np"), zoo::jstr("nvtxNameOsThreadA")}));
    } else {
        rep.top.raw("nvtx", "null");
        rep.top.raw("thread_naming", zoo::jarr({zoo::jstr("pthread_setname_np")}));
    }
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(zoo::kFrameBytes));
    return 0;
}
