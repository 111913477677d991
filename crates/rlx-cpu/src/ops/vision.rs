//! CPU thunks of the Vision group: Conv, Pool, ResizeNearest2x, Conv2dBackwardInput,
//! Conv2dBackwardWeight, MaxPool2dBackward. The kernels live in `conv.rs` and `pool.rs`;
//! this file picks the compute class and plumbs the views.
use super::arity;
use super::conv::{self, Geom};
use super::pool::{resize_nearest2x as resize_t, PoolGeom};
use crate::error::op_err;
use crate::{CpuError, OutView, TensorView};
use rlx_ir::{ConvSpec, PoolSpec};

/// dy's spatial size must be the conv output's (the lengths alone could hide a transpose).
fn check_dy(g: &Geom, dy: &[usize]) -> Result<(), CpuError> {
    if dy.len() != 4 || dy[2..] != g.out_hw() {
        return Err(op_err(format!(
            "dy {dy:?} does not match the conv output size {:?}",
            g.out_hw()
        )));
    }
    Ok(())
}

/// x, w, [bias].
pub fn conv(spec: &ConvSpec, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 3)?;
    let (x, w) = (&ins[0], &ins[1]);
    let g = Geom::new(spec, x.shape, *w.shape.first().unwrap_or(&0))?;
    float_class!(out.class(), T => {
        let bias = match ins.get(2) {
            Some(b) => Some(b.get::<T>()?),
            None => None,
        };
        conv::forward(&g, x.get::<T>()?, w.get::<T>()?, bias, out.get_mut()?)
    })
}

pub fn pool(spec: &PoolSpec, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let x = &arity(ins, 1, 1)?[0];
    let g = PoolGeom::new(spec, x.shape)?;
    float_class!(out.class(), T => g.forward(x.get::<T>()?, out.get_mut()?))
}

/// `[N, C, H, W]` → `[N, C, 2H, 2W]`, any class.
pub fn resize_nearest2x(ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let x = &arity(ins, 1, 1)?[0];
    any_class!(out.class(), T => resize_t(x.shape, x.get::<T>()?, out.get_mut()?))
}

/// dy, w → dx; `input_hw` is x's spatial size.
pub fn conv2d_backward_input(
    spec: &ConvSpec,
    input_hw: [usize; 2],
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (dy, w) = (&ins[0], &ins[1]);
    let o = out.shape;
    if o.len() != 4 {
        return Err(op_err(format!("dx must be rank 4, got {o:?}")));
    }
    let x_shape = [o[0], o[1], input_hw[0], input_hw[1]];
    let g = Geom::new(spec, &x_shape, *w.shape.first().unwrap_or(&0))?;
    check_dy(&g, dy.shape)?;
    float_class!(out.class(), T => {
        conv::backward_input(&g, dy.get::<T>()?, w.get::<T>()?, out.get_mut()?)
    })
}

/// x, dy → dw.
pub fn conv2d_backward_weight(
    spec: &ConvSpec,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let (x, dy) = (&ins[0], &ins[1]);
    let g = Geom::new(spec, x.shape, *dy.shape.get(1).unwrap_or(&0))?;
    check_dy(&g, dy.shape)?;
    float_class!(out.class(), T => {
        conv::backward_weight(&g, x.get::<T>()?, dy.get::<T>()?, out.get_mut()?)
    })
}

/// x, dy → dx.
pub fn max_pool2d_backward(
    spec: &PoolSpec,
    ins: &[TensorView],
    mut out: OutView,
) -> Result<(), CpuError> {
    let ins = arity(ins, 2, 2)?;
    let g = PoolGeom::new(spec, ins[0].shape)?;
    float_class!(out.class(), T => {
        g.max_backward(ins[0].get::<T>()?, ins[1].get::<T>()?, out.get_mut()?)
    })
}
