//! Oracle tests: MatMul, FusedMatMulBiasAct, DequantMatMul, and the quant helpers.
mod common;
use common::*;
use rlx_ir::{Activation, DType, Graph, HostTensor, QuantScheme, Shape};

/// NumPy matmul in f64 with plain loops: (values, output dims).
fn ref_matmul(a: &[f64], ash: &[usize], b: &[f64], bsh: &[usize]) -> (Vec<f64>, Vec<usize>) {
    let a2: Vec<usize> = if ash.len() == 1 {
        vec![1, ash[0]]
    } else {
        ash.to_vec()
    };
    let b2: Vec<usize> = if bsh.len() == 1 {
        vec![bsh[0], 1]
    } else {
        bsh.to_vec()
    };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    assert_eq!(b2[b2.len() - 2], k);
    let ab = &a2[..a2.len() - 2];
    let bb = &b2[..b2.len() - 2];
    let r = ab.len().max(bb.len());
    let pad = |s: &[usize]| {
        let mut v = vec![1; r - s.len()];
        v.extend_from_slice(s);
        v
    };
    let (pa, pb) = (pad(ab), pad(bb));
    let ob: Vec<usize> = (0..r).map(|i| pa[i].max(pb[i])).collect();
    let nb: usize = ob.iter().product();
    let mut out = vec![0.0; nb * m * n];
    for bi in 0..nb {
        // Decompose the batch index and map it into each operand (size-1 dims repeat).
        let (mut rem, mut ia, mut ib) = (bi, 0, 0);
        let (mut sa, mut sb) = (1, 1);
        for d in (0..r).rev() {
            let idx = rem % ob[d];
            rem /= ob[d];
            if pa[d] != 1 {
                ia += idx * sa;
            }
            if pb[d] != 1 {
                ib += idx * sb;
            }
            sa *= pa[d];
            sb *= pb[d];
        }
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    s += a[ia * m * k + i * k + p] * b[ib * k * n + p * n + j];
                }
                out[bi * m * n + i * n + j] = s;
            }
        }
    }
    let mut dims = ob;
    if ash.len() > 1 {
        dims.push(m);
    }
    if bsh.len() > 1 {
        dims.push(n);
    }
    (out, dims)
}

fn check_matmul(rng: &mut Rng, ash: &[usize], bsh: &[usize], dtype: DType) {
    let a = rng.normals(ash.iter().product());
    let b = rng.normals(bsh.iter().product());
    let mut g = Graph::new("mm");
    let x = g.input("a", Shape::new(ash, dtype)).unwrap();
    let y = g.input("b", Shape::new(bsh, dtype)).unwrap();
    let z = g.matmul(x, y).unwrap();
    g.set_outputs(vec![z]);
    let out = run(
        &g,
        &[
            ("a", HostTensor::from_f64_as(ash, &a, dtype)),
            ("b", HostTensor::from_f64_as(bsh, &b, dtype)),
        ],
        &[],
    );
    let (a, b) = (through(dtype, &a), through(dtype, &b));
    let (want, dims) = ref_matmul(&a, ash, &b, bsh);
    let abs = |v: &[f64]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    let (want_abs, _) = ref_matmul(&abs(&a), ash, &abs(&b), bsh);
    assert_eq!(out[0].shape, dims, "{ash:?} @ {bsh:?}");
    assert_eq!(g.shape(z).unwrap().static_dims().unwrap(), dims);
    let what = format!("{ash:?} @ {bsh:?} {dtype}");
    assert_close_sums(&what, &out[0], &want, &want_abs, dtype);
}

#[test]
fn matmul_odd_sizes() {
    let mut rng = Rng::new("matmul_odd_sizes");
    for (m, k, n) in [(1, 1, 1), (7, 13, 5), (33, 65, 17), (1, 40, 3), (9, 1, 11)] {
        check_matmul(&mut rng, &[m, k], &[k, n], DType::F32);
    }
}

#[test]
fn matmul_batched_broadcast() {
    let mut rng = Rng::new("matmul_batched_broadcast");
    check_matmul(&mut rng, &[3, 1, 6, 7], &[4, 7, 5], DType::F32);
    check_matmul(&mut rng, &[5, 3, 4], &[4, 2], DType::F32);
    check_matmul(&mut rng, &[3, 4], &[2, 3, 4, 5], DType::F32);
    check_matmul(&mut rng, &[2, 1, 3, 9], &[1, 3, 9, 4], DType::F32);
    // Many items (parallel over batches) and a few large ones (gemm's own threads).
    check_matmul(&mut rng, &[37, 19, 23], &[37, 23, 21], DType::F32);
    check_matmul(&mut rng, &[2, 130, 70], &[70, 90], DType::F32);
    check_matmul(&mut rng, &[1, 201, 129], &[129, 67], DType::F64);
}

