// calls.cuh: what the blocked-time programs of the zoo share (tests/zoo/README.md, "Who waits for whom").
// Include after zoo.cuh.
//
// - TIMED(kind, call): steady_clock around one CUDA call, added to a zoo::Kind (its count, total,
//   largest, and how many took at least kSlowCallNs and their total), then checked like CUDA_CHECK.
//   A kind can keep every call's duration in order (each_ns), so that a test can set the k-th call of
//   the trace against the k-th call the program timed.
// - zoo::Calls: the kinds of one thread, in the order they were made, as JSON.
// - zoo::Spin: busy-waits of "host work", with the time each one really took, summed.
// - zoo_spin: a kernel that runs for a given time (one warp reads %globaltimer until it has passed);
//   it counts its runs into *done so that the program can check that every launch ran.
//   zoo_store: one thread copies a count into results[slot] (a third small kernel per frame).
// - zoo::loop_begin / loop_end: an NVTX push/pop range "loop" around the steady loop (the main thread),
//   so that a test reads the loop's bounds on the trace's own clock (analyze --window range:loop).
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <deque>

namespace zoo {

// a launch or an async copy that does not wait for the GPU returns in a few µs, even under nsys
constexpr int64_t kSlowCallNs = 20000;

inline void check(cudaError_t err, const char* what, const char* file, int line) {
    if (err != cudaSuccess) {
        std::fprintf(stderr, "%s:%d: CUDA error %s (%s) in %s\n", file, line, cudaGetErrorName(err),
                     cudaGetErrorString(err), what);
        std::exit(1);
    }
}

// one kind of timed call: its label (what the program meant: "h2d", "d2h", "launch", "sync"...) and
// the CUDA API function it calls (the name nsys writes, without its version suffix)
struct Kind {
    std::string label, api;
    bool keep_each = false;
    int64_t n = 0, total_ns = 0, max_ns = 0, slow_n = 0, slow_ns = 0;
    std::vector<int64_t> each;

    void add(int64_t d) {
        ++n;
        total_ns += d;
        if (d > max_ns) max_ns = d;
        if (d >= kSlowCallNs) {
            ++slow_n;
            slow_ns += d;
        }
        if (keep_each) each.push_back(d);
    }
    Obj json() const {
        Obj o;
        o.s("label", label).s("api", api).i("n", n).i("total_ns", total_ns).i("max_ns", max_ns);
        o.i("slow_n", slow_n).i("slow_ns", slow_ns);
        if (keep_each) o.raw("each_ns", jarr_num(each));
        return o;
    }
};

// the timed kinds of one thread; references stay valid (a deque)
struct Calls {
    std::deque<Kind> kinds;
    Kind& kind(const std::string& label, const std::string& api, bool keep_each = false, size_t reserve = 0) {
        for (auto& k : kinds)
            if (k.label == label) return k;
        kinds.emplace_back();
        Kind& k = kinds.back();
        k.label = label;
        k.api = api;
        k.keep_each = keep_each;
        if (keep_each) k.each.reserve(reserve);
        return k;
    }
    int64_t total_ns() const {
        int64_t t = 0;
        for (auto& k : kinds) t += k.total_ns;
        return t;
    }
    int64_t count() const {
        int64_t t = 0;
        for (auto& k : kinds) t += k.n;
        return t;
    }
    // the count of calls to one API function (over its labels)
    int64_t count_of(const std::string& api) const {
        int64_t t = 0;
        for (auto& k : kinds)
            if (k.api == api) t += k.n;
        return t;
    }
    std::string json() const {
        std::vector<std::string> items;
        for (auto& k : kinds) items.push_back(k.json().str());
        return jarr(items);
    }
};

// host "work": busy-waits on steady_clock, each measured from its start to its end
struct Spin {
    double us = 0;  // asked per frame
    int64_t n = 0, total_ns = 0;
    void run() {
        if (us <= 0) return;
        int64_t a = now_ns();
        spin_us(us);
        total_ns += now_ns() - a;
        ++n;
    }
    Obj json() const { return Obj().d("us_asked", us).i("n", n).i("total_ns", total_ns); }
};

// the NVTX range around the loop: the window a test gives analyze
inline void loop_begin() { nvtxRangePushA("loop"); }
inline void loop_end() { nvtxRangePop(); }

// the host-time budget of one thread's loop: [start, end] on steady_clock, the timed CUDA calls, the
// spins and the rest (the loop's own code, the timers, checks)
inline Obj loop_budget(int64_t start_ns, int64_t end_ns, const Calls& calls, const Spin& spin) {
    const int64_t len = end_ns - start_ns;
    Obj o;
    o.i("start_ns", start_ns).i("end_ns", end_ns).i("loop_ns", len).i("calls_ns", calls.total_ns())
        .i("calls", calls.count()).i("spin_ns", spin.total_ns).i("other_ns", len - calls.total_ns() - spin.total_ns);
    return o;
}

// GPU time between pairs of events, in ns (after a synchronization); -1 where it cannot be read
inline std::vector<int64_t> event_spans(const std::vector<cudaEvent_t>& a, const std::vector<cudaEvent_t>& b) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        float ms = 0;
        cudaError_t e = cudaEventElapsedTime(&ms, a[i], b[i]);
        out.push_back(e == cudaSuccess ? int64_t(double(ms) * 1e6 + 0.5) : -1);
    }
    return out;
}

