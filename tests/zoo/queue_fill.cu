// queue_fill: a launch loop that fills the launch queue. One stream, no synchronization in the loop:
// the host launches zoo_spin (--kernel-us 30 µs of GPU time each, one block) as fast as it can. A
// launch takes a few µs, a kernel 30 µs, so the kernels queue up until the queue is full; from then
// on each cudaLaunchKernel returns only when a queued kernel has finished and freed a slot: the call
// blocks on the GPU. The loop stops once --blocked (1,000) launches have taken 20 µs or more (or
// after --max-launches, 4,500: the fixture must stay under 1 MB), then one cudaStreamSynchronize
// waits for the queued kernels. Every cudaLaunchKernel is timed with steady_clock (each_ns, in order);
// the launches before the first run of 8 slow ones in a row are the queue depth the program saw (a
// single slow launch early on is a hiccup, not a full queue).
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo queue_fill.cu   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--kernel-us U] [--blocked B] [--max-launches N]");
    const double kernel_us = args.getd("--kernel-us", 30.0, 1.0, 1e5);
    const long blocked_target = args.get("--blocked", 1000, 1);
    const long max_launches = args.get("--max-launches", 4500, 1);
    args.finish();
    const long long kernel_ns = (long long)(kernel_us * 1000.0);
    zoo::Report rep("queue_fill", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    unsigned* d_done = nullptr;
    CUDA_CHECK(cudaMalloc(&d_done, sizeof(unsigned)));
    CUDA_CHECK(cudaMemset(d_done, 0, sizeof(unsigned)));
    cudaEvent_t ev0, ev1;
    CUDA_CHECK(cudaEventCreate(&ev0));
    CUDA_CHECK(cudaEventCreate(&ev1));
    zoo::Calls setup, loop;
    zoo::Kind& warm = setup.kind("launch", "cudaLaunchKernel");
    zoo::Kind& warm_sync = setup.kind("sync", "cudaStreamSynchronize");
    // warm-up: the first launch loads the module (lazy loading); not part of the loop
    TIMED(warm, zoo::launch_spin(kernel_ns, d_done, st));
    TIMED(warm_sync, cudaStreamSynchronize(st));
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "one warm-up zoo_spin and its sync"));

    zoo::Kind& launch = loop.kind("launch", "cudaLaunchKernel", true, size_t(max_launches));
    zoo::Kind& rec = loop.kind("event_record", "cudaEventRecord");
    zoo::Kind& sync = loop.kind("sync", "cudaStreamSynchronize");
    zoo::Spin spin;  // no host work: the launches alone

    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    TIMED(rec, cudaEventRecord(ev0, st));
    long launches = 0, first_slow = -1, run = 0;  // run: slow launches in a row
    int64_t first_slow_ns = -1;
    while (launches < max_launches && launch.slow_n < blocked_target) {
        TIMED(launch, zoo::launch_spin(kernel_ns, d_done, st));
        run = launch.each.back() >= zoo::kSlowCallNs ? run + 1 : 0;
        if (first_slow < 0 && run == 8) {
            first_slow = launches - 7;
            first_slow_ns = zoo::now_ns();
        }
        ++launches;
    }
    int64_t launched_ns = zoo::now_ns();
    TIMED(rec, cudaEventRecord(ev1, st));
    TIMED(sync, cudaStreamSynchronize(st));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", launches));
    rep.phase("launching", l0, launched_ns, zoo::Obj().i("launches", launches));
    if (first_slow >= 0) rep.phase("queue_full", first_slow_ns, launched_ns, zoo::Obj().i("at_frame", first_slow));
    rep.phase("drain", launched_ns, l1, zoo::Obj().s("call", "cudaStreamSynchronize"));

    float gpu_ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&gpu_ms, ev0, ev1));
    unsigned done = 0;
    CUDA_CHECK(cudaMemcpy(&done, d_done, sizeof(unsigned), cudaMemcpyDeviceToHost));
    if (done != unsigned(launches + 1)) ZOO_FAIL("%u zoo_spin runs counted, %ld launched", done, launches + 1);
    const bool filled = launch.slow_n >= blocked_target;
    if (!filled)
        std::fprintf(stderr, "queue_fill: only %lld of %ld launches took %lld µs or more: the queue did not fill "
                     "(raise --max-launches or --kernel-us)\n", (long long)launch.slow_n, launches,
                     (long long)(zoo::kSlowCallNs / 1000));
    CUDA_CHECK(cudaEventDestroy(ev0));
    CUDA_CHECK(cudaEventDestroy(ev1));
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(d_done));

    rep.top.raw("frame", "null");  // no frames of pixels: a frame is one launch
    rep.top.i("frames", launches).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_spin", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_spin", launches + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_spin", 1).str());
    rep.top.i("h2d_bytes_per_frame", 0).i("d2h_bytes_per_frame", 0).i("memsets_per_frame", 0);
    rep.top.d("host_spin_us_per_frame", 0.0);
    rep.top.raw("copies", zoo::Obj().i("h2d", 0).i("d2h", 1).i("memset", 1).str());
    rep.top.i("stream_syncs", 2);
    rep.top.d("kernel_us", kernel_us).i("slow_call_ns", zoo::kSlowCallNs);
    rep.top.i("blocked_target", blocked_target).i("max_launches", max_launches);
    rep.top.b("queue_filled", filled).i("queue_depth_seen", first_slow);
    rep.top.raw("setup_calls", setup.json());
    rep.top.raw("calls", loop.json());
    rep.top.raw("spin", spin.json().str());
    rep.top.raw("budget", zoo::loop_budget(l0, l1, loop, spin).str());
    rep.top.raw("gpu", zoo::Obj().d("events_ms", gpu_ms).d("us_per_kernel", launches ? gpu_ms * 1000.0 / launches : 0.0)
                           .s("between", "cudaEventRecord before the first and after the last loop launch").str());
    rep.top.s("binds", "kernel");
    rep.top.s("expect", "launches into a full queue block (blocked_launch, queue_full); the kernel binds");
    rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str()})).str());
    rep.top.b("checked", true);
    rep.finish(launches, loop_s, -1);
    return 0;
}