#[test]
fn matmul_rank1_operands() {
    let mut rng = Rng::new("matmul_rank1_operands");
    check_matmul(&mut rng, &[13], &[13], DType::F32);
    check_matmul(&mut rng, &[13], &[13, 6], DType::F32);
    check_matmul(&mut rng, &[7, 13], &[13], DType::F32);
    check_matmul(&mut rng, &[5], &[3, 5, 4], DType::F32);
    check_matmul(&mut rng, &[2, 3, 6, 5], &[5], DType::F64);
}

#[test]
fn matmul_storage_dtypes() {
    let mut rng = Rng::new("matmul_storage_dtypes");
    for dt in [DType::F16, DType::BF16, DType::F64] {
        check_matmul(&mut rng, &[7, 13], &[13, 5], dt);
        check_matmul(&mut rng, &[2, 1, 9, 33], &[3, 33, 17], dt);
        check_matmul(&mut rng, &[33], &[33, 4], dt);
    }
}

/// Each activation in f64, written from its definition.
fn ref_act(act: Activation, x: f64) -> f64 {
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    match act {
        Activation::Gelu => 0.5 * x * (1.0 + libm::erf(x / 2f64.sqrt())),
        Activation::GeluApprox => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x.powi(3))).tanh())
        }
        Activation::Silu => x * sig(x),
        Activation::Relu => x.max(0.0),
        Activation::Sigmoid => sig(x),
        Activation::Tanh => x.tanh(),
        Activation::Exp => x.exp(),
        Activation::Log => x.ln(),
        Activation::Sqrt => x.sqrt(),
        Activation::Rsqrt => 1.0 / x.sqrt(),
        Activation::Neg => -x,
        Activation::Abs => x.abs(),
        Activation::Sin => x.sin(),
        Activation::Cos => x.cos(),
        Activation::Erf => libm::erf(x),
        Activation::Softplus => x.exp().ln_1p(),
        Activation::Recip => 1.0 / x,
        Activation::Square => x * x,
    }
}

#[test]
fn fused_matmul_bias_act_every_epilogue() {
    let mut rng = Rng::new("fused_matmul_bias_act_every_epilogue");
    let acts: Vec<Option<Activation>> = std::iter::once(None)
        .chain(Activation::ALL.iter().map(|&a| Some(a)))
        .collect();
    for (i, act) in acts.into_iter().enumerate() {
        let dt = [DType::F32, DType::F64, DType::F32][i % 3];
        let (ash, wsh) = if i % 2 == 0 {
            (vec![2, 7, 13], vec![13, 9])
        } else {
            (vec![5, 33], vec![33, 17])
        };
        let n = wsh[1];
        // Log / Sqrt / Rsqrt / Recip need a positive pre-activation: positive operands.
        let positive = matches!(
            act,
            Some(Activation::Log | Activation::Sqrt | Activation::Rsqrt | Activation::Recip)
        );
        let mut draw = |len: usize| {
            if positive {
                rng.uniforms(len, 0.1, 1.0)
            } else {
                rng.normals(len).iter().map(|v| v * 0.4).collect()
            }
        };
        let (a, w, bias) = (
            draw(ash.iter().product()),
            draw(wsh.iter().product()),
            draw(n),
        );
        let mut g = Graph::new("fmm");
        let x = g.input("a", Shape::new(&ash, dt)).unwrap();
        let y = g.input("w", Shape::new(&wsh, dt)).unwrap();
        let bb = g.input("bias", Shape::new(&[n], dt)).unwrap();
        let z = g.matmul_bias_act(x, y, bb, act).unwrap();
        g.set_outputs(vec![z]);
        let out = run(
            &g,
            &[
                ("a", HostTensor::from_f64_as(&ash, &a, dt)),
                ("w", HostTensor::from_f64_as(&wsh, &w, dt)),
                ("bias", HostTensor::from_f64_as(&[n], &bias, dt)),
            ],
            &[],
        );
        let (mm, dims) = ref_matmul(&through(dt, &a), &ash, &through(dt, &w), &wsh);
        let bias = through(dt, &bias);
        let want: Vec<f64> = mm
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let s = v + bias[i % n];
                act.map_or(s, |a| ref_act(a, s))
            })
            .collect();
        assert_eq!(out[0].shape, dims);
        assert_close(&format!("bias+{act:?} {dt}"), &out[0], &want, dt);
    }
}

