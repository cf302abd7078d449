// cb_inject: clusterbench's CUDA injection library (CUPTI callback API only, no activity records).
//
// Loaded by the CUDA driver through CUDA_INJECTION64_PATH, which calls InitializeInjection() at cuInit.
// It subscribes to the runtime and driver API callbacks and, on every thread that makes CUDA calls:
//   - times each call's entry and exit (CLOCK_MONOTONIC), summed per thread and per API function: count,
//     total and largest ns; the outermost call of a thread (a runtime call's nested driver calls are
//     not counted twice) adds to the thread's time in CUDA calls, and a call that waits for the GPU
//     (a synchronize, a synchronous copy) to its wait time;
//   - marks frames: the outermost call that launches a kernel whose base name matches a regex
//     (CB_INJECT_MARK=kernel:REGEX, std::regex search, as `analyze --frames kernel:REGEX` counts them),
//     or a call to one of the named API functions (CB_INJECT_MARK=api:NAME|NAME, base names); per mark
//     it keeps the time, the thread's time in calls, in waits and in injected delays so far;
//   - optionally adds a deliberate delay per frame, at the marking call's entry, before the call runs:
//     CB_INJECT_HOST_US  k µs of spin on the launching thread;
//     CB_INJECT_GPU_US   a spin kernel of k µs in the marking call's stream (a module of our own, PTX
//                        below, loaded through the driver API), ahead of the frame's kernel or graph;
//     CB_INJECT_LINK_BYTES an H2D copy of that many bytes (pinned) in the marking call's stream.
//     A stream that is being captured into a graph is never touched (counted as skipped); a frame marked
//     by anything other than a kernel or graph launch from the host has no stream to delay (the report
//     says "not tested" and why); work launched from the device is never seen here.
// At exit it writes one JSON report (CB_INJECT_OUT, "%p" replaced by the pid), schema
// clusterbench.inject-report (clusterbench/run/inject.py reads it; docs/probe.md describes it).
//
// Settings (environment): CB_INJECT_OUT (required), CB_INJECT_MARK, CB_INJECT_WARMUP (marks per thread
// before the loop's per-API counts start, default 0), CB_INJECT_MAX_MARKS (marks kept one by one, default
// 100000), CB_INJECT_DOMAINS (runtime,driver: the default both), CB_INJECT_HOST_US, CB_INJECT_GPU_US,
// CB_INJECT_LINK_BYTES, CB_INJECT_ONLY (a diagnostic: only the named runtime functions' callbacks, base names
// separated by '|', "none" for none; the report's figures then cover those calls alone), CB_INJECT_EMPTY=1 (a
// diagnostic: the callbacks return at once and no report is written: CUPTI's own cost per callback).
//
// Build (clusterbench does it, cached by this file's hash):
//   nvcc -O2 -std=c++17 -shared -Xcompiler -fPIC -I<CUPTI include> cb_inject.cpp -L<CUPTI lib> -lcupti -ldl
// The driver API is reached through dlsym (libcuda is loaded already in any process that runs CUDA), so
// building needs no libcuda.
#include <cupti.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cxxabi.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <regex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kSchemaVersion = 1;
constexpr int kMaxCbid = 2048;  // callback ids above this are summed in one bucket per domain (CUDA 13: 523 runtime, 807 driver)
constexpr int kMaxDepth = 32;

// ------------------------------------------------------------------ time
inline int64_t now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline void spin_until(int64_t t_end) {
    while (now_ns() < t_end) {
    }
}

// ------------------------------------------------------------------ settings
struct Settings {
    std::string out;
    std::string mark_spec;  // as given
    int mark_kind = 0;      // 0 none, 1 kernel regex, 2 api names
    std::regex kernel_rx;
    std::vector<std::string> mark_apis;
    long warmup = 0;
    long max_marks = 100000;
    bool runtime = true, driver = true;
    double host_us = 0, gpu_us = -1;  // gpu_us < 0: no GPU delay (0: the spin kernel with no spin)
    long long link_bytes = -1;        // < 0: no link delay
};
Settings g_set;
std::string g_error;  // set-up failures, reported
std::atomic<bool> g_ready{false};

const char* env(const char* name) {
    const char* v = std::getenv(name);
    return (v && *v) ? v : nullptr;
}

