// no_nvtx: a pipeline with no NVTX at all, whose kernel is JIT-compiled at run time (NVRTC, then
// the driver API's cuModuleLoadData), as pipelines built on CuPy/NVRTC or a plug-in system do.
//
// Set-up: cudaMalloc the device buffers, cudaMallocHost a pinned ring of 8 input frames and the
// per-frame D2H slots, one H2D of a frame (so the GPU has been busy once), then NVRTC compiles
// zoo_calib_jit on the host: a long GPU-idle gap that ends in cuModuleLoadData.
// Steady loop (one stream): per frame an async H2D of 320,000 bytes from pinned memory, the JIT
// kernel (cuLaunchKernel), a D2H of 1,024 bytes (the first 256 calibrated pixels), and a
// cudaStreamSynchronize every --sync-every frames. At frame N/2: (a) cudaMalloc + cudaFree of
// --big-mib MiB (2 GiB by default; cudaFree synchronizes the device), (b) NVRTC compiles a second
// kernel from different source, zoo_calib_jit2, which is loaded and used from then on.
//
// Build: nvcc -O2 -arch=sm_90 -lineinfo no_nvtx.cu -lnvrtc -lcuda -ldl   (tests/zoo/build.sh)
#include "zoo.cuh"

#include <dlfcn.h>

#if __has_include(<nvrtc.h>)
#include <nvrtc.h>
#define ZOO_NVRTC_HEADER 1
#else
// The few NVRTC entry points used, as declared by nvrtc.h (a C API, stable since CUDA 7), for a
// toolkit that ships libnvrtc without its header (e.g. NVRTC from the nvidia-cuda-nvrtc wheel).
#define ZOO_NVRTC_HEADER 0
extern "C" {
typedef enum : int { NVRTC_SUCCESS = 0 } nvrtcResult;  // int-sized, as in nvrtc.h
typedef struct _nvrtcProgram* nvrtcProgram;
const char* nvrtcGetErrorString(nvrtcResult result);
nvrtcResult nvrtcVersion(int* major, int* minor);
nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int numHeaders,
                               const char* const* headers, const char* const* includeNames);
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog);
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char* const* options);
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* cubinSizeRet);
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin);
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* logSizeRet);
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log);
}
#endif

#if __has_include(<cuda.h>)
#include <cuda.h>
#define ZOO_CUDA_H 1
#else
// The driver API entry points used, as declared by cuda.h (none of them is versioned there).
#define ZOO_CUDA_H 0
extern "C" {
typedef int CUresult;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
CUresult cuGetErrorName(CUresult error, const char** pStr);
CUresult cuCtxGetCurrent(CUcontext* pctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, int dev);
CUresult cuModuleLoadData(CUmodule* module, const void* image);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name);
CUresult cuLaunchKernel(CUfunction f, unsigned gridDimX, unsigned gridDimY, unsigned gridDimZ, unsigned blockDimX,
                        unsigned blockDimY, unsigned blockDimZ, unsigned sharedMemBytes, CUstream hStream,
                        void** kernelParams, void** extra);
}
#endif

