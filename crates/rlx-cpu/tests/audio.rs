//! Oracle tests: Fft (O(n²) DFT in all NumPy norm modes), LogMel (Whisper's formula) and
//! LogMelBackward (its definition and central finite differences).
mod common;
use common::*;
use rlx_ir::{DType, FftNorm, Graph, HostTensor, Shape};
use std::f64::consts::PI;

const NORMS: [FftNorm; 3] = [FftNorm::Backward, FftNorm::Ortho, FftNorm::Forward];

/// The DFT sum over axis -2 of `[.., n, 2]`, NumPy's sign and scaling conventions.
fn dft_ref(x: &[f64], n: usize, inverse: bool, norm: FftNorm) -> Vec<f64> {
    let sign = if inverse { 1.0 } else { -1.0 };
    let nf = n as f64;
    let scale = match (norm, inverse) {
        (FftNorm::Backward, false) | (FftNorm::Forward, true) => 1.0,
        (FftNorm::Backward, true) | (FftNorm::Forward, false) => 1.0 / nf,
        (FftNorm::Ortho, _) => 1.0 / nf.sqrt(),
    };
    let mut y = vec![0.0; x.len()];
    for (xi, yi) in x.chunks(2 * n).zip(y.chunks_mut(2 * n)) {
        for k in 0..n {
            let (mut re, mut im) = (0.0, 0.0);
            for j in 0..n {
                let a = sign * 2.0 * PI * ((j * k) % n) as f64 / nf;
                let (c, s) = (a.cos(), a.sin());
                re += xi[2 * j] * c - xi[2 * j + 1] * s;
                im += xi[2 * j] * s + xi[2 * j + 1] * c;
            }
            yi[2 * k] = re * scale;
            yi[2 * k + 1] = im * scale;
        }
    }
    y
}

fn run_fft(shape: &[usize], x: &[f64], dtype: DType, ops: &[(bool, FftNorm)]) -> HostTensor {
    let mut g = Graph::new("fft");
    let mut y = g.input("x", Shape::new(shape, dtype)).unwrap();
    for &(inverse, norm) in ops {
        y = g.fft(y, inverse, norm).unwrap();
    }
    g.set_outputs(vec![y]);
    let feed = HostTensor::from_f64_as(shape, x, dtype);
    run(&g, &[("x", feed)], &[]).remove(0)
}

fn fft_shapes() -> Vec<Vec<usize>> {
    vec![
        vec![1, 2],
        vec![2, 2],
        vec![7, 2],
        vec![3, 12, 2],
        vec![2, 2, 15, 2],
        vec![4, 16, 2],
        vec![2, 97, 2],
    ]
}

#[test]
fn fft_matches_dft_in_all_norm_modes() {
    let mut rng = Rng::new("fft_matches_dft_in_all_norm_modes");
    for dtype in [DType::F32, DType::F64] {
        for shape in fft_shapes() {
            let n = shape[shape.len() - 2];
            for norm in NORMS {
                for inverse in [false, true] {
                    let x = through(dtype, &rng.normals(shape.iter().product()));
                    let got = run_fft(&shape, &x, dtype, &[(inverse, norm)]);
                    assert_eq!(got.shape, shape);
                    let want = dft_ref(&x, n, inverse, norm);
                    let what = format!("fft {dtype} {shape:?} inverse={inverse} {norm:?}");
                    assert_close(&what, &got, &want, dtype);
                }
            }
        }
    }
}

#[test]
fn fft_half_storage() {
    let mut rng = Rng::new("fft_half_storage");
    for dtype in [DType::F16, DType::BF16] {
        for shape in [vec![3, 12, 2], vec![15, 2]] {
            let n = shape[shape.len() - 2];
            for norm in NORMS {
                let x = through(dtype, &rng.normals(shape.iter().product()));
                let got = run_fft(&shape, &x, dtype, &[(false, norm)]);
                assert_close(
                    &format!("fft {dtype} {norm:?}"),
                    &got,
                    &dft_ref(&x, n, false, norm),
                    dtype,
                );
            }
        }
    }
}

#[test]
fn fft_forward_then_inverse_round_trips() {
    let mut rng = Rng::new("fft_forward_then_inverse_round_trips");
    for dtype in [DType::F32, DType::F64] {
        for shape in fft_shapes() {
            for norm in NORMS {
                let x = through(dtype, &rng.normals(shape.iter().product()));
                let got = run_fft(&shape, &x, dtype, &[(false, norm), (true, norm)]);
                assert_close(
                    &format!("ifft(fft) {dtype} {shape:?} {norm:?}"),
                    &got,
                    &x,
                    dtype,
                );
            }
        }
    }
}

/// Whisper's log-mel straight from its definition; returns the output and, per element,
/// whether it is live (unclamped and above the floor) plus m = spec·fb.
fn log_mel_ref(
    spec: &[f64],
    fb: &[f64],
    (items, f, nf, nm): (usize, usize, usize, usize),
) -> (Vec<f64>, Vec<bool>, Vec<f64>) {
    let mut out = vec![0.0; items * f * nm];
    let mut live = vec![false; out.len()];
    let mut ms = vec![0.0; out.len()];
    for it in 0..items {
        let base = it * f * nm;
        let mut l = vec![0.0; f * nm];
        for t in 0..f {
            for j in 0..nm {
                let mut m = 0.0;
                for k in 0..nf {
                    m += spec[(it * f + t) * nf + k] * fb[k * nm + j];
                }
                ms[base + t * nm + j] = m;
                l[t * nm + j] = m.max(1e-10).log10();
            }
        }
        let mx = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        for (i, &v) in l.iter().enumerate() {
            out[base + i] = (v.max(mx - 8.0) + 4.0) / 4.0;
            live[base + i] = v >= mx - 8.0 && ms[base + i] >= 1e-10;
        }
    }
    (out, live, ms)
}

