//! Finite-difference checks of the norm group (the per-op cases of LayerNorm, RmsNorm,
//! FusedResidualLN and FusedResidualRmsNorm come from rlx-testutil's case table), and
//! FusedSwiGLU (of the transformer group, whose table holds no case of it yet).
mod common;
use common::*;
use rlx_ir::{Graph, HostTensor, Op};
use rlx_testutil::run::grad;

rlx_testutil::case_tests!(norm, grad);

#[test]
fn swiglu_vjp() {
    let mut rng = Rng::new("swiglu_vjp");
    for gate_first in [false, true] {
        for dims in [vec![3, 8], vec![2, 2, 6]] {
            let mut g = Graph::new("swiglu");
            let x = f64_input(&mut g, "x", &dims);
            let y = g
                .add_node(
                    Op::FusedSwiGLU {
                        cast_to: None,
                        gate_first,
                    },
                    &[x],
                )
                .unwrap();
            g.set_outputs(vec![y]);
            let n: usize = dims.iter().product();
            gradcheck(
                &format!("swiglu gate_first={gate_first} {dims:?}"),
                &g,
                &[("x", HostTensor::from_f64(&dims, &rng.normals(n)))],
                &[x],
                &mut rng,
            );
        }
    }
}
