// rlx norm kernels (see lower/norm.rs). common.cuh is prepended.