// ------------------------------------------------------------------ API names and categories
enum Category : uint8_t { kUnknown = 0, kOther, kWait, kLaunch, kCopy, kGraph };
enum LaunchShape : uint8_t {
    kShapeNone = 0,
    kRtLaunch,    // cudaLaunchKernel / cudaLaunchCooperativeKernel (func, grid, block, args, shmem, stream)
    kRtLaunchEx,  // cudaLaunchKernelExC (config->stream)
    kDrvLaunch,   // cuLaunchKernel / cuLaunchCooperativeKernel (f, grid, block, shmem, hStream, ...)
    kDrvLaunchEx, // cuLaunchKernelEx (config->hStream)
    kRtGraph,     // cudaGraphLaunch (graphExec, stream)
    kDrvGraph,    // cuGraphLaunch (hGraphExec, hStream)
};

struct ApiInfo {
    std::atomic<uint8_t> seen{0};
    uint8_t category = kUnknown;
    uint8_t shape = kShapeNone;
    bool ptsz = false;
    bool marks = false;  // an api: mark names this function
    char name[96] = {0};  // the base name (no _vNNNN, _ptsz, _ptds suffix)
};
ApiInfo g_api[2][kMaxCbid + 1];

std::string base_name(const char* fn, bool* ptsz) {
    std::string s = fn ? fn : "";
    *ptsz = false;
    for (const char* suf : {"_ptsz", "_ptds"}) {
        size_t p = s.find(suf);
        if (p != std::string::npos) {
            *ptsz = true;
            s.erase(p, std::strlen(suf));
        }
    }
    size_t v = s.rfind("_v");
    if (v != std::string::npos && v + 2 < s.size() &&
        std::all_of(s.begin() + long(v) + 2, s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        s.erase(v);
    return s;
}

bool starts(const std::string& s, const char* p) { return s.compare(0, std::strlen(p), p) == 0; }

uint8_t category_of(const std::string& b) {
    static const char* waits[] = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
                                  "cudaThreadSynchronize", "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D",
                                  "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize", "cuMemcpy",
                                  "cuMemcpyHtoD", "cuMemcpyDtoH"};
    for (const char* w : waits)
        if (b == w) return kWait;
    if (b == "cudaGraphLaunch" || b == "cuGraphLaunch") return kGraph;
    if (starts(b, "cudaLaunchKernel") || starts(b, "cudaLaunchCooperativeKernel") || starts(b, "cuLaunchKernel") ||
        starts(b, "cuLaunchCooperativeKernel") || starts(b, "cudaLaunchHostFunc") || starts(b, "cuLaunchHostFunc"))
        return kLaunch;
    if (starts(b, "cudaMemcpy") || starts(b, "cuMemcpy") || starts(b, "cudaMemset") || starts(b, "cuMemset") ||
        starts(b, "cudaMemPrefetch") || starts(b, "cuMemPrefetch"))
        return kCopy;
    return kOther;
}

uint8_t shape_of(const std::string& b) {
    if (b == "cudaLaunchKernel" || b == "cudaLaunchCooperativeKernel") return kRtLaunch;
    if (b == "cudaLaunchKernelExC") return kRtLaunchEx;
    if (b == "cuLaunchKernel" || b == "cuLaunchCooperativeKernel") return kDrvLaunch;
    if (b == "cuLaunchKernelEx") return kDrvLaunchEx;
    if (b == "cudaGraphLaunch") return kRtGraph;
    if (b == "cuGraphLaunch") return kDrvGraph;
    return kShapeNone;
}

ApiInfo& api_info(int dom, uint32_t cbid, const char* fn) {
    ApiInfo& a = g_api[dom][cbid > uint32_t(kMaxCbid) ? kMaxCbid : cbid];
    if (a.seen.load(std::memory_order_acquire) == 0) {
        static std::mutex m;
        std::lock_guard<std::mutex> lock(m);
        if (a.seen.load(std::memory_order_relaxed) == 0) {
            bool ptsz = false;
            std::string b = cbid > uint32_t(kMaxCbid) ? std::string("other") : base_name(fn, &ptsz);
            std::snprintf(a.name, sizeof(a.name), "%s", b.c_str());
            a.category = category_of(b);
            a.shape = shape_of(b);
            a.ptsz = ptsz;
            if (g_set.mark_kind == 2)
                for (auto& n : g_set.mark_apis)
                    if (n == b) a.marks = true;
            a.seen.store(1, std::memory_order_release);
        }
    }
    return a;
}

// the kernel's base name, as nsys's shortName: demangled, without its arguments, template arguments,
// return type and namespaces
std::string kernel_base_name(const char* sym) {
    if (!sym) return "";
    int status = 0;
    char* dem = abi::__cxa_demangle(sym, nullptr, nullptr, &status);
    std::string s = (status == 0 && dem) ? dem : sym;
    std::free(dem);
    // cut at the '(' of the argument list (depth 0 in <>)
    int depth = 0;
    size_t cut = s.size();
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '<') ++depth;
        else if (c == '>') --depth;
        else if (c == '(' && depth == 0) {
            cut = i;
            break;
        }
    }
    s.erase(cut);
    // drop template arguments at the end
    if (!s.empty() && s.back() == '>') {
        int d = 0;
        for (size_t i = s.size(); i-- > 0;) {
            if (s[i] == '>') ++d;
            else if (s[i] == '<' && --d == 0) {
                s.erase(i);
                break;
            }
        }
    }
    // the last name: after the last "::" or space at depth 0
    depth = 0;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (c == '<') ++depth;
        else if (c == '>') --depth;
        else if (depth == 0 && c == ' ') start = i + 1;
        else if (depth == 0 && c == ':' && i + 1 < s.size() && s[i + 1] == ':') start = i + 2;
    }
    return s.substr(start);
}

