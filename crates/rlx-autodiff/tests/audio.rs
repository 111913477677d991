//! Finite-difference checks: Fft (both directions, every norm mode, odd n), LogMel.
mod common;
use common::*;
use rlx_ir::{FftNorm, Graph, HostTensor, Op};

#[test]
fn fft_vjp() {
    let mut rng = Rng::new("fft_vjp");
    for inverse in [false, true] {
        for norm in [FftNorm::Backward, FftNorm::Ortho, FftNorm::Forward] {
            for dims in [vec![5, 2], vec![2, 8, 2]] {
                let mut g = Graph::new("fft");
                let x = f64_input(&mut g, "x", &dims);
                let y = g.add_node(Op::Fft { inverse, norm }, &[x]).unwrap();
                g.set_outputs(vec![y]);
                gradcheck(
                    &format!("fft inverse={inverse} {norm:?} {dims:?}"),
                    &g,
                    &[("x", rng.tensor(&dims))],
                    &[x],
                    &mut rng,
                );
            }
        }
    }
}

#[test]
fn log_mel_vjp() {
    let mut rng = Rng::new("log_mel_vjp");
    let (frames, nf, nm) = (4, 7, 3);
    let mut g = Graph::new("mel");
    let s = f64_input(&mut g, "spec", &[frames, nf]);
    let fb = f64_input(&mut g, "fb", &[nf, nm]);
    let y = g.add_node(Op::LogMel, &[s, fb]).unwrap();
    g.set_outputs(vec![y]);
    // Positive power and filter weights keep every mel value well inside the clamps.
    gradcheck(
        "log mel",
        &g,
        &[
            (
                "spec",
                HostTensor::from_f64(&[frames, nf], &rng.uniforms(frames * nf, 0.5, 2.0)),
            ),
            (
                "fb",
                HostTensor::from_f64(&[nf, nm], &rng.uniforms(nf * nm, 0.1, 1.0)),
            ),
        ],
        &[s],
        &mut rng,
    );
}
