// nvtx_domain: a DAQ-style program that marks its phases with NVTX3 ranges in its own domain
// ("zoo_daq", nvtxDomainCreateA) using non-registered ASCII strings, and brackets its steady loop
// with cudaProfilerStart/Stop, so that nsys can trace the whole run, only the profiler-API range
// (--capture-range=cudaProfilerApi) or only the NVTX range (--capture-range=nvtx
// --nvtx-capture='event loop@zoo_daq', which needs NSYS_NVTX_PROFILER_REGISTER_ONLY=0 because
// the strings are not registered).
//
// Ranges (domain zoo_daq):
//   "setup"       push/pop   (nvtxDomainRangePushEx/Pop): context, allocations, a warm-up launch
//                            of zoo_calib, and a deliberate host sleep of --sleep-ms (50 ms)
//   "event loop"  push/pop   the steady loop, opened just after cudaProfilerStart() and closed just
//                            before cudaProfilerStop()
//   "batch"       start/end  (nvtxDomainRangeStartEx/End): one per --batch frames (100), the last
//                            one shorter when frames % batch != 0; each ends with a stream sync
// Per frame, one stream: H2D of 320,000 bytes, zoo_calib, D2H of 1,024 bytes.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo nvtx_domain.cu -ldl   (tests/zoo/build.sh)
#include "zoo.cuh"

#include <cuda_profiler_api.h>
#include <nvtx3/nvToolsExt.h>

#include <thread>

