//! Case table of the norm group: LayerNorm, RmsNorm, FusedResidualLN, FusedResidualRmsNorm.
//! The table is the union of the CPU oracle tests, the CUDA parity tests and the gradchecks;
//! each list below names where its shapes came from. Oracle and parity cases take gamma,
//! beta and bias as params (weights a device keeps resident, as the parity tests had them);
//! gradcheck cases take them as inputs to differentiate them, and follow LayerNorm / RmsNorm
//! with a tanh so that the cotangent reaches them through a nonlinearity. Draws: the CPU's
//! `draw` offsets x (removing the mean matters) and keeps gamma in 0.5..1.5; the parity
//! tests' `gpu` draws are plain normals.
pub use super::norm_oracle::*;
use crate::case::{Case, Draw, Input};
use rlx_ir::{Activation, DType, Graph, NodeId, Shape};

/// The CPU tests' x: offset and spread out, so removing the mean matters.
fn offset() -> Draw {
    Draw::custom(|rng, n, _| rng.normals(n).iter().map(|v| 1.5 + 2.0 * v).collect())
}

/// The float dtypes the CUDA norm kernels have (no f64 kernel).
const GPU_FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

fn gamma_draw() -> Draw {
    Draw::Uniform(0.5, 1.5)
}

/// Whether a case's weights are params (oracle and parity) or inputs (gradcheck).
#[derive(Clone, Copy, PartialEq)]
enum Leaf {
    Param,
    Input,
}

fn leaf(g: &mut Graph, kind: Leaf, name: &str, dims: &[usize], dt: DType) -> NodeId {
    let s = Shape::new(dims, dt);
    match kind {
        Leaf::Param => g.param(name, s).unwrap(),
        Leaf::Input => g.input(name, s).unwrap(),
    }
}

/// Every input normal for the parity check: the parity tests' draws.
fn all_normal(mut c: Case) -> Case {
    for i in &mut c.inputs {
        i.gpu = Some(Draw::Normal(1.0));
    }
    c
}

/// Every input normal for every check: the parity lists' cases and the gradchecks.
fn normal_draws(mut c: Case) -> Case {
    for i in &mut c.inputs {
        i.draw = Draw::Normal(1.0);
    }
    c
}

// ---- LayerNorm, RmsNorm ----

/// LayerNorm (or RmsNorm when `rms`) of x `dims` over `axis..`, with or without beta.
fn axis_case(rms: bool, dims: &[usize], axis: i64, beta: bool, eps: f32, kind: Leaf) -> Case {
    let a = if axis < 0 {
        axis + dims.len() as i64
    } else {
        axis
    } as usize;
    let pd = dims[a..].to_vec();
    let len: usize = pd.iter().product();
    let mut ins = vec![
        Input::new("x", dims, offset()),
        Input::new("gamma", &pd, gamma_draw()),
    ];
    if beta {
        ins.push(Input::new("beta", &pd, Draw::Normal(1.0)));
    }
    let what = if rms { "RmsNorm" } else { "LayerNorm" };
    let tail = if kind == Leaf::Input { " ∘ tanh" } else { "" };
    let d = dims.to_vec();
    let c = Case::new(
        format!("{what} {dims:?} axis {axis} beta {beta} eps {eps:e}{tail}"),
        ins,
        move |dt| {
            let mut g = Graph::new("norm");
            let x = g.input("x", Shape::new(&d, dt)).unwrap();
            let gm = leaf(&mut g, kind, "gamma", &pd, dt);
            let be = beta.then(|| leaf(&mut g, kind, "beta", &pd, dt));
            let y = if rms {
                g.rms_norm(x, gm, be, axis, eps)
            } else {
                g.layer_norm(x, gm, be, axis, eps)
            }
            .unwrap();
            let y = match kind {
                Leaf::Input => g.activation(Activation::Tanh, y).unwrap(),
                Leaf::Param => y,
            };
            g.set_outputs(vec![y]);
            g
        },
    )
    .out(dims);
    match kind {
        Leaf::Param => c.oracle(move |v, _| {
            let b = beta.then(|| &v[2][..]);
            norm_ref(&v[0], len, &v[1], b, eps as f64, rms)
        }),
        Leaf::Input => {
            let wrt: &[&str] = if beta {
                &["x", "gamma", "beta"]
            } else {
                &["x", "gamma"]
            };
            normal_draws(c).wrt(wrt).only_grad()
        }
    }
}

