//! Oracle tests: LayerNorm, RmsNorm, FusedResidualLN, FusedResidualRmsNorm, and FusedSwiGLU's
//! builder errors (its cases are in rlx-testutil's transformer table).
mod common;
use common::*;
use rlx_ir::{DType, Graph, HostTensor, NodeId, Shape};

/// Normalise each `len`-long row of `h` in f64 (two-pass statistics).
fn ref_norm(
    h: &[f64],
    len: usize,
    gamma: &[f64],
    beta: Option<&[f64]>,
    eps: f64,
    rms: bool,
) -> Vec<f64> {
    let mut out = vec![];
    for row in h.chunks(len) {
        let n = len as f64;
        let mean = if rms {
            0.0
        } else {
            row.iter().sum::<f64>() / n
        };
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        for (j, v) in row.iter().enumerate() {
            let y = (v - mean) / (var + eps).sqrt() * gamma[j];
            out.push(y + beta.map_or(0.0, |b| b[j]));
        }
    }
    out
}

/// Offset, spread-out inputs so removing the mean matters.
fn draw(rng: &mut Rng, n: usize) -> Vec<f64> {
    rng.normals(n).iter().map(|v| 1.5 + 2.0 * v).collect()
}

fn check_axis_norm(
    rng: &mut Rng,
    shape: &[usize],
    axis: i64,
    with_beta: bool,
    rms: bool,
    dt: DType,
) {
    let a = if axis < 0 {
        axis + shape.len() as i64
    } else {
        axis
    } as usize;
    let pshape = &shape[a..];
    let len: usize = pshape.iter().product();
    let x = draw(rng, shape.iter().product());
    let gamma = rng.uniforms(len, 0.5, 1.5);
    let beta = rng.normals(len);
    let eps = 1e-5;
    let mut g = Graph::new("norm");
    let xi = g.input("x", Shape::new(shape, dt)).unwrap();
    let gi = g.input("gamma", Shape::new(pshape, dt)).unwrap();
    let bi = if with_beta {
        Some(g.input("beta", Shape::new(pshape, dt)).unwrap())
    } else {
        None
    };
    let y = if rms {
        g.rms_norm(xi, gi, bi, axis, eps).unwrap()
    } else {
        g.layer_norm(xi, gi, bi, axis, eps).unwrap()
    };
    g.set_outputs(vec![y]);
    let mut inputs = vec![
        ("x", HostTensor::from_f64_as(shape, &x, dt)),
        ("gamma", HostTensor::from_f64_as(pshape, &gamma, dt)),
    ];
    if with_beta {
        inputs.push(("beta", HostTensor::from_f64_as(pshape, &beta, dt)));
    }
    let out = run(&g, &inputs, &[]);
    let (gr, br) = (through(dt, &gamma), through(dt, &beta));
    let want = ref_norm(
        &through(dt, &x),
        len,
        &gr,
        with_beta.then_some(&br[..]),
        eps as f64,
        rms,
    );
    assert_eq!(out[0].shape, shape);
    let what = format!(
        "{} {shape:?} axis {axis} beta {with_beta} {dt}",
        if rms { "rms" } else { "ln" }
    );
    assert_close(&what, &out[0], &want, dt);
}

#[test]
fn layer_norm_last_and_earlier_axes() {
    let mut rng = Rng::new("layer_norm_last_and_earlier_axes");
    for beta in [true, false] {
        check_axis_norm(&mut rng, &[4, 7], -1, beta, false, DType::F32);
        check_axis_norm(&mut rng, &[2, 3, 33], 2, beta, false, DType::F32);
        check_axis_norm(&mut rng, &[2, 3, 5, 7], 1, beta, false, DType::F32);
        check_axis_norm(&mut rng, &[2, 3, 5, 7], -2, beta, false, DType::F32);
        check_axis_norm(&mut rng, &[9], 0, beta, false, DType::F32);
        check_axis_norm(&mut rng, &[3, 5, 7], 0, beta, false, DType::F32);
    }
}

