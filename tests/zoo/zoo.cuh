// zoo.cuh: what every zoo program shares (tests/zoo/README.md).
//
// - CUDA_CHECK / LAUNCH_CHECK: check a runtime call / the last error after a launch; print file:line
//   and exit 1 on failure.
// - Args: "--name value" or "--name=value" options and "--flag" switches; unknown options exit 2.
// - The frame: 400x400 uint16 (320,000 bytes) filled with a deterministic pattern: a pedestal of
//   1000 plus noise of 0..40, and a "hit" of +200..249 where (i + slot*31) % 997 == 0. zoo_calib
//   subtracts the pedestal and zeroes what is not above the threshold (100), so exactly the hits
//   survive; zoo_reduce counts them. The host knows every expected value (expected_count,
//   expected_calib), so each program checks its results.
// - Report: collects the ground truth and prints the two closing lines:
//     rate: <n> frames/s            (and "throughput: <n> GB/s" of H2D input where bytes move)
//     ZOO {json}
//   Timestamps in "phases" are steady_clock ns since zoo::start() (the first line of main);
//   "t0_steady_ns" is that origin as an absolute steady_clock (CLOCK_MONOTONIC) value.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#define CUDA_CHECK(call)                                                                            \
    do {                                                                                            \
        cudaError_t zoo_err_ = (call);                                                              \
        if (zoo_err_ != cudaSuccess) {                                                              \
            std::fprintf(stderr, "%s:%d: CUDA error %s (%s) in %s\n", __FILE__, __LINE__,           \
                         cudaGetErrorName(zoo_err_), cudaGetErrorString(zoo_err_), #call);          \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)

// after every <<<>>> launch: the launch error, if any, is in the runtime's last error
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

#define ZOO_FAIL(...)                                                                               \
    do {                                                                                            \
        std::fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                        \
        std::fprintf(stderr, __VA_ARGS__);                                                          \
        std::fprintf(stderr, "\n");                                                                 \
        std::exit(1);                                                                               \
    } while (0)

namespace zoo {

// ---------------------------------------------------------------- frames and the pattern
constexpr int kW = 400;
constexpr int kH = 400;
constexpr int kNpix = kW * kH;                                    // 160,000 pixels
constexpr size_t kFrameBytes = size_t(kNpix) * sizeof(uint16_t);  // 320,000 bytes
constexpr float kPedestal = 1000.0f;
constexpr float kThreshold = 100.0f;
constexpr int kHitPeriod = 997;
constexpr int kBlock = 256;
constexpr int kPreviewFloats = 256;  // the "small D2H" of programs without a reduce: 1,024 bytes
constexpr size_t kPreviewBytes = kPreviewFloats * sizeof(float);

inline bool is_hit(int i, int slot) { return (i + slot * 31) % kHitPeriod == 0; }

inline uint16_t pattern(int i, int slot) {
    int v = 1000 + (i * 7 + slot * 13) % 41;
    if (is_hit(i, slot)) v += 200 + i % 50;
    return uint16_t(v);
}

inline void fill_frame(uint16_t* dst, int npix, int slot) {
    for (int i = 0; i < npix; ++i) dst[i] = pattern(i, slot);
}

inline float expected_calib(int i, int slot) {
    float v = float(pattern(i, slot)) - kPedestal;
    return v > kThreshold ? v : 0.0f;
}

inline unsigned expected_count(int npix, int slot) {
    unsigned c = 0;
    for (int i = 0; i < npix; ++i) c += is_hit(i, slot) ? 1u : 0u;
    return c;
}

inline unsigned grid_for(int npix) { return unsigned((npix + kBlock - 1) / kBlock); }

#ifndef ZOO_NO_COMMON_KERNELS
}  // namespace zoo

// Kernels live at global scope so that nsys shows the plain base names zoo_calib / zoo_reduce.
// One thread per pixel (grid-stride for safety).
__global__ void zoo_calib(const uint16_t* __restrict__ in, float* __restrict__ out, int npix,
                          float pedestal, float threshold) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < npix; i += gridDim.x * blockDim.x) {
        float v = float(in[i]) - pedestal;
        out[i] = v > threshold ? v : 0.0f;
    }
}

// counts the pixels that survived zoo_calib into *count (which the caller zeroes)
__global__ void zoo_reduce(const float* __restrict__ calib, int npix, unsigned* __restrict__ count) {
    unsigned c = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < npix; i += gridDim.x * blockDim.x)
        c += calib[i] > 0.0f ? 1u : 0u;
    for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
    if ((threadIdx.x & 31) == 0 && c != 0) atomicAdd(count, c);
}