/// dspec by the chain rule with the documented subgradient choices.
fn log_mel_grad_ref(
    spec: &[f64],
    fb: &[f64],
    dy: &[f64],
    dims: (usize, usize, usize, usize),
) -> Vec<f64> {
    let (items, f, nf, nm) = dims;
    let (_, live, ms) = log_mel_ref(spec, fb, dims);
    let mut ds = vec![0.0; spec.len()];
    for it in 0..items {
        for t in 0..f {
            for j in 0..nm {
                let i = (it * f + t) * nm + j;
                if !live[i] {
                    continue;
                }
                let g = dy[i] / (4.0 * ms[i] * std::f64::consts::LN_10);
                for k in 0..nf {
                    ds[(it * f + t) * nf + k] += g * fb[k * nm + j];
                }
            }
        }
    }
    ds
}

fn dims_of(shape: &[usize], nm: usize) -> (usize, usize, usize, usize) {
    let r = shape.len();
    (
        shape[..r - 2].iter().product(),
        shape[r - 2],
        shape[r - 1],
        nm,
    )
}

fn out_shape(shape: &[usize], nm: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    *s.last_mut().unwrap() = nm;
    s
}

/// A power spectrum whose frames span `decades` orders of magnitude, so the (max − 8)
/// clamp is active on some frames when `decades` > 8: every third frame sits at the top,
/// the next at the bottom, the rest at random scales in between.
fn power_spec(rng: &mut Rng, n: usize, nf: usize, decades: f64) -> Vec<f64> {
    let mut v = vec![];
    for t in 0..n / nf {
        let exponent = match t % 3 {
            0 => 0.0,
            1 => decades,
            _ => rng.range(0.0, decades),
        };
        let frame_scale = 10f64.powf(-exponent);
        for _ in 0..nf {
            v.push(frame_scale * rng.range(0.05, 2.0));
        }
    }
    v
}

/// A triangular-ish nonnegative filterbank with random weights.
fn filterbank(rng: &mut Rng, nf: usize, nm: usize) -> Vec<f64> {
    (0..nf * nm).map(|_| rng.range(0.0, 1.0)).collect()
}

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

#[test]
fn log_mel_matches_whisper_formula() {
    let mut rng = Rng::new("log_mel_matches_whisper_formula");
    let cases: [(&[usize], usize); 4] = [
        (&[9, 13], 5),
        (&[2, 11, 21], 8),
        (&[2, 1, 7, 16], 3),
        (&[3, 2, 5, 33], 10),
    ];
    for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
        for &(shape, nm) in &cases {
            let n: usize = shape.iter().product();
            let nf = shape[shape.len() - 1];
            // Half storage: keep the spectrum inside f16's normal range.
            let decades = if matches!(dtype, DType::F16) {
                3.5
            } else {
                12.0
            };
            let spec = through(dtype, &power_spec(&mut rng, n, nf, decades));
            let fb = through(dtype, &filterbank(&mut rng, nf, nm));
            let got = run_log_mel(shape, nm, &spec, &fb, None, dtype);
            assert_eq!(got.shape, out_shape(shape, nm));
            let (want, live, _) = log_mel_ref(&spec, &fb, dims_of(shape, nm));
            assert_close(&format!("logmel {dtype} {shape:?}"), &got, &want, dtype);
            if decades > 8.0 && n / nf > 4 {
                assert!(live.iter().any(|l| !l), "the clamp should be exercised");
            }
        }
    }
}

/// d/dspec of Σ dy·LogMel(spec) by central differences of the f64 oracle; NaN where a step
/// crosses a kink.
fn log_mel_fd(
    spec: &[f64],
    fb: &[f64],
    dy: &[f64],
    dims: (usize, usize, usize, usize),
) -> Vec<f64> {
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
fn argmax_rows(spec: &[f64], fb: &[f64], dims: (usize, usize, usize, usize)) -> Vec<usize> {
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

#[test]
fn log_mel_backward_matches_definition_and_finite_differences() {
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
            let def = log_mel_grad_ref(&spec, &fb, &dy, dims);
            assert_close(&format!("dspec def {shape:?}"), &got, &def, DType::F64);
            // Finite differences: where the clamp is active, the forward's max moves with
            // the argmax row, which the op deliberately does not propagate; compare the
            // other rows there, everything otherwise.
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
            // f32 storage against the definition.
            let (s32, f32b, d32) = (
                through(DType::F32, &spec),
                through(DType::F32, &fb),
                through(DType::F32, &dy),
            );
            let got32 = run_log_mel(shape, nm, &s32, &f32b, Some(&d32), DType::F32);
            let def32 = log_mel_grad_ref(&s32, &f32b, &d32, dims);
            assert_close("dspec f32", &got32, &def32, DType::F32);
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
