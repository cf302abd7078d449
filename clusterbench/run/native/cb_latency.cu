// cb_latency: the GPU's latency between dependent work on one stream, and the round trip at a
// synchronize, measured by clusterbench's own program (docs/probe.md, "The untraced frame").
//
//   cb_latency --out FILE [--seq OPS] [--reps N] [--batches B] [--sched auto|spin|yield|blocking]
//              [--round-trips R]
//
// OPS is the frame's work on one stream, in order, comma-separated: memset:BYTES, h2d:BYTES, d2h:BYTES
// (pinned host memory), kernel:US (a one-block kernel that runs US µs on the GPU's global timer) and
// event (cudaEventRecord). Default: memset:4,h2d:320000,event,kernel:1,event,d2h:120000.
//
// What it measures (every figure on this process's own clocks; run it untraced and under a profiler to
// see what the profiler adds):
//   chains    for each distinct op of OPS, and for OPS as a whole: a gate kernel holds the stream while
//             the host queues N copies of it back to back (each depends on the one before by stream
//             order), then lets go; cudaEvents before and after give the GPU's time per op (or per OPS),
//             its duration plus the latency between dependent work. A kernel op also stamps its own start
//             and end (%globaltimer), so that the gap between one kernel's end and the next one's start is
//             read exactly.
//   round_trip  R times: launch a stamping kernel, cudaStreamSynchronize. The gap between one kernel's end
//             and the next one's start (GPU clock) is the round trip: the host waking from the synchronize,
//             its own code, and the next launch reaching the GPU. The GPU clock is set against the host's
//             (CLOCK_MONOTONIC) by kernels that write %globaltimer into mapped host memory, which the host
//             polls (the smallest difference over many tries: the offset plus the write's flight time),
//             which splits the round trip into the wake, the host's part and the launch.
//   sync_loop R frames of OPS each followed by cudaStreamSynchronize, timed on the host: the frame time
//             of a one-stream loop that synchronizes every frame and does nothing else.
//   idle_sync R times cudaStreamSynchronize on the stream once its work has ended (a synchronize that
//             has nothing to wait for), timed on the host: a synchronize's own cost, the host's part of
//             every synchronize, which a loop that waits for nothing still pays.
//   The schedule flag (--sched, cudaSetDeviceFlags before the context exists) says how a synchronize waits.
//
// Writes one JSON (schema clusterbench.latency-report, version 2: version 1 had no idle_sync);
// clusterbench/run/latency.py reads it.
// Exit status: 0 done; 1 a CUDA error (the message names it); 2 bad arguments.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <time.h>
#include <vector>

namespace {

int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

#define CK(call)                                                                                          \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            std::fprintf(stderr, "cb_latency: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::exit(1);                                                                                 \
        }                                                                                                 \
    } while (0)

__device__ __forceinline__ unsigned long long gtimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// holds the stream until the host writes `expect` into *flag (mapped host memory), or timeout_ns passed
__global__ void cbl_gate(volatile unsigned* flag, unsigned expect, long long timeout_ns, unsigned* timed_out) {
    const unsigned long long t0 = gtimer();
    while (*flag != expect) {
        if ((long long)(gtimer() - t0) > timeout_ns) {
            *timed_out = 1u;
            return;
        }
    }
}

// runs ns nanoseconds, stamping its start and end into stamps[2*slot], stamps[2*slot+1] (slot < 0: none)
__global__ void cbl_spin(long long ns, unsigned long long* stamps, int slot) {
    const unsigned long long t0 = gtimer();
    unsigned long long t = t0;
    while ((long long)(t - t0) < ns) t = gtimer();
    if (slot >= 0) {
        stamps[2 * slot] = t0;
        stamps[2 * slot + 1] = gtimer();
    }
}

// writes the GPU clock into mapped host memory, then a sequence number after it (the host polls that)
__global__ void cbl_clock(volatile unsigned long long* host_out, unsigned seq) {
    unsigned long long t = gtimer();
    host_out[0] = t;
    __threadfence_system();
    host_out[1] = seq;
    __threadfence_system();
}

