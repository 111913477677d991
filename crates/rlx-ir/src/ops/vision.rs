//! Shape rules and builders: Conv, Pool, ResizeNearest2x, Conv2dBackwardInput,
//! Conv2dBackwardWeight, MaxPool2dBackward. Layouts are NCHW (data) and OIHW (weights).
//!
//! The 1-D conv form (DESIGN.md): an input `[N, C, 1, L]` with `kernel_size = [k, 1]` is a
//! conv along L whose stride / padding / dilation sit at index 0. It is recognised when
//! x's H is 1, `kernel_size[1] == 1` and the index-1 parameters are neutral (stride 1,
//! padding 0, dilation 1). The last condition keeps a genuine 2-D conv whose second-axis
//! parameters matter (say a 1×1 stride-2 shortcut on a 1×W map) a 2-D conv; with neutral
//! index-1 parameters the 2-D reading would only ever touch one kernel row, so nothing useful
//! is lost. The weight stays `[O, C/groups, k, 1]`, which has the same memory layout as
//! `[O, C/groups, 1, k]`, so backends run the form as a 2-D conv with [`conv_spec_2d`].
use super::{arity, mul, require_float, same_dtype};
use crate::{ConvSpec, Dim::Static};
use crate::{Dim, DimsFmt, Graph, IrError, NodeId, Op, OpKind, PoolKind, PoolSpec, Shape};

/// True when `spec` applied to an input of height `in_h` is the 1-D form (see module docs).
pub fn conv_is_1d(spec: &ConvSpec, in_h: &Dim) -> bool {
    *in_h == Static(1)
        && spec.kernel_size[1] == 1
        && spec.stride[1] == 1
        && spec.padding[1] == 0
        && spec.dilation[1] == 1
}

/// `spec` in true 2-D terms for an input of height `in_h`: for the 1-D form the length
/// parameters move from index 0 to index 1 (the W axis); otherwise `spec` unchanged.
pub fn conv_spec_2d(spec: &ConvSpec, in_h: &Dim) -> ConvSpec {
    if !conv_is_1d(spec, in_h) {
        return *spec;
    }
    let swap = |a: [usize; 2]| [a[1], a[0]];
    ConvSpec {
        kernel_size: swap(spec.kernel_size),
        stride: swap(spec.stride),
        padding: swap(spec.padding),
        dilation: swap(spec.dilation),
        groups: spec.groups,
    }
}

/// PyTorch's output length `(len + 2p − d(k−1) − 1) / s + 1`, or None when the dilated
/// kernel is longer than the padded input.
pub fn conv_out_len(len: usize, k: usize, s: usize, p: usize, d: usize) -> Option<usize> {
    let ext = d.checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
    let padded = len.checked_add(p.checked_mul(2)?)?;
    if s == 0 || ext > padded {
        return None;
    }
    Some((padded - ext) / s + 1)
}

/// One spatial output dim; a symbolic input keeps its symbol when the size is preserved and
/// otherwise gets a derived symbol (the CPU re-infers with concrete sizes at run time).
fn out_dim(what: &str, d: &Dim, k: usize, s: usize, p: usize, dil: usize) -> Result<Dim, String> {
    let ext = dil
        .checked_mul(k.saturating_sub(1))
        .and_then(|e| e.checked_add(1));
    let (Some(ext), Some(pad)) = (ext, p.checked_mul(2)) else {
        return Err(format!(
            "{what}: the kernel extent or the padding overflows usize (kernel {k}, dilation {dil}, padding {p})"
        ));
    };
    match d {
        Static(n) => {
            let padded = n
                .checked_add(pad)
                .ok_or_else(|| format!("{what}: padded size {n} + 2·{p} overflows usize"))?;
            conv_out_len(*n, k, s, p, dil).map(Static).ok_or_else(|| {
                format!(
                    "{what}: kernel extent {ext} is larger than the padded input {padded} ({n} + 2·{p})"
                )
            })
        }
        Dim::Dynamic(sym) => {
            if s == 1 && pad.checked_add(1) == Some(ext) {
                Ok(d.clone())
            } else {
                Ok(Dim::Dynamic(format!("({sym}+{pad}-{ext})/{s}+1")))
            }
        }
    }
}

fn check_spec(spec: &ConvSpec) -> Result<(), String> {
    if spec.groups == 0 {
        return Err("groups must be at least 1".into());
    }
    for i in 0..2 {
        if spec.kernel_size[i] == 0 || spec.stride[i] == 0 || spec.dilation[i] == 0 {
            return Err(format!(
                "kernel_size {:?}, stride {:?} and dilation {:?} must all be at least 1",
                spec.kernel_size, spec.stride, spec.dilation
            ));
        }
    }
    Ok(())
}