namespace zoo {
#endif  // ZOO_NO_COMMON_KERNELS

// ---------------------------------------------------------------- time
inline std::chrono::steady_clock::time_point& origin() {
    static std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    return t0;
}
inline void start() { origin() = std::chrono::steady_clock::now(); }
inline int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin())
        .count();
}
inline int64_t origin_steady_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(origin().time_since_epoch()).count();
}

// busy-wait on steady_clock (host "work" that keeps the thread on the CPU)
inline void spin_us(double us) {
    if (us <= 0) return;
    auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(int64_t(us * 1000.0));
    while (std::chrono::steady_clock::now() < until) {
    }
}

// ---------------------------------------------------------------- JSON
inline std::string jstr(const std::string& s) {
    std::string o = "\"";
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        if (c == '"' || c == '\\') {
            o += '\\';
            o += ch;
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            o += buf;
        } else {
            o += ch;
        }
    }
    return o + "\"";
}
inline std::string jnum(int64_t v) { return std::to_string(v); }
inline std::string jnum(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}
inline std::string jbool(bool b) { return b ? "true" : "false"; }

// an ordered JSON object; values are JSON text
struct Obj {
    std::vector<std::pair<std::string, std::string>> kv;
    Obj& raw(const std::string& k, const std::string& json) {
        for (auto& p : kv)
            if (p.first == k) {
                p.second = json;
                return *this;
            }
        kv.emplace_back(k, json);
        return *this;
    }
    Obj& i(const std::string& k, int64_t v) { return raw(k, jnum(v)); }
    Obj& d(const std::string& k, double v) { return raw(k, jnum(v)); }
    Obj& s(const std::string& k, const std::string& v) { return raw(k, jstr(v)); }
    Obj& b(const std::string& k, bool v) { return raw(k, jbool(v)); }
    Obj& o(const std::string& k, const Obj& v) { return raw(k, v.str()); }
    std::string str() const {
        std::string o = "{";
        for (size_t n = 0; n < kv.size(); ++n) {
            if (n) o += ",";
            o += jstr(kv[n].first) + ":" + kv[n].second;
        }
        return o + "}";
    }
};

inline std::string jarr(const std::vector<std::string>& items) {
    std::string o = "[";
    for (size_t n = 0; n < items.size(); ++n) {
        if (n) o += ",";
        o += items[n];
    }
    return o + "]";
}
template <class T>
inline std::string jarr_num(const std::vector<T>& v) {
    std::vector<std::string> items;
    for (auto x : v) items.push_back(jnum(static_cast<int64_t>(x)));
    return jarr(items);
}

// ---------------------------------------------------------------- options
struct Args {
    int argc;
    char** argv;
    std::vector<bool> used;
    std::string usage;
    Args(int c, char** v, std::string u) : argc(c), argv(v), used(size_t(c), false), usage(std::move(u)) {
        for (int k = 1; k < argc; ++k)
            if (!std::strcmp(argv[k], "--help") || !std::strcmp(argv[k], "-h")) {
                std::printf("usage: %s %s\n", argv[0], usage.c_str());
                std::exit(0);
            }
    }
    const char* value(const char* name) {
        size_t n = std::strlen(name);
        for (int k = 1; k < argc; ++k) {
            if (!std::strcmp(argv[k], name)) {
                if (k + 1 >= argc) {
                    std::fprintf(stderr, "%s: %s needs a value\nusage: %s %s\n", argv[0], name, argv[0], usage.c_str());
                    std::exit(2);
                }
                used[size_t(k)] = used[size_t(k + 1)] = true;
                return argv[k + 1];
            }
            if (!std::strncmp(argv[k], name, n) && argv[k][n] == '=') {
                used[size_t(k)] = true;
                return argv[k] + n + 1;
            }
        }
        return nullptr;
    }
    long get(const char* name, long def, long lo = 0, long hi = 1L << 40) {
        const char* v = value(name);
        if (!v) return def;
        char* end = nullptr;
        long x = std::strtol(v, &end, 10);
        if (!*v || *end || x < lo || x > hi) {
            std::fprintf(stderr, "%s: %s wants an integer in [%ld, %ld], got '%s'\n", argv[0], name, lo, hi, v);
            std::exit(2);
        }
        return x;
    }
    double getd(const char* name, double def, double lo = 0, double hi = 1e12) {
        const char* v = value(name);
        if (!v) return def;
        char* end = nullptr;
        double x = std::strtod(v, &end);
        if (!*v || *end || x < lo || x > hi) {
            std::fprintf(stderr, "%s: %s wants a number in [%g, %g], got '%s'\n", argv[0], name, lo, hi, v);
            std::exit(2);
        }
        return x;
    }
    bool flag(const char* name) {
        for (int k = 1; k < argc; ++k)
            if (!std::strcmp(argv[k], name)) {
                used[size_t(k)] = true;
                return true;
            }
        return false;
    }
    void finish() {
        for (int k = 1; k < argc; ++k)
            if (!used[size_t(k)]) {
                std::fprintf(stderr, "%s: unknown argument '%s'\nusage: %s %s\n", argv[0], argv[k], argv[0], usage.c_str());
                std::exit(2);
            }
    }
    std::string command_line() const {
        std::string s;
        for (int k = 0; k < argc; ++k) {
            if (k) s += " ";
            s += argv[k];
        }
        return s;
    }
};

