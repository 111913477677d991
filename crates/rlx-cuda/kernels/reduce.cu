// rlx reduce kernels (see lower/reduce.rs). common.cuh is prepended.
