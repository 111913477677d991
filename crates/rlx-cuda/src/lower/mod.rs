//! Lowering: the graph is walked once and every node becomes launches (or a cuBLASLt call)
//! over device pointers that are fixed for the life of the plan. One arm per op group lives
//! in its own file (`lower/<group>.rs`, kernels in `kernels/<group>.cu`); the plumbing an arm
//! needs — fetch inputs, normalise an axis, pick the storage suffix, launch — is here, so each
//! arm is just the op. An arm that cannot lower a node returns `LowerError` with the reason; the node
//! then runs on the CPU thunks (`RLX_TRACE=1` prints the reason).
pub mod audio;
pub mod collective;
pub mod elementwise;
pub mod index;
pub mod linalg;
pub mod norm;
pub mod reduce;
pub mod region;
pub mod shape;
pub mod transformer;
pub mod vision;

use crate::gemm::GemmDesc;
use crate::kernels::Kernel;
use crate::plan::{LowerEnv, Step};
use crate::precision::Precision;
use crate::CudaError;
use rlx_ir::{DType, Node, Op, OpKind, OpKindSet};

/// Why lowering a node did not record its launches. The two cases are handled oppositely:
/// `Unsupported` is a legitimate answer (the node runs on the CPU thunks and the dispatch
/// report says why); `Internal` is a failure of the GPU path itself (NVRTC, module load,
/// symbol lookup, cuBLASLt, a driver call, a lowering bug) and fails the compile, since a
/// quiet CPU fallback would hide a broken install or kernel.
#[derive(Debug)]
pub enum LowerError {
    /// Shape, dtype, rank or parameters outside what the kernels handle.
    Unsupported(String),
    /// The GPU path failed; never turned into a fallback.
    Internal(CudaError),
}

impl From<CudaError> for LowerError {
    fn from(e: CudaError) -> LowerError {
        LowerError::Internal(e)
    }
}

impl LowerError {
    /// An internal failure described by `msg` (a lowering bug, not a device error).
    pub fn internal(node: &Node, msg: impl Into<String>) -> LowerError {
        LowerError::Internal(CudaError::Node {
            node: node.label(),
            msg: msg.into(),
        })
    }
}

pub type Lowered = Result<(), LowerError>;

/// `unsupported!("...", args)`: return `LowerError::Unsupported` from a lowering function
/// (the node then runs on the CPU).
#[macro_export]
macro_rules! unsupported {
    ($($t:tt)*) => { return Err($crate::lower::LowerError::Unsupported(format!($($t)*))) };
}

/// A tensor in device memory: contiguous row-major, in its storage dtype.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevTensor {
    pub ptr: u64,
    pub dims: Vec<usize>,
    pub dtype: DType,
}

impl DevTensor {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }
    pub fn bytes(&self) -> usize {
        self.numel() * self.dtype.size_bytes()
    }
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    /// Row-major element strides.
    pub fn strides(&self) -> Vec<usize> {
        rlx_ir::strides(&self.dims)
    }
    /// Pointer to element `i`.
    pub fn at(&self, i: usize) -> u64 {
        self.ptr + (i * self.dtype.size_bytes()) as u64
    }
}

/// Mirrors `Dims8` in `kernels/common.cuh`: dims and element strides, rank <= 8.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims8 {
    pub rank: i32,
    pub pad_: i32,
    pub d: [i64; 8],
    pub s: [i64; 8],
}

impl Dims8 {
    /// Explicit dims and element strides.
    pub fn new(dims: &[usize], strides: &[usize]) -> Result<Dims8, LowerError> {
        if dims.len() > 8 || strides.len() != dims.len() {
            unsupported!("rank {} is above the kernels' limit of 8", dims.len());
        }
        let mut v = Dims8 {
            rank: dims.len() as i32,
            pad_: 0,
            d: [1; 8],
            s: [0; 8],
        };
        for k in 0..dims.len() {
            v.d[k] = dims[k] as i64;
            v.s[k] = strides[k] as i64;
        }
        Ok(v)
    }
    pub fn contiguous(dims: &[usize]) -> Result<Dims8, LowerError> {
        Dims8::new(dims, &rlx_ir::strides(dims))
    }
    /// A view of a contiguous tensor of `in_dims` broadcast (numpy rules, right-aligned) to
    /// `out_dims`: dims are `out_dims`, broadcast axes get stride 0.
    pub fn broadcast(in_dims: &[usize], out_dims: &[usize]) -> Result<Dims8, LowerError> {
        if in_dims.len() > out_dims.len() {
            unsupported!("cannot broadcast {in_dims:?} to {out_dims:?}");
        }
        let lead = out_dims.len() - in_dims.len();
        let cs = rlx_ir::strides(in_dims);
        let mut strides = vec![0usize; out_dims.len()];
        for k in 0..in_dims.len() {
            let (i, o) = (in_dims[k], out_dims[lead + k]);
            if i == o {
                strides[lead + k] = cs[k];
            } else if i != 1 {
                unsupported!("cannot broadcast {in_dims:?} to {out_dims:?}");
            }
        }
        Dims8::new(out_dims, &strides)
    }
}

