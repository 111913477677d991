//! Oracle tests of the audio group: the per-op cases (Fft against the O(n²) DFT in every
//! NumPy norm mode and its round trip, LogMel against Whisper's formula, LogMelBackward
//! against its definition) come from rlx-testutil's case table; below them the tests that
//! are not per-op cases (LogMelBackward against finite differences, the 1e-10 floor, the
//! builders' errors).
mod common;
use common::*;
use rlx_ir::{DType, FftNorm, Graph, HostTensor, Shape};
use rlx_testutil::cases::audio::{
    dims_of, filterbank, log_mel_grad_ref, log_mel_ref, out_shape, power_spec, MelDims,
};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(audio, cpu);

fn run_log_mel(
    shape: &[usize],
    nm: usize,
    spec: &[f64],
    fb: &[f64],
    dy: Option<&[f64]>,
    dtype: DType,
) -> HostTensor {
    let nf = shape[shape.len() - 1];
    let mut g = Graph::new("logmel");
    let s = g.input("spec", Shape::new(shape, dtype)).unwrap();
    let b = g.input("fb", Shape::new(&[nf, nm], dtype)).unwrap();
    let mut feeds = vec![
        ("spec", HostTensor::from_f64_as(shape, spec, dtype)),
        ("fb", HostTensor::from_f64_as(&[nf, nm], fb, dtype)),
    ];
    let y = match dy {
        None => g.log_mel(s, b).unwrap(),
        Some(d) => {
            let os = out_shape(shape, nm);
            let dyi = g.input("dy", Shape::new(&os, dtype)).unwrap();
            feeds.push(("dy", HostTensor::from_f64_as(&os, d, dtype)));
            g.log_mel_backward(s, b, dyi).unwrap()
        }
    };
    g.set_outputs(vec![y]);
    run(&g, &feeds, &[]).remove(0)
}

/// d/dspec of Σ dy·LogMel(spec) by central differences of the f64 oracle; NaN where a step
/// crosses a kink.
fn log_mel_fd(spec: &[f64], fb: &[f64], dy: &[f64], dims: MelDims) -> Vec<f64> {
    let loss = |s: &[f64]| -> f64 {
        log_mel_ref(s, fb, dims)
            .0
            .iter()
            .zip(dy)
            .map(|(a, b)| a * b)
            .sum()
    };
    // Which outputs are clamped, and (when some sit at max − 8) which frame holds each
    // item's max: the loss's kinks.
    let live = |s: &[f64]| {
        let (_, live, ms) = log_mel_ref(s, fb, dims);
        let max_matters = live.iter().zip(&ms).any(|(&l, &m)| !l && m >= 1e-10);
        let top = max_matters.then(|| argmax_rows(s, fb, dims));
        (live, top)
    };
    let base = live(spec);
    let mut v = spec.to_vec();
    (0..spec.len())
        .map(|i| {
            // Five-point stencil, error O(h⁴): a step of 1e-3 of the input costs ~1e-12,
            // while the loss's rounding (1e-16 of a sum of logs) over a step 1e-4 or less
            // reached 1e-6 of the slope on inputs near 1e-8.
            let h = 1e-3 * spec[i].abs();
            let mut at = |k: f64| {
                v[i] = spec[i] + k * h;
                let r = (loss(&v), live(&v) == base);
                v[i] = spec[i];
                r
            };
            let (p1, p2, m1, m2) = (at(1.0), at(2.0), at(-1.0), at(-2.0));
            // A step across a kink (the clamp, or a new max) measures neither side's slope.
            if !(p1.1 && p2.1 && m1.1 && m2.1) {
                return f64::NAN;
            }
            (8.0 * (p1.0 - m1.0) - (p2.0 - m2.0)) / (12.0 * h)
        })
        .collect()
}

/// Items' argmax frames: the only rows where the treated-as-constant max matters.
fn argmax_rows(spec: &[f64], fb: &[f64], dims: MelDims) -> Vec<usize> {
    let (items, f, _, nm) = dims;
    let (out, _, _) = log_mel_ref(spec, fb, dims);
    (0..items)
        .map(|it| {
            let sl = &out[it * f * nm..(it + 1) * f * nm];
            let (mut bi, mut bv) = (0, f64::NEG_INFINITY);
            for (i, &v) in sl.iter().enumerate() {
                if v > bv {
                    (bi, bv) = (i, v);
                }
            }
            it * f + bi / nm
        })
        .collect()
}

