//! CPU thunks: Conv, Pool, ResizeNearest2x, Conv2dBackwardInput, Conv2dBackwardWeight,
//! MaxPool2dBackward. The kernels live in `conv.rs` and `pool.rs`; this file picks the
//! compute class and plumbs the views.
use super::conv::{self, Geom};
use super::pool::{resize_nearest2x, PoolGeom};
use crate::error::op_err;
use crate::{CpuError, Float, OutView, TensorView};
use rlx_ir::{ComputeClass, Node, Op};

fn run<T: Float>(node: &Node, ins: &[TensorView], out: &mut OutView) -> Result<(), CpuError> {
    let oshape = out.shape.to_vec();
    let o = out.get_mut::<T>()?;
    let need = |n: usize| {
        if ins.len() < n {
            Err(op_err(format!("needs {n} inputs, got {}", ins.len())))
        } else {
            Ok(())
        }
    };
    match &node.op {
        Op::Conv(spec) => {
            need(2)?;
            let w = &ins[1];
            let g = Geom::new(spec, ins[0].shape, *w.shape.first().unwrap_or(&0))?;
            let bias = match ins.get(2) {
                Some(b) => Some(b.get::<T>()?),
                None => None,
            };
            conv::forward(&g, ins[0].get::<T>()?, w.get::<T>()?, bias, o)
        }
        Op::Conv2dBackwardInput { spec, input_hw } => {
            need(2)?;
            let (dy, w) = (&ins[0], &ins[1]);
            let x_shape = [oshape[0], oshape[1], input_hw[0], input_hw[1]];
            let g = Geom::new(spec, &x_shape, *w.shape.first().unwrap_or(&0))?;
            check_dy(&g, dy.shape)?;
            conv::backward_input(&g, dy.get::<T>()?, w.get::<T>()?, o)
        }
        Op::Conv2dBackwardWeight(spec) => {
            need(2)?;
            let (x, dy) = (&ins[0], &ins[1]);
            let g = Geom::new(spec, x.shape, *dy.shape.get(1).unwrap_or(&0))?;
            check_dy(&g, dy.shape)?;
            conv::backward_weight(&g, x.get::<T>()?, dy.get::<T>()?, o)
        }
        Op::Pool(spec) => PoolGeom::new(spec, ins[0].shape)?.forward(ins[0].get::<T>()?, o),
        Op::MaxPool2dBackward(spec) => {
            need(2)?;
            PoolGeom::new(spec, ins[0].shape)?.max_backward(
                ins[0].get::<T>()?,
                ins[1].get::<T>()?,
                o,
            )
        }
        op => Err(op_err(format!("{} is not a float vision op", op.kind()))),
    }
}

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

pub(crate) fn eval(node: &Node, ins: &[TensorView], mut out: OutView) -> Result<(), CpuError> {
    let Some(x) = ins.first() else {
        return Err(op_err("missing input"));
    };
    if let Op::ResizeNearest2x = node.op {
        return match out.class() {
            ComputeClass::F32 => resize_nearest2x(x.shape, x.get::<f32>()?, out.get_mut()?),
            ComputeClass::F64 => resize_nearest2x(x.shape, x.get::<f64>()?, out.get_mut()?),
            ComputeClass::I64 => resize_nearest2x(x.shape, x.get::<i64>()?, out.get_mut()?),
        };
    }
    match out.class() {
        ComputeClass::F32 => run::<f32>(node, ins, &mut out),
        ComputeClass::F64 => run::<f64>(node, ins, &mut out),
        c => Err(op_err(format!(
            "{} does not run on values held as {c:?}",
            node.op.kind()
        ))),
    }
}
