// two_threads: two host threads, one stream each, each with its own loop that synchronizes its stream
// every frame. Thread t (named zoo-turn-0 / zoo-turn-1 with pthread_setname_np before its first CUDA
// call, and through nvtxNameOsThreadA unless --no-nvtx-names) runs --frames (400) frames on its own
// stream: it spins its own --spin-us (20 µs for thread 0, 40 µs for thread 1: "20,40") of host work,
// then an H2D of a 320,000-byte frame (pinned), zoo_calib, zoo_spin (--kernel-us, 10 µs), a D2H of
// 1,024 bytes and cudaStreamSynchronize. Each thread takes turns with its own stream; the two threads
// overlap each other, so each thread's split of its time (work, wait) is its own, and the slower
// thread (thread 1) sets the end. The main thread sets up, warms up (one frame on stream 0), starts
// both threads together and joins them. Every call of each thread is timed, its syncs one by one.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo two_threads.cu -lpthread -ldl   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <sys/syscall.h>

#include <atomic>
#include <thread>

struct Feed {
    std::string name;
    long tid = 0;
    double spin_us = 0;
    long frames = 0;
    int64_t start_ns = 0, end_ns = 0;
    zoo::Calls calls;
    zoo::Spin spin;
};

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--spin-us A,B] [--kernel-us K] [--no-nvtx-names]");
    const long frames = args.get("--frames", 400, 1);
    const char* spins = args.value("--spin-us");
    const double kernel_us = args.getd("--kernel-us", 10.0, 0.0, 1e5);
    const bool nvtx_names = !args.flag("--no-nvtx-names");
    args.finish();
    double spin_of[2] = {20.0, 40.0};
    if (spins && std::sscanf(spins, "%lf,%lf", &spin_of[0], &spin_of[1]) != 2) {
        std::fprintf(stderr, "%s: --spin-us wants two numbers A,B (µs for thread 0 and thread 1), got '%s'\n", argv[0], spins);
        return 2;
    }
    const long long kernel_ns = (long long)(kernel_us * 1000.0);
    const int n = zoo::kNpix;
    zoo::Report rep("two_threads", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 8;
    uint16_t* h_in = zoo::pinned_ring(ring, n);
    float* h_out[2];
    cudaStream_t st[2];
    uint16_t* d_in[2];
    float* d_out[2];
    unsigned long long ids[2];
    unsigned* d_done = nullptr;
    unsigned* h_done = nullptr;  // each thread reads its zoo_spin count back on its own stream
    CUDA_CHECK(cudaMalloc(&d_done, 2 * sizeof(unsigned)));
    CUDA_CHECK(cudaMallocHost(&h_done, 2 * sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(d_done, 0, 2 * sizeof(unsigned)));
    for (int t = 0; t < 2; ++t) {
        CUDA_CHECK(cudaMallocHost(&h_out[t], size_t(frames) * zoo::kPreviewBytes));
        CUDA_CHECK(cudaStreamCreateWithFlags(&st[t], cudaStreamNonBlocking));
        CUDA_CHECK(cudaStreamGetId(st[t], &ids[t]));
        CUDA_CHECK(cudaMalloc(&d_in[t], zoo::kFrameBytes));
        CUDA_CHECK(cudaMalloc(&d_out[t], size_t(n) * sizeof(float)));
    }
    zoo::Calls setup;
    {
        zoo::Kind& w_h2d = setup.kind("h2d", "cudaMemcpyAsync");
        zoo::Kind& w_launch = setup.kind("launch", "cudaLaunchKernel");
        zoo::Kind& w_sync = setup.kind("sync", "cudaStreamSynchronize");
        TIMED(w_h2d, cudaMemcpyAsync(d_in[0], h_in, zoo::kFrameBytes, cudaMemcpyHostToDevice, st[0]));
        TIMED(w_launch, zoo::launch_calib(d_in[0], d_out[0], n, st[0]));
        TIMED(w_launch, zoo::launch_spin(kernel_ns, d_done, st[0]));
        TIMED(w_sync, cudaStreamSynchronize(st[0]));
    }
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "one warm-up frame on stream 0 (main thread)"));

    Feed feeds[2];
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    auto feed = [&](int t) {
        Feed& o = feeds[t];
        o.name = "zoo-turn-" + std::to_string(t);
        pthread_setname_np(pthread_self(), o.name.c_str());  // <= 15 characters
        o.tid = long(syscall(SYS_gettid));
        if (nvtx_names) nvtxNameOsThreadA(uint32_t(o.tid), o.name.c_str());
        o.spin_us = spin_of[t];
        o.spin.us = spin_of[t];
        zoo::Kind& h2d = o.calls.kind("h2d", "cudaMemcpyAsync");
        zoo::Kind& launch = o.calls.kind("launch", "cudaLaunchKernel");
        zoo::Kind& d2h = o.calls.kind("d2h", "cudaMemcpyAsync");
        zoo::Kind& sync = o.calls.kind("sync", "cudaStreamSynchronize", true, size_t(frames));
        CUDA_CHECK(cudaSetDevice(0));
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        o.start_ns = zoo::now_ns();
        for (long f = 0; f < frames; ++f) {
            const int slot = int((f * 2 + t) % ring);
            o.spin.run();
            TIMED(h2d, cudaMemcpyAsync(d_in[t], h_in + size_t(slot) * n, zoo::kFrameBytes, cudaMemcpyHostToDevice, st[t]));
            TIMED(launch, zoo::launch_calib(d_in[t], d_out[t], n, st[t]));
            TIMED(launch, zoo::launch_spin(kernel_ns, d_done + t, st[t]));
            TIMED(d2h, cudaMemcpyAsync(h_out[t] + size_t(f) * zoo::kPreviewFloats, d_out[t], zoo::kPreviewBytes,
                                       cudaMemcpyDeviceToHost, st[t]));
            TIMED(sync, cudaStreamSynchronize(st[t]));
            ++o.frames;
        }
        // the count of its zoo_spin runs, read back on its own stream (the last GPU work of the thread)
        TIMED(d2h, cudaMemcpyAsync(h_done + t, d_done + t, sizeof(unsigned), cudaMemcpyDeviceToHost, st[t]));
        TIMED(sync, cudaStreamSynchronize(st[t]));
        o.end_ns = zoo::now_ns();
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < 2; ++t) pool.emplace_back(feed, t);
    while (ready.load() < 2) std::this_thread::yield();
    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    go.store(true, std::memory_order_release);
    for (auto& th : pool) th.join();
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", 2 * frames));
    for (auto& o : feeds) rep.phase("thread", o.start_ns, o.end_ns, zoo::Obj().s("name", o.name).i("frames", o.frames));

    if (h_done[0] != unsigned(frames + 1) || h_done[1] != unsigned(frames))
        ZOO_FAIL("zoo_spin runs counted %u and %u, launched %ld and %ld", h_done[0], h_done[1], frames + 1, frames);
    for (int t = 0; t < 2; ++t)
        for (long f = 0; f < frames; ++f)
            if (!zoo::preview_ok(h_out[t] + size_t(f) * zoo::kPreviewFloats, int((f * 2 + t) % ring)))
                ZOO_FAIL("thread %d frame %ld: the D2H preview differs from the expected calibration", t, f);
    std::vector<std::string> tlist;
    for (int t = 0; t < 2; ++t) {
        const Feed& o = feeds[t];
        tlist.push_back(zoo::Obj()
                            .s("name", o.name)
                            .i("tid", o.tid)
                            .i("stream", int64_t(ids[t]))
                            .i("frames", o.frames)
                            .d("spin_us_per_frame", o.spin_us)
                            .i("start_ns", o.start_ns)
                            .i("end_ns", o.end_ns)
                            .raw("calls", o.calls.json())
                            .raw("spin", o.spin.json().str())
                            .raw("budget", zoo::loop_budget(o.start_ns, o.end_ns, o.calls, o.spin).str())
                            .str());
        CUDA_CHECK(cudaStreamDestroy(st[t]));
        CUDA_CHECK(cudaFree(d_in[t]));
        CUDA_CHECK(cudaFree(d_out[t]));
        CUDA_CHECK(cudaFreeHost(h_out[t]));
    }
    CUDA_CHECK(cudaFree(d_done));
    CUDA_CHECK(cudaFreeHost(h_done));
    CUDA_CHECK(cudaFreeHost(h_in));

    rep.frame_info(n);
    rep.top.i("frames", 2 * frames).i("frames_per_thread", frames).i("streams", 2).i("threads", 2);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}, {"zoo_spin", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", 2 * frames + 1).i("zoo_spin", 2 * frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).i("zoo_spin", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(zoo::kFrameBytes)).i("d2h_bytes_per_frame", int64_t(zoo::kPreviewBytes));
    rep.top.i("memsets_per_frame", 0).d("kernel_us", kernel_us);
    rep.top.d("host_spin_us_per_frame", (spin_of[0] + spin_of[1]) / 2);
    rep.top.raw("copies", zoo::Obj().i("h2d", 2 * frames + 1).i("d2h", 2 * frames + 2).i("memset", 1).str());
    rep.top.raw("per_thread", zoo::jarr(tlist));
    rep.top.i("main_tid", long(syscall(SYS_gettid)));
    rep.top.s("main_thread", "sets up, warms up (one frame on stream 0), joins; launches nothing in the loop");
    rep.top.i("stream_syncs", 2 * frames + 3).i("slow_call_ns", zoo::kSlowCallNs);
    rep.top.raw("setup_calls", setup.json());
    const std::string loop_range = zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str();
    if (nvtx_names) {
        rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({loop_range})).s("thread_names", "nvtxNameOsThreadA").str());
        rep.top.raw("thread_naming", zoo::jarr({zoo::jstr("pthread_setname_np"), zoo::jstr("nvtxNameOsThreadA")}));
    } else {
        rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({loop_range})).str());
        rep.top.raw("thread_naming", zoo::jarr({zoo::jstr("pthread_setname_np")}));
    }
    rep.top.s("binds", "zoo-turn-1");
    rep.top.s("expect", "each thread takes turns with its own stream: its split (work, wait) from its own timers; "
                        "the thread with the longer spin sets the end");
    rep.top.b("checked", true);
    rep.finish(2 * frames, loop_s, int64_t(2 * frames) * int64_t(zoo::kFrameBytes));
    return 0;
}
