// rlx elementwise kernels (see lower/elementwise.rs). common.cuh is prepended.
