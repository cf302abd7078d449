// call_cost: the host's time per CUDA runtime call in a tight loop, so that what an injection library adds
// to each call can be read as a difference (benchmarks/callback_cost.py builds and runs it).
//
//   call_cost [--kind query|record|launch] [--calls N] [--blocks B]
//
// kinds (each on one stream of its own, created non-blocking):
//   query   cudaStreamQuery on the idle stream: a call that does no GPU work at all;
//   record  cudaEventRecord on the stream: a call that queues a little GPU work, which the GPU keeps up with;
//   launch  cudaLaunchKernel of an empty kernel (cc_empty), with a cudaStreamSynchronize after every 64
//           launches, which is counted as a call too, so that the queue never fills.
// After 10,000 calls of warm-up it times B blocks of N calls each (CLOCK_MONOTONIC) and prints one JSON line:
// {"kind":..., "calls":N, "ns_per_call":[one per block]}.
// Exit status: 0 done; 1 a CUDA error (named); 2 bad arguments.
#include <cuda_runtime.h>

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

#define CK(call)                                                                                             \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess && e_ != cudaErrorNotReady) {                                                  \
            std::fprintf(stderr, "call_cost: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::exit(1);                                                                                    \
        }                                                                                                    \
    } while (0)

__global__ void cc_empty() {}

int usage(const char* why) {
    std::fprintf(stderr, "call_cost: %s\nusage: call_cost [--kind query|record|launch] [--calls N] [--blocks B]\n", why);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string kind = "query";
    long calls = 200000, blocks = 5;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (i + 1 >= argc) return usage(("no value after " + a).c_str());
        const char* v = argv[++i];
        char* end = nullptr;
        if (a == "--kind") {
            kind = v;
        } else if (a == "--calls" || a == "--blocks") {
            long x = std::strtol(v, &end, 10);
            if (end == v || *end != '\0' || x < 1) return usage((a + " takes a count of 1 or more").c_str());
            (a == "--calls" ? calls : blocks) = x;
        } else {
            return usage(("unknown option " + a).c_str());
        }
    }
    if (kind != "query" && kind != "record" && kind != "launch") return usage("--kind is query, record or launch");
    cudaStream_t s;
    cudaEvent_t ev;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    auto one = [&](long i) {
        if (kind == "query") {
            CK(cudaStreamQuery(s));
        } else if (kind == "record") {
            CK(cudaEventRecord(ev, s));
        } else if (i % 65 == 64) {
            CK(cudaStreamSynchronize(s));
        } else {
            cc_empty<<<1, 1, 0, s>>>();  // its error, if any, is read once a block (a call of its own)
        }
    };
    for (long i = 0; i < 10000; ++i) one(i);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    std::vector<double> per;
    for (long b = 0; b < blocks; ++b) {
        const int64_t t0 = now_ns();
        for (long i = 0; i < calls; ++i) one(i);
        const int64_t t1 = now_ns();
        per.push_back(double(t1 - t0) / double(calls));
        CK(cudaGetLastError());
        CK(cudaStreamSynchronize(s));
    }
    std::printf("{\"kind\": \"%s\", \"calls\": %ld, \"ns_per_call\": [", kind.c_str(), calls);
    for (size_t i = 0; i < per.size(); ++i) std::printf("%s%.3f", i ? ", " : "", per[i]);
    std::printf("]}\n");
    CK(cudaEventDestroy(ev));
    CK(cudaStreamDestroy(s));
    return 0;
}