// ---------------------------------------------------------------- the report
struct Report {
    Obj top;
    std::vector<std::pair<int64_t, std::string>> phases;  // (start_ns, JSON), sorted at finish

    Report(const std::string& program, const Args& args) {
        top.s("program", program);
        top.s("command", args.command_line());
        top.i("pid", int64_t(getpid()));
        top.i("t0_steady_ns", origin_steady_ns());
    }

    // a phase: what, host start/end in ns since zoo::start(), and optional extras (at_frame, ...)
    void phase(const std::string& what, int64_t start_ns, int64_t end_ns, Obj extra = Obj()) {
        Obj p;
        p.s("what", what);
        for (auto& kv : extra.kv) p.raw(kv.first, kv.second);
        p.i("start_ns", start_ns);
        p.i("end_ns", end_ns);
        phases.emplace_back(start_ns, p.str());
    }

    void device_info() {
        int dev = 0, rt = 0, drv = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        cudaDeviceProp prop;
        CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
        CUDA_CHECK(cudaRuntimeGetVersion(&rt));
        CUDA_CHECK(cudaDriverGetVersion(&drv));
        Obj d;
        d.s("name", prop.name).i("sm", prop.major * 10 + prop.minor).i("cuda_runtime", rt).i("cuda_driver", drv);
        top.o("device", d);
    }

    // the common frame description
    void frame_info(int npix) {
        Obj f;
        f.i("pixels", npix).i("bytes", int64_t(npix) * 2).s("dtype", "uint16").d("pedestal", kPedestal)
            .d("threshold", kThreshold).i("hit_period", kHitPeriod);
        top.o("frame", f);
    }

    // prints "rate:" (and "throughput:" when h2d_bytes >= 0), then the ZOO line; returns nothing.
    // reported_factor scales only the printed throughput (the --rate-bug of multi_kernel).
    void finish(int64_t frames, double loop_s, int64_t h2d_bytes_loop, double reported_factor = 1.0,
                const char* unit = "frames/s") {
        double fps = loop_s > 0 ? double(frames) / loop_s : 0.0;
        std::printf("rate: %.1f %s\n", fps, unit);
        Obj rep;
        rep.d("rate", fps).s("rate_unit", unit);
        if (h2d_bytes_loop >= 0) {
            double gbps = loop_s > 0 ? double(h2d_bytes_loop) / loop_s / 1e9 : 0.0;
            double shown = gbps * reported_factor;
            std::printf("throughput: %.3f GB/s\n", shown);
            rep.d("throughput_gbps", shown);
            top.d("true_throughput_gbps", gbps);
            top.i("h2d_bytes_loop", h2d_bytes_loop);
        }
        top.o("reported", rep);
        top.d("true_rate", fps);
        top.d("loop_s", loop_s);
        std::stable_sort(phases.begin(), phases.end(),
                         [](const std::pair<int64_t, std::string>& a, const std::pair<int64_t, std::string>& b) {
                             return a.first < b.first;
                         });
        std::vector<std::string> list;
        for (auto& p : phases) list.push_back(p.second);
        top.raw("phases", jarr(list));
        std::printf("ZOO %s\n", top.str().c_str());
        std::fflush(stdout);
    }
};

// a map of kernel base name -> count, as JSON
inline std::string kmap(std::initializer_list<std::pair<const char*, double>> items) {
    Obj o;
    for (auto& p : items) o.d(p.first, p.second);
    return o.str();
}

inline uint16_t* pinned_ring(int slots, int npix) {
    uint16_t* h = nullptr;
    CUDA_CHECK(cudaMallocHost(&h, size_t(slots) * size_t(npix) * sizeof(uint16_t)));
    for (int s = 0; s < slots; ++s) fill_frame(h + size_t(s) * npix, npix, s);
    return h;
}

// checks a D2H preview (the first kPreviewFloats calibrated pixels of a frame of ring slot `slot`)
inline bool preview_ok(const float* got, int slot) {
    for (int i = 0; i < kPreviewFloats; ++i)
        if (got[i] != expected_calib(i, slot)) return false;
    return true;
}

}  // namespace zoo