// ------------------------------------------------------------------ the driver API, through dlsym
struct Driver {
    CUresult (*ctxGetFlags)(unsigned*) = nullptr;
    CUresult (*moduleLoadData)(CUmodule*, const void*) = nullptr;
    CUresult (*moduleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
    CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
    CUresult (*memAllocHost)(void**, size_t) = nullptr;
    CUresult (*memAlloc)(CUdeviceptr*, size_t) = nullptr;
    CUresult (*memcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream) = nullptr;
    CUresult (*streamIsCapturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
    bool ok = false;
};
Driver g_drv;

void load_driver() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        g_error = "cannot open libcuda.so.1";
        return;
    }
#define CB_SYM(field, name) g_drv.field = reinterpret_cast<decltype(g_drv.field)>(dlsym(h, name))
    CB_SYM(ctxGetFlags, "cuCtxGetFlags");
    CB_SYM(moduleLoadData, "cuModuleLoadData");
    CB_SYM(moduleGetFunction, "cuModuleGetFunction");
    CB_SYM(launchKernel, "cuLaunchKernel");
    CB_SYM(memAllocHost, "cuMemAllocHost_v2");
    CB_SYM(memAlloc, "cuMemAlloc_v2");
    CB_SYM(memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
    CB_SYM(streamIsCapturing, "cuStreamIsCapturing");
#undef CB_SYM
    g_drv.ok = g_drv.ctxGetFlags && g_drv.moduleLoadData && g_drv.moduleGetFunction && g_drv.launchKernel &&
               g_drv.memAllocHost && g_drv.memAlloc && g_drv.memcpyHtoDAsync && g_drv.streamIsCapturing;
    if (!g_drv.ok) g_error = "libcuda.so.1 lacks a driver API function the delays need";
}

// the GPU delay: one thread spins on the GPU's global timer for ns nanoseconds (PTX, JIT-compiled by the
// driver for the GPU at hand; sm_50 is the lowest target that has %globaltimer and that current drivers JIT)
const char kSpinPtx[] =
    ".version 6.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    ".visible .entry cb_inject_spin(.param .u64 cb_ns)\n"
    "{\n"
    "  .reg .pred %p<2>;\n"
    "  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [cb_ns];\n"
    "  mov.u64 %rd2, %globaltimer;\n"
    "LOOP:\n"
    "  mov.u64 %rd3, %globaltimer;\n"
    "  sub.s64 %rd4, %rd3, %rd2;\n"
    "  setp.lt.u64 %p1, %rd4, %rd1;\n"
    "  @%p1 bra LOOP;\n"
    "  ret;\n"
    "}\n";

struct CtxInject {
    CUfunction spin = nullptr;
    void* host = nullptr;
    CUdeviceptr dev = 0;
    size_t bytes = 0;
    std::string error;
};
std::mutex g_ctx_mutex;
std::unordered_map<CUcontext, CtxInject> g_ctx;
std::atomic<long long> g_gpu_applied{0}, g_gpu_skipped{0}, g_link_applied{0}, g_link_skipped{0};
std::atomic<long long> g_delay_failed{0};
std::string g_not_tested;  // why no frame could be delayed on the GPU or the link (first reason)
std::mutex g_note_mutex;
std::atomic<int> g_ctx_flags{-1};

void note_not_tested(const char* why) {
    std::lock_guard<std::mutex> lock(g_note_mutex);
    if (g_not_tested.empty()) g_not_tested = why;
}

// ------------------------------------------------------------------ per thread
struct Agg {
    uint64_t n = 0;
    int64_t total = 0, max = 0;
};
struct Mark {
    int64_t t, call_ns, wait_ns, delay_ns;
};
struct Thread {
    pid_t tid = 0;
    char name[64] = {0};
    Agg agg[2][kMaxCbid + 1];
    Agg loop[2][kMaxCbid + 1];  // calls made after the thread's CB_INJECT_WARMUP-th mark
    int depth = 0;
    int64_t stack_t[kMaxDepth];
    int64_t call_ns = 0, wait_ns = 0, delay_ns = 0, calls = 0;
    int64_t first_call_t = 0, last_call_t = 0;
    // from a wait's return to the next call that issues GPU work: the host's own time after a synchronize
    int64_t wait_exit_t = -1, rti_ns = 0, rti_n = 0;
    uint64_t marks_total = 0;
    bool in_loop = false;
    bool prepared = false;  // the delays' module and buffers made ready in this thread's context
    Mark warm{}, last{};
    std::vector<Mark> marks;
    std::unordered_map<const void*, int8_t> kernel_match;  // symbol -> matches the mark regex
};
std::mutex g_threads_mutex;
std::vector<Thread*> g_threads;
thread_local Thread* t_self = nullptr;
thread_local bool t_inside = false;  // our own driver calls: their callbacks are ignored

void read_comm(pid_t tid, char* out, size_t n) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/self/task/%d/comm", int(tid));
    FILE* f = std::fopen(path, "r");
    if (!f) return;
    if (std::fgets(out, int(n), f)) {
        size_t l = std::strlen(out);
        if (l && out[l - 1] == '\n') out[l - 1] = 0;
    }
    std::fclose(f);
}

