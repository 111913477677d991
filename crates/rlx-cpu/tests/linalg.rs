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

#[test]
fn quant_dequantize_matches_block_layout() {
    let mut rng = Rng::new("quant_dequantize_matches_block_layout");
    for scheme in SCHEMES {
        let (rows, cols) = (5, 96);
        let packed = random_packed(&mut rng, scheme, rows, cols);
        let got = rlx_cpu::quant::dequantize(scheme, &packed, rows, cols).unwrap();
        let want = unpack(scheme, &packed, rows, cols);
        let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
        assert!(rel_l2(&got, &want) <= 1e-7, "{scheme:?}");
    }
}

#[test]
fn quant_roundtrip_within_scheme_bound() {
    let mut rng = Rng::new("quant_roundtrip_within_scheme_bound");
    for scheme in SCHEMES {
        let (rows, cols) = (7, 160);
        let v: Vec<f32> = rng
            .normals(rows * cols)
            .iter()
            .map(|x| (x * 2.0 + 0.5) as f32)
            .collect();
        let packed = rlx_cpu::quant::quantize(scheme, &v, rows, cols).unwrap();
        assert_eq!(packed.len(), rows * cols / 32 * scheme.block_bytes());
        // The packed bytes read back the same through the test's own unpacker.
        let own = unpack(scheme, &packed, rows, cols);
        let back = rlx_cpu::quant::dequantize(scheme, &packed, rows, cols).unwrap();
        for (blk, (xs, ys)) in v.chunks(32).zip(back.chunks(32)).enumerate() {
            let amax = xs.iter().fold(0f64, |m, &x| m.max((x as f64).abs()));
            let min = xs.iter().fold(f64::MAX, |m, &x| m.min(x as f64));
            let max = xs.iter().fold(f64::MIN, |m, &x| m.max(x as f64));
            // Half a step of rounding (a full step where Q4_0 clamps +8 to 7), plus the
            // f16 rounding of the scale and min.
            let bound = match scheme {
                QuantScheme::Q8_0 => 0.5 * amax / 127.0 + amax * 1e-3,
                QuantScheme::Q4_0 => amax / 8.0 + amax * 2e-3,
                QuantScheme::Q4_1 => 0.5 * (max - min) / 15.0 + (amax + max - min) * 2e-3,
            };
            for (e, (&x, &y)) in xs.iter().zip(ys).enumerate() {
                let err = (x as f64 - y as f64).abs();
                assert!(
                    err <= bound,
                    "{scheme:?} block {blk} elem {e}: {x} -> {y}, err {err} > {bound}"
                );
                assert!((own[blk * 32 + e] - y as f64).abs() <= 1e-6 * (1.0 + amax));
            }
        }
        // Overall the roundtrip is much better than the worst case.
        let vv: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        let bb: Vec<f64> = back.iter().map(|&x| x as f64).collect();
        let limit = match scheme {
            QuantScheme::Q8_0 => 1e-2,
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
        let bb = scheme.block_bytes();
        assert!(rlx_cpu::quant::dequantize(scheme, &vec![0; bb * 2 - 1], 2, 32).is_err());
        assert!(rlx_cpu::quant::dequantize(scheme, &vec![0; bb * 2], 1, 48).is_err());
        assert!(rlx_cpu::quant::dequantize(scheme, &vec![0; bb * 2], 2, 32).is_ok());
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