// the smallest step of %globaltimer seen in a tight loop
__global__ void cbl_timer_step(unsigned long long* out) {
    unsigned long long prev = gtimer(), best = ~0ULL;
    int changes = 0;
    while (changes < 64) {
        unsigned long long t = gtimer();
        if (t != prev) {
            if (t - prev < best) best = t - prev;
            prev = t;
            ++changes;
        }
    }
    *out = best;
}

struct Op {
    std::string kind;  // memset, h2d, d2h, kernel, event
    long long bytes = 0;
    double us = 0;
    std::string text() const {
        if (kind == "kernel") {
            char b[64];
            std::snprintf(b, sizeof(b), "kernel:%g", us);
            return b;
        }
        if (kind == "event") return kind;
        return kind + ":" + std::to_string(bytes);
    }
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr, "cb_latency: %s\nusage: cb_latency --out FILE [--seq OPS] [--reps N] [--batches B] "
                         "[--sched auto|spin|yield|blocking] [--round-trips R]\n", why);
    std::exit(2);
}

std::vector<Op> parse_seq(const std::string& s) {
    std::vector<Op> ops;
    size_t p = 0;
    while (p < s.size()) {
        size_t q = s.find(',', p);
        if (q == std::string::npos) q = s.size();
        std::string item = s.substr(p, q - p);
        p = q + 1;
        if (item.empty()) continue;
        Op op;
        size_t c = item.find(':');
        op.kind = item.substr(0, c);
        std::string v = c == std::string::npos ? "" : item.substr(c + 1);
        char* end = nullptr;
        if (op.kind == "memset" || op.kind == "h2d" || op.kind == "d2h") {
            op.bytes = std::strtoll(v.c_str(), &end, 10);
            if (v.empty() || *end || op.bytes < 1 || op.bytes > (1LL << 30)) usage(("bad op: " + item).c_str());
        } else if (op.kind == "kernel") {
            op.us = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || op.us < 0 || op.us > 1e5) usage(("bad op: " + item).c_str());
        } else if (op.kind != "event" || !v.empty()) {
            usage(("unknown op: " + item + " (memset:BYTES, h2d:BYTES, d2h:BYTES, kernel:US, event)").c_str());
        }
        ops.push_back(op);
    }
    if (ops.empty()) usage("--seq names no op");
    return ops;
}

struct Bench {
    cudaStream_t st{};
    void* dev_a = nullptr;
    void* dev_b = nullptr;
    void* host_in = nullptr;
    void* host_out = nullptr;
    unsigned* flag_h = nullptr;
    unsigned* flag_d = nullptr;
    unsigned* timed_out = nullptr;
    unsigned long long* stamps = nullptr;
    int max_stamps = 0;
    std::vector<cudaEvent_t> events;
    size_t next_event = 0;
    unsigned gate_seq = 0;

    void issue(const Op& op, int slot) {
        if (op.kind == "memset") CK(cudaMemsetAsync(dev_a, 0, size_t(op.bytes), st));
        else if (op.kind == "h2d") CK(cudaMemcpyAsync(dev_a, host_in, size_t(op.bytes), cudaMemcpyHostToDevice, st));
        else if (op.kind == "d2h") CK(cudaMemcpyAsync(host_out, dev_b, size_t(op.bytes), cudaMemcpyDeviceToHost, st));
        else if (op.kind == "kernel") {
            cbl_spin<<<1, 32, 0, st>>>((long long)(op.us * 1000.0), stamps, slot < max_stamps ? slot : -1);
            CK(cudaGetLastError());
        } else {
            CK(cudaEventRecord(events[next_event % events.size()], st));
            ++next_event;
        }
    }

