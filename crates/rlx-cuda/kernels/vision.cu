// rlx vision kernels (see lower/vision.rs). common.cuh is prepended.
