// device_graph: a self-relaunching, device-launched CUDA graph, as the LCLS-II GPU DAQ runs its
// per-event work: the host launches the graph once and the GPU keeps relaunching it until a
// device-side event counter reaches --events.
//
// The graph (stream capture of two kernels, so two kernel nodes in a chain) does one event:
//   zoo_calib   reads the event counter e and calibrates frame e % ring of a device-resident ring
//               of --ring (4) frames (uploaded once in set-up) into a float buffer;
//   zoo_reduce  counts the pixels above threshold into counts[e]; the last of its blocks to finish
//               (a ticket counter) advances the event counter to e+1 and, while e+1 < events,
//               relaunches the graph it runs in:
//                   cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch)
//               A failed device-side launch (its cudaError_t) lands in a flag the host reads back.
// Device launch (default): cudaGraphInstantiate(..., cudaGraphInstantiateFlagDeviceLaunch),
// cudaGraphUpload, one host cudaGraphLaunch, cudaStreamSynchronize (a host-launched device graph's
// stream completes only when its tail launches have run).
// --host-launch: the same two-kernel graph instantiated normally (no relaunch code in its
// zoo_reduce) and launched E times from the host with cudaGraphLaunch, then one
// cudaStreamSynchronize.
// Facts (CUDA programming guide, "Device Graph Launch"): a graph may have only one pending
// self tail launch; a tail launch runs once the whole launching graph (all its nodes) has finished,
// so it need not be issued by the last node (here it is, by one thread of its last block).
// Device-side cudaGraphLaunch belongs to the device runtime: compile with -rdc=true and link
// -lcudadevrt.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo -rdc=true device_graph.cu -lcudadevrt   (tests/zoo/build.sh)
#define ZOO_NO_COMMON_KERNELS
#include "zoo.cuh"

struct Ctl {
    unsigned event;         // the next event to process; E at the end
    unsigned ticket;        // blocks of zoo_reduce done for the current event
    unsigned dev_launches;  // successful device-side relaunches
    int launch_err;         // first failed device-side cudaGraphLaunch (cudaError_t), -1: no current graph
};

__global__ void zoo_calib(const uint16_t* __restrict__ ring, int ring_slots, float* __restrict__ out, int npix,
                          float pedestal, float threshold, const Ctl* ctl) {
    const unsigned e = *(volatile const unsigned*)&ctl->event;
    const uint16_t* in = ring + size_t(e % unsigned(ring_slots)) * size_t(npix);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < npix; i += gridDim.x * blockDim.x) {
        float v = float(in[i]) - pedestal;
        out[i] = v > threshold ? v : 0.0f;
    }
}

