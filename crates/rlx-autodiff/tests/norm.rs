//! Finite-difference checks: LayerNorm, RmsNorm (with / without beta, several axes),
//! FusedResidualLN / FusedResidualRmsNorm (with / without bias); FusedSwiGLU's are in
//! rlx-testutil's transformer case table.
mod common;
use common::*;
use rlx_ir::{Graph, Op};

#[test]
fn layer_and_rms_norm_vjp() {
    let mut rng = Rng::new("layer_and_rms_norm_vjp");
    for layer in [true, false] {
        for (dims, axis) in [(vec![3, 5], -1i64), (vec![2, 3, 4], 1), (vec![4, 7], 1)] {
            for with_beta in [true, false] {
                let a = if axis < 0 {
                    dims.len() as i64 + axis
                } else {
                    axis
                } as usize;
                let pd = dims[a..].to_vec();
                let mut g = Graph::new("norm");
                let x = f64_input(&mut g, "x", &dims);
                let gm = f64_input(&mut g, "gamma", &pd);
                let bt = f64_input(&mut g, "beta", &pd);
                let eps = 1e-5;
                let y = if layer {
                    g.layer_norm(x, gm, if with_beta { Some(bt) } else { None }, axis, eps)
                } else {
                    g.rms_norm(x, gm, if with_beta { Some(bt) } else { None }, axis, eps)
                }
                .unwrap();
                let y = g.activation(rlx_ir::Activation::Tanh, y).unwrap();
                g.set_outputs(vec![y]);
                let mut wrt = vec![x, gm];
                if with_beta {
                    wrt.push(bt);
                }
                gradcheck(
                    &format!(
                        "{} {dims:?} axis {axis} beta {with_beta}",
                        if layer { "ln" } else { "rms" }
                    ),
                    &g,
                    &[
                        ("x", rng.tensor(&dims)),
                        ("gamma", rng.tensor(&pd)),
                        ("beta", rng.tensor(&pd)),
                    ],
                    &wrt,
                    &mut rng,
                );
            }
        }
    }
}

#[test]
fn fused_residual_norm_vjp() {
    let mut rng = Rng::new("fused_residual_norm_vjp");
    let dims = [3usize, 6];
    for layer in [true, false] {
        for has_bias in [true, false] {
            for has_beta in [true, false] {
                let mut g = Graph::new("frn");
                let x = f64_input(&mut g, "x", &dims);
                let r = f64_input(&mut g, "r", &dims);
                let b = f64_input(&mut g, "bias", &[6]);
                let gm = f64_input(&mut g, "gamma", &[6]);
                let bt = f64_input(&mut g, "beta", &[6]);
                let mut ins = vec![x, r];
                if has_bias {
                    ins.push(b);
                }
                ins.push(gm);
                if has_beta {
                    ins.push(bt);
                }
                let op = if layer {
                    Op::FusedResidualLN {
                        has_bias,
                        eps: 1e-5,
                    }
                } else {
                    Op::FusedResidualRmsNorm {
                        has_bias,
                        eps: 1e-5,
                    }
                };
                let y = g.add_node(op, &ins).unwrap();
                g.set_outputs(vec![y]);
                gradcheck(
                    &format!("fused residual layer={layer} bias={has_bias} beta={has_beta}"),
                    &g,
                    &[
                        ("x", rng.tensor(&dims)),
                        ("r", rng.tensor(&dims)),
                        ("bias", rng.tensor(&[6])),
                        ("gamma", rng.tensor(&[6])),
                        ("beta", rng.tensor(&[6])),
                    ],
                    &ins,
                    &mut rng,
                );
            }
        }
    }
}
