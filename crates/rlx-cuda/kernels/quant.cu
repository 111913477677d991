// rlx quant kernels (see lower/quant.rs). common.cuh is prepended.