// ---- quantised weights: the test's own packer / unpacker, written from the block layout.

fn f16_bytes(v: f64) -> [u8; 2] {
    half::f16::from_f64(v).to_bits().to_le_bytes()
}

fn f16_val(b: &[u8]) -> f64 {
    half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()
}

/// Random blocks for a `[rows, cols]` weight: random scales (and mins) and random quants.
fn random_packed(rng: &mut Rng, scheme: QuantScheme, rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![];
    for _ in 0..rows * cols / 32 {
        out.extend(f16_bytes(rng.range(0.01, 0.2)));
        match scheme {
            QuantScheme::Q8_0 => {
                out.extend((0..32).map(|_| (rng.below(256) as i64 - 128) as i8 as u8));
            }
            QuantScheme::Q4_0 => out.extend((0..16).map(|_| rng.below(256) as u8)),
            QuantScheme::Q4_1 => {
                out.extend(f16_bytes(rng.range(-1.0, 1.0)));
                out.extend((0..16).map(|_| rng.below(256) as u8));
            }
        }
    }
    out
}

fn unpack(scheme: QuantScheme, bytes: &[u8], rows: usize, cols: usize) -> Vec<f64> {
    let bb = scheme.block_bytes();
    let mut out = vec![0.0; rows * cols];
    for (blk, b) in bytes.chunks(bb).enumerate() {
        let base = blk * 32;
        let d = f16_val(&b[0..2]);
        for e in 0..32 {
            out[base + e] = match scheme {
                QuantScheme::Q8_0 => d * (b[2 + e] as i8) as f64,
                QuantScheme::Q4_0 | QuantScheme::Q4_1 => {
                    let off = if scheme == QuantScheme::Q4_0 { 2 } else { 4 };
                    // Element e < 16 is the low nibble of byte e, e ≥ 16 the high nibble of e - 16.
                    let q = if e < 16 {
                        b[off + e] & 0x0f
                    } else {
                        b[off + e - 16] >> 4
                    } as f64;
                    if scheme == QuantScheme::Q4_0 {
                        d * (q - 8.0)
                    } else {
                        // Weights are f32 values, as in ggml: d·q is exact there, and the
                        // sum with m rounds once (visible when |m| is tiny).
                        (d * q + f16_val(&b[2..4])) as f32 as f64
                    }
                }
            };
        }
    }
    out
}

const SCHEMES: [QuantScheme; 3] = [QuantScheme::Q8_0, QuantScheme::Q4_0, QuantScheme::Q4_1];

#[test]
fn dequant_matmul_all_schemes() {
    let mut rng = Rng::new("dequant_matmul_all_schemes");
    let cases: [(&[usize], usize, DType); 5] = [
        (&[1, 32], 1, DType::F32),
        (&[3, 5, 64], 7, DType::F32),
        (&[4, 96], 33, DType::F64),
        (&[2, 160], 9, DType::F16),
        (&[96], 5, DType::BF16),
    ];
    for scheme in SCHEMES {
        for &(xsh, n, dt) in &cases {
            let k = *xsh.last().unwrap();
            let x = rng.normals(xsh.iter().product());
            let packed = random_packed(&mut rng, scheme, n, k);
            let rb = k / 32 * scheme.block_bytes();
            let mut g = Graph::new("dq");
            let xi = g.input("x", Shape::new(xsh, dt)).unwrap();
            let wi = g.input("w", Shape::new(&[n, rb], DType::U8)).unwrap();
            let z = g.dequant_matmul(xi, wi, scheme).unwrap();
            g.set_outputs(vec![z]);
            let out = run(
                &g,
                &[
                    ("x", HostTensor::from_f64_as(xsh, &x, dt)),
                    (
                        "w",
                        HostTensor::new(&[n, rb], DType::U8, packed.clone()).unwrap(),
                    ),
                ],
                &[],
            );
            let w = unpack(scheme, &packed, n, k);
            let x = through(dt, &x);
            let m = x.len() / k;
            let (mut want, mut abs) = (vec![0.0; m * n], vec![0.0; m * n]);
            for i in 0..m {
                for j in 0..n {
                    let terms = (0..k).map(|p| x[i * k + p] * w[j * k + p]);
                    want[i * n + j] = terms.clone().sum();
                    abs[i * n + j] = terms.map(f64::abs).sum();
                }
            }
            let mut dims = xsh[..xsh.len() - 1].to_vec();
            dims.push(n);
            assert_eq!(out[0].shape, dims);
            let what = format!("{scheme:?} x{xsh:?} n={n} {dt}");
            assert_close_sums(&what, &out[0], &want, &abs, dt);
        }
    }
}

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
