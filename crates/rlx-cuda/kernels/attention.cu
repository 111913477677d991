// rlx attention kernels (see lower/attention.rs). common.cuh is prepended.
