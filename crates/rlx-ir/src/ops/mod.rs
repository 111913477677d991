//! Shape rules and builders, one file per op group ([`crate::OpGroup`]). `infer_shape` is
//! the single entry used by builders, the verifier and run-time re-binding of dynamic dims;
//! it is also the only router: it destructures each variant and calls that op's typed rule
//! in its group's file, so a new variant does not build until it has a rule.
use crate::{Op, OpKind, Shape};

pub mod audio;
pub mod collective;
pub mod composite;
pub mod elementwise;
pub mod index;
pub mod linalg;
pub mod norm;
pub mod reduce;
pub mod region;
pub mod shape_ops;
pub mod transformer;
pub mod vision;

/// The transformer group's file under its former name, for callers of
/// `ops::attention::rope_view`.
pub use transformer as attention;

/// Output shape of `op` applied to inputs of these shapes; the message says what is wrong.
/// Every shape it returns passes [`Shape::check_size`].
pub fn infer_shape(op: &Op, inputs: &[&Shape]) -> Result<Shape, String> {
    let out = route(op, inputs)?;
    out.check_size()?;
    Ok(out)
}

fn route(op: &Op, inputs: &[&Shape]) -> Result<Shape, String> {
    use Op::*;
    match op {
        Input { .. } | Param { .. } | Constant { .. } => {
            Err("leaf nodes carry their own shape".into())
        }
        // Elementwise
        Activation(act) => elementwise::activation(*act, inputs),
        Binary(op) => elementwise::binary(*op, inputs),
        Compare(_) => elementwise::compare(inputs),
        Where => elementwise::where_(inputs),
        Cast { to } => elementwise::cast(*to, inputs),
        FloatRound {
            format: _,
            saturate: _,
        } => elementwise::float_round(inputs),
        StopGradient => elementwise::stop_gradient(inputs),
        // Linalg
        MatMul => linalg::matmul(inputs),
        FusedMatMulBiasAct { activation: _ } => linalg::fused_matmul_bias_act(inputs),
        DequantMatMul { scheme } => linalg::dequant_matmul(*scheme, inputs),
        FusedDequantMatMul {
            scheme,
            norm_eps,
            residual,
            glu,
        } => linalg::fused_dequant_matmul(*scheme, *norm_eps, *residual, *glu, inputs),
        Dequantize { scheme } => linalg::dequantize(*scheme, inputs),
        // Norm
        LayerNorm { axis, eps } => norm::layer_norm(*axis, *eps, inputs),
        RmsNorm { axis, eps } => norm::rms_norm(*axis, *eps, inputs),
        FusedResidualLN { has_bias, eps } => norm::fused_residual_ln(*has_bias, *eps, inputs),
        FusedResidualRmsNorm { has_bias, eps } => {
            norm::fused_residual_rms_norm(*has_bias, *eps, inputs)
        }
        // Reduce
        Reduce {
            op: _,
            axes,
            keep_dim,
        } => reduce::reduce(axes, *keep_dim, inputs),
        Softmax { axis } => reduce::softmax(*axis, inputs),
        ArgMax { axis, keep_dim } => reduce::argmax(*axis, *keep_dim, inputs),
        CumSum {
            axis,
            exclusive: _,
            reverse: _,
        } => reduce::cumsum(*axis, inputs),
        TopK {
            k,
            axis,
            largest: _,
            sorted: _,
        } => reduce::top_k(*k, *axis, inputs),
        SoftmaxCrossEntropy => reduce::softmax_cross_entropy(inputs),
        SoftmaxCrossEntropyWithLogits => reduce::softmax_cross_entropy_with_logits(inputs),
        SoftmaxCrossEntropyBackward => reduce::softmax_cross_entropy_backward(inputs),
        // Shape
        Reshape { shape } => shape_ops::reshape(shape, inputs),
        Expand { shape } => shape_ops::expand(shape, inputs),
        Transpose { perm } => shape_ops::transpose(perm, inputs),
        Narrow { axis, start, len } => shape_ops::narrow(*axis, *start, *len, inputs),
        Concat { axis } => shape_ops::concat(*axis, inputs),
        Gather { axis } => shape_ops::gather(*axis, inputs),
        Tile { repeats } => shape_ops::tile(repeats, inputs),
        Pad { pads, value: _ } => shape_ops::pad(pads, inputs),
        Slice {
            axes,
            starts,
            ends,
            steps,
        } => shape_ops::slice(axes, starts, ends, steps, inputs),
        // Index
        GatherElements { axis } => index::gather_elements(*axis, inputs),
        GatherND { batch_dims } => index::gather_nd(*batch_dims, inputs),
        ScatterElements { axis, reduction: _ } => index::scatter_elements(*axis, inputs),
        ScatterND { reduction: _ } => index::scatter_nd(inputs),
        OneHot { axis, depth } => index::one_hot(*axis, *depth, inputs),
        Range { len } => index::range(*len, inputs),
        // Transformer
        Attention(spec) => transformer::attention(spec, inputs),
        CacheWrite { axis } => transformer::cache_write(*axis, inputs),
        CachedAttention { spec, rope } => transformer::cached_attention(spec, rope, inputs),
        RopeCacheWrite {
            axis,
            head_dim,
            n_rot,
            style: _,
        } => transformer::rope_cache_write(*axis, *head_dim, *n_rot, inputs),
        Rope {
            head_dim,
            n_rot,
            style: _,
        } => transformer::rope(*head_dim, *n_rot, inputs),
        FusedSwiGLU {
            cast_to,
            gate_first: _,
        } => transformer::fused_swiglu(*cast_to, inputs),
        // Vision
        Conv(spec) => vision::conv(spec, inputs),
        Pool(spec) => vision::pool(spec, inputs),
        ResizeNearest2x => vision::resize_nearest2x(inputs),
        Conv2dBackwardInput { spec, input_hw } => {
            vision::conv2d_backward_input(spec, *input_hw, inputs)
        }
        Conv2dBackwardWeight(spec) => vision::conv2d_backward_weight(spec, inputs),
        MaxPool2dBackward(spec) => vision::max_pool2d_backward(spec, inputs),
        // Region
        ElementwiseRegion { chain, prologue } => {
            region::elementwise_region(chain, *prologue, inputs)
        }
        BatchElementwiseRegion {
            chain,
            num_batch_inputs,
            prologue,
        } => region::batch_elementwise_region(chain, *num_batch_inputs, *prologue, inputs),
        TransformRegion { steps } => region::transform_region(steps, inputs),
        // Audio
        Fft {
            inverse: _,
            norm: _,
        } => audio::fft(inputs),
        LogMel => audio::log_mel(inputs),
        LogMelBackward => audio::log_mel_backward(inputs),
        // Collective
        AllReduce { reduce } => collective::all_reduce(*reduce, inputs),
        AllGather { axis, ranks } => collective::all_gather(*axis, *ranks, inputs),
        ReduceScatter {
            reduce,
            axis,
            ranks,
        } => collective::reduce_scatter(*reduce, *axis, *ranks, inputs),
    }
}