Thread* self() {
    if (t_self) return t_self;
    Thread* t = new Thread();
    t->tid = pid_t(syscall(SYS_gettid));
    read_comm(t->tid, t->name, sizeof(t->name));
    {
        std::lock_guard<std::mutex> lock(g_threads_mutex);
        g_threads.push_back(t);
    }
    t_self = t;
    return t;
}

// ------------------------------------------------------------------ delays
CUstream stream_of(const ApiInfo& a, const void* params) {
    CUstream s = nullptr;
    switch (a.shape) {
        case kRtLaunch: s = reinterpret_cast<CUstream>(static_cast<const cudaLaunchKernel_v7000_params*>(params)->stream); break;
        case kRtLaunchEx: {
            const cudaLaunchConfig_t* c = static_cast<const cudaLaunchKernelExC_v11060_params*>(params)->config;
            s = c ? reinterpret_cast<CUstream>(c->stream) : nullptr;
            break;
        }
        case kDrvLaunch: s = static_cast<const cuLaunchKernel_params*>(params)->hStream; break;
        case kDrvLaunchEx: {
            const CUlaunchConfig* c = static_cast<const cuLaunchKernelEx_params*>(params)->config;
            s = c ? c->hStream : nullptr;
            break;
        }
        case kRtGraph: s = reinterpret_cast<CUstream>(static_cast<const cudaGraphLaunch_v10000_params*>(params)->stream); break;
        case kDrvGraph: s = static_cast<const cuGraphLaunch_params*>(params)->hStream; break;
        default: break;
    }
    if (s == nullptr && a.ptsz) s = CU_STREAM_PER_THREAD;  // a per-thread default stream call's stream 0
    return s;
}