inline Obj span_stats(const std::vector<int64_t>& v) {
    int64_t n = 0, total = 0, mx = 0;
    for (int64_t x : v)
        if (x >= 0) {
            ++n;
            total += x;
            if (x > mx) mx = x;
        }
    Obj o;
    o.i("n", n).i("total_ns", total).i("max_ns", mx).d("mean_us", n ? double(total) / double(n) / 1000.0 : 0.0);
    return o;
}

}  // namespace zoo

#define TIMED(kind_, call)                                                                          \
    do {                                                                                            \
        const int64_t zoo_t0_ = ::zoo::now_ns();                                                    \
        const cudaError_t zoo_e_ = (call);                                                          \
        (kind_).add(::zoo::now_ns() - zoo_t0_);                                                     \
        ::zoo::check(zoo_e_, #call, __FILE__, __LINE__);                                            \
    } while (0)

__device__ __forceinline__ unsigned long long zoo_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// runs for ns nanoseconds of GPU time (one block; thread 0 waits, the others wait at the barrier)
__global__ void zoo_spin(long long ns, unsigned* done) {
    if (threadIdx.x == 0) {
        const unsigned long long t0 = zoo_globaltimer();
        while ((long long)(zoo_globaltimer() - t0) < ns) {
        }
    }
    __syncthreads();
    if (threadIdx.x == 0 && done != nullptr) atomicAdd(done, 1u);
}

// results[slot] = *count (one thread)
__global__ void zoo_store(const unsigned* __restrict__ count, unsigned* __restrict__ results, int slot) {
    if (blockIdx.x == 0 && threadIdx.x == 0) results[slot] = *count;
}

namespace zoo {

// cudaLaunchKernel of the zoo's kernels, so that TIMED brackets exactly the call nsys records
inline cudaError_t launch_spin(long long ns, unsigned* done, cudaStream_t st) {
    void* a[] = {&ns, &done};
    return cudaLaunchKernel(reinterpret_cast<const void*>(zoo_spin), dim3(1), dim3(32), a, 0, st);
}
inline cudaError_t launch_calib(const uint16_t* in, float* out, int npix, cudaStream_t st) {
    float ped = kPedestal, thr = kThreshold;
    void* a[] = {&in, &out, &npix, &ped, &thr};
    return cudaLaunchKernel(reinterpret_cast<const void*>(zoo_calib), dim3(grid_for(npix)), dim3(kBlock), a, 0, st);
}
inline cudaError_t launch_reduce(const float* calib, int npix, unsigned* count, cudaStream_t st) {
    void* a[] = {&calib, &npix, &count};
    return cudaLaunchKernel(reinterpret_cast<const void*>(zoo_reduce), dim3(grid_for(npix)), dim3(kBlock), a, 0, st);
}
inline cudaError_t launch_store(const unsigned* count, unsigned* results, int slot, cudaStream_t st) {
    void* a[] = {&count, &results, &slot};
    return cudaLaunchKernel(reinterpret_cast<const void*>(zoo_store), dim3(1), dim3(32), a, 0, st);
}

}  // namespace zoo