#[test]
fn rms_norm_last_and_earlier_axes() {
    let mut rng = Rng::new("rms_norm_last_and_earlier_axes");
    for beta in [true, false] {
        check_axis_norm(&mut rng, &[4, 7], -1, beta, true, DType::F32);
        check_axis_norm(&mut rng, &[2, 3, 33], -1, beta, true, DType::F32);
        check_axis_norm(&mut rng, &[2, 3, 5, 7], 1, beta, true, DType::F32);
        check_axis_norm(&mut rng, &[2, 3, 5, 7], -3, beta, true, DType::F32);
    }
}

#[test]
fn norms_in_half_and_double_storage() {
    let mut rng = Rng::new("norms_in_half_and_double_storage");
    for dt in [DType::F16, DType::BF16, DType::F64] {
        for rms in [false, true] {
            check_axis_norm(&mut rng, &[5, 65], -1, true, rms, dt);
            check_axis_norm(&mut rng, &[3, 4, 9], 1, false, rms, dt);
        }
    }
}

#[test]
fn norms_on_many_rows() {
    // Enough elements that rows are normalised in parallel.
    let mut rng = Rng::new("norms_on_many_rows");
    check_axis_norm(&mut rng, &[300, 257], -1, true, false, DType::F32);
    check_axis_norm(&mut rng, &[150, 2, 129], 1, false, true, DType::F32);
}

fn check_residual(rng: &mut Rng, shape: &[usize], bias: bool, beta: bool, rms: bool, dt: DType) {
    let c = *shape.last().unwrap();
    let n: usize = shape.iter().product();
    let (x, r) = (draw(rng, n), rng.normals(n));
    let (bv, gv, betav) = (rng.normals(c), rng.uniforms(c, 0.5, 1.5), rng.normals(c));
    let eps = 1e-6;
    let mut g = Graph::new("res");
    let xi = g.input("x", Shape::new(shape, dt)).unwrap();
    let ri = g.input("r", Shape::new(shape, dt)).unwrap();
    let vec_in = |g: &mut Graph, name: &str| g.input(name, Shape::new(&[c], dt)).unwrap();
    let bi = bias.then(|| vec_in(&mut g, "bias"));
    let gi = vec_in(&mut g, "gamma");
    let be = beta.then(|| vec_in(&mut g, "beta"));
    let y = if rms {
        g.fused_residual_rms_norm(xi, ri, bi, gi, be, eps).unwrap()
    } else {
        g.fused_residual_ln(xi, ri, bi, gi, be, eps).unwrap()
    };
    g.set_outputs(vec![y]);
    let t = |v: &[f64], s: &[usize]| HostTensor::from_f64_as(s, v, dt);
    let mut inputs = vec![
        ("x", t(&x, shape)),
        ("r", t(&r, shape)),
        ("gamma", t(&gv, &[c])),
    ];
    if bias {
        inputs.push(("bias", t(&bv, &[c])));
    }
    if beta {
        inputs.push(("beta", t(&betav, &[c])));
    }
    let out = run(&g, &inputs, &[]);
    let (xr, rr, br) = (through(dt, &x), through(dt, &r), through(dt, &bv));
    let h: Vec<f64> = (0..n)
        .map(|i| xr[i] + rr[i] + if bias { br[i % c] } else { 0.0 })
        .collect();
    let betar = through(dt, &betav);
    let want = ref_norm(
        &h,
        c,
        &through(dt, &gv),
        beta.then_some(&betar[..]),
        eps as f64,
        rms,
    );
    let what = format!("residual rms={rms} {shape:?} bias {bias} beta {beta} {dt}");
    assert_close(&what, &out[0], &want, dt);
}

#[test]
fn fused_residual_norms_with_and_without_bias() {
    let mut rng = Rng::new("fused_residual_norms_with_and_without_bias");
    for rms in [false, true] {
        for bias in [false, true] {
            for beta in [false, true] {
                check_residual(&mut rng, &[3, 5, 33], bias, beta, rms, DType::F32);
                check_residual(&mut rng, &[7], bias, beta, rms, DType::F64);
            }
        }
        check_residual(&mut rng, &[4, 65], true, true, rms, DType::F16);
        check_residual(&mut rng, &[4, 65], true, false, rms, DType::BF16);
        check_residual(&mut rng, &[260, 130], false, true, rms, DType::F32);
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
