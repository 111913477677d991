// rlx profiling aid (see src/exec/profile.rs). common.cuh is prepended.
//
// Holds the stream for `cycles` clock cycles, so the host can queue every timed step behind it
// and the GPU then runs them back to back: without it, steps shorter than a launch's host
// cost would be timed with the GPU idling for the next launch.
extern "C" __global__ void rlx_spin(long long cycles) {
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
        __nanosleep(1000);
    }
}
