//! Oracle tests of the linalg group: the per-op cases (MatMul, FusedMatMulBiasAct,
//! DequantMatMul) come from rlx-testutil's case table, run here against their f64 oracles;
//! below them the tests that are not per-op cases (the quant helpers, bad builds, a
//! symbolic batch dim).
mod common;
use common::*;
use rlx_ir::{DType, Graph, HostTensor, QuantScheme, Shape};
use rlx_testutil::cases::linalg::{random_packed, ref_matmul, unpack, SCHEMES};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(linalg, cpu);

/// rlx's dequantiser against the tests' own f64 reading of the block layouts: equal to the
/// bit (the oracle's module doc says why every value is exact in f32).
#[test]
fn quant_dequantize_matches_block_layout() {
    let mut rng = Rng::new("quant_dequantize_matches_block_layout");
    for scheme in SCHEMES {
        let (rows, cols) = (5, 3 * scheme.block_len());
        let packed = random_packed(&mut rng, scheme, rows, cols);
        assert_eq!(
            packed.len(),
            rows * cols / scheme.block_len() * scheme.block_bytes()
        );
        let got = rlx_cpu::quant::dequantize(scheme, &packed, rows, cols).unwrap();
        let want = unpack(scheme, &packed, rows, cols);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g as f64, w, "{scheme:?} element {i}");
        }
    }
}