static nvtxEventAttributes_t ascii_attr(const char* text, uint32_t argb) {
    nvtxEventAttributes_t a;
    std::memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = argb;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text;
    return a;
}

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--batch B] [--sleep-ms MS]");
    const long frames = args.get("--frames", 1000, 1);
    const long batch = args.get("--batch", 100, 1);
    const long sleep_ms = args.get("--sleep-ms", 50, 0, 10000);
    args.finish();
    zoo::Report rep("nvtx_domain", args);

    const char* kDomain = "zoo_daq";
    nvtxDomainHandle_t dom = nvtxDomainCreateA(kDomain);

    // ------------------------------------------------------------ setup range
    nvtxEventAttributes_t a_setup = ascii_attr("setup", 0xFF4C8BF5u);
    int64_t s0 = zoo::now_ns();
    nvtxDomainRangePushEx(dom, &a_setup);
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int ring = 8;
    const int n = zoo::kNpix;
    uint16_t* h_in = zoo::pinned_ring(ring, n);
    float* h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_out, size_t(frames) * zoo::kPreviewBytes));
    uint16_t* d_in = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, zoo::kFrameBytes));
    CUDA_CHECK(cudaMalloc(&d_out, size_t(n) * sizeof(float)));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const unsigned grid = zoo::grid_for(n);
    // warm-up: one frame's H2D and one zoo_calib (loads the module; lazy loading is the default)
    CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, zoo::kFrameBytes, cudaMemcpyHostToDevice, stream));
    zoo_calib<<<grid, zoo::kBlock, 0, stream>>>(d_in, d_out, n, zoo::kPedestal, zoo::kThreshold);
    LAUNCH_CHECK();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    int64_t sl0 = zoo::now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    int64_t sl1 = zoo::now_ns();
    nvtxDomainRangePop(dom);
    int64_t s1 = zoo::now_ns();
    rep.phase("setup", s0, s1, zoo::Obj().s("nvtx", "setup"));
    rep.phase("sleep", sl0, sl1, zoo::Obj().i("ms", sleep_ms));
    int64_t syncs = 1;

    // ------------------------------------------------------------ profiler range + event loop
    int64_t p0 = zoo::now_ns();
    CUDA_CHECK(cudaProfilerStart());
    int64_t p0e = zoo::now_ns();
    nvtxEventAttributes_t a_loop = ascii_attr("event loop", 0xFF2CA02Cu);
    nvtxEventAttributes_t a_batch = ascii_attr("batch", 0xFFFF7F0Eu);
    int64_t l0 = zoo::now_ns();
    nvtxDomainRangePushEx(dom, &a_loop);
    auto c0 = std::chrono::steady_clock::now();
    int64_t batches = 0;
    std::vector<std::string> batch_list;
    for (long b0 = 0; b0 < frames; b0 += batch) {
        const long b1 = std::min(frames, b0 + batch);
        int64_t bt0 = zoo::now_ns();
        nvtxRangeId_t id = nvtxDomainRangeStartEx(dom, &a_batch);
        for (long f = b0; f < b1; ++f) {
            const int slot = int(f % ring);
            CUDA_CHECK(cudaMemcpyAsync(d_in, h_in + size_t(slot) * n, zoo::kFrameBytes, cudaMemcpyHostToDevice, stream));
            zoo_calib<<<grid, zoo::kBlock, 0, stream>>>(d_in, d_out, n, zoo::kPedestal, zoo::kThreshold);
            LAUNCH_CHECK();
            CUDA_CHECK(cudaMemcpyAsync(h_out + size_t(f) * zoo::kPreviewFloats, d_out, zoo::kPreviewBytes,
                                       cudaMemcpyDeviceToHost, stream));
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
        ++syncs;
        nvtxDomainRangeEnd(dom, id);
        int64_t bt1 = zoo::now_ns();
        ++batches;
        rep.phase("batch", bt0, bt1, zoo::Obj().i("at_frame", b0).i("frames", b1 - b0));
    }
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    nvtxDomainRangePop(dom);
    int64_t l1 = zoo::now_ns();
    CUDA_CHECK(cudaProfilerStop());
    int64_t p1 = zoo::now_ns();
    rep.phase("event loop", l0, l1, zoo::Obj().s("nvtx", "event loop").i("frames", frames));
    rep.phase("cudaProfilerStart", p0, p0e);
    rep.phase("profiler_range", p0, p1, zoo::Obj().s("from", "cudaProfilerStart").s("to", "cudaProfilerStop"));

    for (long f = 0; f < frames; ++f)
        if (!zoo::preview_ok(h_out + size_t(f) * zoo::kPreviewFloats, int(f % ring)))
            ZOO_FAIL("frame %ld: the D2H preview differs from the expected calibration", f);

    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(zoo::kFrameBytes)).i("d2h_bytes_per_frame", int64_t(zoo::kPreviewBytes));
    rep.top.i("memsets_per_frame", 0).d("host_spin_us_per_frame", 0.0);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames).i("memset", 0).str());
    rep.top.i("stream_syncs", syncs).i("batch", batch).i("batches", batches);
    // what a trace limited to cudaProfilerStart..Stop (or to the "event loop" range) holds
    rep.top.raw("in_profiler_range", zoo::Obj()
                                         .raw("launches", zoo::Obj().i("zoo_calib", frames).str())
                                         .i("h2d", frames)
                                         .i("d2h", frames)
                                         .i("stream_syncs", batches)
                                         .str());
    zoo::Obj setup_r, loop_r, batch_r;
    setup_r.s("name", "setup").s("api", "push_pop").i("count", 1);
    loop_r.s("name", "event loop").s("api", "push_pop").i("count", 1);
    batch_r.s("name", "batch").s("api", "start_end").i("count", batches).i("frames_per_range", batch);
    rep.top.raw("nvtx", zoo::Obj()
                            .s("domain", kDomain)
                            .s("message_type", "ascii")
                            .b("registered_strings", false)
                            .raw("ranges", zoo::jarr({setup_r.str(), loop_r.str(), batch_r.str()}))
                            .s("capture_range", "event loop@zoo_daq")
                            .str());
    rep.top.raw("profiler_api", zoo::Obj().b("start", true).b("stop", true).s("around", "event loop").str());
    rep.top.i("sleep_ms", sleep_ms);
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(zoo::kFrameBytes));
    return 0;
}
