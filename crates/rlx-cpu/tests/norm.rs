//! Oracle tests of the norm group: the per-op cases (LayerNorm, RmsNorm, FusedResidualLN,
//! FusedResidualRmsNorm) come from rlx-testutil's case table, run here against their f64
//! oracles; below them the norm builders' accepted and rejected forms (FusedSwiGLU's builder
//! errors included; its cases are in the transformer table).
use rlx_ir::{DType, Graph, NodeId, Shape};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(norm, cpu);

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