CtxInject* ctx_inject(CUcontext ctx) {
    std::lock_guard<std::mutex> lock(g_ctx_mutex);
    CtxInject& c = g_ctx[ctx];
    if (c.spin == nullptr && c.error.empty() && g_set.gpu_us >= 0) {
        CUmodule mod = nullptr;
        CUresult r = g_drv.moduleLoadData(&mod, kSpinPtx);
        if (r == CUDA_SUCCESS) r = g_drv.moduleGetFunction(&c.spin, mod, "cb_inject_spin");
        if (r != CUDA_SUCCESS) c.error = "the spin kernel's module did not load (CUresult " + std::to_string(int(r)) + ")";
    }
    if (c.host == nullptr && c.error.empty() && g_set.link_bytes >= 0) {
        c.bytes = size_t(std::max<long long>(g_set.link_bytes, 4));
        CUresult r = g_drv.memAllocHost(&c.host, c.bytes);
        if (r == CUDA_SUCCESS) r = g_drv.memAlloc(&c.dev, c.bytes);
        if (r != CUDA_SUCCESS) c.error = "the link delay's buffers were not allocated (CUresult " + std::to_string(int(r)) + ")";
        else std::memset(c.host, 0, c.bytes);
    }
    return &c;
}

void gpu_delays(const ApiInfo& a, const CUpti_CallbackData* cb) {
    if (g_set.gpu_us < 0 && g_set.link_bytes < 0) return;
    if (a.shape == kShapeNone) {
        note_not_tested("the frames are marked by a call that launches no kernel or graph, so there is no stream to delay");
        return;
    }
    if (!g_drv.ok) {
        note_not_tested("the driver API functions the delays need were not found");
        return;
    }
    CUstream s = stream_of(a, cb->functionParams);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    if (g_drv.streamIsCapturing(s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE) {
        if (g_set.gpu_us >= 0) g_gpu_skipped++;
        if (g_set.link_bytes >= 0) g_link_skipped++;
        return;  // the stream is being captured into a graph: adding work there would change the program's graph
    }
    CtxInject* c = ctx_inject(cb->context);
    if (!c->error.empty()) {
        note_not_tested(c->error.c_str());
        g_delay_failed++;
        return;
    }
    if (g_set.gpu_us >= 0) {
        unsigned long long ns = (unsigned long long)(g_set.gpu_us * 1000.0 + 0.5);
        void* args[] = {&ns};
        if (g_drv.launchKernel(c->spin, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS) g_gpu_applied++;
        else g_delay_failed++;
    }
    if (g_set.link_bytes >= 0) {
        if (g_drv.memcpyHtoDAsync(c->dev, c->host, c->bytes, s) == CUDA_SUCCESS) g_link_applied++;
        else g_delay_failed++;
    }
}

bool is_mark(Thread* t, const ApiInfo& a, const CUpti_CallbackData* cb) {
    if (g_set.mark_kind == 2) return a.marks;
    if (g_set.mark_kind != 1 || a.category != kLaunch || a.shape == kShapeNone) return false;
    const void* key = cb->symbolName;
    if (key == nullptr) return false;
    auto it = t->kernel_match.find(key);
    if (it != t->kernel_match.end()) return it->second != 0;
    bool m = std::regex_search(kernel_base_name(cb->symbolName), g_set.kernel_rx);
    t->kernel_match.emplace(key, int8_t(m ? 1 : 0));
    return m;
}

void CUPTIAPI on_empty(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    if (t_inside || !g_ready.load(std::memory_order_relaxed)) return;
    const int64_t t0 = now_ns();
    const CUpti_CallbackData* cb = static_cast<const CUpti_CallbackData*>(data);
    const int dom = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0;
    Thread* t = self();
    ApiInfo& a = api_info(dom, cbid, cb->functionName);
    if (cb->callbackSite == CUPTI_API_ENTER) {
        int64_t start = t0;  // the call's own start: after any delay the library added at its entry
        if (t->depth == 0) {
            if (g_ctx_flags.load(std::memory_order_relaxed) < 0 && cb->context != nullptr && g_drv.ctxGetFlags) {
                unsigned flags = 0;
                t_inside = true;
                if (g_drv.ctxGetFlags(&flags) == CUDA_SUCCESS) g_ctx_flags.store(int(flags));
                t_inside = false;
            }
            if (a.category == kLaunch || a.category == kCopy || a.category == kGraph) {
                if (t->wait_exit_t >= 0) {
                    t->rti_ns += t0 - t->wait_exit_t;
                    ++t->rti_n;
                    t->wait_exit_t = -1;
                }
            }
            if (g_set.mark_kind != 0 && is_mark(t, a, cb)) {
                Mark m{t0, t->call_ns, t->wait_ns, t->delay_ns};
                if (t->marks_total == 0) t->marks.reserve(size_t(std::min<long>(g_set.max_marks, 1L << 20)));
                if (long(t->marks.size()) < g_set.max_marks) t->marks.push_back(m);
                if (t->marks_total == uint64_t(g_set.warmup)) {
                    t->warm = m;
                    t->in_loop = true;
                }
                t->last = m;
                ++t->marks_total;
                if (g_set.host_us > 0) spin_until(t0 + int64_t(g_set.host_us * 1000.0 + 0.5));
                t_inside = true;
                gpu_delays(a, cb);
                t_inside = false;
                start = now_ns();
                t->delay_ns += start - t0;
            }
        }
        if (t->depth < kMaxDepth) t->stack_t[t->depth] = start;
        ++t->depth;
        return;
    }
    // exit
    if (t->depth <= 0) return;  // an exit whose entry came before the subscription
    --t->depth;
    if (t->depth >= kMaxDepth) return;
    const int64_t d = t0 - t->stack_t[t->depth];
    const int idx = cbid > uint32_t(kMaxCbid) ? kMaxCbid : int(cbid);
    Agg& g = t->agg[dom][idx];
    ++g.n;
    g.total += d;
    if (d > g.max) g.max = d;
    if (t->in_loop) {
        Agg& l = t->loop[dom][idx];
        ++l.n;
        l.total += d;
        if (d > l.max) l.max = d;
    }
    if (t->depth == 0 && cb->context != nullptr && (g_set.gpu_us >= 0 || g_set.link_bytes >= 0) && g_drv.ok &&
        !t->prepared) {
        // load the spin kernel and allocate the link's buffers after a call has returned (the driver holds
        // nothing then), not inside the first marking call
        t_inside = true;
        ctx_inject(cb->context);
        t_inside = false;
        t->prepared = true;
    }
    if (t->depth == 0) {
        t->call_ns += d;
        ++t->calls;
        if (t->first_call_t == 0) t->first_call_t = t->stack_t[0];
        t->last_call_t = t0;
        if (a.category == kWait) {
            t->wait_ns += d;
            t->wait_exit_t = t0;
        }
    }
}

// ------------------------------------------------------------------ the report
std::string jstr(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            o += '\\';
            o += char(c);
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof(b), "\\u%04x", c);
            o += b;
        } else {
            o += char(c);
        }
    }
    return o + "\"";
}