/// Kernel arguments, in the order of the kernel's parameters. Each value keeps its own
/// 8-byte-aligned storage so the launch can pass a pointer to it.
#[derive(Clone, Debug, Default)]
pub struct KArgs {
    pub(crate) vals: Vec<Vec<u64>>,
    /// The exact byte size of each value (the storage is rounded up to 8), so a test can
    /// compare a family's packing with the parameter list in its `.cu` source.
    pub(crate) sizes: Vec<usize>,
}

impl KArgs {
    pub fn new() -> KArgs {
        KArgs::default()
    }
    /// Any plain-old-data value (`#[repr(C)]` structs such as `Dims8`, scalars).
    pub fn pod<T: Copy>(mut self, v: T) -> KArgs {
        let n = std::mem::size_of::<T>().div_ceil(8).max(1);
        let mut buf = vec![0u64; n];
        // SAFETY: buf holds at least size_of::<T>() bytes and T is Copy (no drop, no
        // interior references are created).
        unsafe { std::ptr::write_unaligned(buf.as_mut_ptr() as *mut T, v) };
        self.vals.push(buf);
        self.sizes.push(std::mem::size_of::<T>());
        self
    }
    pub fn ptr(self, p: u64) -> KArgs {
        self.pod(p)
    }
    pub fn i32(self, v: i32) -> KArgs {
        self.pod(v)
    }
    pub fn u32(self, v: u32) -> KArgs {
        self.pod(v)
    }
    pub fn i64(self, v: i64) -> KArgs {
        self.pod(v)
    }
    pub fn f32(self, v: f32) -> KArgs {
        self.pod(v)
    }
    pub fn f64(self, v: f64) -> KArgs {
        self.pod(v)
    }
    pub fn dims(self, v: Dims8) -> KArgs {
        self.pod(v)
    }
}

/// One kernel launch: a typed kernel and its launch geometry (a candidate of
/// `NodeCtx::launch_fastest`, or what `NodeCtx::run` records).
pub struct KernelLaunch {
    pub kernel: Kernel,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub smem: u32,
    /// Launch with PDL (see `plan::Launch::pdl` for what the kernel must do).
    pub pdl: bool,
}

impl KernelLaunch {
    pub fn new(kernel: Kernel, grid: [u32; 3], block: [u32; 3], smem: u32) -> KernelLaunch {
        KernelLaunch {
            kernel,
            grid,
            block,
            smem,
            pdl: false,
        }
    }

    /// The same launch with PDL: only for a kernel that waits on its predecessor
    /// (`pdl_wait()` in every thread) before reading its inputs or writing.
    pub fn with_pdl(self) -> KernelLaunch {
        KernelLaunch { pdl: true, ..self }
    }
}

/// Everything one node's lowering sees.
pub struct NodeCtx<'a> {
    pub node: &'a Node,
    pub ins: Vec<DevTensor>,
    /// Per input: a param or constant (or a view of one) that no kernel of the plan writes.
    pub fixed: Vec<bool>,
    pub out: DevTensor,
    pub precision: Precision,
    pub(crate) env: &'a mut LowerEnv,
}