template <bool kDeviceRelaunch>
__global__ void zoo_reduce(const float* __restrict__ calib, int npix, unsigned* __restrict__ counts, Ctl* ctl,
                           unsigned events) {
    __shared__ unsigned s_event;
    if (threadIdx.x == 0) s_event = *(volatile unsigned*)&ctl->event;
    __syncthreads();
    const unsigned e = s_event;
    unsigned c = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < npix; i += gridDim.x * blockDim.x)
        c += calib[i] > 0.0f ? 1u : 0u;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c != 0) atomicAdd(&counts[e], c);
    __syncthreads();
    if (threadIdx.x != 0) return;
    __threadfence();
    if (atomicAdd(&ctl->ticket, 1u) != gridDim.x - 1) return;
    // the last block of this event: every block has read the counter and added its count
    ctl->ticket = 0;
    *(volatile unsigned*)&ctl->event = e + 1;
    __threadfence();
    if constexpr (kDeviceRelaunch) {
        if (e + 1 < events) {
            cudaGraphExec_t self = cudaGetCurrentGraphExec();
            if (self == nullptr) {
                atomicCAS(&ctl->launch_err, 0, -1);
                return;
            }
            cudaError_t err = cudaGraphLaunch(self, cudaStreamGraphTailLaunch);
            if (err != cudaSuccess)
                atomicCAS(&ctl->launch_err, 0, int(err));
            else
                atomicAdd(&ctl->dev_launches, 1u);
        }
    }
}

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--events E] [--ring R] [--host-launch]");
    const long events = args.get("--events", 5000, 1, 100000000);
    const long ring = args.get("--ring", 4, 1, 64);
    const bool host_launch = args.flag("--host-launch");
    args.finish();
    zoo::Report rep("device_graph", args);

    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));
    rep.device_info();
    const int n = zoo::kNpix;
    uint16_t* h_ring = zoo::pinned_ring(int(ring), n);
    uint16_t* d_ring = nullptr;
    float* d_out = nullptr;
    unsigned* d_counts = nullptr;
    Ctl* d_ctl = nullptr;
    CUDA_CHECK(cudaMalloc(&d_ring, size_t(ring) * zoo::kFrameBytes));
    CUDA_CHECK(cudaMalloc(&d_out, size_t(n) * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&d_counts, size_t(events) * sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&d_ctl, sizeof(Ctl)));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMemcpyAsync(d_ring, h_ring, size_t(ring) * zoo::kFrameBytes, cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemsetAsync(d_counts, 0, size_t(events) * sizeof(unsigned), st));
    CUDA_CHECK(cudaMemsetAsync(d_ctl, 0, sizeof(Ctl), st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    rep.phase("setup", t0, zoo::now_ns(), zoo::Obj().i("ring_frames", ring));

    // the per-event graph: two kernel nodes captured from the stream
    const unsigned grid = zoo::grid_for(n);
    int64_t g0 = zoo::now_ns();
    cudaGraph_t graph;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    zoo_calib<<<grid, zoo::kBlock, 0, st>>>(d_ring, int(ring), d_out, n, zoo::kPedestal, zoo::kThreshold, d_ctl);
    LAUNCH_CHECK();
    if (host_launch)
        zoo_reduce<false><<<grid, zoo::kBlock, 0, st>>>(d_out, n, d_counts, d_ctl, unsigned(events));
    else
        zoo_reduce<true><<<grid, zoo::kBlock, 0, st>>>(d_out, n, d_counts, d_ctl, unsigned(events));
    LAUNCH_CHECK();
    CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    int64_t g1 = zoo::now_ns();
    rep.phase("capture", g0, g1, zoo::Obj().i("nodes", int64_t(nodes)));
    cudaGraphExec_t exec;
    const unsigned long long flags = host_launch ? 0ull : (unsigned long long)cudaGraphInstantiateFlagDeviceLaunch;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, flags));
    int64_t g2 = zoo::now_ns();
    rep.phase("instantiate", g1, g2, zoo::Obj().i("flags", int64_t(flags)));
    CUDA_CHECK(cudaGraphUpload(exec, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    int64_t g3 = zoo::now_ns();
    rep.phase("upload", g2, g3);

    // the steady loop: the launch(es) and the one synchronization
    int64_t l0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    long host_launches = 0;
    if (host_launch) {
        for (long e = 0; e < events; ++e) {
            CUDA_CHECK(cudaGraphLaunch(exec, st));
            ++host_launches;
        }
    } else {
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        ++host_launches;
    }
    int64_t l1 = zoo::now_ns();
    CUDA_CHECK(cudaStreamSynchronize(st));
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t l2 = zoo::now_ns();
    rep.phase("host_launch", l0, l1, zoo::Obj().i("graph_launches", host_launches));
    rep.phase("loop", l0, l2, zoo::Obj().i("events", events));
    CUDA_CHECK(cudaGetLastError());

    Ctl ctl;
    std::vector<unsigned> counts(static_cast<size_t>(events));
    int64_t r0 = zoo::now_ns();
    CUDA_CHECK(cudaMemcpy(&ctl, d_ctl, sizeof(Ctl), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(counts.data(), d_counts, size_t(events) * sizeof(unsigned), cudaMemcpyDeviceToHost));
    rep.phase("readback", r0, zoo::now_ns());
    const long want_dev = host_launch ? 0 : events - 1;
    if (ctl.launch_err != 0)
        ZOO_FAIL("device-side cudaGraphLaunch failed: %d (%s) after %u events", ctl.launch_err,
                 ctl.launch_err > 0 ? cudaGetErrorName(cudaError_t(ctl.launch_err)) : "no current graph exec",
                 ctl.event);
    if (long(ctl.event) != events)
        ZOO_FAIL("device event counter is %u, expected %ld (device relaunches %u)", ctl.event, events, ctl.dev_launches);
    if (long(ctl.dev_launches) != want_dev)
        ZOO_FAIL("device relaunches %u, expected %ld", ctl.dev_launches, want_dev);
    std::vector<unsigned> want(static_cast<size_t>(ring));
    for (long s = 0; s < ring; ++s) want[size_t(s)] = zoo::expected_count(n, int(s));
    for (long e = 0; e < events; ++e)
        if (counts[size_t(e)] != want[size_t(e % ring)])
            ZOO_FAIL("event %ld: count %u, expected %u", e, counts[size_t(e)], want[size_t(e % ring)]);

    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(st));
    CUDA_CHECK(cudaFree(d_ring));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFree(d_counts));
    CUDA_CHECK(cudaFree(d_ctl));
    CUDA_CHECK(cudaFreeHost(h_ring));

    rep.frame_info(n);
    rep.top.s("variant", host_launch ? "host_launch" : "device_launch");
    rep.top.i("frames", events).i("events", events).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib", 1}, {"zoo_reduce", 1}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib", events).i("zoo_reduce", events).str());
    rep.top.s("launches_note", "kernel executions, all as graph nodes; no kernel is launched outside the graph");
    rep.top.i("h2d_bytes_per_frame", 0).i("d2h_bytes_per_frame", 0);
    rep.top.i("memsets_per_frame", 0).d("host_spin_us_per_frame", 0.0);
    rep.top.raw("copies", zoo::Obj()
                              .i("h2d", 1)
                              .i("h2d_bytes", int64_t(ring) * int64_t(zoo::kFrameBytes))
                              .i("d2h", 2)
                              .i("d2h_bytes", int64_t(sizeof(Ctl)) + int64_t(events) * 4)
                              .i("memset", 2)
                              .s("when", "set-up (h2d, memsets) and read-back after the loop (d2h)")
                              .str());
    rep.top.raw("graph", zoo::Obj()
                             .s("launch", host_launch ? "host" : "device")
                             .s("built_by", "stream capture")
                             .i("nodes", int64_t(nodes))
                             .raw("node_kernels", zoo::jarr({zoo::jstr("zoo_calib"), zoo::jstr("zoo_reduce")}))
                             .s("instantiate_flags", host_launch ? "0" : "cudaGraphInstantiateFlagDeviceLaunch")
                             .b("uploaded", true)
                             .i("executions", events)
                             .i("host_graph_launches", host_launches)
                             .i("device_graph_launches", long(ctl.dev_launches))
                             .s("relaunch", host_launch ? "none" : "cudaGraphLaunch(cudaGetCurrentGraphExec(), cudaStreamGraphTailLaunch) from zoo_reduce, last block, thread 0")
                             .i("device_event_counter", long(ctl.event))
                             .i("device_launch_error", ctl.launch_err)
                             .str());
    rep.top.i("stream_syncs", 3);
    rep.top.raw("nvtx", "null");
    rep.top.b("checked", true);
    rep.finish(events, loop_s, -1);
    return 0;
}
