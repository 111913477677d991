//! The 8-bit activation product: the quantisers against ggml's formulas written again here
//! in f64, the integer block dots against an f64 loop over the dequantised weight and the
//! dequantised activation, and every SIMD build against the portable kernels.
use super::*;
use crate::quant::dequantize;
use rlx_testutil::cases::linalg::{random_packed, SCHEMES};
use rlx_testutil::Rng;

const QUANTISED: [QuantScheme; 8] = [
    QuantScheme::Q4_0,
    QuantScheme::Q4_1,
    QuantScheme::Q5_0,
    QuantScheme::Q5_1,
    QuantScheme::Q8_0,
    QuantScheme::Q4_K,
    QuantScheme::Q5_K,
    QuantScheme::Q6_K,
];

/// Rows of x whose blocks span magnitudes 1e-3 … 1e2, with a few exact zeros and repeats.
fn activations(rng: &mut Rng, m: usize, k: usize) -> Vec<f32> {
    let mut x: Vec<f32> = rng.normals(m * k).iter().map(|&v| v as f32).collect();
    for b in x.chunks_mut(32) {
        let scale = 10f64.powf(rng.range(-3.0, 2.0)) as f32;
        b.iter_mut().for_each(|v| *v *= scale);
        let i = rng.below(32);
        b[i] = 0.0;
        let (a, c) = (rng.below(32), rng.below(32));
        b[a] = b[c];
    }
    x
}

fn f16_round(v: f64) -> f64 {
    f16::from_f64(v).to_f64()
}

/// `q` is t rounded (`even`: ties to even, else away from zero), or t lies within 1e-4 of a
/// tie (where the f32 product the quantiser rounds may fall on the other side).
fn rounds(q: i32, t: f64, even: bool) -> bool {
    let want = if even { t.round_ties_even() } else { t.round() };
    let near_tie = ((t - t.floor()) - 0.5).abs() < 1e-4;
    q as f64 == want || (near_tie && (q as f64 - t).abs() <= 0.5 + 1e-4)
}

#[test]
fn q8_0_and_q8_1_follow_ggml_reference() {
    let mut rng = Rng::new("q8_0_and_q8_1_follow_ggml_reference");
    for format in [ActFormat::Q8_0, ActFormat::Q8_1] {
        let (m, k) = (1 + rng.below(4), 32 * (1 + 2 * rng.below(20)));
        let x = activations(&mut rng, m, k);
        let a = Q8Act::quantize(format, &x, k).unwrap();
        assert_eq!(
            (a.rows(), a.qs().len(), a.d().len()),
            (m, m * k, m * k / 32)
        );
        for (b, xb) in x.chunks(32).enumerate() {
            let amax = xb.iter().fold(0f64, |m, &v| m.max((v as f64).abs()));
            let d32 = (amax / 127.0) as f32; // the f32 quotient (f64 then f32 rounds once)
            assert_eq!(
                a.d()[b] as f64,
                f16_round(d32 as f64),
                "{format:?} block {b} d"
            );
            let qs = &a.qs()[32 * b..32 * b + 32];
            for (j, (&q, &v)) in qs.iter().zip(xb).enumerate() {
                let t = if d32 == 0.0 {
                    0.0
                } else {
                    v as f64 / d32 as f64
                };
                assert!(
                    rounds(q as i32, t, false),
                    "{format:?} {b}/{j}: {q} for {t}"
                );
            }
            let sum: i32 = qs.iter().map(|&q| q as i32).sum();
            let want_s = match format {
                ActFormat::Q8_1 => f16_round(d32 as f64 * sum as f64),
                _ => 0.0,
            };
            // s is rounded from the f32 product: at most one f16 step from the exact one.
            let step = f16_round(want_s.abs()) * 2f64.powi(-10);
            assert!(
                (a.s()[b] as f64 - want_s).abs() <= step,
                "{format:?} block {b} s"
            );
        }
        // Half a step of the f32 d, plus the f16 rounding of d over up to 127 steps.
        for (j, (&q, &v)) in a.dequantize().iter().zip(&x).enumerate() {
            let xb = &x[j / 32 * 32..j / 32 * 32 + 32];
            let d32 = (xb.iter().fold(0f64, |m, &v| m.max((v as f64).abs())) / 127.0) as f32;
            let d = a.d()[j / 32] as f64;
            let bound = 0.5 * d32 as f64 * (1.0 + 1e-6) + 127.0 * (d - d32 as f64).abs();
            assert!(
                (q as f64 - v as f64).abs() <= bound,
                "value {j}: {q} vs {v}"
            );
        }
    }
}