/// A second, external check of the layouts: blocks dequantised by gguf-py (llama.cpp's
/// numpy implementation; `scripts/gen_quant_ref.py` wrote the JSON), against rlx-cpu and
/// against the tests' own oracle, bit for bit.
#[test]
fn quant_matches_gguf_py() {
    let text = include_str!("data/quant_gguf_py.json");
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut seen = vec![];
    for s in doc["schemes"].as_array().unwrap() {
        let name = s["scheme"].as_str().unwrap();
        let scheme = *SCHEMES
            .iter()
            .find(|q| format!("{q:?}") == name)
            .unwrap_or_else(|| panic!("unknown scheme {name}"));
        let hex = s["hex"].as_str().unwrap();
        let bytes: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        // gguf-py's values are f32; serde_json's default parse may miss the f64 by an ulp,
        // which rounding back to f32 removes.
        let want: Vec<f32> = s["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let cols = want.len();
        let got = rlx_cpu::quant::dequantize(scheme, &bytes, 1, cols).unwrap();
        let own = unpack(scheme, &bytes, 1, cols);
        for i in 0..cols {
            assert_eq!(got[i], want[i], "{name} element {i}: rlx-cpu vs gguf-py");
            assert_eq!(
                own[i], want[i] as f64,
                "{name} element {i}: oracle vs gguf-py"
            );
        }
        seen.push(scheme);
    }
    // Every block format; the plain halves (F16, BF16) are IEEE values, checked against the
    // oracle by the roundtrip test.
    let quantized: Vec<QuantScheme> = SCHEMES.into_iter().filter(|s| !s.is_half()).collect();
    assert_eq!(seen, quantized);
}

/// rlx's quantisers of the 32-value formats are ggml's `quantize_row_*_ref`: their bytes
/// equal gguf-py's (which mirrors that code) on the same f32 input.
#[test]
fn quantize_matches_gguf_py() {
    let doc: serde_json::Value =
        serde_json::from_str(include_str!("data/quant_gguf_py.json")).unwrap();
    let x: Vec<f32> = doc["quantize_input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let mut n = 0;
    for (name, hex) in doc["quantized"].as_object().unwrap() {
        let scheme = *SCHEMES.iter().find(|q| format!("{q:?}") == *name).unwrap();
        let got = rlx_cpu::quant::quantize(scheme, &x, 4, 64).unwrap();
        let got: String = got.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, hex.as_str().unwrap(), "{name}");
        n += 1;
    }
    assert_eq!(n, 5);
}

/// The worst error of one block's roundtrip, from the input alone: half a quantisation step
/// (a full one where Q4_0/Q5_0 clamp the top level), the steps bounded as each quantiser
/// builds them, plus the f16 rounding of scales and mins.
fn roundtrip_bounds(scheme: QuantScheme, xs: &[f32]) -> Vec<f64> {
    let x: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
    let amax = x.iter().fold(0f64, |m, v| m.max(v.abs()));
    let min = x.iter().fold(f64::MAX, |m, &v| m.min(v));
    let max = x.iter().fold(f64::MIN, |m, &v| m.max(v));
    let f16_slack = (amax + max - min) * 2e-3;
    let per = |b: f64| vec![b + f16_slack; x.len()];
    match scheme {
        QuantScheme::Q8_0 => per(0.5 * amax / 127.0),
        QuantScheme::Q4_0 => per(amax / 8.0),
        QuantScheme::Q5_0 => per(amax / 16.0),
        QuantScheme::Q4_1 => per(0.5 * (max - min) / 15.0),
        QuantScheme::Q5_1 => per(0.5 * (max - min) / 31.0),
        QuantScheme::Q4_K | QuantScheme::Q5_K => {
            // Sub-blocks of 32: lifted range r = max − min(min, 0); the min's grid unit D
            // and the scales' unit S are their largest over 63, rounded up to f16.
            let top = if scheme == QuantScheme::Q4_K {
                15.0
            } else {
                31.0
            };
            let subs: Vec<(f64, f64)> = x
                .chunks(32)
                .map(|c| {
                    let lo = c.iter().fold(0f64, |m, &v| m.min(v));
                    let hi = c.iter().fold(f64::MIN, |m, &v| m.max(v));
                    (-lo, hi - lo)
                })
                .collect();
            let unit_d = subs.iter().fold(0f64, |m, s| m.max(s.0)) / 63.0 * 1.001;
            let steps: Vec<f64> = subs.iter().map(|s| (s.1 + unit_d) / top).collect();
            let unit_s = steps.iter().fold(0f64, |m, &s| m.max(s)) / 63.0 * 1.001;
            let mut out = vec![];
            for s in steps {
                out.extend([0.5 * (s + unit_s) * 1.001 + amax * 1e-6; 32]);
            }
            out
        }
        // Round to nearest: half an ulp, 2^-11 (f16) or 2^-8 (bf16) of the value.
        QuantScheme::F16 => x.iter().map(|v| v.abs() * 2f64.powi(-11)).collect(),
        QuantScheme::BF16 => x.iter().map(|v| v.abs() * 2f64.powi(-8)).collect(),
        QuantScheme::Q6_K => {
            let steps: Vec<f64> = x
                .chunks(16)
                .map(|c| c.iter().fold(0f64, |m, v| m.max(v.abs())) / 31.0)
                .collect();
            let unit = steps.iter().fold(0f64, |m, &s| m.max(s)) / 127.0 * 1.001;
            let mut out = vec![];
            for s in steps {
                out.extend([0.5 * (s + unit) * 1.001 + amax * 1e-6; 16]);
            }
            out
        }
    }
}

#[test]
fn quant_roundtrip_within_scheme_bound() {
    let mut rng = Rng::new("quant_roundtrip_within_scheme_bound");
    for scheme in SCHEMES {
        let bl = scheme.block_len();
        let (rows, cols) = (7, 5 * bl);
        // Mostly normals; every third row is all positive, so the K-quants' min clamp at 0
        // and the type-1 offsets both get exercised.
        let v: Vec<f32> = rng
            .normals(rows * cols)
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let x = x * 2.0 + 0.5;
                (if (i / cols) % 3 == 2 { x.abs() } else { x }) as f32
            })
            .collect();
        let packed = rlx_cpu::quant::quantize(scheme, &v, rows, cols).unwrap();
        assert_eq!(packed.len(), rows * cols / bl * scheme.block_bytes());
        // The packed bytes read back the same through the test's own unpacker.
        let own = unpack(scheme, &packed, rows, cols);
        let back = rlx_cpu::quant::dequantize(scheme, &packed, rows, cols).unwrap();
        for (blk, (xs, ys)) in v.chunks(bl).zip(back.chunks(bl)).enumerate() {
            let bounds = roundtrip_bounds(scheme, xs);
            for (e, ((&x, &y), bound)) in xs.iter().zip(ys).zip(bounds).enumerate() {
                let err = (x as f64 - y as f64).abs();
                assert!(
                    err <= bound,
                    "{scheme:?} block {blk} elem {e}: {x} -> {y}, err {err} > {bound}"
                );
                assert_eq!(
                    own[blk * bl + e],
                    y as f64,
                    "{scheme:?} block {blk} elem {e}"
                );
            }
        }
        // Overall the roundtrip is much better than the worst case.
        let vv: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        let bb: Vec<f64> = back.iter().map(|&x| x as f64).collect();
        let limit = match scheme {
            QuantScheme::Q8_0 => 1e-2,
            QuantScheme::Q6_K => 0.04,
            QuantScheme::Q5_0 | QuantScheme::Q5_1 | QuantScheme::Q5_K => 0.08,
            _ => 0.15,
        };
        let e = rel_l2(&bb, &vv);
        assert!(e < limit, "{scheme:?} roundtrip rel-L2 {e}");
    }
}

#[test]
fn quant_helpers_reject_bad_sizes() {
    for scheme in SCHEMES {
        assert!(rlx_cpu::quant::quantize(scheme, &[0.5; 48], 1, 48).is_err());
        assert!(rlx_cpu::quant::quantize(scheme, &[0.5; 64], 1, 32).is_err());
        let (bb, bl) = (scheme.block_bytes(), scheme.block_len());
        let q = |n: usize| vec![0; n];
        assert!(rlx_cpu::quant::dequantize(scheme, &q(bb * 2 - 1), 2, bl).is_err());
        assert!(rlx_cpu::quant::dequantize(scheme, &q(bb * 2), 1, bl + 16).is_err());
        assert!(rlx_cpu::quant::dequantize(scheme, &q(bb * 2), 2, bl).is_ok());
        assert!(rlx_cpu::quant::quantize(scheme, &vec![0.5; bl * 2], 1, bl * 2).is_ok());
    }
}

