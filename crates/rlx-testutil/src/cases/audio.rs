//! Case table of the audio group: Fft (any n, both directions, every NumPy norm mode, and
//! a forward-then-inverse round trip), LogMel (Whisper's log-mel with the per-item
//! (max − 8) clamp exercised) and LogMelBackward (its VJP, by definition), with the f64
//! oracles of `audio_oracle`. The device's mel kernels have no f64 variant: f64 mel cases
//! take the oracle check only.
pub use super::audio_oracle::*;
use super::elementwise::FLOATS;
use super::Dims;
use crate::case::{Case, Draw, Input};
use rlx_ir::{DType, FftNorm, Graph, Shape};

/// Fft steps applied in order to input `x`.
fn fft_graph(shape: &[usize], ops: &[(bool, FftNorm)], dt: DType) -> Graph {
    let mut g = Graph::new("fft");
    let mut y = g.input("x", Shape::new(shape, dt)).unwrap();
    for &(inverse, norm) in ops {
        y = g.fft(y, inverse, norm).unwrap();
    }
    g.set_outputs(vec![y]);
    g
}

fn log_mel_graph(shape: &[usize], nm: usize, backward: bool, dt: DType) -> Graph {
    let nf = shape[shape.len() - 1];
    let mut g = Graph::new("log_mel");
    let s = g.input("spec", Shape::new(shape, dt)).unwrap();
    let b = g.input("fb", Shape::new(&[nf, nm], dt)).unwrap();
    let y = if backward {
        let dy = g
            .input("dy", Shape::new(&out_shape(shape, nm), dt))
            .unwrap();
        g.log_mel_backward(s, b, dy).unwrap()
    } else {
        g.log_mel(s, b).unwrap()
    };
    g.set_outputs(vec![y]);
    g
}

// ---- fft ----

/// Every size the oracle, parity and gradcheck suites used: n = 1, small primes, powers
/// of two, n past a warp, batched and not.
const FFT_SHAPES: [Dims; 14] = [
    &[1, 2],
    &[2, 2],
    &[5, 2],
    &[7, 2],
    &[8, 2],
    &[15, 2],
    &[2, 8, 2],
    &[3, 12, 2],
    &[4, 16, 2],
    &[2, 2, 15, 2],
    &[5, 100, 2],
    &[2, 97, 2],
    &[4, 400, 2],
    &[1, 128, 2],
];

/// The oracle suite's round-trip shapes.
const ROUND_TRIP_SHAPES: [Dims; 7] = [
    &[1, 2],
    &[2, 2],
    &[7, 2],
    &[3, 12, 2],
    &[2, 2, 15, 2],
    &[4, 16, 2],
    &[2, 97, 2],
];

pub fn fft() -> Vec<Case> {
    let mut cases = vec![];
    for shape in FFT_SHAPES {
        let n = shape[shape.len() - 2];
        for inverse in [false, true] {
            for norm in NORMS {
                let c = Case::new(
                    format!("Fft {shape:?} inverse={inverse} {norm:?}"),
                    vec![Input::new("x", shape, Draw::Normal(1.0))],
                    move |dt| fft_graph(shape, &[(inverse, norm)], dt),
                )
                .dtypes(&FLOATS)
                .out(shape)
                .oracle(move |v, _| dft_ref(&v[0], n, inverse, norm))
                .wrt(&["x"]);
                // Finite differences cost four runs per element: the gradcheck shapes only.
                let grad = shape == [5, 2] || shape == [2, 8, 2];
                cases.push(if grad { c } else { c.no_grad() });
            }
        }
    }
    cases
}

/// ifft(fft(x)) = x in every norm mode.
pub fn fft_round_trip() -> Vec<Case> {
    let mut cases = vec![];
    for shape in ROUND_TRIP_SHAPES {
        for norm in NORMS {
            cases.push(
                Case::new(
                    format!("ifft(fft) {shape:?} {norm:?}"),
                    vec![Input::new("x", shape, Draw::Normal(1.0))],
                    move |dt| fft_graph(shape, &[(false, norm), (true, norm)], dt),
                )
                .dtypes(&[DType::F32, DType::F64])
                .out(shape)
                .oracle(|v, _| v[0].clone())
                .no_grad(),
            );
        }
    }
    cases
}

/// Whisper's 3000 frames of n_fft = 400, and lengths past the device's shared twiddle
/// table (6144 points in f32, 3072 in f64) that compute twiddles in registers. Parity only.
pub fn fft_big() -> Vec<Case> {
    let cases: [(Dims, bool); 3] = [
        (&[3000, 400, 2], false),
        (&[3, 7000, 2], true),
        (&[2, 4001, 2], false),
    ];
    cases
        .into_iter()
        .map(|(shape, inverse)| {
            Case::new(
                format!("Fft big {shape:?}"),
                vec![Input::new("x", shape, Draw::Normal(1.0))],
                move |dt| fft_graph(shape, &[(inverse, FftNorm::Ortho)], dt),
            )
            .dtypes(&[DType::F32, DType::F64, DType::BF16])
            .only_parity()
        })
        .collect()
}

// ---- log-mel ----