std::string cmdline() {
    std::string s;
    FILE* f = std::fopen("/proc/self/cmdline", "rb");
    if (!f) return s;
    std::vector<std::string> args(1);
    int c;
    while ((c = std::fgetc(f)) != EOF) {
        if (c == 0) args.emplace_back();
        else args.back() += char(c);
    }
    std::fclose(f);
    if (!args.empty() && args.back().empty()) args.pop_back();
    s = "[";
    for (size_t i = 0; i < args.size(); ++i) s += (i ? "," : "") + jstr(args[i]);
    return s + "]";
}

std::string mark_json(const Mark& m) {
    char b[160];
    std::snprintf(b, sizeof(b), "{\"t_ns\":%lld,\"call_ns\":%lld,\"wait_ns\":%lld,\"delay_ns\":%lld}", (long long)m.t,
                  (long long)m.call_ns, (long long)m.wait_ns, (long long)m.delay_ns);
    return b;
}

void write_aggs(FILE* f, const Agg (&agg)[2][kMaxCbid + 1]) {
    std::fputc('[', f);
    bool first = true;
    for (int dom = 0; dom < 2; ++dom)
        for (int i = 0; i <= kMaxCbid; ++i) {
            const Agg& g = agg[dom][i];
            if (g.n == 0) continue;
            const ApiInfo& a = g_api[dom][i];
            std::fprintf(f, "%s{\"api\":%s,\"domain\":\"%s\",\"category\":\"%s\",\"n\":%llu,\"total_ns\":%lld,\"max_ns\":%lld}",
                         first ? "" : ",", jstr(a.name).c_str(), dom ? "driver" : "runtime",
                         a.category == kWait ? "wait" : a.category == kLaunch ? "launch" : a.category == kCopy ? "copy"
                         : a.category == kGraph ? "graph_launch" : "other",
                         (unsigned long long)g.n, (long long)g.total, (long long)g.max);
            first = false;
        }
    std::fputc(']', f);
}