#define CU_CHECK(call)                                                                              \
    do {                                                                                            \
        CUresult zoo_cu_ = (call);                                                                  \
        if (zoo_cu_ != 0) {                                                                         \
            const char* zoo_name_ = nullptr;                                                        \
            cuGetErrorName(zoo_cu_, &zoo_name_);                                                    \
            std::fprintf(stderr, "%s:%d: CUDA driver error %d (%s) in %s\n", __FILE__, __LINE__,    \
                         int(zoo_cu_), zoo_name_ ? zoo_name_ : "?", #call);                         \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)

#define NVRTC_CHECK(call)                                                                           \
    do {                                                                                            \
        nvrtcResult zoo_rt_ = (call);                                                               \
        if (zoo_rt_ != NVRTC_SUCCESS) {                                                             \
            std::fprintf(stderr, "%s:%d: NVRTC error %d (%s) in %s\n", __FILE__, __LINE__,          \
                         int(zoo_rt_), nvrtcGetErrorString(zoo_rt_), #call);                        \
            std::exit(1);                                                                           \
        }                                                                                           \
    } while (0)

// The first JIT kernel: the same calibration as zoo_calib.
static const char* kSrc1 = R"(
extern "C" __global__ void zoo_calib_jit(const unsigned short* in, float* out, int npix,
                                         float pedestal, float threshold) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < npix; i += gridDim.x * blockDim.x) {
        float v = (float)in[i] - pedestal;
        out[i] = v > threshold ? v : 0.0f;
    }
}
)";

// The second JIT kernel: different source (a gain and restrict pointers), the same results at gain 1.
static const char* kSrc2 = R"(
extern "C" __global__ void zoo_calib_jit2(const unsigned short* __restrict__ in, float* __restrict__ out,
                                          int npix, float pedestal, float threshold, float gain) {
    const int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < npix; i += stride) {
        const float v = ((float)__ldg(in + i) - pedestal) * gain;
        out[i] = (v > threshold) ? v : 0.0f;
    }
}
)";

// libnvrtc dlopens libnvrtc-builtins.so.MAJOR.MINOR by name; where NVRTC comes from a pip wheel
// (nvidia/cu13/lib) that folder is on no search path, so load it first from beside libnvrtc.
// Returns libnvrtc's path; `builtins` gets the preloaded file, or "" when it was not there (then
// the loader's search path must find it, as it does for a toolkit in ld.so.conf).
static std::string preload_nvrtc_builtins(std::string& builtins) {
    builtins.clear();
    void* sym = dlsym(RTLD_DEFAULT, "nvrtcVersion");
    Dl_info info;
    if (!sym || !dladdr(sym, &info) || !info.dli_fname) return "";
    std::string lib = info.dli_fname;
    std::string dir = lib.substr(0, lib.rfind('/') + 1);
    int major = 0, minor = 0;
    NVRTC_CHECK(nvrtcVersion(&major, &minor));
    std::string path = dir + "libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor);
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) builtins = path;
    return lib;
}

struct Jit {
    CUmodule mod = nullptr;
    CUfunction fn = nullptr;
    size_t cubin_bytes = 0;
};

static Jit jit(zoo::Report& rep, const char* src, const char* name, int sm, int64_t at_frame) {
    Jit j;
    int64_t t0 = zoo::now_ns();
    nvrtcProgram prog;
    NVRTC_CHECK(nvrtcCreateProgram(&prog, src, "zoo_jit.cu", 0, nullptr, nullptr));
    std::string arch = "--gpu-architecture=sm_" + std::to_string(sm);
    const char* opts[] = {arch.c_str(), "--std=c++17"};
    nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
    if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        nvrtcGetProgramLogSize(prog, &n);
        std::string log(n, '\0');
        nvrtcGetProgramLog(prog, &log[0]);
        ZOO_FAIL("NVRTC could not compile %s (%s):\n%s", name, nvrtcGetErrorString(r), log.c_str());
    }
    NVRTC_CHECK(nvrtcGetCUBINSize(prog, &j.cubin_bytes));
    std::vector<char> cubin(j.cubin_bytes);
    NVRTC_CHECK(nvrtcGetCUBIN(prog, cubin.data()));
    NVRTC_CHECK(nvrtcDestroyProgram(&prog));
    int64_t t1 = zoo::now_ns();
    CU_CHECK(cuModuleLoadData(&j.mod, cubin.data()));
    CU_CHECK(cuModuleGetFunction(&j.fn, j.mod, name));
    int64_t t2 = zoo::now_ns();
    zoo::Obj e;
    e.s("kernel", name).i("cubin_bytes", int64_t(j.cubin_bytes));
    if (at_frame >= 0) e.i("at_frame", at_frame);
    rep.phase("jit", t0, t1, e);
    zoo::Obj l;
    l.s("kernel", name).s("api", "cuModuleLoadData");
    if (at_frame >= 0) l.i("at_frame", at_frame);
    rep.phase("module_load", t1, t2, l);
    return j;
}

