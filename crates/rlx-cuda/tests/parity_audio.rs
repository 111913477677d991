//! GPU parity: Fft (any n, both directions, every norm mode), LogMel (Whisper's log-mel,
//! the per-item (max − 8) clamp exercised) and LogMelBackward.
mod common;
use common::*;
use rlx_ir::{DType, FftNorm, Graph, Shape};

const NORMS: [FftNorm; 3] = [FftNorm::Backward, FftNorm::Ortho, FftNorm::Forward];

fn fft_graph(shape: &[usize], inverse: bool, norm: FftNorm, dt: DType) -> Graph {
    let mut g = Graph::new("fft");
    let x = g.input("x", Shape::new(shape, dt)).unwrap();
    let y = g.fft(x, inverse, norm).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn fft_sizes_directions_norms() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("fft_sizes_directions_norms");
    let shapes: [&[usize]; 8] = [
        &[1, 2],
        &[8, 2],
        &[3, 12, 2],
        &[2, 2, 15, 2],
        &[5, 100, 2],
        &[2, 97, 2],
        &[4, 400, 2],
        &[1, 128, 2],
    ];
    for shape in shapes {
        for inverse in [false, true] {
            for norm in NORMS {
                for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
                    let feeds = vec![normal(&mut rng, "x", shape)];
                    parity(
                        &format!("fft {shape:?} inverse={inverse} {norm:?}"),
                        &|d| fft_graph(shape, inverse, norm, d),
                        &feeds,
                        dt,
                    );
                }
            }
        }
    }
}

#[test]
fn fft_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("fft_big");
    // Whisper's 3000 frames of n_fft = 400, and lengths past the shared twiddle table
    // (6144 points in f32, 3072 in f64) that compute twiddles in registers.
    let cases: [(&[usize], bool); 3] = [
        (&[3000, 400, 2], false),
        (&[3, 7000, 2], true),
        (&[2, 4001, 2], false),
    ];
    for (shape, inverse) in cases {
        for dt in [DType::F32, DType::F64, DType::BF16] {
            let feeds = vec![normal(&mut rng, "x", shape)];
            parity(
                &format!("fft big {shape:?}"),
                &|d| fft_graph(shape, inverse, FftNorm::Ortho, d),
                &feeds,
                dt,
            );
        }
    }
}

/// A power spectrum whose frames span `decades` orders of magnitude (frame scales drawn in
/// [10^-decades, 1]), so the (max − 8) clamp is active on some frames when `decades` > 8.
fn power_spec(rng: &mut Rng, frames: usize, nf: usize, decades: f64) -> Vec<f64> {
    let mut v = Vec::with_capacity(frames * nf);
    for t in 0..frames {
        let e = match t % 3 {
            0 => 0.0,
            1 => decades,
            _ => rng.range(0.0, decades),
        };
        let s = 10f64.powf(-e);
        v.extend((0..nf).map(|_| s * rng.range(0.05, 2.0)));
    }
    v
}

fn log_mel_graph(shape: &[usize], nm: usize, backward: bool, dt: DType) -> Graph {
    let nf = shape[shape.len() - 1];
    let mut g = Graph::new("log_mel");
    let s = g.input("spec", Shape::new(shape, dt)).unwrap();
    let b = g.input("fb", Shape::new(&[nf, nm], dt)).unwrap();
    let y = if backward {
        let mut os = shape.to_vec();
        *os.last_mut().unwrap() = nm;
        let dy = g.input("dy", Shape::new(&os, dt)).unwrap();
        g.log_mel_backward(s, b, dy).unwrap()
    } else {
        g.log_mel(s, b).unwrap()
    };
    g.set_outputs(vec![y]);
    g
}

fn log_mel_feeds(
    rng: &mut Rng,
    shape: &[usize],
    nm: usize,
    decades: f64,
    backward: bool,
) -> Vec<Feed> {
    let nf = shape[shape.len() - 1];
    let frames = shape.iter().product::<usize>() / nf;
    let mut f = vec![
        feed("spec", shape, power_spec(rng, frames, nf, decades)),
        feed("fb", &[nf, nm], rng.uniforms(nf * nm, 0.0, 1.0)),
    ];
    if backward {
        let mut os = shape.to_vec();
        *os.last_mut().unwrap() = nm;
        f.push(normal(rng, "dy", &os));
    }
    f
}

const MEL_CASES: [(&[usize], usize); 6] = [
    (&[1, 3000, 201], 80),
    (&[9, 13], 5),
    (&[2, 11, 21], 8),
    (&[2, 1, 7, 16], 3),
    (&[3, 2, 5, 33], 10),
    (&[1, 1], 1),
];

#[test]
fn log_mel_whisper() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("log_mel_whisper");
    for (shape, nm) in MEL_CASES {
        for dt in FLOATS {
            // f16: keep the spectrum inside f16's range (no clamp); others span 12 decades.
            let decades = if dt == DType::F16 { 3.5 } else { 12.0 };
            let feeds = log_mel_feeds(&mut rng, shape, nm, decades, false);
            parity(
                &format!("log_mel {shape:?}x{nm}"),
                &|d| log_mel_graph(shape, nm, false, d),
                &feeds,
                dt,
            );
        }
    }
}

#[test]
fn log_mel_backward_whisper() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("log_mel_backward_whisper");
    for (shape, nm) in MEL_CASES {
        for dt in FLOATS {
            // Half storage moves mel values by ~1e-3: an element that crosses the clamp edge
            // flips its (huge, 1/m) gradient, so the clamp is only exercised in f32.
            let decades = if dt == DType::F32 { 12.0 } else { 3.5 };
            let feeds = log_mel_feeds(&mut rng, shape, nm, decades, true);
            parity(
                &format!("log_mel_backward {shape:?}x{nm}"),
                &|d| log_mel_graph(shape, nm, true, d),
                &feeds,
                dt,
            );
        }
    }
}
