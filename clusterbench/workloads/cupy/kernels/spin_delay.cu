// A fixed delay on the GPU, for testing compare's sensitivity (delay_us_per_frame, docs/workload.md):
// one thread spins on %globaltimer (ns) until `ns` have passed since it started. It reads and writes no
// memory, so the finder's output is the same bit for bit; the stream's next work waits for it, so the
// delay shows in the trace's kernel bar and in sustained FPS.
extern "C" __global__ void spin_delay(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