impl<'a> NodeCtx<'a> {
    pub fn op(&self) -> &'a Op {
        &self.node.op
    }

    pub fn input(&self, i: usize) -> Result<&DevTensor, LowerError> {
        self.ins.get(i).ok_or_else(|| {
            LowerError::Unsupported(format!("missing input {i} (have {})", self.ins.len()))
        })
    }

    /// Normalise a possibly negative axis against `rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize, LowerError> {
        rlx_ir::normalize_axis(axis, rank).map_err(LowerError::Unsupported)
    }

    /// A launch of a typed kernel, labelled with this node.
    fn make_launch(&mut self, l: KernelLaunch) -> Result<crate::plan::Launch, LowerError> {
        let k = l.kernel;
        let f = self.env.function(&k.src, &k.name)?;
        if l.grid.contains(&0) || l.block.contains(&0) {
            unsupported!(
                "empty launch of {}: grid {:?} block {:?}",
                k.name,
                l.grid,
                l.block
            );
        }
        Ok(crate::plan::Launch {
            func: f,
            grid: l.grid,
            block: l.block,
            smem: l.smem,
            args: k.args,
            label: format!("{}#{} {}", self.node.op.kind(), self.node.id.0, k.name),
            pdl: l.pdl && self.env.gpu.hopper_or_later(),
        })
    }

    /// Record one launch of a typed kernel (built by a family function in `kernels::*`,
    /// which owns the symbol name and the argument order, or a generated region kernel).
    pub fn run(&mut self, k: Kernel, grid: [u32; 3], block: [u32; 3], smem: u32) -> Lowered {
        let l = self.make_launch(KernelLaunch::new(k, grid, block, smem))?;
        self.env.steps.push(Step::Kernel(l));
        Ok(())
    }

    /// `run` with one thread per element for `n` elements, 256 threads a block
    /// (grid-stride kernels may be given fewer blocks; this picks `ceil(n/256)` capped at
    /// 65535·8).
    pub fn run_1d(&mut self, k: Kernel, n: usize) -> Lowered {
        let blocks = n.div_ceil(256).clamp(1, 65535 * 8) as u32;
        self.run(k, [blocks, 1, 1], [256, 1, 1], 0)
    }

    /// `run_1d` launched with PDL: only for a kernel whose every thread calls `pdl_wait()`
    /// before it reads or writes device memory.
    pub fn run_1d_pdl(&mut self, k: Kernel, n: usize) -> Lowered {
        let blocks = n.div_ceil(256).clamp(1, 65535 * 8) as u32;
        let l = KernelLaunch::new(k, [blocks, 1, 1], [256, 1, 1], 0).with_pdl();
        let l = self.make_launch(l)?;
        self.env.steps.push(Step::Kernel(l));
        Ok(())
    }

    /// `run` launched with PDL (see `run_1d_pdl`).
    pub fn run_pdl(&mut self, k: Kernel, grid: [u32; 3], block: [u32; 3], smem: u32) -> Lowered {
        let l = self.make_launch(KernelLaunch::new(k, grid, block, smem).with_pdl())?;
        self.env.steps.push(Step::Kernel(l));
        Ok(())
    }

    /// Record the fastest of several launches that compute the same result (timed once
    /// per process for `key`, which must name everything but the pointers; see `tune`).
    pub fn launch_fastest(&mut self, key: &str, cands: Vec<KernelLaunch>) -> Lowered {
        let launches = self.make_launches(cands)?;
        let l = self.env.fastest(key, launches)?;
        self.env.steps.push(Step::Kernel(l));
        Ok(())
    }

    /// [`Self::launch_fastest`] for kernels streaming an operand from HBM: timed with the
    /// L2 cache flushed before each run.
    pub fn launch_fastest_cold(&mut self, key: &str, cands: Vec<KernelLaunch>) -> Lowered {
        let launches = self.make_launches(cands)?;
        let l = self.env.fastest_cold(key, launches)?;
        self.env.steps.push(Step::Kernel(l));
        Ok(())
    }

    fn make_launches(
        &mut self,
        cands: Vec<KernelLaunch>,
    ) -> Result<Vec<crate::plan::Launch>, LowerError> {
        cands.into_iter().map(|k| self.make_launch(k)).collect()
    }

    /// Device scratch memory that lives as long as the plan (for per-node temporaries).
    pub fn scratch(&mut self, bytes: usize) -> Result<u64, LowerError> {
        self.env.scratch(bytes)
    }

    /// Device-to-device copy.
    pub fn copy(&mut self, dst: u64, src: u64, bytes: usize) -> Lowered {
        if bytes > 0 {
            self.env.steps.push(Step::Copy { dst, src, bytes });
        }
        Ok(())
    }

    /// Zero `bytes` at `dst`.
    pub fn zero(&mut self, dst: u64, bytes: usize) -> Lowered {
        if bytes > 0 {
            self.env.steps.push(Step::Memset { dst, bytes });
        }
        Ok(())
    }

    /// A cuBLASLt matmul (see `GemmDesc`).
    pub fn gemm(&mut self, g: GemmDesc) -> Lowered {
        let g = self.env.prepare_gemm(g, self.precision)?;
        self.env.steps.push(Step::Gemm(g));
        Ok(())
    }
}

