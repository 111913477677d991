//! Finite-difference checks: MatMul (plain, batched, broadcast batch, rank-1 operands) and
//! FusedMatMulBiasAct (with and without an activation).
mod common;
use common::*;
use rlx_ir::{Activation, Graph};

fn check_matmul(da: &[usize], db: &[usize], rng: &mut Rng) {
    let mut g = Graph::new("mm");
    let a = f64_input(&mut g, "a", da);
    let b = f64_input(&mut g, "b", db);
    let y = g.matmul(a, b).unwrap();
    g.set_outputs(vec![y]);
    gradcheck(
        &format!("matmul {da:?} @ {db:?}"),
        &g,
        &[("a", rng.tensor(da)), ("b", rng.tensor(db))],
        &[a, b],
        rng,
    );
}

#[test]
fn matmul_vjp() {
    let mut rng = Rng::new("matmul_vjp");
    let cases: [(&[usize], &[usize]); 7] = [
        (&[3, 5], &[5, 2]),
        (&[2, 3, 4], &[2, 4, 3]),
        (&[2, 3, 4], &[4, 5]),
        (&[3, 1, 2, 3], &[2, 3, 2]),
        (&[5], &[5, 3]),
        (&[2, 3, 4], &[4]),
        (&[4], &[4]),
    ];
    for (da, db) in cases {
        check_matmul(da, db, &mut rng);
    }
}

#[test]
fn fused_matmul_bias_act_vjp() {
    let mut rng = Rng::new("fused_matmul_bias_act_vjp");
    let acts = [
        None,
        Some(Activation::Relu),
        Some(Activation::Gelu),
        Some(Activation::Silu),
        Some(Activation::Tanh),
    ];
    for act in acts {
        for (da, dw) in [(vec![3, 4], vec![4, 5]), (vec![2, 3, 4], vec![4, 3])] {
            let n = dw[1];
            let mut g = Graph::new("fmm");
            let a = f64_input(&mut g, "a", &da);
            let w = f64_input(&mut g, "w", &dw);
            let b = f64_input(&mut g, "b", &[n]);
            let y = g.matmul_bias_act(a, w, b, act).unwrap();
            g.set_outputs(vec![y]);
            gradcheck(
                &format!("fused {act:?} {da:?} {dw:?}"),
                &g,
                &[
                    ("a", rng.tensor(&da)),
                    ("w", rng.tensor(&dw)),
                    ("b", rng.tensor(&[n])),
                ],
                &[a, w, b],
                &mut rng,
            );
        }
    }
}