int main(int argc, char** argv) {
    zoo::start();
    zoo::Args args(argc, argv, "[--frames N] [--sync-every K] [--big-mib M]");
    const long frames = args.get("--frames", 1000, 2);
    const long sync_every = args.get("--sync-every", 50, 1);
    const long big_mib = args.get("--big-mib", 2048, 0);
    args.finish();
    const long half = frames / 2;

    zoo::Report rep("no_nvtx", args);
    int64_t t0 = zoo::now_ns();
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaFree(nullptr));  // creates the primary context, current on this thread
    CUcontext ctx = nullptr;
    CU_CHECK(cuCtxGetCurrent(&ctx));
    const bool ctx_from_runtime = ctx != nullptr;
    if (!ctx) {  // the runtime left no context current on this thread: bind its primary context
        CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CU_CHECK(cuCtxSetCurrent(ctx));
    }
    rep.device_info();
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    const int sm = major * 10 + minor;
    rep.phase("context", t0, zoo::now_ns());

    // set-up: buffers, pinned memory, one H2D so that the GPU was busy before the JIT gap
    t0 = zoo::now_ns();
    const int ring = 8;
    uint16_t* h_in = zoo::pinned_ring(ring, zoo::kNpix);
    float* h_out = nullptr;
    CUDA_CHECK(cudaMallocHost(&h_out, size_t(frames) * zoo::kPreviewBytes));
    uint16_t* d_in = nullptr;
    float* d_out = nullptr;
    CUDA_CHECK(cudaMalloc(&d_in, zoo::kFrameBytes));
    CUDA_CHECK(cudaMalloc(&d_out, size_t(zoo::kNpix) * sizeof(float)));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, zoo::kFrameBytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    rep.phase("setup", t0, zoo::now_ns());
    int64_t copies_h2d = 1, copies_d2h = 0, syncs = 1;

    std::string builtins;
    const std::string nvrtc_lib = preload_nvrtc_builtins(builtins);
    Jit j1 = jit(rep, kSrc1, "zoo_calib_jit", sm, -1);
    Jit j2;

    int n = zoo::kNpix;
    float ped = zoo::kPedestal, thr = zoo::kThreshold, gain = 1.0f;
    const unsigned grid = zoo::grid_for(n);
    int64_t launches1 = 0, launches2 = 0;

    int64_t loop0 = zoo::now_ns();
    auto c0 = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
        if (f == half) {
            int64_t a0 = zoo::now_ns();
            void* big = nullptr;
            if (big_mib > 0) {
                CUDA_CHECK(cudaMalloc(&big, size_t(big_mib) << 20));
                CUDA_CHECK(cudaFree(big));
            }
            zoo::Obj e;
            e.i("at_frame", f).i("bytes", int64_t(big_mib) << 20);
            rep.phase("big_alloc_free", a0, zoo::now_ns(), e);
            j2 = jit(rep, kSrc2, "zoo_calib_jit2", sm, f);
        }
        const int slot = int(f % ring);
        CUDA_CHECK(cudaMemcpyAsync(d_in, h_in + size_t(slot) * n, zoo::kFrameBytes, cudaMemcpyHostToDevice, stream));
        if (f < half) {
            void* params[] = {&d_in, &d_out, &n, &ped, &thr};
            CU_CHECK(cuLaunchKernel(j1.fn, grid, 1, 1, zoo::kBlock, 1, 1, 0, (CUstream)stream, params, nullptr));
            ++launches1;
        } else {
            void* params[] = {&d_in, &d_out, &n, &ped, &thr, &gain};
            CU_CHECK(cuLaunchKernel(j2.fn, grid, 1, 1, zoo::kBlock, 1, 1, 0, (CUstream)stream, params, nullptr));
            ++launches2;
        }
        CUDA_CHECK(cudaMemcpyAsync(h_out + size_t(f) * zoo::kPreviewFloats, d_out, zoo::kPreviewBytes,
                                   cudaMemcpyDeviceToHost, stream));
        copies_h2d++;
        copies_d2h++;
        if ((f + 1) % sync_every == 0) {
            CUDA_CHECK(cudaStreamSynchronize(stream));
            ++syncs;
        }
    }
    if (frames % sync_every != 0) {
        CUDA_CHECK(cudaStreamSynchronize(stream));
        ++syncs;
    }
    double loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    int64_t loop1 = zoo::now_ns();
    rep.phase("loop", loop0, loop1, zoo::Obj().i("frames", frames));

    for (long f = 0; f < frames; ++f)
        if (!zoo::preview_ok(h_out + size_t(f) * zoo::kPreviewFloats, int(f % ring)))
            ZOO_FAIL("frame %ld: the D2H preview differs from the expected calibration", f);

    CU_CHECK(cuModuleUnload(j1.mod));
    CU_CHECK(cuModuleUnload(j2.mod));
    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(d_in));
    CUDA_CHECK(cudaFree(d_out));
    CUDA_CHECK(cudaFreeHost(h_in));
    CUDA_CHECK(cudaFreeHost(h_out));

    int nv_major = 0, nv_minor = 0;
    NVRTC_CHECK(nvrtcVersion(&nv_major, &nv_minor));
    rep.frame_info(n);
    rep.top.i("frames", frames).i("streams", 1).i("threads", 1);
    rep.top.raw("kernels_per_frame", zoo::kmap({{"zoo_calib_jit", double(half) / frames},
                                                {"zoo_calib_jit2", double(frames - half) / frames}}));
    rep.top.raw("launches", zoo::Obj().i("zoo_calib_jit", launches1).i("zoo_calib_jit2", launches2).str());
    rep.top.raw("kernel_frames", zoo::Obj()
                                     .raw("zoo_calib_jit", zoo::jarr_num(std::vector<long>{0, half}))
                                     .raw("zoo_calib_jit2", zoo::jarr_num(std::vector<long>{half, frames}))
                                     .str());
    rep.top.i("h2d_bytes_per_frame", int64_t(zoo::kFrameBytes)).i("d2h_bytes_per_frame", int64_t(zoo::kPreviewBytes));
    rep.top.i("memsets_per_frame", 0).d("host_spin_us_per_frame", 0.0);
    rep.top.raw("copies", zoo::Obj().i("h2d", copies_h2d).i("d2h", copies_d2h).i("memset", 0).str());
    rep.top.i("sync_every", sync_every).i("stream_syncs", syncs);
    rep.top.i("big_alloc_bytes", int64_t(big_mib) << 20).i("switch_frame", half);
    rep.top.raw("nvtx", "null");
    rep.top.raw("jit", zoo::Obj()
                           .s("compiler", "nvrtc")
                           .s("nvrtc_version", std::to_string(nv_major) + "." + std::to_string(nv_minor))
                           .s("nvrtc_library", nvrtc_lib)
                           .s("nvrtc_builtins_preloaded", builtins)
                           .b("nvrtc_header", ZOO_NVRTC_HEADER != 0)
                           .b("cuda_h", ZOO_CUDA_H != 0)
                           .s("target", "sm_" + std::to_string(sm) + " cubin")
                           .s("load", "cuModuleLoadData")
                           .s("launch", "cuLaunchKernel")
                           .s("context", ctx_from_runtime ? "the runtime's primary context, current after cudaFree(0)"
                                                          : "primary context retained and set current (cuDevicePrimaryCtxRetain)")
                           .str());
    rep.top.b("checked", true);
    rep.finish(frames, loop_s, int64_t(frames) * int64_t(zoo::kFrameBytes));
    return 0;
}
