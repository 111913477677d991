//! One thunk per op, in the file of the op's group (`rlx_ir::OpKind::group`), like rlx-ir's
//! `ops/`: elementwise, linalg, norm, reduce, shape_ops (Shape), index, attention (Transformer:
//! Attention, Rope, FusedSwiGLU), vision (with its kernels in conv.rs / pool.rs), region
//! and audio. `scalar.rs` holds the per-value math (and the integer and cast semantics)
//! that the elementwise thunks, the region chain (`chain.rs`) and fused epilogues share.
//!
//! [`eval`] is the only router: it destructures every variant (no wildcard, every field
//! named) and calls the op's typed thunk, so a new op or a new parameter does not build
//! until its thunk is written.
use crate::error::op_err;
use crate::quant::QuantAct;
use crate::{CpuError, OutView, TensorView};
use rlx_ir::{Node, Op};

/// Bind the type alias `$t` to the f32 / f64 type of compute class `$class` and evaluate
/// `$body`; the integer class evaluates `$int` (the one place the two macros below differ).
macro_rules! class_with {
    ($class:expr, $t:ident => $body:expr, int: $int:expr) => {
        match $class {
            rlx_ir::ComputeClass::F32 => {
                type $t = f32;
                $body
            }
            rlx_ir::ComputeClass::F64 => {
                type $t = f64;
                $body
            }
            rlx_ir::ComputeClass::I64 => $int,
        }
    };
}

/// `$body` with `$t` the float type of `$class`; integer classes are an error.
macro_rules! float_class {
    ($class:expr, $t:ident => $body:expr) => {
        class_with!($class, $t => $body, int: Err($crate::error::op_err(
            "needs float values, got values held as I64"
        )))
    };
}

/// Like `float_class!`, for thunks that move data of any class.
macro_rules! any_class {
    ($class:expr, $t:ident => $body:expr) => {
        class_with!($class, $t => $body, int: {
            type $t = i64;
            $body
        })
    };
}

pub mod attention;
pub mod audio;
pub mod cache_write;
mod chain;
mod conv;
pub mod elementwise;
pub mod float_round;
pub mod fused_dequant_matmul;
pub mod index;
pub mod linalg;
pub mod norm;
mod pool;
pub mod reduce;
pub mod region;
pub mod scalar;
pub mod shape_ops;
pub mod vision;