fn rank4(what: &str, s: &Shape) -> Result<(), String> {
    if s.rank() != 4 {
        return Err(format!(
            "{what} must be rank 4 (NCHW / OIHW), got {}",
            DimsFmt(&s.dims)
        ));
    }
    Ok(())
}

/// Two dims that must agree when both are known.
fn agree(what: &str, a: &Dim, b: &Dim) -> Result<(), String> {
    match (a, b) {
        (Static(x), Static(y)) if x != y => Err(format!("{what}: {x} vs {y}")),
        _ => Ok(()),
    }
}

/// Check w `[O, C/groups, kh, kw]` against the spec and x's channel dim `c`; returns O.
fn check_weight(spec: &ConvSpec, w: &Shape, c: Option<&Dim>) -> Result<Dim, String> {
    rank4("weight", w)?;
    let g = spec.groups;
    for (i, name) in [(2, "kh"), (3, "kw")] {
        if let Static(k) = w.dims[i] {
            if k != spec.kernel_size[i - 2] {
                return Err(format!(
                    "weight {} has {name} = {k}, but kernel_size is {:?}",
                    DimsFmt(&w.dims),
                    spec.kernel_size
                ));
            }
        }
    }
    if let Static(o) = w.dims[0] {
        if o % g != 0 {
            return Err(format!("out channels {o} are not divisible by groups {g}"));
        }
    }
    if let (Some(Static(c)), Static(cg)) = (c, &w.dims[1]) {
        let want = mul("weight in-channels · groups", *cg, g)?;
        if *c != want {
            return Err(format!(
                "input has {c} channels, but weight {} with groups {g} expects {want}",
                DimsFmt(&w.dims),
            ));
        }
    }
    Ok(w.dims[0].clone())
}

/// Spatial output dims of a conv over an input of spatial dims `h`, `w`.
fn conv_hw(spec: &ConvSpec, h: &Dim, w: &Dim) -> Result<[Dim; 2], String> {
    let s = conv_spec_2d(spec, h);
    Ok([
        out_dim(
            "height",
            h,
            s.kernel_size[0],
            s.stride[0],
            s.padding[0],
            s.dilation[0],
        )?,
        out_dim(
            "width",
            w,
            s.kernel_size[1],
            s.stride[1],
            s.padding[1],
            s.dilation[1],
        )?,
    ])
}

fn check_pool(spec: &PoolSpec) -> Result<(), String> {
    for i in 0..2 {
        let (k, s, p) = (spec.kernel_size[i], spec.stride[i], spec.padding[i]);
        if k == 0 || s == 0 {
            return Err(format!(
                "kernel_size {:?} and stride {:?} must be at least 1",
                spec.kernel_size, spec.stride
            ));
        }
        // PyTorch's rule; it also guarantees every window holds at least one real element.
        if p > k / 2 {
            return Err(format!(
                "padding {:?} must be at most half the kernel {:?}",
                spec.padding, spec.kernel_size
            ));
        }
    }
    Ok(())
}

fn pool_out(spec: &PoolSpec, x: &Shape) -> Result<Shape, String> {
    rank4("pool input", x)?;
    check_pool(spec)?;
    let k = spec.kernel_size;
    let ho = out_dim(
        "height",
        &x.dims[2],
        k[0],
        spec.stride[0],
        spec.padding[0],
        1,
    )?;
    let wo = out_dim(
        "width",
        &x.dims[3],
        k[1],
        spec.stride[1],
        spec.padding[1],
        1,
    )?;
    Ok(Shape::with_dims(
        vec![x.dims[0].clone(), x.dims[1].clone(), ho, wo],
        x.dtype,
    ))
}

fn doubled(d: &Dim) -> Result<Dim, String> {
    Ok(match d {
        Static(n) => Static(mul("doubled size", *n, 2)?),
        Dim::Dynamic(s) => Dim::Dynamic(format!("2*{s}")),
    })
}

