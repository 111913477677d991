// rlx linalg kernels (see lower/linalg.rs). common.cuh is prepended.