std::string out_path() {
    std::string p = g_set.out;
    size_t k = p.find("%p");
    if (k != std::string::npos) p.replace(k, 2, std::to_string(getpid()));
    return p;
}

void write_report() {
    if (g_set.out.empty()) return;
    g_ready.store(false);
    std::string path = out_path();
    std::string tmp = path + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return;
    std::fprintf(f, "{\"schema\":\"clusterbench.inject-report\",\"version\":%d,\"pid\":%d,\"argv\":%s,", kSchemaVersion,
                 int(getpid()), cmdline().c_str());
    std::fprintf(f, "\"settings\":{\"mark\":%s,\"warmup\":%ld,\"max_marks\":%ld,\"runtime\":%s,\"driver\":%s,"
                    "\"host_us\":%.6g,\"gpu_us\":%s,\"link_bytes\":%s},",
                 jstr(g_set.mark_spec).c_str(), g_set.warmup, g_set.max_marks, g_set.runtime ? "true" : "false",
                 g_set.driver ? "true" : "false", g_set.host_us,
                 g_set.gpu_us >= 0 ? std::to_string(g_set.gpu_us).c_str() : "null",
                 g_set.link_bytes >= 0 ? std::to_string(g_set.link_bytes).c_str() : "null");
    std::fprintf(f, "\"error\":%s,\"ctx_flags\":%s,", g_error.empty() ? "null" : jstr(g_error).c_str(),
                 g_ctx_flags.load() >= 0 ? std::to_string(g_ctx_flags.load()).c_str() : "null");
    {
        std::lock_guard<std::mutex> lock(g_note_mutex);
        std::fprintf(f, "\"delays\":{\"gpu_applied\":%lld,\"gpu_skipped_capturing\":%lld,\"link_applied\":%lld,"
                        "\"link_skipped_capturing\":%lld,\"failed\":%lld,\"not_tested\":%s},",
                     (long long)g_gpu_applied.load(), (long long)g_gpu_skipped.load(), (long long)g_link_applied.load(),
                     (long long)g_link_skipped.load(), (long long)g_delay_failed.load(),
                     g_not_tested.empty() ? "null" : jstr(g_not_tested).c_str());
    }
    std::fputs("\"threads\":[", f);
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    for (size_t i = 0; i < g_threads.size(); ++i) {
        Thread* t = g_threads[i];
        char name[64] = {0};
        std::snprintf(name, sizeof(name), "%s", t->name);
        read_comm(t->tid, name, sizeof(name));  // a name set after the first call
        std::fprintf(f, "%s{\"tid\":%d,\"name\":%s,\"calls\":%lld,\"call_ns\":%lld,\"wait_ns\":%lld,\"delay_ns\":%lld,"
                        "\"first_call_ns\":%lld,\"last_call_ns\":%lld,\"after_wait_ns\":%lld,\"after_wait_n\":%lld,"
                        "\"marks_total\":%llu,",
                     i ? "," : "", int(t->tid), jstr(name).c_str(), (long long)t->calls, (long long)t->call_ns,
                     (long long)t->wait_ns, (long long)t->delay_ns, (long long)t->first_call_t,
                     (long long)t->last_call_t, (long long)t->rti_ns, (long long)t->rti_n,
                     (unsigned long long)t->marks_total);
        std::fprintf(f, "\"warm_mark\":%s,\"last_mark\":%s,", t->in_loop ? mark_json(t->warm).c_str() : "null",
                     t->marks_total ? mark_json(t->last).c_str() : "null");
        // the marks kept one by one, as four columns
        const char* cols[] = {"t_ns", "call_ns", "wait_ns", "delay_ns"};
        std::fputs("\"marks\":{", f);
        for (int c = 0; c < 4; ++c) {
            std::fprintf(f, "%s\"%s\":[", c ? "," : "", cols[c]);
            for (size_t k = 0; k < t->marks.size(); ++k) {
                const Mark& m = t->marks[k];
                int64_t v = c == 0 ? m.t : c == 1 ? m.call_ns : c == 2 ? m.wait_ns : m.delay_ns;
                std::fprintf(f, "%s%lld", k ? "," : "", (long long)v);
            }
            std::fputc(']', f);
        }
        std::fputs("},\"apis\":", f);
        write_aggs(f, t->agg);
        std::fputs(",\"loop_apis\":", f);
        write_aggs(f, t->loop);
        std::fputc('}', f);
    }
    std::fputs("]}\n", f);
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
}