/// x, w, [bias] → `[N, O, Ho, Wo]`.
pub(crate) fn conv(spec: &ConvSpec, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::Conv;
    arity(kind, inputs, 2, 3)?;
    require_float(kind, inputs, &[0, 1, 2])?;
    same_dtype(kind, inputs)?;
    check_spec(spec)?;
    let (x, w) = (inputs[0], inputs[1]);
    rank4("input", x)?;
    let o = check_weight(spec, w, Some(&x.dims[1]))?;
    if let Some(b) = inputs.get(2) {
        if b.rank() != 1 {
            return Err(format!("bias must be [O], got {}", DimsFmt(&b.dims)));
        }
        agree("bias length vs out channels", &b.dims[0], &o)?;
    }
    let [ho, wo] = conv_hw(spec, &x.dims[2], &x.dims[3])?;
    Ok(Shape::with_dims(
        vec![x.dims[0].clone(), o, ho, wo],
        x.dtype,
    ))
}

/// dy, w → dx `[N, C, input_hw]`.
pub(crate) fn conv2d_backward_input(
    spec: &ConvSpec,
    input_hw: [usize; 2],
    inputs: &[&Shape],
) -> Result<Shape, String> {
    let kind = OpKind::Conv2dBackwardInput;
    arity(kind, inputs, 2, 2)?;
    require_float(kind, inputs, &[0, 1])?;
    same_dtype(kind, inputs)?;
    check_spec(spec)?;
    let (dy, w) = (inputs[0], inputs[1]);
    rank4("dy", dy)?;
    let o = check_weight(spec, w, None)?;
    agree("dy channels vs weight out channels", &dy.dims[1], &o)?;
    let [h, wd] = [Static(input_hw[0]), Static(input_hw[1])];
    let [ho, wo] = conv_hw(spec, &h, &wd)?;
    agree("dy height vs conv output height", &dy.dims[2], &ho)?;
    agree("dy width vs conv output width", &dy.dims[3], &wo)?;
    let c = match &w.dims[1] {
        Static(cg) => Static(mul("input channels", *cg, spec.groups)?),
        d => d.clone(),
    };
    Ok(Shape::with_dims(
        vec![dy.dims[0].clone(), c, h, wd],
        dy.dtype,
    ))
}

/// x, dy → dw `[O, C/groups, kh, kw]`.
pub(crate) fn conv2d_backward_weight(spec: &ConvSpec, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::Conv2dBackwardWeight;
    arity(kind, inputs, 2, 2)?;
    require_float(kind, inputs, &[0, 1])?;
    same_dtype(kind, inputs)?;
    check_spec(spec)?;
    let (x, dy) = (inputs[0], inputs[1]);
    rank4("x", x)?;
    rank4("dy", dy)?;
    agree("batch of x vs dy", &x.dims[0], &dy.dims[0])?;
    let g = spec.groups;
    let cg = match &x.dims[1] {
        Static(c) if c % g != 0 => {
            return Err(format!(
                "input channels {c} are not divisible by groups {g}"
            ))
        }
        Static(c) => Static(c / g),
        Dim::Dynamic(s) => Dim::Dynamic(format!("{s}/{g}")),
    };
    if let Static(o) = dy.dims[1] {
        if o % g != 0 {
            return Err(format!("out channels {o} are not divisible by groups {g}"));
        }
    }
    let [ho, wo] = conv_hw(spec, &x.dims[2], &x.dims[3])?;
    agree("dy height vs conv output height", &dy.dims[2], &ho)?;
    agree("dy width vs conv output width", &dy.dims[3], &wo)?;
    let k = spec.kernel_size;
    Ok(Shape::with_dims(
        vec![dy.dims[1].clone(), cg, Static(k[0]), Static(k[1])],
        x.dtype,
    ))
}

pub(crate) fn pool(spec: &PoolSpec, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::Pool, inputs, 1, 1)?;
    require_float(OpKind::Pool, inputs, &[0])?;
    pool_out(spec, inputs[0])
}

/// x, dy → dx.
pub(crate) fn max_pool2d_backward(spec: &PoolSpec, inputs: &[&Shape]) -> Result<Shape, String> {
    let kind = OpKind::MaxPool2dBackward;
    arity(kind, inputs, 2, 2)?;
    require_float(kind, inputs, &[0, 1])?;
    same_dtype(kind, inputs)?;
    if spec.kind != PoolKind::Max {
        return Err("MaxPool2dBackward needs a PoolSpec of kind Max".into());
    }
    let y = pool_out(spec, inputs[0])?;
    let dy = inputs[1];
    rank4("dy", dy)?;
    for (i, (a, b)) in y.dims.iter().zip(&dy.dims).enumerate() {
        agree(&format!("dy dim {i} vs pool output"), b, a)?;
    }
    Ok(inputs[0].clone())
}