/// `ins` when it holds `min..=max` inputs; thunks index their inputs only after this.
pub(crate) fn arity<'s, 'a>(
    ins: &'s [TensorView<'a>],
    min: usize,
    max: usize,
) -> Result<&'s [TensorView<'a>], CpuError> {
    let n = ins.len();
    if n < min || n > max {
        let want = if min == max {
            format!("{min}")
        } else if max == usize::MAX {
            format!("at least {min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(op_err(format!("takes {want} inputs, got {n}")));
    }
    Ok(ins)
}

/// Run `node`'s op on `ins`, writing `out` (fully: the arena is not zeroed between runs).
pub fn eval(node: &Node, ins: &[TensorView], out: OutView) -> Result<(), CpuError> {
    eval_with(node, ins, out, QuantAct::F32)
}

/// [`eval`] with the numerics of products with a quantised weight (DequantMatMul,
/// FusedDequantMatMul) chosen by `quant_act`.
pub fn eval_with(
    node: &Node,
    ins: &[TensorView],
    out: OutView,
    quant_act: QuantAct,
) -> Result<(), CpuError> {
    match &node.op {
        // ---- leaves
        Op::Input { name: _ } | Op::Param { name: _ } | Op::Constant { data: _ } => {
            Err(op_err("leaf nodes are not evaluated"))
        }

        // ---- elementwise
        Op::Activation(act) => elementwise::activation(*act, ins, out),
        Op::Binary(op) => elementwise::binary(*op, ins, out),
        Op::Compare(op) => elementwise::compare(*op, ins, out),
        Op::Where => elementwise::where_(ins, out),
        Op::Cast { to } => elementwise::cast(*to, ins, out),
        Op::FloatRound { format, saturate } => {
            float_round::float_round(*format, *saturate, ins, out)
        }
        Op::StopGradient => elementwise::stop_gradient(ins, out),

        // ---- linalg
        Op::MatMul => linalg::matmul(ins, out),
        Op::FusedMatMulBiasAct { activation } => {
            linalg::fused_matmul_bias_act(*activation, ins, out)
        }
        Op::DequantMatMul { scheme } => linalg::dequant_matmul_with(*scheme, quant_act, ins, out),
        Op::FusedDequantMatMul {
            scheme,
            norm_eps,
            residual,
            glu,
        } => fused_dequant_matmul::fused_dequant_matmul(
            *scheme, *norm_eps, *residual, *glu, quant_act, ins, out,
        ),
        Op::Dequantize { scheme } => linalg::dequantize(*scheme, ins, out),

        // ---- norm
        Op::LayerNorm { axis, eps } => norm::layer_norm(*axis, *eps, ins, out),
        Op::RmsNorm { axis, eps } => norm::rms_norm(*axis, *eps, ins, out),
        Op::FusedResidualLN { has_bias, eps } => norm::fused_residual_ln(*has_bias, *eps, ins, out),
        Op::FusedResidualRmsNorm { has_bias, eps } => {
            norm::fused_residual_rms_norm(*has_bias, *eps, ins, out)
        }

        // ---- reduce
        // keep_dim only changes the declared shape, which `out` already has.
        Op::Reduce {
            op,
            axes,
            keep_dim: _,
        } => reduce::reduce(*op, axes, ins, out),
        Op::Softmax { axis } => reduce::softmax(*axis, ins, out),
        Op::ArgMax { axis, keep_dim: _ } => reduce::argmax(*axis, ins, out),
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => reduce::cumsum(*axis, *exclusive, *reverse, ins, out),
        // This IR always sorts, which `sorted = false` allows.
        Op::TopK {
            k,
            axis,
            largest,
            sorted: _,
        } => reduce::top_k(*k, *axis, *largest, ins, out),
        Op::SoftmaxCrossEntropy => reduce::softmax_cross_entropy(ins, out),
        Op::SoftmaxCrossEntropyWithLogits => reduce::softmax_cross_entropy_with_logits(ins, out),
        Op::SoftmaxCrossEntropyBackward => reduce::softmax_cross_entropy_backward(ins, out),

        // ---- shape (the target shape of Reshape / Expand and Narrow's len are `out`'s)
        Op::Reshape { shape: _ } => shape_ops::reshape(ins, out),
        Op::Expand { shape: _ } => shape_ops::expand(ins, out),
        Op::Transpose { perm } => shape_ops::transpose(perm, ins, out),
        Op::Narrow {
            axis,
            start,
            len: _,
        } => shape_ops::narrow(*axis, *start, ins, out),
        Op::Concat { axis } => shape_ops::concat(*axis, ins, out),
        Op::Gather { axis } => shape_ops::gather(*axis, ins, out),
        Op::Tile { repeats } => shape_ops::tile(repeats, ins, out),
        Op::Pad { pads, value } => shape_ops::pad(pads, *value, ins, out),
        Op::Slice {
            axes,
            starts,
            ends,
            steps,
        } => shape_ops::slice(axes, starts, ends, steps, ins, out),

        // ---- index
        Op::GatherElements { axis } => index::gather_elements(*axis, ins, out),
        Op::GatherND { batch_dims } => index::gather_nd(*batch_dims, ins, out),
        Op::ScatterElements { axis, reduction } => {
            index::scatter_elements(*axis, *reduction, ins, out)
        }
        Op::ScatterND { reduction } => index::scatter_nd(*reduction, ins, out),
        Op::OneHot { axis, depth } => index::one_hot(*axis, *depth, ins, out),
        Op::Range { len } => index::range(*len, ins, out),

        // ---- collective: they need the executable's communicator (`crate::comm::run`).
        Op::AllReduce { reduce: _ }
        | Op::AllGather { axis: _, ranks: _ }
        | Op::ReduceScatter {
            reduce: _,
            axis: _,
            ranks: _,
        } => Err(op_err(
            "collectives run in the executor, over its communicator",
        )),

        // ---- transformer
        // Written in place by the executor (it borrows the cache leaf), never as a thunk.
        Op::CacheWrite { axis: _ } => Err(op_err("CacheWrite runs in place in the executor")),
        Op::RopeCacheWrite {
            axis: _,
            head_dim: _,
            n_rot: _,
            style: _,
        } => Err(op_err("RopeCacheWrite runs in place in the executor")),
        Op::Attention(spec) => attention::attention(spec, ins, out),
        Op::CachedAttention { spec, rope } => attention::cached_attention(spec, rope, ins, out),
        Op::Rope {
            head_dim,
            n_rot,
            style,
        } => attention::rope(*head_dim, *n_rot, *style, ins, out),
        // cast_to is the output dtype, which `out` already has.
        Op::FusedSwiGLU {
            cast_to: _,
            gate_first,
        } => attention::fused_swiglu(*gate_first, ins, out),

        // ---- vision
        Op::Conv(spec) => vision::conv(spec, ins, out),
        Op::Pool(spec) => vision::pool(spec, ins, out),
        Op::ResizeNearest2x => vision::resize_nearest2x(ins, out),
        Op::Conv2dBackwardInput { spec, input_hw } => {
            vision::conv2d_backward_input(spec, *input_hw, ins, out)
        }
        Op::Conv2dBackwardWeight(spec) => vision::conv2d_backward_weight(spec, ins, out),
        Op::MaxPool2dBackward(spec) => vision::max_pool2d_backward(spec, ins, out),

        // ---- region
        Op::ElementwiseRegion { chain, prologue } => {
            region::elementwise_region(chain, *prologue, ins, out)
        }
        Op::BatchElementwiseRegion {
            chain,
            num_batch_inputs,
            prologue,
        } => region::batch_elementwise_region(chain, *num_batch_inputs, *prologue, ins, out),
        Op::TransformRegion { steps } => region::transform_region(steps, ins, out),

        // ---- audio
        Op::Fft { inverse, norm } => audio::fft(*inverse, *norm, ins, out),
        Op::LogMel => audio::log_mel(ins, out),
        Op::LogMelBackward => audio::log_mel_backward(ins, out),
    }
}