/// Lower one node: the one place an op is routed, exhaustive over `Op` (a new op does not
/// build until it has a line here). Each line destructures the op's parameters and calls its
/// group's typed function (`lower/<group>.rs`, groups as `OpKind::group`).
pub(crate) fn lower_node(ctx: &mut NodeCtx) -> Lowered {
    let node = ctx.node;
    match &node.op {
        // Leaves own device buffers (params, constants, inputs); build_plan never lowers one.
        Op::Input { .. } | Op::Param { .. } | Op::Constant { .. } => {
            Err(LowerError::internal(node, "a leaf reached lowering"))
        }
        Op::Activation(a) => elementwise::activation(ctx, *a),
        Op::Binary(op) => elementwise::binary(ctx, *op),
        Op::Compare(op) => elementwise::compare(ctx, *op),
        Op::Where => elementwise::where_(ctx),
        Op::Cast { to } => elementwise::cast(ctx, *to),
        Op::StopGradient => elementwise::stop_gradient(ctx),
        Op::MatMul => linalg::matmul(ctx),
        Op::FusedMatMulBiasAct { activation } => linalg::fused_matmul_bias_act(ctx, *activation),
        Op::DequantMatMul { scheme } => linalg::dequant_matmul(ctx, *scheme),
        Op::FusedDequantMatMul {
            scheme,
            norm_eps,
            residual,
            glu,
        } => {
            let f = linalg::Fusion {
                norm_eps: *norm_eps,
                residual: *residual,
                glu: *glu,
            };
            linalg::fused_dequant_matmul(ctx, *scheme, f)
        }
        Op::Dequantize { scheme } => linalg::dequantize(ctx, *scheme),
        Op::LayerNorm { axis, eps } => norm::layer_norm(ctx, *axis, *eps),
        Op::RmsNorm { axis, eps } => norm::rms_norm(ctx, *axis, *eps),
        Op::FusedResidualLN { has_bias, eps } => norm::fused_residual_ln(ctx, *has_bias, *eps),
        Op::FusedResidualRmsNorm { has_bias, eps } => {
            norm::fused_residual_rms_norm(ctx, *has_bias, *eps)
        }
        Op::Reduce { op, axes, .. } => reduce::reduce(ctx, *op, axes),
        Op::Softmax { axis } => reduce::softmax(ctx, *axis),
        Op::ArgMax { axis, .. } => reduce::argmax(ctx, *axis),
        Op::SoftmaxCrossEntropy => reduce::softmax_cross_entropy(ctx),
        Op::SoftmaxCrossEntropyWithLogits => reduce::softmax_cross_entropy_with_logits(ctx),
        Op::SoftmaxCrossEntropyBackward => reduce::softmax_cross_entropy_backward(ctx),
        // The bound target shape is the output's; the lowering reads it from there.
        Op::Reshape { .. } => shape::reshape(ctx),
        Op::Expand { .. } => shape::expand(ctx),
        Op::Transpose { perm } => shape::transpose(ctx, perm),
        Op::Narrow { axis, start, len } => shape::narrow(ctx, *axis, *start, *len),
        Op::Concat { axis } => shape::concat(ctx, *axis),
        Op::Gather { axis } => shape::gather(ctx, *axis),
        Op::Pad { pads, value } => shape::pad(ctx, pads, *value),
        Op::Slice {
            axes,
            starts,
            ends,
            steps,
        } => shape::slice(ctx, axes, starts, ends, steps),
        Op::Attention(spec) => transformer::attention(ctx, spec),
        Op::CacheWrite { axis } => transformer::cache_write(ctx, *axis),
        Op::CachedAttention { spec, rope } => transformer::cached_attention(ctx, spec, rope),
        Op::RopeCacheWrite {
            axis,
            head_dim,
            n_rot,
            style,
        } => transformer::rope_cache_write(ctx, *axis, *head_dim, *n_rot, *style),
        Op::Rope {
            head_dim,
            n_rot,
            style,
        } => transformer::rope(ctx, *head_dim, *n_rot, *style),
        // `cast_to` is the output dtype, which the kernel reads from the output.
        Op::FusedSwiGLU { gate_first, .. } => transformer::fused_swiglu(ctx, *gate_first),
        Op::Conv(spec) => vision::conv(ctx, spec),
        Op::Pool(spec) => vision::pool(ctx, spec),
        Op::ResizeNearest2x => vision::resize_nearest2x(ctx),
        Op::Conv2dBackwardInput { spec, input_hw } => {
            vision::conv2d_backward_input(ctx, spec, *input_hw)
        }
        Op::Conv2dBackwardWeight(spec) => vision::conv2d_backward_weight(ctx, spec),
        Op::MaxPool2dBackward(spec) => vision::max_pool2d_backward(ctx, spec),
        Op::ElementwiseRegion { chain, prologue } => {
            region::elementwise_region(ctx, chain, *prologue)
        }
        Op::BatchElementwiseRegion {
            chain,
            num_batch_inputs,
            prologue,
        } => region::batch_elementwise_region(ctx, chain, *num_batch_inputs, *prologue),
        Op::TransformRegion { steps } => region::transform_region(ctx, steps),
        Op::Fft { inverse, norm } => audio::fft(ctx, *inverse, *norm),
        Op::LogMel => audio::log_mel(ctx),
        Op::LogMelBackward => audio::log_mel_backward(ctx),
        // ONNX ops without a kernel yet: the CPU thunks run them (`index.rs` says why).
        Op::Tile { repeats: _ } => index::no_kernel(OpKind::Tile),
        Op::CumSum {
            axis: _,
            exclusive: _,
            reverse: _,
        } => index::no_kernel(OpKind::CumSum),
        Op::TopK {
            k: _,
            axis: _,
            largest: _,
            sorted: _,
        } => index::no_kernel(OpKind::TopK),
        Op::GatherElements { axis: _ } => index::no_kernel(OpKind::GatherElements),
        Op::GatherND { batch_dims: _ } => index::no_kernel(OpKind::GatherND),
        Op::ScatterElements {
            axis: _,
            reduction: _,
        } => index::no_kernel(OpKind::ScatterElements),
        Op::ScatterND { reduction: _ } => index::no_kernel(OpKind::ScatterND),
        Op::OneHot { axis: _, depth: _ } => index::no_kernel(OpKind::OneHot),
        Op::Range { len: _ } => index::no_kernel(OpKind::Range),
        Op::AllReduce { reduce: _ }
        | Op::AllGather { axis: _, ranks: _ }
        | Op::ReduceScatter {
            reduce: _,
            axis: _,
            ranks: _,
        } => collective::lower(ctx),
        // Rounding to a float8 / float4 grid is rare and cheap on the host; the CPU runs it.
        Op::FloatRound {
            format: _,
            saturate: _,
        } => index::no_kernel(OpKind::FloatRound),
    }
}