pub(crate) fn resize_nearest2x(inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::ResizeNearest2x, inputs, 1, 1)?;
    let x = inputs[0];
    rank4("input", x)?;
    let d = &x.dims;
    Ok(Shape::with_dims(
        vec![d[0].clone(), d[1].clone(), doubled(&d[2])?, doubled(&d[3])?],
        x.dtype,
    ))
}

impl Graph {
    /// Conv without bias; x `[N,C,H,W]`, w `[O, C/groups, kh, kw]` → `[N, O, Ho, Wo]`.
    pub fn conv2d(&mut self, x: NodeId, w: NodeId, spec: ConvSpec) -> Result<NodeId, IrError> {
        self.add_node(Op::Conv(spec), &[x, w])
    }
    /// Conv plus a per-out-channel bias `[O]`.
    pub fn conv2d_bias(
        &mut self,
        x: NodeId,
        w: NodeId,
        bias: NodeId,
        spec: ConvSpec,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::Conv(spec), &[x, w, bias])
    }
    pub fn pool2d(&mut self, x: NodeId, spec: PoolSpec) -> Result<NodeId, IrError> {
        self.add_node(Op::Pool(spec), &[x])
    }
    pub fn max_pool2d(
        &mut self,
        x: NodeId,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<NodeId, IrError> {
        let spec = PoolSpec {
            kind: PoolKind::Max,
            kernel_size: kernel,
            stride,
            padding,
        };
        self.pool2d(x, spec)
    }
    /// Average pool; padded positions count toward the divisor.
    pub fn avg_pool2d(
        &mut self,
        x: NodeId,
        kernel: [usize; 2],
        stride: [usize; 2],
        padding: [usize; 2],
    ) -> Result<NodeId, IrError> {
        let spec = PoolSpec {
            kind: PoolKind::Avg,
            kernel_size: kernel,
            stride,
            padding,
        };
        self.pool2d(x, spec)
    }
    pub fn resize_nearest2x(&mut self, x: NodeId) -> Result<NodeId, IrError> {
        self.add_node(Op::ResizeNearest2x, &[x])
    }
    /// Gradient of `conv2d` w.r.t. its input; `input_hw` is x's spatial size.
    pub fn conv2d_backward_input(
        &mut self,
        dy: NodeId,
        w: NodeId,
        spec: ConvSpec,
        input_hw: [usize; 2],
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::Conv2dBackwardInput { spec, input_hw }, &[dy, w])
    }
    /// Gradient of `conv2d` w.r.t. its weight.
    pub fn conv2d_backward_weight(
        &mut self,
        x: NodeId,
        dy: NodeId,
        spec: ConvSpec,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::Conv2dBackwardWeight(spec), &[x, dy])
    }
    /// Gradient of max pooling w.r.t. x: each window's dy goes to its first max.
    pub fn max_pool2d_backward(
        &mut self,
        x: NodeId,
        dy: NodeId,
        spec: PoolSpec,
    ) -> Result<NodeId, IrError> {
        self.add_node(Op::MaxPool2dBackward(spec), &[x, dy])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn out_len_matches_pytorch_formula() {
        assert_eq!(conv_out_len(7, 3, 2, 1, 1), Some(4));
        assert_eq!(conv_out_len(5, 3, 1, 0, 2), Some(1));
        assert_eq!(conv_out_len(4, 3, 1, 0, 2), None);
        assert_eq!(conv_out_len(1, 1, 1, 0, 1), Some(1));
    }

    #[test]
    fn one_d_form_moves_length_params() {
        let s = ConvSpec::new([3, 1]).stride([2, 1]).padding([1, 0]);
        assert!(conv_is_1d(&s, &Static(1)));
        assert!(!conv_is_1d(&s, &Static(2)));
        let t = conv_spec_2d(&s, &Static(1));
        assert_eq!(t.kernel_size, [1, 3]);
        assert_eq!(t.stride, [1, 2]);
        assert_eq!(t.padding, [0, 1]);
        // Non-neutral index-1 params keep the 2-D reading.
        let u = ConvSpec::new([1, 1]).stride([2, 2]);
        assert!(!conv_is_1d(&u, &Static(1)));
    }

    #[test]
    fn dtype_mismatch_is_reported() {
        let x = Shape::new(&[1, 2, 5, 5], DType::F32);
        let w = Shape::new(&[3, 2, 3, 3], DType::F64);
        assert!(conv(&ConvSpec::new([3, 3]), &[&x, &w]).is_err());
    }
}