/// LogMelBackward against central finite differences of the f64 oracle (its values against
/// the definition are table cases).
#[test]
fn log_mel_backward_matches_finite_differences() {
    let mut rng = Rng::new("log_mel_backward");
    let cases: [(&[usize], usize); 3] = [(&[6, 11], 4), (&[2, 7, 9], 5), (&[2, 1, 5, 12], 3)];
    // decades: 1.5 = nothing clamped; 14 = clamp active on some frames.
    for decades in [1.5, 14.0] {
        for &(shape, nm) in &cases {
            let n: usize = shape.iter().product();
            let nf = shape[shape.len() - 1];
            let dims = dims_of(shape, nm);
            let spec = power_spec(&mut rng, n, nf, decades);
            let fb = filterbank(&mut rng, nf, nm);
            let dy = rng.normals(dims.0 * dims.1 * nm);
            let got = run_log_mel(shape, nm, &spec, &fb, Some(&dy), DType::F64);
            assert_eq!(got.shape, shape);
            // Where the clamp is active, the forward's max moves with the argmax row, which
            // the op deliberately does not propagate; compare the other rows there,
            // everything otherwise.
            let fd = log_mel_fd(&spec, &fb, &dy, dims);
            let g = got.to_f64_vec();
            let (_, live, _) = log_mel_ref(&spec, &fb, dims);
            let skip: Vec<usize> = if live.iter().all(|&l| l) {
                vec![]
            } else {
                argmax_rows(&spec, &fb, dims)
            };
            let keep = |i: &usize| !skip.contains(&(i / nf)) && !fd[*i].is_nan();
            let kept = (0..g.len()).filter(keep).count();
            assert!(
                kept * 2 > g.len(),
                "finite differences left {kept} of {}",
                g.len()
            );
            let gk: Vec<f64> = (0..g.len()).filter(keep).map(|i| g[i]).collect();
            let fk: Vec<f64> = (0..g.len()).filter(keep).map(|i| fd[i]).collect();
            let e = rel_l2(&gk, &fk);
            assert!(
                e < 1e-6,
                "dspec vs finite differences {shape:?} decades {decades}: {e:.3e}"
            );
        }
    }
}

/// The 1e-10 floor: a frame far below it passes no gradient, others do, and finite
/// differences agree everywhere (nothing is clamped: the max sits near 1e-3).
#[test]
fn log_mel_backward_floor_passes_no_gradient() {
    let mut rng = Rng::new("log_mel_backward_floor");
    let (shape, nm) = ([7usize, 10], 4);
    let dims = dims_of(&shape, nm);
    let fb = filterbank(&mut rng, 10, nm);
    let mut spec = vec![];
    let tiny = rng.below(7);
    for t in 0..7 {
        let scale = if t == tiny { 1e-13 } else { 1e-4 };
        for _ in 0..10 {
            spec.push(scale * rng.range(0.1, 1.0));
        }
    }
    let dy = rng.normals(7 * nm);
    let got = run_log_mel(&shape, nm, &spec, &fb, Some(&dy), DType::F64).to_f64_vec();
    let (_, live, ms) = log_mel_ref(&spec, &fb, dims);
    assert!(ms[tiny * nm..(tiny + 1) * nm].iter().all(|&m| m < 1e-10));
    assert!(!live[tiny * nm] && live.iter().filter(|&&l| !l).count() == nm);
    assert!(got[tiny * 10..(tiny + 1) * 10].iter().all(|&v| v == 0.0));
    let def = log_mel_grad_ref(&spec, &fb, &dy, dims);
    let fd = log_mel_fd(&spec, &fb, &dy, dims);
    assert!(rel_l2(&got, &def) < 1e-12, "definition");
    let e = rel_l2(&got, &fd);
    assert!(e < 1e-6, "finite differences: {e:.3e}");
}

#[test]
fn audio_builders_reject_bad_shapes() {
    let mut g = Graph::new("bad");
    let f32s = |d: &[usize]| Shape::new(d, DType::F32);
    let x3 = g.input("x3", f32s(&[4, 8, 3])).unwrap();
    let x1 = g.input("x1", f32s(&[2])).unwrap();
    let x0 = g.input("x0", f32s(&[3, 0, 2])).unwrap();
    let xi = g.input("xi", Shape::new(&[8, 2], DType::I64)).unwrap();
    let ok = g.input("ok", f32s(&[4, 8, 2])).unwrap();
    assert!(g.fft(ok, false, FftNorm::Backward).is_ok());
    assert!(g.fft(x3, false, FftNorm::Backward).is_err());
    assert!(g.fft(x1, true, FftNorm::Ortho).is_err());
    assert!(g.fft(x0, false, FftNorm::Forward).is_err());
    assert!(g.fft(xi, false, FftNorm::Backward).is_err());
    let spec = g.input("spec", f32s(&[2, 9, 21])).unwrap();
    let fb = g.input("fb", f32s(&[21, 8])).unwrap();
    let fb_bad = g.input("fbb", f32s(&[20, 8])).unwrap();
    let fb3 = g.input("fb3", f32s(&[21, 8, 1])).unwrap();
    let fb64 = g.input("fb64", Shape::new(&[21, 8], DType::F64)).unwrap();
    let spec1 = g.input("spec1", f32s(&[21])).unwrap();
    assert!(g.log_mel(spec, fb).is_ok());
    assert!(g.log_mel(spec, fb_bad).is_err());
    assert!(g.log_mel(spec, fb3).is_err());
    assert!(g.log_mel(spec, fb64).is_err());
    assert!(g.log_mel(spec1, fb).is_err());
    let dy = g.input("dy", f32s(&[2, 9, 8])).unwrap();
    let dy_bad = g.input("dyb", f32s(&[2, 9, 7])).unwrap();
    assert!(g.log_mel_backward(spec, fb, dy).is_ok());
    assert!(g.log_mel_backward(spec, fb, dy_bad).is_err());
    assert!(g.log_mel_backward(spec, fb_bad, dy).is_err());
}