/// Whether this backend has a lowering for `kind` (it may still answer `Unsupported` for
/// some shapes or dtypes, which then run on the CPU). Exhaustive, so a new kind must be
/// placed here too; leaves are not lowered (they are device buffers).
fn lowers(kind: OpKind) -> bool {
    use OpKind::*;
    match kind {
        Input | Param | Constant => false,
        Activation | Binary | Compare | Where | Cast | StopGradient => true,
        MatMul | FusedMatMulBiasAct | DequantMatMul | FusedDequantMatMul | Dequantize => true,
        LayerNorm | RmsNorm | FusedResidualLN | FusedResidualRmsNorm => true,
        Reduce
        | Softmax
        | ArgMax
        | SoftmaxCrossEntropy
        | SoftmaxCrossEntropyWithLogits
        | SoftmaxCrossEntropyBackward => true,
        Reshape | Expand | Transpose | Narrow | Concat | Gather | Pad | Slice => true,
        Attention | Rope | FusedSwiGLU | CacheWrite | RopeCacheWrite | CachedAttention => true,
        Conv | Pool | ResizeNearest2x | Conv2dBackwardInput | Conv2dBackwardWeight
        | MaxPool2dBackward => true,
        ElementwiseRegion | BatchElementwiseRegion | TransformRegion => true,
        Fft | LogMel | LogMelBackward => true,
        // Listed as fallbacks, so the dispatch report shows them running on the CPU.
        Tile | CumSum | TopK => false,
        GatherElements | GatherND | ScatterElements | ScatterND | OneHot | Range => false,
        FloatRound => false,
        AllReduce | AllGather | ReduceScatter => true,
    }
}

/// The op kinds this backend lowers to GPU code.
pub fn native_kinds() -> OpKindSet {
    OpKindSet::filter(lowers)
}

/// The fused kinds this backend lowers natively: what its pipeline's `Expand` keeps.
pub fn native_fused_ops() -> OpKindSet {
    OpKindSet::filter(|k| k.is_fused() && lowers(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_compute_kind_is_native_but_the_onnx_fallbacks_and_no_leaf_is() {
        for &k in OpKind::ALL {
            let want = !k.is_leaf() && !index::FALLBACK.contains(&k);
            assert_eq!(native_kinds().contains(k), want, "{k}");
        }
        assert_eq!(
            native_fused_ops(),
            OpKindSet::filter(OpKind::is_fused),
            "every fused op has a CUDA lowering, so Expand keeps them all"
        );
    }
}