bool parse_settings() {
    const char* out = env("CB_INJECT_OUT");
    if (!out) return false;
    g_set.out = out;
    if (const char* m = env("CB_INJECT_MARK")) {
        g_set.mark_spec = m;
        std::string s = m;
        if (s.rfind("kernel:", 0) == 0) {
            try {
                g_set.kernel_rx = std::regex(s.substr(7), std::regex::ECMAScript);
                g_set.mark_kind = 1;
            } catch (const std::regex_error& e) {
                g_error = std::string("CB_INJECT_MARK: not a regular expression: ") + e.what();
            }
        } else if (s.rfind("api:", 0) == 0) {
            std::string rest = s.substr(4);
            size_t p = 0;
            while (p <= rest.size()) {
                size_t q = rest.find('|', p);
                if (q == std::string::npos) q = rest.size();
                if (q > p) g_set.mark_apis.push_back(rest.substr(p, q - p));
                p = q + 1;
            }
            g_set.mark_kind = g_set.mark_apis.empty() ? 0 : 2;
        } else {
            g_error = "CB_INJECT_MARK must be kernel:REGEX or api:NAME[|NAME...]";
        }
    }
    if (const char* w = env("CB_INJECT_WARMUP")) g_set.warmup = std::max(0L, std::strtol(w, nullptr, 10));
    if (const char* w = env("CB_INJECT_MAX_MARKS")) g_set.max_marks = std::max(0L, std::strtol(w, nullptr, 10));
    if (const char* d = env("CB_INJECT_DOMAINS")) {
        std::string s = d;
        g_set.runtime = s.find("runtime") != std::string::npos;
        g_set.driver = s.find("driver") != std::string::npos;
    }
    if (const char* h = env("CB_INJECT_HOST_US")) g_set.host_us = std::max(0.0, std::strtod(h, nullptr));
    if (const char* g = env("CB_INJECT_GPU_US")) g_set.gpu_us = std::max(0.0, std::strtod(g, nullptr));
    if (const char* l = env("CB_INJECT_LINK_BYTES")) g_set.link_bytes = std::max(0LL, std::strtoll(l, nullptr, 10));
    return true;
}

CUpti_SubscriberHandle g_sub;

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    static std::atomic<bool> done{false};
    if (done.exchange(true)) return 1;
    if (!parse_settings()) return 1;  // no report asked for: stay out of the way
    load_driver();
    // CB_INJECT_EMPTY=1: the same subscription and callbacks, each returning at once, and no report: what
    // CUPTI's own dispatch costs a call, apart from this library's work (benchmarks/callback_cost.py)
    const char* empty = env("CB_INJECT_EMPTY");
    const bool is_empty = empty != nullptr && std::strcmp(empty, "1") == 0;
    if (!is_empty) std::atexit(write_report);
    CUptiResult r = cuptiSubscribe(&g_sub, reinterpret_cast<CUpti_CallbackFunc>(is_empty ? on_empty : on_callback),
                                   nullptr);
    if (r != CUPTI_SUCCESS) {
        const char* s = nullptr;
        cuptiGetResultString(r, &s);
        g_error = std::string("cuptiSubscribe failed: ") + (s ? s : "?") +
                  " (another CUPTI client, such as a profiler, may hold the subscription)";
        return 1;
    }
    if (g_set.runtime) cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (g_set.driver) cuptiEnableDomain(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
    if (const char* o = env("CB_INJECT_ONLY")) {
        // only the named runtime functions' callbacks (base names, '|'-separated; "none" for none): to measure
        // what the subscription and each callback cost (docs/probe.md, "Measured on three more H100s")
        const std::string only = std::string("|") + o + "|";
        cuptiEnableDomain(0, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API);
        cuptiEnableDomain(0, g_sub, CUPTI_CB_DOMAIN_DRIVER_API);
        for (int id = 1; id < kMaxCbid; ++id) {
            const char* name = nullptr;
            if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, CUpti_CallbackId(id), &name) != CUPTI_SUCCESS || !name)
                continue;
            std::string base = name;
            const size_t v = base.find("_v");
            if (v != std::string::npos) base.resize(v);
            if (only.find("|" + base + "|") != std::string::npos)
                cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUpti_CallbackId(id));
        }
    }
    g_ready.store(true);
    return 1;
}
