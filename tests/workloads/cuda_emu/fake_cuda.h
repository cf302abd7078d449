// A tiny CPU emulation of the CUDA features the clusterbench kernels use (tests only, never shipped): one std::thread per CUDA
// thread, std::barrier for __syncthreads and for warp exchanges, one forked process per block for
// cooperative launches (so that static "__shared__" arrays are per block), a process-shared
// pthread barrier for grid.sync(), and global memory in a MAP_SHARED arena.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>
#include <cstdio>
#include <cstdlib>

struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) alignas(n)

inline std::barrier<>* g_block_bar = nullptr;
inline std::barrier<>* g_warp_bar[64];
inline uint64_t g_xch[64][32];
inline int g_or_flag;
inline pthread_barrier_t* g_grid_bar = nullptr;

inline int emu_tid() { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)); }
inline void __syncthreads() { g_block_bar->arrive_and_wait(); }
inline int __syncthreads_or(int p) {
    g_block_bar->arrive_and_wait();
    if (emu_tid() == 0) g_or_flag = 0;
    g_block_bar->arrive_and_wait();
    if (p) __atomic_store_n(&g_or_flag, 1, __ATOMIC_SEQ_CST);
    g_block_bar->arrive_and_wait();
    int r = __atomic_load_n(&g_or_flag, __ATOMIC_SEQ_CST);
    g_block_bar->arrive_and_wait();
    return r;
}
inline void __syncwarp(unsigned = 0xffffffffu) { g_warp_bar[emu_tid() >> 5]->arrive_and_wait(); }
template <class T> inline T emu_xch(T v, int src) {
    const int t = emu_tid(), w = t >> 5, l = t & 31;
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    g_xch[w][l] = b;
    g_warp_bar[w]->arrive_and_wait();
    uint64_t o = g_xch[w][src & 31];
    g_warp_bar[w]->arrive_and_wait();
    T r;
    std::memcpy(&r, &o, sizeof(T));
    return r;
}
template <class T> inline T __shfl_sync(unsigned, T v, int src) { return emu_xch(v, src); }
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d) {
    const int l = emu_tid() & 31;
    T o = emu_xch(v, l - (int)d < 0 ? l : l - (int)d);
    return o;
}
inline unsigned __ballot_sync(unsigned, int p) {
    const int t = emu_tid(), w = t >> 5, l = t & 31;
    g_xch[w][l] = p ? 1 : 0;
    g_warp_bar[w]->arrive_and_wait();
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= (unsigned)(g_xch[w][i] & 1) << i;
    g_warp_bar[w]->arrive_and_wait();
    return r;
}
inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { T r; __atomic_load(p, &r, __ATOMIC_RELAXED); return r; }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline unsigned atomicExch(unsigned* p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicOr(unsigned* p, unsigned v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline unsigned __float_as_uint(float v) { unsigned u; std::memcpy(&u, &v, 4); return u; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double v) { long long d; std::memcpy(&d, &v, 8); return d; }
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
using std::fmax; using std::fmaxf; using std::sqrt; using std::fma;

// ---- launches ----
inline uint8_t* g_arena = nullptr;
inline size_t g_arena_used = 0;
inline void* dalloc(size_t n) {
    if (!g_arena) {
        g_arena = (uint8_t*)mmap(nullptr, (size_t)2 << 30, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (g_arena == MAP_FAILED) { perror("mmap"); exit(1); }
    }
    void* p = g_arena + g_arena_used;
    g_arena_used += (n + 255) & ~(size_t)255;
    std::memset(p, 0, n);
    return p;
}

inline void run_block(unsigned b, dim3 block, const std::function<void()>& f) {
    const int nt = (int)(block.x * block.y * block.z);
    std::barrier<> bb(nt);
    g_block_bar = &bb;
    for (int w = 0; w < (nt + 31) / 32; ++w) { g_warp_bar[w] = new std::barrier<>(32); }
    std::vector<std::thread> th;
    for (int t = 0; t < nt; ++t) {
        th.emplace_back([&, t] {
            threadIdx.x = t % block.x; threadIdx.y = (t / block.x) % block.y; threadIdx.z = t / (block.x * block.y);
            blockIdx.x = b;
            f();
        });
    }
    for (auto& x : th) x.join();
    for (int w = 0; w < (nt + 31) / 32; ++w) delete g_warp_bar[w];
}

// Blocks one after the other in this process (no inter-block waits allowed).
inline void launch_seq(unsigned grid, dim3 block, const std::function<void()>& f) {
    gridDim.x = grid; blockDim = block;
    for (unsigned b = 0; b < grid; ++b) run_block(b, block, f);
}

// Every block at once, one process each (cooperative launch): grid.sync() and flags work.
inline void launch_coop(unsigned grid, dim3 block, const std::function<void()>& f) {
    gridDim.x = grid; blockDim = block;
    pthread_barrier_t* gb = (pthread_barrier_t*)dalloc(sizeof(pthread_barrier_t));
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(gb, &a, grid * block.x * block.y * block.z);
    g_grid_bar = gb;
    std::vector<pid_t> kids;
    for (unsigned b = 0; b < grid; ++b) {
        pid_t pid = fork();
        if (pid == 0) { run_block(b, block, f); _exit(0); }
        kids.push_back(pid);
    }
    for (pid_t k : kids) { int st; waitpid(k, &st, 0); if (!WIFEXITED(st) || WEXITSTATUS(st)) { fprintf(stderr, "block died\n"); exit(1); } }
}
