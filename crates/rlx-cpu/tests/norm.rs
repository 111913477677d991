//! Oracle tests of the norm group: the per-op cases (LayerNorm, RmsNorm, FusedResidualLN,
//! FusedResidualRmsNorm) come from rlx-testutil's case table, run here against their f64
//! oracles; below them the norm builders' accepted and rejected forms, and FusedSwiGLU (of
//! the transformer group, whose table holds no case of it yet).
mod common;
use common::*;
use rlx_ir::{DType, Graph, HostTensor, NodeId, Shape};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(norm, cpu);

fn check_swiglu(
    rng: &mut Rng,
    shape: &[usize],
    gate_first: bool,
    dt: DType,
    cast_to: Option<DType>,
) {
    let two_n = *shape.last().unwrap();
    let n = two_n / 2;
    let x = rng.normals(shape.iter().product());
    let mut g = Graph::new("swiglu");
    let xi = g.input("x", Shape::new(shape, dt)).unwrap();
    let y = g.swiglu(xi, gate_first, cast_to).unwrap();
    g.set_outputs(vec![y]);
    let out = run(&g, &[("x", HostTensor::from_f64_as(shape, &x, dt))], &[]);
    let odt = cast_to.unwrap_or(dt);
    assert_eq!(out[0].dtype, odt);
    let mut oshape = shape.to_vec();
    *oshape.last_mut().unwrap() = n;
    assert_eq!(out[0].shape, oshape);
    let xr = through(dt, &x);
    let mut want = vec![];
    for row in xr.chunks(two_n) {
        for j in 0..n {
            let (u, gt) = if gate_first {
                (row[n + j], row[j])
            } else {
                (row[j], row[n + j])
            };
            want.push(u * gt / (1.0 + (-gt).exp()));
        }
    }
    // The looser of the input and output storage tolerances applies.
    let tol_dt = if tol(odt) > tol(dt) { odt } else { dt };
    let what = format!("swiglu {shape:?} gate_first {gate_first} {dt} -> {odt}");
    assert_close(&what, &out[0], &want, tol_dt);
}

#[test]
fn swiglu_both_orders_and_casts() {
    let mut rng = Rng::new("swiglu_both_orders_and_casts");
    for gate_first in [false, true] {
        check_swiglu(&mut rng, &[3, 14], gate_first, DType::F32, None);
        check_swiglu(&mut rng, &[2, 3, 66], gate_first, DType::F32, None);
        check_swiglu(&mut rng, &[2], gate_first, DType::F64, None);
        check_swiglu(&mut rng, &[5, 34], gate_first, DType::F32, Some(DType::F16));
        check_swiglu(&mut rng, &[5, 34], gate_first, DType::F32, Some(DType::F64));
        check_swiglu(&mut rng, &[5, 34], gate_first, DType::F64, Some(DType::F32));
        check_swiglu(
            &mut rng,
            &[4, 18],
            gate_first,
            DType::BF16,
            Some(DType::F32),
        );
        check_swiglu(&mut rng, &[300, 222], gate_first, DType::F32, None);
    }
}

#[test]
fn norm_builders_accept_beta_forms() {
    let mut g = Graph::new("forms");
    let x = g.input("x", Shape::new(&[2, 8], DType::F32)).unwrap();
    let gamma = g.input("g", Shape::new(&[8], DType::F32)).unwrap();
    let beta_id: NodeId = g.input("b", Shape::new(&[8], DType::F32)).unwrap();
    let a = g.layer_norm(x, gamma, beta_id, -1, 1e-5).unwrap();
    let b = g.layer_norm(x, gamma, None, -1, 1e-5).unwrap();
    let c = g.rms_norm(x, gamma, Some(beta_id), 1usize, 1e-5).unwrap();
    let d = g.rms_norm(x, gamma, None, -1i64, 1e-5).unwrap();
    assert_eq!(g.node(a).unwrap().inputs.len(), 3);
    assert_eq!(g.node(b).unwrap().inputs.len(), 2);
    assert_eq!(g.node(c).unwrap().inputs.len(), 3);
    assert_eq!(g.node(d).unwrap().inputs.len(), 2);
}

#[test]
fn norm_builders_reject_bad_shapes() {
    let mut g = Graph::new("bad");
    let f = |d: &[usize]| Shape::new(d, DType::F32);
    let x = g.input("x", f(&[2, 3, 8])).unwrap();
    let g8 = g.input("g8", f(&[8])).unwrap();
    let g7 = g.input("g7", f(&[7])).unwrap();
    let g38 = g.input("g38", f(&[3, 8])).unwrap();
    let g8_64 = g.input("g8_64", Shape::new(&[8], DType::F64)).unwrap();
    let xi = g.input("xi", Shape::new(&[2, 8], DType::I64)).unwrap();
    assert!(
        g.layer_norm(x, g7, None, -1, 1e-5).is_err(),
        "gamma [7] vs 8"
    );
    assert!(g.layer_norm(x, g8, g7, -1, 1e-5).is_err(), "beta [7]");
    assert!(
        g.layer_norm(x, g8, None, 1, 1e-5).is_err(),
        "axis 1 needs [3, 8]"
    );
    assert!(g.layer_norm(x, g38, None, 1, 1e-5).is_ok());
    assert!(g.rms_norm(x, g38, None, -1, 1e-5).is_err());
    assert!(
        g.rms_norm(x, g8, None, 3, 1e-5).is_err(),
        "axis out of range"
    );
    assert!(
        g.rms_norm(x, g8, None, -4, 1e-5).is_err(),
        "axis out of range"
    );
    assert!(g.layer_norm(x, g8_64, None, -1, 1e-5).is_err(), "dtype");
    assert!(g.layer_norm(xi, g8, None, -1, 1e-5).is_err(), "int x");
    assert!(g.layer_norm(x, g8, None, -1, f32::NAN).is_err(), "eps");
    let r = g.input("r", f(&[2, 3, 8])).unwrap();
    let r_bad = g.input("r_bad", f(&[2, 4, 8])).unwrap();
    assert!(g.fused_residual_ln(x, r_bad, None, g8, None, 1e-5).is_err());
    assert!(
        g.fused_residual_ln(x, r, Some(g7), g8, None, 1e-5).is_err(),
        "bias [7]"
    );
    assert!(g
        .fused_residual_rms_norm(x, r, None, g7, None, 1e-5)
        .is_err());
    assert!(g
        .fused_residual_rms_norm(x, r, None, g8, Some(g38), 1e-5)
        .is_err());
    assert!(g
        .fused_residual_rms_norm(x, r, Some(g8), g8, Some(g8), 1e-5)
        .is_ok());
    let odd = g.input("odd", f(&[4, 7])).unwrap();
    let s = g.input("s", f(&[])).unwrap();
    assert!(g.swiglu(odd, false, None).is_err(), "odd last dim");
    assert!(g.swiglu(s, true, None).is_err(), "rank 0");
    assert!(g.swiglu(x, true, Some(DType::I32)).is_err(), "int cast_to");
    assert!(g.swiglu(xi, true, None).is_err(), "int x");
    let ok = g.swiglu(x, true, Some(DType::BF16)).unwrap();
    assert_eq!(g.shape(ok).unwrap(), &Shape::new(&[2, 3, 4], DType::BF16));
}