#[test]
fn q8_k_follows_ggml_reference() {
    let mut rng = Rng::new("q8_k_follows_ggml_reference");
    let (m, k) = (1 + rng.below(4), 256 * (1 + 2 * rng.below(4)));
    let mut x = activations(&mut rng, m, k);
    // A block whose largest magnitude comes twice, positive first: ggml keeps the first, so
    // iscale = −127 / max and d are negative.
    let amax = x[..256].iter().fold(0f32, |m, &v| m.max(v.abs())) * 2.0;
    let (i, j) = (rng.below(100), 100 + rng.below(156));
    (x[i], x[j]) = (amax, -amax);
    let a = Q8Act::quantize(ActFormat::Q8K, &x, k).unwrap();
    assert!(a.d()[0] < 0.0, "first block's d {}", a.d()[0]);
    for (b, xb) in x.chunks(256).enumerate() {
        let first = xb.iter().fold(0f64, |m, &v| {
            let v = v as f64;
            if v.abs() > m.abs() {
                v
            } else {
                m
            }
        });
        let want_d = first / -127.0;
        let d = a.d()[b] as f64;
        assert!(
            (d - want_d).abs() <= want_d.abs() * 2e-7,
            "block {b}: d {d} vs {want_d}"
        );
        let qs = &a.qs()[256 * b..256 * b + 256];
        for (j, (&q, &v)) in qs.iter().zip(xb).enumerate() {
            let t = (v as f64 * -127.0 / first).min(127.0);
            assert!(rounds(q as i32, t, true), "block {b}/{j}: {q} for {t}");
        }
        for g in 0..16 {
            let s: i32 = qs[16 * g..16 * g + 16].iter().map(|&q| q as i32).sum();
            assert_eq!(a.bsums()[16 * b + g] as i32, s, "block {b} bsum {g}");
        }
    }
    // An all-zero block is d = 0 and zero quants.
    let z = Q8Act::quantize(ActFormat::Q8K, &[0.0; 256], 256).unwrap();
    assert!(z.d() == [0.0] && z.qs().iter().all(|&q| q == 0));
}

/// f64 `x̂ @ Wᵀ` from the dequantised weight and the dequantised activation, with Q4_1 /
/// Q5_1's offset term through Q8_1's s as ggml takes it; and Σ|terms| per output.
fn reference(s: QuantScheme, w: &[u8], n: usize, k: usize, a: &Q8Act) -> (Vec<f64>, Vec<f64>) {
    let wd = dequantize(s, w, n, k).unwrap();
    let bl = a.format().block_len();
    let xd: Vec<f64> = (a.qs().iter().enumerate())
        .map(|(j, &q)| a.d()[j / bl] as f64 * q as f64)
        .collect();
    let type1 = matches!(s, QuantScheme::Q4_1 | QuantScheme::Q5_1);
    let (m, bb) = (a.rows(), s.block_bytes());
    let (mut out, mut mag) = (vec![0f64; m * n], vec![0f64; m * n]);
    for i in 0..m {
        for r in 0..n {
            let (mut v, mut g) = (0f64, 0f64);
            for c in 0..k {
                let t = wd[r * k + c] as f64 * xd[i * k + c];
                v += t;
                g += t.abs();
            }
            if type1 {
                for b in 0..k / 32 {
                    let at = (r * k / 32 + b) * bb;
                    let mw = f16::from_le_bytes([w[at + 2], w[at + 3]]).to_f64();
                    let sx: f64 = xd[i * k + 32 * b..i * k + 32 * b + 32].iter().sum();
                    let t = mw * a.s()[i * k / 32 + b] as f64;
                    v += t - mw * sx;
                    g += t.abs();
                }
            }
            out[i * n + r] = v;
            mag[i * n + r] = g;
        }
    }
    (out, mag)
}

