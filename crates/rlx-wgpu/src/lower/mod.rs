//! Lowering: each compute node of the bound graph becomes steps (kernels, buffer copies)
//! over the plan's tensors, or answers `Unsupported` with a reason and runs on the CPU.
//! One arm per op in [`lower_node`]; the op's pieces live in the file of its group.
//!
//! A reason that starts with [`PORTABLE`] is a limit of portable WGSL itself (no f64, no
//! 64-bit integers), not a missing kernel: the dispatch report shows both alike.
use crate::device::Caps;
use crate::shader::{storable, Kernel, WTensor};
use crate::WgpuError;
use rlx_ir::{DType, Node, Op};

pub mod audio;
pub mod elementwise;
pub mod linalg;
pub mod linalg_gemm;
pub mod linalg_quant;
pub mod norm;
pub mod reduce;
pub mod reduce_scan;
pub mod reduce_softmax;
pub mod reduce_topk;
pub mod shape;
pub mod shape_index;
pub mod transformer;
pub mod vision;

/// Prefix of the fallback reasons that are limits of portable WGSL, not missing kernels.
pub const PORTABLE: &str = "portable WGSL:";

#[derive(Debug)]
pub enum LowerError {
    /// Not lowered here: the node runs on the CPU thunks (the reason is reported).
    Unsupported(String),
    /// The GPU path failed: an error naming the node, never a fallback.
    Internal(WgpuError),
}

impl From<WgpuError> for LowerError {
    fn from(e: WgpuError) -> Self {
        LowerError::Internal(e)
    }
}

pub type Lowered = Result<(), LowerError>;

/// Return `Err(LowerError::Unsupported(format!(…)))` from the enclosing lowering.
#[macro_export]
macro_rules! unsupported {
    ($($t:tt)*) => {
        return Err($crate::lower::LowerError::Unsupported(format!($($t)*)))
    };
}

/// One step of a plan, in order.
#[derive(Clone, Debug)]
pub enum Step {
    Kernel(Kernel),
    /// `bytes` (a multiple of 4, offsets too) from one tensor's buffer to another's.
    Copy {
        src: (usize, u64),
        dst: (usize, u64),
        bytes: u64,
    },
}

/// Lowering's state: the steps so far and the scratch buffers asked for (their slabs are
/// numbered from `first_scratch` in order).
pub struct LowerEnv {
    pub steps: Vec<Step>,
    pub scratch: Vec<u64>,
    pub first_scratch: usize,
}

impl LowerEnv {
    pub fn new(first_scratch: usize) -> LowerEnv {
        LowerEnv {
            steps: Vec::new(),
            scratch: Vec::new(),
            first_scratch,
        }
    }
}

/// What a lowering arm sees: the node with its bound op and shapes, its input and output
/// tensors, the adapter's capabilities, and where its steps go.
pub struct NodeCtx<'a> {
    pub node: &'a Node,
    pub ins: Vec<WTensor>,
    pub out: WTensor,
    pub caps: &'a Caps,
    pub env: &'a mut LowerEnv,
}

impl NodeCtx<'_> {
    pub fn push(&mut self, k: Kernel) {
        self.env.steps.push(Step::Kernel(k));
    }

    /// A fresh device tensor for intermediate values of this node.
    pub fn scratch(&mut self, dims: &[usize], dtype: DType) -> WTensor {
        let bytes = (dims.iter().product::<usize>() * dtype.size_bytes()) as u64;
        self.env.scratch.push(bytes);
        WTensor {
            slab: self.env.first_scratch + self.env.scratch.len() - 1,
            off: 0,
            dims: dims.to_vec(),
            dtype,
        }
    }

    /// Where a kernel that stores one element per invocation writes: the output itself
    /// for word dtypes (f32, i32, i64), else an f32 (integers: i32) scratch that
    /// [`finish_out`](Self::finish_out) converts into the output.
    pub fn word_out(&mut self) -> WTensor {
        match self.out.dtype {
            DType::F32 | DType::I32 | DType::I64 => self.out.clone(),
            d => {
                let dims = self.out.dims.clone();
                self.scratch(&dims, if d.is_float() { DType::F32 } else { DType::I32 })
            }
        }
    }

    /// Convert what a kernel wrote into `word_out`'s tensor into the output (a no-op when it
    /// was the output).
    pub fn finish_out(&mut self, y: &WTensor) -> Lowered {
        if *y == self.out {
            return Ok(());
        }
        let k = elementwise::convert(y, &self.out, self.caps)?;
        self.push(k);
        Ok(())
    }

    /// A copy of `src` into `dst` (same bytes): a buffer copy where both are word-aligned,
    /// else a kernel.
    pub fn copy(&mut self, src: &WTensor, dst: &WTensor) -> Lowered {
        let bytes = src.bytes() as u64;
        if bytes == 0 {
            return Ok(());
        }
        // A buffer copy cannot read and write one buffer: those move through a kernel.
        if src.slab != dst.slab
            && src.off.is_multiple_of(4)
            && dst.off.is_multiple_of(4)
            && bytes.is_multiple_of(4)
        {
            self.env.steps.push(Step::Copy {
                src: (src.slab, src.off),
                dst: (dst.slab, dst.off),
                bytes,
            });
            return Ok(());
        }
        if src.dtype.size_bytes() == dst.dtype.size_bytes() {
            let view = shape::View::contiguous(&[src.numel()]);
            let flat = WTensor {
                dims: vec![dst.numel()],
                ..dst.clone()
            };
            return shape::copy_view(self, src, &view, &flat);
        }
        let k = elementwise::convert(src, dst, self.caps)?;
        self.push(k);
        Ok(())
    }
}