#[test]
fn matmul_builders_reject_bad_shapes() {
    let mut g = Graph::new("bad");
    let f = |d: &[usize]| Shape::new(d, DType::F32);
    let a = g.input("a", f(&[3, 4])).unwrap();
    let b = g.input("b", f(&[5, 6])).unwrap();
    let b64 = g.input("b64", Shape::new(&[4, 6], DType::F64)).unwrap();
    let s = g.input("s", f(&[])).unwrap();
    let w = g.input("w", f(&[4, 6])).unwrap();
    let bias_bad = g.input("bias_bad", f(&[5])).unwrap();
    let bias_2d = g.input("bias_2d", f(&[2, 6])).unwrap();
    let v = g.input("v", f(&[4])).unwrap();
    let bb = g.input("bb", f(&[2, 4, 6])).unwrap();
    let cb = g.input("cb", f(&[3, 3, 4])).unwrap();
    assert!(g.matmul(a, b).is_err(), "inner dims 4 vs 5");
    assert!(g.matmul(a, b64).is_err(), "dtype mismatch");
    assert!(g.matmul(s, w).is_err(), "rank-0 operand");
    assert!(g.matmul(cb, bb).is_err(), "batch 3 vs 2");
    assert!(g.matmul_bias_act(a, w, bias_bad, None).is_err());
    assert!(g.matmul_bias_act(a, w, bias_2d, None).is_err());
    assert!(g.matmul_bias_act(a, v, v, None).is_err(), "rank-1 weight");
    assert!(g.matmul(a, w).is_ok());
    let x48 = g.input("x48", f(&[2, 48])).unwrap();
    let x64 = g.input("x64", f(&[2, 64])).unwrap();
    let w48 = g.input("w48", Shape::new(&[3, 51], DType::U8)).unwrap();
    let w64 = g.input("w64", Shape::new(&[3, 36], DType::U8)).unwrap();
    let w64f = g.input("w64f", f(&[3, 36])).unwrap();
    let w_short = g.input("w_short", Shape::new(&[3, 35], DType::U8)).unwrap();
    let xi = g.input("xi", Shape::new(&[2, 64], DType::I32)).unwrap();
    assert!(
        g.dequant_matmul(x48, w48, QuantScheme::Q8_0).is_err(),
        "K=48"
    );
    assert!(
        g.dequant_matmul(x64, w64f, QuantScheme::Q4_0).is_err(),
        "not u8"
    );
    assert!(g.dequant_matmul(x64, w_short, QuantScheme::Q4_0).is_err());
    assert!(
        g.dequant_matmul(x64, w64, QuantScheme::Q8_0).is_err(),
        "36 bytes is Q4_0"
    );
    assert!(
        g.dequant_matmul(xi, w64, QuantScheme::Q4_0).is_err(),
        "int x"
    );
    // The K-quants need K in whole 256-value super-blocks.
    let w_k = g.input("w_k", Shape::new(&[3, 144], DType::U8)).unwrap();
    assert!(
        g.dequant_matmul(x64, w_k, QuantScheme::Q4_K).is_err(),
        "K=64 for Q4_K"
    );
    let x256 = g.input("x256", f(&[2, 256])).unwrap();
    assert!(
        g.dequant_matmul(x256, w_k, QuantScheme::Q5_K).is_err(),
        "144 is Q4_K"
    );
    let ok_k = g.dequant_matmul(x256, w_k, QuantScheme::Q4_K).unwrap();
    assert_eq!(g.shape(ok_k).unwrap(), &f(&[2, 3]));
    let ok = g.dequant_matmul(x64, w64, QuantScheme::Q4_0).unwrap();
    assert_eq!(g.shape(ok).unwrap(), &f(&[2, 3]));
}

#[test]
fn matmul_with_symbolic_batch_dim() {
    use rlx_ir::Dim;
    let mut rng = Rng::new("matmul_with_symbolic_batch_dim");
    let mut g = Graph::new("dyn");
    let dims = vec![Dim::dynamic("B"), 7.into(), 13.into()];
    let x = g.input("a", Shape::with_dims(dims, DType::F32)).unwrap();
    let w = g.input("w", Shape::new(&[13, 5], DType::F32)).unwrap();
    let z = g.matmul(x, w).unwrap();
    assert_eq!(g.shape(z).unwrap().dims[0], Dim::dynamic("B"));
    g.set_outputs(vec![z]);
    for b in [1usize, 3] {
        let a = rng.normals(b * 7 * 13);
        let wv = rng.normals(13 * 5);
        let out = run(
            &g,
            &[
                ("a", HostTensor::from_f64_as(&[b, 7, 13], &a, DType::F32)),
                ("w", HostTensor::from_f64_as(&[13, 5], &wv, DType::F32)),
            ],
            &[],
        );
        let (want, dims) = ref_matmul(
            &through(DType::F32, &a),
            &[b, 7, 13],
            &through(DType::F32, &wv),
            &[13, 5],
        );
        assert_eq!(out[0].shape, dims);
        assert_close(&format!("B={b}"), &out[0], &want, DType::F32);
    }
}