/// (spectrum dims, n_mels): Whisper's size first (parity only), then the oracle shapes.
const MEL_CASES: [(Dims, usize); 6] = [
    (&[1, 3000, 201], 80),
    (&[9, 13], 5),
    (&[2, 11, 21], 8),
    (&[2, 1, 7, 16], 3),
    (&[3, 2, 5, 33], 10),
    (&[1, 1], 1),
];

/// Inputs spec (frames spanning `decades(dt)` decades), fb and, for the backward, dy.
fn mel_inputs(shape: Dims, nm: usize, backward: bool, decades: fn(DType) -> f64) -> Vec<Input> {
    let nf = shape[shape.len() - 1];
    let spec = Draw::custom(move |rng, n, dt| power_spec(rng, n, nf, decades(dt)));
    let mut ins = vec![
        Input::new("spec", shape, spec),
        Input::new("fb", &[nf, nm], Draw::Uniform(0.0, 1.0)),
    ];
    if backward {
        ins.push(Input::new("dy", &out_shape(shape, nm), Draw::Normal(1.0)));
    }
    ins
}

/// f16 keeps the spectrum inside its normal range (no clamp); the others span 12 decades.
fn forward_decades(dt: DType) -> f64 {
    if dt == DType::F16 {
        3.5
    } else {
        12.0
    }
}

/// Half storage moves mel values by ~1e-3: an element that crosses the clamp edge flips
/// its (huge, 1/m) gradient between the dtype and the f64 graph, so the device's backward
/// exercises the clamp in f32 only.
fn backward_decades(dt: DType) -> f64 {
    if dt == DType::F32 {
        12.0
    } else {
        3.5
    }
}

fn log_mel_case(shape: Dims, nm: usize, dtypes: &[DType]) -> Case {
    let dims = dims_of(shape, nm);
    Case::new(
        format!("LogMel {shape:?}x{nm}"),
        mel_inputs(shape, nm, false, forward_decades),
        move |dt| log_mel_graph(shape, nm, false, dt),
    )
    .dtypes(dtypes)
    .out(&out_shape(shape, nm))
    .oracle(move |v, dt| {
        let (want, live, _) = log_mel_ref(&v[0], &v[1], dims);
        if forward_decades(dt) > 8.0 && dims.0 * dims.1 > 4 {
            assert!(live.iter().any(|l| !l), "the clamp should be exercised");
        }
        want
    })
}

pub fn log_mel() -> Vec<Case> {
    let mut cases = vec![];
    for (k, (shape, nm)) in MEL_CASES.into_iter().enumerate() {
        let halves = [DType::F32, DType::F16, DType::BF16];
        if k == 0 {
            cases.push(log_mel_case(shape, nm, &halves).only_parity());
            continue;
        }
        cases.push(log_mel_case(shape, nm, &halves));
        cases.push(log_mel_case(shape, nm, &[DType::F64]).no_parity());
    }
    // Gradcheck: positive power and filter weights keep every mel value well inside the
    // clamps.
    let (frames, nf, nm) = (4, 7, 3);
    let ins = vec![
        Input::new("spec", &[frames, nf], Draw::Uniform(0.5, 2.0)),
        Input::new("fb", &[nf, nm], Draw::Uniform(0.1, 1.0)),
    ];
    cases.push(
        Case::new("LogMel vjp", ins, move |dt| {
            log_mel_graph(&[frames, nf], nm, false, dt)
        })
        .wrt(&["spec"])
        .only_grad(),
    );
    cases
}

fn log_mel_backward_case(
    name: String,
    shape: Dims,
    nm: usize,
    decades: fn(DType) -> f64,
    dtypes: &[DType],
) -> Case {
    let dims = dims_of(shape, nm);
    Case::new(name, mel_inputs(shape, nm, true, decades), move |dt| {
        log_mel_graph(shape, nm, true, dt)
    })
    .dtypes(dtypes)
    .out(shape)
    .oracle(move |v, _| log_mel_grad_ref(&v[0], &v[1], &v[2], dims))
}

pub fn log_mel_backward() -> Vec<Case> {
    let mut cases = vec![];
    // The oracle suite's shapes; decades 1.5 = nothing clamped, 14 = the clamp active on
    // some frames. f64 and f32 storage against the definition.
    let shapes: [(Dims, usize); 3] = [(&[6, 11], 4), (&[2, 7, 9], 5), (&[2, 1, 5, 12], 3)];
    for (shape, nm) in shapes {
        let few: fn(DType) -> f64 = |_| 1.5;
        let many: fn(DType) -> f64 = |_| 14.0;
        for (tag, decades) in [("1.5", few), ("14", many)] {
            cases.push(
                log_mel_backward_case(
                    format!("LogMelBackward {shape:?}x{nm} decades {tag}"),
                    shape,
                    nm,
                    decades,
                    &[DType::F64, DType::F32],
                )
                .no_parity(),
            );
        }
    }
    // The parity suite's shapes, Whisper's size parity only.
    for (k, (shape, nm)) in MEL_CASES.into_iter().enumerate() {
        let c = log_mel_backward_case(
            format!("LogMelBackward {shape:?}x{nm}"),
            shape,
            nm,
            backward_decades,
            &[DType::F32, DType::F16, DType::BF16],
        );
        cases.push(if k == 0 { c.only_parity() } else { c });
    }
    cases
}