/// Lower one node. The router is exhaustive over every op: a new op must answer here.
pub fn lower_node(ctx: &mut NodeCtx) -> Lowered {
    if let Some(t) = (ctx.ins.iter().chain([&ctx.out])).find(|t| !storable(t.dtype)) {
        unsupported!(
            "{PORTABLE} {} has no type (no f64 without an extension)",
            t.dtype
        );
    }
    if ctx.out.numel() == 0 && !ctx.node.op.kind().is_in_place() {
        return Ok(());
    }
    let op = ctx.node.op.clone();
    match &op {
        Op::Input { .. } | Op::Param { .. } | Op::Constant { .. } => Ok(()),
        Op::Activation(_)
        | Op::Binary(_)
        | Op::Compare(_)
        | Op::Where
        | Op::Cast { .. }
        | Op::FloatRound { .. }
        | Op::StopGradient
        | Op::ElementwiseRegion { .. }
        | Op::BatchElementwiseRegion { .. }
        | Op::FusedSwiGLU { .. } => elementwise::lower(ctx, &op),
        Op::MatMul | Op::FusedMatMulBiasAct { .. } => linalg::lower(ctx, &op),
        Op::DequantMatMul { .. } | Op::FusedDequantMatMul { .. } => {
            linalg_quant::lower_dequant_matmul(ctx, &op)
        }
        Op::Dequantize { scheme } => linalg_quant::lower_dequantize(ctx, *scheme),
        Op::LayerNorm { axis, eps } => norm::lower_axis_norm(ctx, false, *axis, *eps),
        Op::RmsNorm { axis, eps } => norm::lower_axis_norm(ctx, true, *axis, *eps),
        Op::FusedResidualLN { has_bias, eps } => {
            norm::lower_residual_norm(ctx, false, *has_bias, *eps)
        }
        Op::FusedResidualRmsNorm { has_bias, eps } => {
            norm::lower_residual_norm(ctx, true, *has_bias, *eps)
        }
        Op::Reduce { op, axes, .. } => reduce::lower_reduce(ctx, *op, axes),
        Op::ArgMax { axis, .. } => reduce::lower_argmax(ctx, *axis),
        Op::Softmax { axis } => reduce_softmax::lower_softmax(ctx, *axis),
        Op::SoftmaxCrossEntropy => reduce_softmax::lower_ce(ctx, false),
        Op::SoftmaxCrossEntropyWithLogits => reduce_softmax::lower_ce(ctx, true),
        Op::SoftmaxCrossEntropyBackward => reduce_softmax::lower_ce_backward(ctx),
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => reduce_scan::lower_cumsum(ctx, *axis, *exclusive, *reverse),
        Op::Reshape { .. } => shape::reshape(ctx),
        Op::Expand { .. } => shape::expand(ctx),
        Op::Transpose { perm } => shape::transpose(ctx, perm),
        Op::Narrow { axis, start, len } => shape::narrow(ctx, *axis, *start, *len),
        Op::Slice {
            axes,
            starts,
            ends,
            steps,
        } => shape::slice(ctx, axes, starts, ends, steps),
        Op::Tile { repeats } => shape::tile(ctx, repeats),
        Op::Pad { pads, value } => shape::pad(ctx, pads, *value),
        Op::Concat { axis } => shape::concat(ctx, *axis),
        Op::Gather { axis } => shape::gather(ctx, *axis),
        Op::TransformRegion { steps } => shape::transform_region(ctx, steps),
        Op::GatherElements { axis } => shape_index::gather_elements(ctx, *axis),
        Op::GatherND { batch_dims } => shape_index::gather_nd(ctx, *batch_dims),
        Op::ScatterElements { axis, reduction } => {
            shape_index::scatter_elements(ctx, *axis, *reduction)
        }
        Op::ScatterND { reduction } => shape_index::scatter_nd(ctx, *reduction),
        Op::OneHot { axis, depth } => shape_index::one_hot(ctx, *axis, *depth),
        Op::Range { .. } => shape_index::range(ctx),
        Op::Conv(spec) => vision::conv(ctx, spec),
        Op::Pool(spec) => vision::pool(ctx, spec),
        Op::ResizeNearest2x => vision::resize_nearest2x(ctx),
        Op::Conv2dBackwardInput { spec, input_hw } => {
            vision::conv2d_backward_input(ctx, spec, *input_hw)
        }
        Op::Conv2dBackwardWeight(spec) => vision::conv2d_backward_weight(ctx, spec),
        Op::MaxPool2dBackward(spec) => vision::max_pool2d_backward(ctx, spec),
        Op::Fft { inverse, norm } => audio::fft(ctx, *inverse, *norm),
        Op::LogMel => audio::log_mel(ctx),
        Op::LogMelBackward => audio::log_mel_backward(ctx),
        Op::Attention(spec) => transformer::attention(ctx, spec),
        Op::Rope {
            head_dim,
            n_rot,
            style,
        } => transformer::rope(ctx, *head_dim, *n_rot, *style),
        Op::CacheWrite { axis } => transformer::cache_write(ctx, *axis),
        Op::RopeCacheWrite {
            axis,
            head_dim,
            n_rot,
            style,
        } => transformer::rope_cache_write(ctx, *axis, *head_dim, *n_rot, *style),
        Op::CachedAttention { spec, rope } => transformer::cached_attention(ctx, spec, rope),
        // wgpu has no collective engine: a group of one runs them on the CPU (identities).
        Op::AllReduce { .. } | Op::AllGather { .. } | Op::ReduceScatter { .. } => {
            unsupported!(
                "{} needs a communicator; wgpu has none (runs on the CPU)",
                op.kind()
            )
        }
        // `sorted = false` may return any order: the sorted one is one of them.
        Op::TopK {
            k, axis, largest, ..
        } => reduce_topk::lower_topk(ctx, *k, *axis, *largest),
    }
}