    // N copies of ops behind a gate: GPU ns per copy (events), and kernel gaps (end -> next start) when the
    // ops hold one kernel; false when the gate let go before the host had queued them all
    bool chain(const std::vector<Op>& ops, int n, double* ns_per, std::vector<long long>* gaps) {
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        *timed_out = 0;
        const unsigned expect = ++gate_seq;
        cbl_gate<<<1, 1, 0, st>>>(flag_d, expect, 2000000000LL, timed_out);
        CK(cudaGetLastError());
        CK(cudaEventRecord(a, st));
        int kernels = 0;
        for (const Op& o : ops) kernels += o.kind == "kernel";
        for (int i = 0; i < n; ++i)
            for (const Op& o : ops) issue(o, kernels == 1 ? i : -1);
        CK(cudaEventRecord(b, st));
        __atomic_store_n(flag_h, expect, __ATOMIC_SEQ_CST);
        CK(cudaStreamSynchronize(st));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        CK(cudaEventDestroy(a));
        CK(cudaEventDestroy(b));
        *ns_per = double(ms) * 1e6 / n;
        if (gaps && kernels == 1) {
            std::vector<unsigned long long> h(size_t(2 * std::min(n, max_stamps)));
            CK(cudaMemcpy(h.data(), stamps, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
            const size_t m = h.size() / 2;
            for (size_t i = 1; i < m; ++i) gaps->push_back((long long)(h[2 * i] - h[2 * i - 1]));
        }
        return *timed_out == 0;
    }
};

std::string jnums(const std::vector<long long>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
}
std::string jdoubles(const std::vector<double>& v) {
    std::string s = "[";
    char b[48];
    for (size_t i = 0; i < v.size(); ++i) {
        std::snprintf(b, sizeof(b), "%s%.3f", i ? "," : "", v[i]);
        s += b;
    }
    return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
    std::string out, seq_text = "memset:4,h2d:320000,event,kernel:1,event,d2h:120000", sched = "auto";
    int reps = 100, batches = 7, round_trips = 300;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto val = [&](const char* name) -> std::string {
            if (i + 1 >= argc) usage((std::string(name) + " needs a value").c_str());
            return argv[++i];
        };
        auto num = [&](const char* name, int lo, int hi) {
            std::string v = val(name);
            char* end = nullptr;
            long x = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || x < lo || x > hi) usage((std::string(name) + " wants an integer in [" +
                                                              std::to_string(lo) + ", " + std::to_string(hi) + "]").c_str());
            return int(x);
        };
        if (a == "--out") out = val("--out");
        else if (a == "--seq") seq_text = val("--seq");
        else if (a == "--reps") reps = num("--reps", 2, 256);
        else if (a == "--batches") batches = num("--batches", 1, 100);
        else if (a == "--round-trips") round_trips = num("--round-trips", 2, 100000);
        else if (a == "--sched") sched = val("--sched");
        else if (a == "-h" || a == "--help") {
            std::printf("usage: cb_latency --out FILE [--seq OPS] [--reps N] [--batches B] "
                        "[--sched auto|spin|yield|blocking] [--round-trips R]\n");
            return 0;
        } else usage(("unknown argument: " + a).c_str());
    }
    if (out.empty()) usage("--out FILE is required");
    const std::vector<Op> seq = parse_seq(seq_text);
    unsigned flags = 0;
    if (sched == "auto") flags = cudaDeviceScheduleAuto;
    else if (sched == "spin") flags = cudaDeviceScheduleSpin;
    else if (sched == "yield") flags = cudaDeviceScheduleYield;
    else if (sched == "blocking") flags = cudaDeviceScheduleBlockingSync;
    else usage("--sched must be auto, spin, yield or blocking");
    const int64_t t_start = now_ns();
    CK(cudaSetDeviceFlags(flags | cudaDeviceMapHost));
    CK(cudaFree(nullptr));
    cudaDeviceProp prop;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));

    Bench b;
    long long max_bytes = 4;
    for (const Op& o : seq) max_bytes = std::max(max_bytes, o.bytes);
    CK(cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking));
    CK(cudaMalloc(&b.dev_a, size_t(max_bytes)));
    CK(cudaMalloc(&b.dev_b, size_t(max_bytes)));
    CK(cudaMemset(b.dev_b, 0, size_t(max_bytes)));
    CK(cudaMallocHost(&b.host_in, size_t(max_bytes)));
    CK(cudaMallocHost(&b.host_out, size_t(max_bytes)));
    std::memset(b.host_in, 1, size_t(max_bytes));
    CK(cudaHostAlloc(reinterpret_cast<void**>(&b.flag_h), sizeof(unsigned), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&b.flag_d), b.flag_h, 0));
    *b.flag_h = 0;
    CK(cudaMallocManaged(reinterpret_cast<void**>(&b.timed_out), sizeof(unsigned)));
    b.max_stamps = std::max(256, round_trips + 1);
    CK(cudaMalloc(reinterpret_cast<void**>(&b.stamps), size_t(2 * b.max_stamps) * sizeof(unsigned long long)));
    b.events.resize(64);
    for (auto& e : b.events) CK(cudaEventCreate(&e));

    // warm up: every op once, the gate, the kernels
    for (const Op& o : seq) b.issue(o, -1);
    double ignore = 0;
    b.chain(seq, 2, &ignore, nullptr);
    CK(cudaStreamSynchronize(b.st));

    unsigned long long* step_d = nullptr;
    unsigned long long step = 0;
    CK(cudaMalloc(reinterpret_cast<void**>(&step_d), sizeof(unsigned long long)));
    cbl_timer_step<<<1, 1, 0, b.st>>>(step_d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&step, step_d, sizeof(step), cudaMemcpyDeviceToHost));

    // ---- chains: each distinct op, then the sequence
    std::vector<Op> distinct;
    for (const Op& o : seq) {
        bool seen = false;
        for (const Op& d : distinct) seen = seen || d.text() == o.text();
        if (!seen) distinct.push_back(o);
    }
    const int n_seq = std::max(2, std::min(reps, 512 / int(seq.size())));
    std::string chains = "[";
    for (size_t k = 0; k <= distinct.size(); ++k) {
        const bool whole = k == distinct.size();
        std::vector<Op> ops = whole ? seq : std::vector<Op>{distinct[k]};
        const int n = whole ? n_seq : reps;
        std::vector<double> per;
        std::vector<long long> gaps;
        int gate_timeouts = 0;
        for (int r = 0; r < batches; ++r) {
            double ns = 0;
            if (b.chain(ops, n, &ns, &gaps)) per.push_back(ns);
            else ++gate_timeouts;
        }
        std::string ops_text;
        for (size_t i = 0; i < ops.size(); ++i) ops_text += (i ? "," : "") + ops[i].text();
        char head[256];
        std::snprintf(head, sizeof(head), "%s{\"ops\":\"%s\",\"whole\":%s,\"n\":%d,\"gate_timeouts\":%d,", k ? "," : "",
                      ops_text.c_str(), whole ? "true" : "false", n, gate_timeouts);
        chains += head;
        chains += "\"ns_per\":" + jdoubles(per) + ",\"kernel_gap_ns\":" + jnums(gaps) + "}";
    }
    chains += "]";

    // ---- the GPU clock against the host's
    unsigned long long* clk_h = nullptr;
    unsigned long long* clk_d = nullptr;
    CK(cudaHostAlloc(reinterpret_cast<void**>(&clk_h), 2 * sizeof(unsigned long long), cudaHostAllocMapped));
    CK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&clk_d), clk_h, 0));
    long long offset = (1LL << 62);
    const int tries = std::max(50, std::min(round_trips, 400));
    for (int i = 0; i < tries; ++i) {
        volatile unsigned long long* v = clk_h;
        v[1] = 0;
        const unsigned s = unsigned(i + 1);
        cbl_clock<<<1, 1, 0, b.st>>>(clk_d, s);
        CK(cudaGetLastError());
        while (v[1] != s) {
        }
        const int64_t seen = now_ns();
        const long long off = (long long)seen - (long long)v[0];
        if (off < offset) offset = off;
        CK(cudaStreamSynchronize(b.st));
    }

    // ---- the round trip at a synchronize
    std::vector<int64_t> t_launch(static_cast<size_t>(round_trips)), t_ret(static_cast<size_t>(round_trips));
    for (int i = 0; i < round_trips; ++i) {
        t_launch[size_t(i)] = now_ns();
        cbl_spin<<<1, 32, 0, b.st>>>(0, b.stamps, i);
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(b.st));
        t_ret[size_t(i)] = now_ns();
    }
    std::vector<unsigned long long> st(size_t(2 * round_trips));
    CK(cudaMemcpy(st.data(), b.stamps, st.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    std::vector<long long> gap, wake, host, launch, sync_call;
    for (int i = 1; i < round_trips; ++i) {
        const long long end_prev = (long long)st[size_t(2 * i - 1)];
        const long long start = (long long)st[size_t(2 * i)];
        gap.push_back(start - end_prev);
        wake.push_back((long long)t_ret[size_t(i - 1)] - (end_prev + offset));
        host.push_back((long long)(t_launch[size_t(i)] - t_ret[size_t(i - 1)]));
        launch.push_back((start + offset) - (long long)t_launch[size_t(i)]);
    }
    for (int i = 0; i < round_trips; ++i) sync_call.push_back((long long)(t_ret[size_t(i)] - t_launch[size_t(i)]));

    // ---- a loop of the sequence that synchronizes every frame
    std::vector<long long> frame;
    int64_t prev = now_ns();
    for (int i = 0; i < round_trips; ++i) {
        for (const Op& o : seq) b.issue(o, -1);
        CK(cudaStreamSynchronize(b.st));
        const int64_t t = now_ns();
        frame.push_back((long long)(t - prev));
        prev = t;
    }

    // ---- a synchronize with nothing to wait for: the stream's work has ended (checked by a query
    // first), so each call is the synchronize's own cost
    CK(cudaStreamSynchronize(b.st));
    while (cudaStreamQuery(b.st) != cudaSuccess) {
    }
    std::vector<long long> idle_sync;
    for (int i = 0; i < round_trips; ++i) {
        const int64_t t0 = now_ns();
        CK(cudaStreamSynchronize(b.st));
        idle_sync.push_back((long long)(now_ns() - t0));
    }

    FILE* f = std::fopen((out + ".tmp").c_str(), "w");
    if (!f) {
        std::fprintf(stderr, "cb_latency: cannot write %s\n", out.c_str());
        return 1;
    }
    int rt = 0, drv = 0;
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaDriverGetVersion(&drv));
    unsigned got_flags = 0;
    CK(cudaGetDeviceFlags(&got_flags));
    std::fprintf(f, "{\"schema\":\"clusterbench.latency-report\",\"version\":2,\"device\":\"%s\",\"sm\":%d,"
                    "\"cuda_runtime\":%d,\"cuda_driver\":%d,\"sched\":\"%s\",\"device_flags\":%u,\"seq\":\"%s\","
                    "\"reps\":%d,\"batches\":%d,\"round_trips\":%d,\"globaltimer_step_ns\":%llu,"
                    "\"clock_offset_ns\":%lld,\"clock_tries\":%d,\"chains\":%s,",
                 prop.name, prop.major * 10 + prop.minor, rt, drv, sched.c_str(), got_flags, seq_text.c_str(), reps,
                 batches, round_trips, step, offset, tries, chains.c_str());
    std::fprintf(f, "\"round_trip\":{\"gap_ns\":%s,\"wake_ns\":%s,\"host_ns\":%s,\"launch_ns\":%s,\"sync_call_ns\":%s},",
                 jnums(gap).c_str(), jnums(wake).c_str(), jnums(host).c_str(), jnums(launch).c_str(),
                 jnums(sync_call).c_str());
    std::fprintf(f, "\"sync_loop\":{\"frame_ns\":%s},\"idle_sync\":{\"call_ns\":%s},\"wall_s\":%.3f}\n",
                 jnums(frame).c_str(), jnums(idle_sync).c_str(), double(now_ns() - t_start) / 1e9);
    std::fclose(f);
    std::rename((out + ".tmp").c_str(), out.c_str());
    return 0;
}