/// Check the input count is within `min..=max`.
pub(crate) fn arity(kind: OpKind, inputs: &[&Shape], min: usize, max: usize) -> Result<(), String> {
    let n = inputs.len();
    if n < min || n > max {
        let want = if min == max {
            format!("{min}")
        } else {
            format!("{min} to {max}")
        };
        return Err(format!("{kind} takes {want} inputs, got {n}"));
    }
    Ok(())
}

/// Check every listed input is a float type.
pub(crate) fn require_float(
    kind: OpKind,
    inputs: &[&Shape],
    which: &[usize],
) -> Result<(), String> {
    for &i in which {
        if let Some(s) = inputs.get(i) {
            if !s.dtype.is_float() {
                return Err(format!(
                    "{kind} input {i} must be a float type, got {}",
                    s.dtype
                ));
            }
        }
    }
    Ok(())
}

/// Check every input has input 0's dtype.
pub(crate) fn same_dtype(kind: OpKind, inputs: &[&Shape]) -> Result<(), String> {
    let Some(first) = inputs.first() else {
        return Ok(());
    };
    if let Some(s) = inputs.iter().find(|s| s.dtype != first.dtype) {
        return Err(format!(
            "{kind} inputs differ in dtype: {} vs {}",
            first.dtype, s.dtype
        ));
    }
    Ok(())
}

/// `a + b` for a shape rule, or a message naming `what` when it overflows.
pub(crate) fn add(what: &str, a: usize, b: usize) -> Result<usize, String> {
    a.checked_add(b)
        .ok_or_else(|| format!("{what}: {a} + {b} overflows usize"))
}

/// `a · b` for a shape rule, or a message naming `what` when it overflows.
pub(crate) fn mul(what: &str, a: usize, b: usize) -> Result<usize, String> {
    a.checked_mul(b)
        .ok_or_else(|| format!("{what}: {a} · {b} overflows usize"))
}
