//! The f32 exact GELU (a rational erf, vectorisable) against the f64 erf-GELU oracle: rel-L2
//! and max abs error on random inputs over [-10, 10] and the tails, the same values through
//! the executor (the chain path), and NaN / ±0 / infinities.
mod common;
use common::*;
use rlx_cpu::ops::scalar::{erf_f32, gelu_f32};
use rlx_ir::{Activation, DType, Graph, HostTensor, Shape};
use rlx_testutil::cases::elementwise::act_ref;

/// Random values over [-10, 10], the tails ±[10, 40], and the points where erf's clamp
/// and 1 + erf's cancellation start.
fn inputs(rng: &mut Rng) -> Vec<f32> {
    let mut x: Vec<f32> = (0..100_000)
        .map(|_| rng.range(-10.0, 10.0) as f32)
        .collect();
    for _ in 0..2_000 {
        let s = if rng.below(2) == 0 { -1.0 } else { 1.0 };
        x.push((s * rng.range(10.0, 40.0)) as f32);
    }
    x.extend([
        0.0, -0.0, 1e-30, -1e-30, 5.65, -5.65, 5.66, -5.66, 4.0, -4.0,
    ]);
    x
}

fn gelu_ref(x: f32) -> f64 {
    act_ref(Activation::Gelu, x as f64)
}

#[test]
fn f32_gelu_matches_the_f64_oracle() {
    let mut rng = Rng::new("gelu_f32");
    let x = inputs(&mut rng);
    let got: Vec<f64> = x.iter().map(|&v| gelu_f32(v) as f64).collect();
    let want: Vec<f64> = x.iter().map(|&v| gelu_ref(v)).collect();
    let e = rel_l2(&got, &want);
    // Per value, in units of the f32 spacing at the exact value (ulp), with an absolute
    // floor of 1e-30 for the far negative tail, where the value is below f32's normals.
    let mut worst = (0.0f64, 0.0f32);
    for ((&g, &w), &v) in got.iter().zip(&want).zip(&x) {
        let ulp = (w.abs() as f32).max(f32::MIN_POSITIVE) as f64 * f32::EPSILON as f64;
        let err = ((g - w).abs() - 1e-30).max(0.0) / ulp;
        if err > worst.0 {
            worst = (err, v);
        }
    }
    println!(
        "f32 GELU: rel-L2 {e:.3e}, worst error {:.2} ulp at x = {}",
        worst.0, worst.1
    );
    assert!(e <= 1e-6, "rel-L2 {e:.3e} > 1e-6");
    // f32 arithmetic inside: a few ulp (the erf rational's and erfc fit's own errors are
    // ~1e-7 relative; the rational's dozen f32 operations near x ≈ -1, where 1 + erf is
    // 0.32, reach 4.4 ulp over 20 seeds).
    assert!(worst.0 <= 6.0, "{:.2} ulp at x = {}", worst.0, worst.1);
}

#[test]
fn f32_erf_is_within_1e7() {
    let mut rng = Rng::new("erf_f32");
    let mut max_abs = 0.0f64;
    for _ in 0..200_000 {
        let v = rng.range(-6.0, 6.0) as f32;
        let want = act_ref(Activation::Erf, v as f64);
        max_abs = max_abs.max((erf_f32(v) as f64 - want).abs());
    }
    println!("f32 erf: max abs error {max_abs:.3e}");
    assert!(max_abs <= 1e-7, "max abs error {max_abs:.3e}");
}

#[test]
fn f32_gelu_special_values() {
    assert!(gelu_f32(f32::NAN).is_nan());
    assert_eq!(gelu_f32(f32::INFINITY), f32::INFINITY);
    assert_eq!(gelu_f32(0.0), 0.0);
    // Far below zero the value is -0 (the oracle is below f32's smallest normal).
    assert_eq!(gelu_f32(-30.0), 0.0);
    assert_eq!(gelu_f32(f32::MAX), f32::MAX);
}

/// The executor's f32 Activation(Gelu) is the same function, value for value.
#[test]
fn executor_f32_gelu_is_the_vector_kernel() {
    let mut rng = Rng::new("gelu_f32_graph");
    let x = inputs(&mut rng);
    let n = x.len();
    let mut g = Graph::new("gelu");
    let xi = g.input("x", Shape::new(&[n], DType::F32)).unwrap();
    let y = g.activation(Activation::Gelu, xi).unwrap();
    g.set_outputs(vec![y]);
    let xs: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let feed = HostTensor::from_f64_as(&[n], &xs, DType::F32);
    let out = run(&g, &[("x", feed)], &[])[0].to_f64_vec();
    for (i, (&o, &v)) in out.iter().zip(&x).enumerate() {
        assert_eq!(o.to_bits(), (gelu_f32(v) as f64).to_bits(), "x[{i}] = {v}");
    }
    let want: Vec<f64> = x.iter().map(|&v| gelu_ref(v)).collect();
    assert!(rel_l2(&out, &want) <= 1e-6);
}