/// The parity tests' row lengths, hitting every kernel variant: warp rows of 1..512 (each
/// register width), block rows cached in 256 / 1024 threads, streaming rows above 16384, and
/// multiples of four up to 1024 (the vectorised warp kernel at each width).
const SHAPES: [(&[usize], i64); 16] = [
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
    (&[13, 12], -1),
    (&[6, 260], -1),
    (&[4, 3, 176], 1),
    (&[11, 1020], -1),
];

/// The cases of LayerNorm (`rms` false) or RmsNorm from each suite's lists.
fn axis_norms(
    rms: bool,
    cpu: &[(&[usize], i64)],
    many_rows: (&[usize], i64, bool),
    gpu_beta: impl Fn(usize) -> bool,
    gpu_eps: f32,
    extra: &[(&[usize], i64, bool, f32)],
) -> Vec<Case> {
    let mut cases = vec![];
    // The CPU's axes in f32; then half and double storage; then rows normalised in parallel.
    for beta in [true, false] {
        for &(dims, axis) in cpu {
            let c = axis_case(rms, dims, axis, beta, 1e-5, Leaf::Param);
            cases.push(all_normal(c));
        }
    }
    for (dims, axis, beta) in [(&[5usize, 65][..], -1i64, true), (&[3, 4, 9], 1, false)] {
        let c = axis_case(rms, dims, axis, beta, 1e-5, Leaf::Param);
        let c = c.dtypes(&[DType::F16, DType::BF16, DType::F64]);
        cases.push(all_normal(c).parity_dtypes(&[DType::F16, DType::BF16]));
    }
    let (dims, axis, beta) = many_rows;
    cases.push(all_normal(axis_case(
        rms,
        dims,
        axis,
        beta,
        1e-5,
        Leaf::Param,
    )));
    // The GPU's kernel variants, every float dtype (normal draws for the oracle check too).
    let gpu = SHAPES
        .iter()
        .enumerate()
        .map(|(i, &(d, a))| (d, a, gpu_beta(i), gpu_eps));
    for (dims, axis, beta, eps) in gpu.chain(extra.iter().copied()) {
        let c = axis_case(rms, dims, axis, beta, eps, Leaf::Param);
        cases.push(normal_draws(c).dtypes(&GPU_FLOATS));
    }
    for (dims, axis) in [(&[3usize, 5][..], -1i64), (&[2, 3, 4], 1), (&[4, 7], 1)] {
        for beta in [true, false] {
            cases.push(axis_case(rms, dims, axis, beta, 1e-5, Leaf::Input));
        }
    }
    cases
}

pub fn layer_norm() -> Vec<Case> {
    let cpu: [(&[usize], i64); 6] = [
        (&[4, 7], -1),
        (&[2, 3, 33], 2),
        (&[2, 3, 5, 7], 1),
        (&[2, 3, 5, 7], -2),
        (&[9], 0),
        (&[3, 5, 7], 0),
    ];
    let extra: [(&[usize], i64, bool, f32); 2] =
        [(&[7, 1], -1, true, 1e-5), (&[33, 129], -1, false, 1e-2)];
    axis_norms(
        false,
        &cpu,
        (&[300, 257], -1, true),
        |i| i.is_multiple_of(2),
        1e-5,
        &extra,
    )
}

pub fn rms_norm() -> Vec<Case> {
    let cpu: [(&[usize], i64); 4] = [
        (&[4, 7], -1),
        (&[2, 3, 33], -1),
        (&[2, 3, 5, 7], 1),
        (&[2, 3, 5, 7], -3),
    ];
    let extra: [(&[usize], i64, bool, f32); 1] = [(&[33, 129], -2, true, 1e-2)];
    axis_norms(
        true,
        &cpu,
        (&[150, 2, 129], 1, false),
        |i| i % 2 == 1,
        1e-6,
        &extra,
    )
}

// ---- FusedResidualLN, FusedResidualRmsNorm ----

