// rlx audio kernels (see lower/audio.rs). common.cuh is prepended.
