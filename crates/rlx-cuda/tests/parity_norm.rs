//! GPU parity: LayerNorm, RmsNorm, FusedResidualLN, FusedResidualRmsNorm against the CPU
//! reference (same dtype) and the f64 oracle, over short rows (warp per row), long rows
//! (block per row, cached and streaming) and several normalised-axis choices.
mod common;
use common::*;
use rlx_ir::{DType, Graph, Shape};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Layer,
    Rms,
}

fn normalised(dims: &[usize], axis: i64) -> Vec<usize> {
    let a = if axis < 0 {
        (dims.len() as i64 + axis) as usize
    } else {
        axis as usize
    };
    dims[a..].to_vec()
}

/// LayerNorm / RmsNorm of x `dims` over `axis..`, in every float dtype.
fn axis_case(rng: &mut Rng, kind: Kind, dims: &[usize], axis: i64, beta: bool, eps: f32) {
    let nd = normalised(dims, axis);
    let mut feeds = vec![normal(rng, "x", dims), normal(rng, "g", &nd)];
    if beta {
        feeds.push(normal(rng, "b", &nd));
    }
    let build = |dt: DType| {
        let mut g = Graph::new("norm");
        let x = g.input("x", Shape::new(dims, dt)).unwrap();
        let gm = g.param("g", Shape::new(&nd, dt)).unwrap();
        let be = beta.then(|| g.param("b", Shape::new(&nd, dt)).unwrap());
        let y = match kind {
            Kind::Layer => g.layer_norm(x, gm, be, axis, eps),
            Kind::Rms => g.rms_norm(x, gm, be, axis, eps),
        }
        .unwrap();
        g.set_outputs(vec![y]);
        g
    };
    let what = if kind == Kind::Layer {
        "layer_norm"
    } else {
        "rms_norm"
    };
    for dt in FLOATS {
        parity(
            &format!("{what} {dims:?} axis {axis} beta {beta}"),
            &build,
            &feeds,
            dt,
        );
    }
}

/// Fused residual norm of x + residual (+ bias) over the last dim, in every float dtype.
fn residual_case(rng: &mut Rng, kind: Kind, dims: &[usize], bias: bool, beta: bool, eps: f32) {
    let last = &dims[dims.len() - 1..];
    let mut feeds = vec![
        normal(rng, "x", dims),
        normal(rng, "r", dims),
        normal(rng, "g", last),
    ];
    if bias {
        feeds.push(normal(rng, "bias", last));
    }
    if beta {
        feeds.push(normal(rng, "b", last));
    }
    let build = |dt: DType| {
        let mut g = Graph::new("residual_norm");
        let x = g.input("x", Shape::new(dims, dt)).unwrap();
        let r = g.input("r", Shape::new(dims, dt)).unwrap();
        let bi = bias.then(|| g.param("bias", Shape::new(last, dt)).unwrap());
        let gm = g.param("g", Shape::new(last, dt)).unwrap();
        let be = beta.then(|| g.param("b", Shape::new(last, dt)).unwrap());
        let y = match kind {
            Kind::Layer => g.fused_residual_ln(x, r, bi, gm, be, eps),
            Kind::Rms => g.fused_residual_rms_norm(x, r, bi, gm, be, eps),
        }
        .unwrap();
        g.set_outputs(vec![y]);
        g
    };
    let what = if kind == Kind::Layer {
        "fused_residual_ln"
    } else {
        "fused_residual_rms_norm"
    };
    for dt in FLOATS {
        parity(
            &format!("{what} {dims:?} bias {bias} beta {beta}"),
            &build,
            &feeds,
            dt,
        );
    }
}

/// Row lengths that hit every kernel variant: warp rows of 1..512 (each register width),
/// block rows cached in 256 / 1024 threads, and streaming rows above 16384.
const SHAPES: &[(&[usize], i64)] = &[
    (&[7, 33], -1),
    (&[1, 1], -1),
    (&[5, 3, 129], 1),
    (&[2, 3, 7], -3),
    (&[4096, 384], -1),
    (&[65, 513], -1),
    (&[33, 1000], 1),
    (&[3, 2000], -1),
    (&[9, 4096], -1),
    (&[5, 2, 5000], 1),
    (&[3, 12000], -1),
    (&[2, 40000], -1),
    // Multiples of four up to 1024: the vectorised warp kernel at each width.
    (&[13, 12], -1),
    (&[6, 260], -1),
    (&[4, 3, 176], 1),
    (&[11, 1020], -1),
];

#[test]
fn layer_norm() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("layer_norm");
    for (i, &(dims, axis)) in SHAPES.iter().enumerate() {
        axis_case(&mut rng, Kind::Layer, dims, axis, i % 2 == 0, 1e-5);
    }
    axis_case(&mut rng, Kind::Layer, &[7, 1], -1, true, 1e-5);
    axis_case(&mut rng, Kind::Layer, &[33, 129], -1, false, 1e-2);
}

#[test]
fn rms_norm() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("rms_norm");
    for (i, &(dims, axis)) in SHAPES.iter().enumerate() {
        axis_case(&mut rng, Kind::Rms, dims, axis, i % 2 == 1, 1e-6);
    }
    axis_case(&mut rng, Kind::Rms, &[33, 129], -2, true, 1e-2);
}

#[test]
fn fused_residual_ln() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("fused_residual_ln");
    let shapes: &[&[usize]] = &[
        &[7, 33],
        &[3, 5, 129],
        &[4096, 384],
        &[3, 8],
        &[17, 516],
        &[5, 3000],
        &[3, 20000],
    ];
    for (i, dims) in shapes.iter().enumerate() {
        residual_case(&mut rng, Kind::Layer, dims, i % 2 == 0, i % 3 != 1, 1e-5);
    }
    residual_case(&mut rng, Kind::Layer, &[9, 1000], true, true, 1e-5);
    residual_case(&mut rng, Kind::Layer, &[9, 1000], false, false, 1e-5);
}

#[test]
fn fused_residual_rms_norm() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("fused_residual_rms_norm");
    let shapes: &[&[usize]] = &[&[1, 7], &[33, 129], &[1024, 1000], &[5, 9000], &[2, 17000]];
    for (i, dims) in shapes.iter().enumerate() {
        residual_case(&mut rng, Kind::Rms, dims, i % 2 == 1, i % 3 == 0, 1e-6);
    }
    residual_case(&mut rng, Kind::Rms, &[9, 1000], true, true, 1e-5);
}
