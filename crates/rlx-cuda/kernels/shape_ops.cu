// rlx shape_ops kernels (see lower/shape_ops.rs). common.cuh is prepended.
