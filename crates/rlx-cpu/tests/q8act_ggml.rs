//! The 8-bit activation product (`QuantAct::Q8`) against ggml itself: tests/data/
//! ggml_q8_ref.json holds, per weight scheme, x as ggml's CPU backend quantises it
//! (`from_float` of the scheme's `vec_dot_type`) and its `vec_dot` results
//! (scripts/ggml_q8_ref.py). The quantised activations must be ggml's byte for byte, the
//! products equal to f32 rounding, through every kernel (one-row and tiled).
use half::f16;
use rlx_cpu::quant::{act_format, matmul_q8_with, ActFormat, Q8Act, Q8Kernel};
use rlx_ir::QuantScheme;
use serde_json::Value;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

fn scheme(name: &str) -> QuantScheme {
    *QuantScheme::ALL
        .iter()
        .find(|s| format!("{s:?}") == name)
        .expect("a scheme")
}

fn i16_at(b: &[u8]) -> i16 {
    i16::from_le_bytes([b[0], b[1]])
}

/// Our quantised x against ggml's blocks.
fn check_activations(name: &str, a: &Q8Act, xq: &[u8]) {
    let f16_bits = |v: f32| f16::from_f32(v).to_bits();
    let (bl, bb) = match a.format() {
        ActFormat::Q8_0 => (32, 34),
        ActFormat::Q8_1 => (32, 36),
        ActFormat::Q8K => (256, 292),
    };
    assert_eq!(xq.len(), a.qs().len() / bl * bb, "{name}");
    for (b, g) in xq.chunks_exact(bb).enumerate() {
        let qs = &a.qs()[b * bl..(b + 1) * bl];
        let (gq, what) = match a.format() {
            ActFormat::Q8K => {
                let d = f32::from_le_bytes([g[0], g[1], g[2], g[3]]);
                assert_eq!(a.d()[b].to_bits(), d.to_bits(), "{name} block {b}: d");
                for j in 0..16 {
                    let want = i16_at(&g[260 + 2 * j..]);
                    assert_eq!(a.bsums()[16 * b + j], want, "{name} block {b}: bsum {j}");
                }
                (&g[4..260], "Q8_K")
            }
            f => {
                let d = u16::from_le_bytes([g[0], g[1]]);
                assert_eq!(f16_bits(a.d()[b]), d, "{name} block {b}: d");
                if f == ActFormat::Q8_1 {
                    let s = u16::from_le_bytes([g[2], g[3]]);
                    assert_eq!(f16_bits(a.s()[b]), s, "{name} block {b}: s");
                    (&g[4..36], "Q8_1")
                } else {
                    (&g[2..34], "Q8_0")
                }
            }
        };
        for (j, (&q, &w)) in qs.iter().zip(gq).enumerate() {
            assert_eq!(q, w as i8, "{name} {what} block {b}: quant {j}");
        }
    }
}

#[test]
fn q8_products_match_ggml() {
    let doc: Value =
        serde_json::from_str(include_str!("data/ggml_q8_ref.json")).expect("reference JSON");
    let (n, k, m) = (
        doc["n"].as_u64().unwrap() as usize,
        doc["k"].as_u64().unwrap() as usize,
        doc["m"].as_u64().unwrap() as usize,
    );
    println!("kernels: {}", Q8Kernel::best_name());
    for case in doc["schemes"].as_array().unwrap() {
        let name = case["scheme"].as_str().unwrap();
        let s = scheme(name);
        let w = hex(case["w"].as_str().unwrap());
        let x: Vec<f32> = (hex(case["x"].as_str().unwrap()).chunks_exact(4))
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let want: Vec<f32> = (case["dots"].as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!((x.len(), want.len()), (m * k, m * n), "{name}");
        let a = Q8Act::quantize(act_format(s).unwrap(), &x, k).unwrap();
        check_activations(name, &a, &hex(case["xq"].as_str().unwrap()));
        // ggml's rows repeated to 12 rows of x, so the tiled (many-row) kernels run too.
        let reps = 6;
        let xs: Vec<f32> = (0..reps).flat_map(|_| x.iter().copied()).collect();
        let scale = (want.iter().map(|v| (v * v) as f64).sum::<f64>() / want.len() as f64).sqrt();
        for kernel in [Q8Kernel::Portable, Q8Kernel::Best] {
            for rows in [m, m * reps] {
                let mut got = vec![f32::NAN; rows * n];
                matmul_q8_with(kernel, s, &w, n, k, &xs[..rows * k], &mut got).unwrap();
                let mut same = 0;
                for (j, &g) in got.iter().enumerate() {
                    let v = want[j % (m * n)];
                    same += usize::from(g.to_bits() == v.to_bits());
                    let tol = 1e-6 * (v.abs() as f64 + scale);
                    assert!(
                        ((g - v) as f64).abs() <= tol,
                        "{name} {kernel:?} {rows} rows, out {j}: {g} vs ggml {v}"
                    );
                }
                println!(
                    "{name} {kernel:?} {rows} rows: {same}/{} bit-equal to ggml",
                    got.len()
                );
            }
        }
    }
}
