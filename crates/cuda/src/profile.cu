// hold_stream: keeps the stream busy for `ns` nanoseconds, so that the host can queue a whole
// decode step behind it and the per-kernel events measure GPU time, not the host's launch pace.
// One thread.
extern "C" __global__ void hold_stream(long long ns) {
    long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
