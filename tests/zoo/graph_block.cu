// graph_block: a CUDA graph whose launch blocks the host. The graph (built node by node, as
// NVIDIA's simpleCudaGraphs builds its first one): an H2D memcpy node of a --mib (4 MiB) frame, a
// memset node zeroing a 4-byte count, zoo_calib, zoo_reduce (counts the pixels above threshold),
// and a D2H memcpy node of the count. Instantiated once, uploaded, launched --frames (200) times on
// one stream after --spin-us (20 µs) of host work each; one cudaStreamSynchronize at the end.
// --pageable says which host buffer is pageable (malloc'd) memory:
//   h2d  (default) the frame the H2D node reads: the driver stages it through pinned buffers inside
//        cudaGraphLaunch, which returns only when the copy has run (after the previous launch's work)
//   d2h  the count the D2H node writes (the shape of simpleCudaGraphs: a pinned input, a result in a
//        host variable)
//   none every host buffer pinned: the launch returns at once (the control)
// Every cudaGraphLaunch is timed (steady_clock, each_ns in order), so that a test takes what it saw.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo graph_block.cu   (tests/zoo/build.sh)
#include "zoo.cuh"
#include "calls.cuh"

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--mib M] [--spin-us U] [--pageable h2d|d2h|none]");
    const long frames = args.get("--frames", 200, 1);
    const long mib = args.get("--mib", 4, 1, 1024);
    const double spin_us = args.getd("--spin-us", 20.0, 0.0, 1e6);
    const char* pv = args.value("--pageable");
    args.finish();
    const std::string pageable = pv ? pv : "h2d";
    if (pageable != "h2d" && pageable != "d2h" && pageable != "none") {
        std::fprintf(stderr, "%s: --pageable wants h2d, d2h or none, got '%s'\n", argv[0], pageable.c_str());
        return 2;
    }
    const int n = int(mib * (1 << 20) / 2);
    const size_t bytes = size_t(n) * sizeof(uint16_t);
    zoo::Report rep("graph_block", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    uint16_t* h_in = nullptr;
    if (pageable == "h2d") {
        h_in = static_cast<uint16_t*>(std::malloc(bytes));
        if (!h_in) ZOO_FAIL("malloc of %zu bytes failed", bytes);
    } else {
        CUDA_CHECK(cudaMallocHost(&h_in, bytes));
    }
    zoo::fill_frame(h_in, n, 0);
    unsigned* h_count = nullptr;
    if (pageable == "d2h") {
        h_count = static_cast<unsigned*>(std::malloc(sizeof(unsigned)));
        if (!h_count) ZOO_FAIL("malloc failed");
    } else {
        CUDA_CHECK(cudaMallocHost(&h_count, sizeof(unsigned)));
    }
    *h_count = 0;
    uint16_t* d_in = nullptr;
    float* d_out = nullptr;
    unsigned* d_count = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, bytes));
    CUDA_CHECK(cudaMalloc(&d_out, size_t(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_count, sizeof(unsigned)));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    // the graph, node by node
    int64_t g0 = zoo::now_ns();
    cudaGraph_t graph;
    CUDA_CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphNode_t n_h2d, n_memset, n_calib, n_reduce, n_d2h;
    CUDA_CHECK(cudaGraphAddMemcpyNode1D(&n_h2d, graph, nullptr, 0, d_in, h_in, bytes, cudaMemcpyHostToDevice));
    cudaMemsetParams ms = {};
    ms.dst = d_count;
    ms.value = 0;
    ms.elementSize = sizeof(unsigned);
    ms.width = 1;
    ms.height = 1;
    ms.pitch = 0;
    CUDA_CHECK(cudaGraphAddMemsetNode(&n_memset, graph, nullptr, 0, &ms));
    const uint16_t* k_in = d_in;
    float* k_out = d_out;
    int k_n = n;
    float k_ped = zoo::kPedestal, k_thr = zoo::kThreshold;
    void* calib_args[] = {&k_in, &k_out, &k_n, &k_ped, &k_thr};
    cudaKernelNodeParams kp = {};
    kp.func = reinterpret_cast<void*>(zoo_calib);
    kp.gridDim = dim3(zoo::grid_for(n));
    kp.blockDim = dim3(zoo::kBlock);
    kp.sharedMemBytes = 0;
    kp.kernelParams = calib_args;
    kp.extra = nullptr;
    CUDA_CHECK(cudaGraphAddKernelNode(&n_calib, graph, &n_h2d, 1, &kp));
    const float* r_in = d_out;
    unsigned* r_count = d_count;
    void* reduce_args[] = {&r_in, &k_n, &r_count};
    kp.func = reinterpret_cast<void*>(zoo_reduce);
    kp.kernelParams = reduce_args;
    cudaGraphNode_t before_reduce[] = {n_calib, n_memset};
    CUDA_CHECK(cudaGraphAddKernelNode(&n_reduce, graph, before_reduce, 2, &kp));
    CUDA_CHECK(cudaGraphAddMemcpyNode1D(&n_d2h, graph, &n_reduce, 1, h_count, d_count, sizeof(unsigned),
                                        cudaMemcpyDeviceToHost));
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphUpload(exec, st));
    rep.phase("graph_build", g0, zoo::now_ns(), zoo::Obj().i("nodes", 5));
    zoo::Calls setup, loop;
    zoo::Kind& w_launch = setup.kind("graph_launch", "cudaGraphLaunch");
    zoo::Kind& w_sync = setup.kind("sync", "cudaStreamSynchronize");
    TIMED(w_launch, cudaGraphLaunch(exec, st));  // warm-up: loads the kernels' module
    TIMED(w_sync, cudaStreamSynchronize(st));
    const unsigned want = zoo::expected_count(n, 0);
    if (*h_count != want) ZOO_FAIL("warm-up: count %u, expected %u", *h_count, want);
    *h_count = 0;
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().s("includes", "graph build, upload, one warm-up launch"));

    zoo::Kind& glaunch = loop.kind("graph_launch", "cudaGraphLaunch", true, size_t(frames));
    zoo::Kind& sync = loop.kind("sync", "cudaStreamSynchronize");
    zoo::Spin spin;
    spin.us = spin_us;
    zoo::loop_begin();
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        spin.run();
        TIMED(glaunch, cudaGraphLaunch(exec, st));
    }
    TIMED(sync, cudaStreamSynchronize(st));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l1 = zoo::now_ns();
    zoo::loop_end();
    rep.phase("loop", l0, l1, zoo::Obj().i("frames", frames));
    if (*h_count != want) ZOO_FAIL("the last launch's count is %u, expected %u", *h_count, want);

    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_count));
    if (pageable == "h2d") std::free(h_in); else CUDA_CHECK(cudaFreeHost(h_in));
    if (pageable == "d2h") std::free(h_count); else CUDA_CHECK(cudaFreeHost(h_count));

    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}, {"zoo_reduce", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", frames + 1).i("zoo_reduce", frames + 1).str());
    rep.top.raw("warmup_launches", zoo::Obj().i("zoo_calib", 1).i("zoo_reduce", 1).str());
    rep.top.i("h2d_bytes_per_frame", int64_t(bytes)).i("d2h_bytes_per_frame", int64_t(sizeof(unsigned)));
    rep.top.i("memsets_per_frame", 1).d("host_spin_us_per_frame", spin_us);
    rep.top.raw("copies", zoo::Obj().i("h2d", frames + 1).i("d2h", frames + 1).i("memset", frames + 1).str());
    rep.top.s("pageable", pageable);
    rep.top.raw("graph", zoo::Obj().s("built", "cudaGraphAddMemcpyNode1D, cudaGraphAddMemsetNode, cudaGraphAddKernelNode")
                             .raw("nodes", zoo::jarr({zoo::jstr("h2d"), zoo::jstr("memset"), zoo::jstr("zoo_calib"),
                                                      zoo::jstr("zoo_reduce"), zoo::jstr("d2h")}))
                             .i("executions", frames + 1).i("host_graph_launches", frames + 1).str());
    rep.top.i("stream_syncs", 2).i("slow_call_ns", zoo::kSlowCallNs);
    rep.top.b("launch_blocked", glaunch.slow_n * 2 >= glaunch.n);
    rep.top.raw("setup_calls", setup.json());
    rep.top.raw("calls", loop.json());
    rep.top.raw("spin", spin.json().str());
    rep.top.raw("budget", zoo::loop_budget(l0, l1, loop, spin).str());
    rep.top.s("binds", "h2d");  // the 4 MiB copy is the longest step whichever buffer is pageable
    rep.top.s("expect", pageable == "none" ? "the launches return at once; the H2D binds"
                                           : "cudaGraphLaunch blocks until the graph's copy has run; the copy binds");
    rep.top.raw("nvtx", zoo::Obj().raw("ranges", zoo::jarr({zoo::Obj().s("text", "loop").s("api", "nvtxRangePushA").i("count", 1).str()})).str());
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(bytes));
    return 0;
}