#[test]
fn integer_dots_match_f64_of_the_dequantised_operands() {
    let mut rng = Rng::new("integer_dots_match_f64_of_the_dequantised_operands");
    for s in QUANTISED {
        let bl = s.block_len();
        for trial in 0..4 {
            // Odd numbers of blocks; the last trial is large enough to be split over threads.
            let k = bl * (1 + 2 * rng.below(if bl == 32 { 24 } else { 3 }));
            let n = if trial == 3 {
                300 + rng.below(200)
            } else {
                1 + rng.below(40)
            };
            // Odd trials have enough rows of x for the tiled (prefill) kernels.
            let m = if trial % 2 == 1 {
                8 + rng.below(30)
            } else {
                1 + rng.below(7)
            };
            let w = random_packed(&mut rng, s, n, k);
            let x = activations(&mut rng, m, k);
            let a = Q8Act::quantize(act_format(s).unwrap(), &x, k).unwrap();
            let (want, mag) = reference(s, &w, n, k, &a);
            for kernel in [Q8Kernel::Portable, Q8Kernel::Best] {
                let mut got = vec![f32::NAN; m * n];
                matmul_q8_with(kernel, s, &w, n, k, &x, &mut got).unwrap();
                for (j, ((&g, &v), &t)) in got.iter().zip(&want).zip(&mag).enumerate() {
                    assert!(
                        (g as f64 - v).abs() <= 1e-6 * t + 1e-30,
                        "{s:?} {kernel:?} m {m} n {n} k {k} out {j}: {g} vs {v} (Σ|terms| {t})"
                    );
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn simd_builds_match_the_portable_kernels() {
    use super::super::q8x86::Isa;
    let mut rng = Rng::new("simd_builds_match_the_portable_kernels");
    let isas = Isa::available();
    println!(
        "builds on this CPU: {isas:?} (best {})",
        Q8Kernel::best_name()
    );
    for s in QUANTISED {
        let bl = s.block_len();
        let k = bl * (1 + 2 * rng.below(if bl == 32 { 24 } else { 3 }));
        let (n, m) = (1 + rng.below(50), 1 + rng.below(11));
        let rb = crate::quant::row_bytes(s, k).unwrap();
        let w = random_packed(&mut rng, s, n, k);
        let x = activations(&mut rng, m, k);
        let a = Q8Act::quantize(act_format(s).unwrap(), &x, k).unwrap();
        let (_, mag) = reference(s, &w, n, k, &a);
        let code = scheme_code(s).unwrap();
        let mut want = vec![0f32; n * m];
        rows_portable_any(code, &w, rb, &a, &mut want);
        for &isa in &isas {
            let mut got = vec![f32::NAN; n * m];
            isa.rows(code, &w, rb, &a, &mut got);
            for (j, (&g, &v)) in got.iter().zip(&want).enumerate() {
                let (i, r) = (j % m, j / m);
                if bl == 256 {
                    assert_eq!(g.to_bits(), v.to_bits(), "{s:?} {isa:?} row {r} x {i}");
                } else {
                    let t = mag[i * n + r];
                    assert!(
                        (g as f64 - v as f64).abs() <= 1e-6 * t,
                        "{s:?} {isa:?} row {r} x {i}: {g} vs {v}"
                    );
                }
            }
        }
    }
}

#[test]
fn rejects_half_weights_and_bad_sizes() {
    for s in SCHEMES {
        let (bl, bb) = (s.block_len(), s.block_bytes());
        let (w, x, mut out) = (vec![0u8; 2 * bb], vec![1f32; bl], vec![0f32; 2]);
        let ok = matmul_q8(s, &w, 2, bl, &x, &mut out);
        assert_eq!(ok.is_ok(), !s.is_half(), "{s:?}");
        if s.is_half() {
            continue;
        }
        assert!(matmul_q8(s, &w[1..], 2, bl, &x, &mut out).is_err());
        assert!(matmul_q8(s, &w, 2, bl + 16, &x, &mut out).is_err());
        assert!(matmul_q8(s, &w, 2, bl, &x, &mut out[1..]).is_err());
    }
    assert!(Q8Act::quantize(ActFormat::Q8K, &[1.0; 128], 128).is_err());
    assert_eq!(QuantAct::parse("Q8"), Some(QuantAct::Q8));
    assert_eq!(QuantAct::parse("f32"), Some(QuantAct::F32));
    assert_eq!(QuantAct::parse("q4"), None);
}