/// The fused norm of x + residual (+ bias) over the last dim, with or without beta.
fn residual_case(rms: bool, dims: &[usize], bias: bool, beta: bool, eps: f32, kind: Leaf) -> Case {
    let c = *dims.last().unwrap();
    let mut ins = vec![
        Input::new("x", dims, offset()),
        Input::new("r", dims, Draw::Normal(1.0)),
        Input::new("gamma", &[c], gamma_draw()),
    ];
    if bias {
        ins.push(Input::new("bias", &[c], Draw::Normal(1.0)));
    }
    if beta {
        ins.push(Input::new("beta", &[c], Draw::Normal(1.0)));
    }
    let what = if rms {
        "FusedResidualRmsNorm"
    } else {
        "FusedResidualLN"
    };
    let d = dims.to_vec();
    let case = Case::new(
        format!("{what} {dims:?} bias {bias} beta {beta} eps {eps:e}"),
        ins,
        move |dt| {
            let mut g = Graph::new("residual_norm");
            let x = g.input("x", Shape::new(&d, dt)).unwrap();
            let r = g.input("r", Shape::new(&d, dt)).unwrap();
            let bi = bias.then(|| leaf(&mut g, kind, "bias", &[c], dt));
            let gm = leaf(&mut g, kind, "gamma", &[c], dt);
            let be = beta.then(|| leaf(&mut g, kind, "beta", &[c], dt));
            let y = if rms {
                g.fused_residual_rms_norm(x, r, bi, gm, be, eps)
            } else {
                g.fused_residual_ln(x, r, bi, gm, be, eps)
            }
            .unwrap();
            g.set_outputs(vec![y]);
            g
        },
    )
    .out(dims)
    .oracle(move |v, _| {
        // Inputs in order: x, r, gamma, [bias], [beta].
        let b = bias.then(|| &v[3][..]);
        let be = beta.then(|| &v[if bias { 4 } else { 3 }][..]);
        norm_ref(
            &residual_sum(&v[0], &v[1], b, c),
            c,
            &v[2],
            be,
            eps as f64,
            rms,
        )
    });
    match kind {
        Leaf::Param => all_normal(case),
        Leaf::Input => {
            let mut wrt = vec!["x", "r", "gamma"];
            wrt.extend(bias.then_some("bias"));
            wrt.extend(beta.then_some("beta"));
            normal_draws(case).wrt(&wrt).only_grad()
        }
    }
}

/// The cases of FusedResidualLN (`rms` false) or FusedResidualRmsNorm from each suite.
fn residual_norms(
    rms: bool,
    gpu: &[&[usize]],
    gpu_flags: impl Fn(usize) -> (bool, bool),
    gpu_eps: f32,
    extra: &[(bool, bool)],
) -> Vec<Case> {
    let mut cases = vec![];
    // The CPU's: every bias / beta form in f32 and (a single row) f64, half storage, and
    // rows normalised in parallel.
    for bias in [false, true] {
        for beta in [false, true] {
            cases.push(residual_case(
                rms,
                &[3, 5, 33],
                bias,
                beta,
                1e-6,
                Leaf::Param,
            ));
            let c = residual_case(rms, &[7], bias, beta, 1e-6, Leaf::Param);
            cases.push(c.dtypes(&[DType::F64]).no_parity());
        }
    }
    let half = [(DType::F16, true), (DType::BF16, false)];
    for (dt, beta) in half {
        let c = residual_case(rms, &[4, 65], true, beta, 1e-6, Leaf::Param);
        cases.push(c.dtypes(&[dt]));
    }
    cases.push(residual_case(
        rms,
        &[260, 130],
        false,
        true,
        1e-6,
        Leaf::Param,
    ));
    // The GPU's row lengths, every float dtype (normal draws for the oracle check too).
    let shapes = gpu.iter().enumerate().map(|(i, &d)| {
        let (bias, beta) = gpu_flags(i);
        (d, bias, beta, gpu_eps)
    });
    let extra = extra
        .iter()
        .map(|&(bias, beta)| (&[9usize, 1000][..], bias, beta, 1e-5));
    for (dims, bias, beta, eps) in shapes.chain(extra) {
        let c = residual_case(rms, dims, bias, beta, eps, Leaf::Param);
        cases.push(normal_draws(c).dtypes(&GPU_FLOATS));
    }
    for bias in [true, false] {
        for beta in [true, false] {
            cases.push(residual_case(rms, &[3, 6], bias, beta, 1e-5, Leaf::Input));
        }
    }
    cases
}

pub fn fused_residual_ln() -> Vec<Case> {
    let gpu: [&[usize]; 7] = [
        &[7, 33],
        &[3, 5, 129],
        &[4096, 384],
        &[3, 8],
        &[17, 516],
        &[5, 3000],
        &[3, 20000],
    ];
    let flags = |i: usize| (i.is_multiple_of(2), i % 3 != 1);
    residual_norms(false, &gpu, flags, 1e-5, &[(true, true), (false, false)])
}

pub fn fused_residual_rms_norm() -> Vec<Case> {
    let gpu: [&[usize]; 5] = [&[1, 7], &[33, 129], &[1024, 1000], &[5, 9000], &[2, 17000]];
    let flags = |i: usize| (i % 2 == 1, i.is_multiple_of(3));
    residual_norms(true, &gpu, flags, 1e-6, &[(true, true)])
}
