//! The decode path of DequantMatMul (`quant::matvec`: packed rows walked once, no tile,
//! no GEMM) against an f64 reference — the tested dequantiser's values widened to f64 and
//! dotted in f64 — for every scheme and random shapes; and the same through a graph whose
//! packed weight is a U8 param held as bytes, on both sides of the small-M cut.
use rlx_cpu::quant::{dequantize, matvec};
use rlx_cpu::{CpuExecutable, TensorView};
use rlx_ir::{DType, Graph, HostTensor, QuantScheme, Shape};
use rlx_testutil::cases::linalg::{random_packed, SCHEMES};
use rlx_testutil::{rel_l2, Rng};

/// `x [m, k] @ W [n, k]ᵀ` in f64 from the dequantised weight.
fn reference(scheme: QuantScheme, w: &[u8], n: usize, k: usize, x: &[f32]) -> Vec<f64> {
    let wd = dequantize(scheme, w, n, k).unwrap();
    let m = x.len() / k;
    let mut out = vec![0f64; m * n];
    for i in 0..m {
        for r in 0..n {
            out[i * n + r] = (0..k)
                .map(|c| x[i * k + c] as f64 * wd[r * k + c] as f64)
                .sum();
        }
    }
    out
}

fn normals_f32(rng: &mut Rng, n: usize) -> Vec<f32> {
    rng.normals(n).iter().map(|&v| v as f32).collect()
}

#[test]
fn matvec_matches_f64_reference_for_every_scheme() {
    let mut rng = Rng::new("matvec_matches_f64_reference_for_every_scheme");
    for scheme in SCHEMES {
        let bl = scheme.block_len();
        for trial in 0..6 {
            // Multiples of the block up to 2048 values; the last trials are large enough
            // (n·row bytes ≥ 64 KiB) to be spread over threads.
            let k = bl * (1 + rng.below(2048 / bl));
            let n = if trial >= 4 {
                200 + rng.below(300)
            } else {
                1 + rng.below(70)
            };
            let m = 1 + rng.below(8);
            let w = random_packed(&mut rng, scheme, n, k);
            let x = normals_f32(&mut rng, m * k);
            let mut got = vec![f32::NAN; m * n];
            matvec(scheme, &w, n, k, &x, &mut got).unwrap();
            let want = reference(scheme, &w, n, k, &x);
            let got: Vec<f64> = got.iter().map(|&v| v as f64).collect();
            let e = rel_l2(&got, &want);
            assert!(
                e <= 1e-5,
                "{scheme:?} m {m} n {n} k {k}: rel-L2 {e} against the f64 reference"
            );
        }
    }
}

#[test]
fn matvec_rejects_bad_sizes() {
    for scheme in SCHEMES {
        let (bl, bb) = (scheme.block_len(), scheme.block_bytes());
        let w = vec![0u8; 3 * bb];
        let x = vec![0f32; bl];
        let mut out = vec![0f32; 3];
        assert!(matvec(scheme, &w, 3, bl, &x, &mut out).is_ok());
        assert!(matvec(scheme, &w[1..], 3, bl, &x, &mut out).is_err());
        assert!(matvec(scheme, &w, 3, bl + 16, &x, &mut out).is_err());
        assert!(matvec(scheme, &w, 3, bl, &x, &mut out[1..]).is_err());
        assert!(matvec(scheme, &w, 3, bl, &x[1..], &mut out).is_err());
    }
}

/// `x @ Wᵀ` with W a U8 param: M ≤ 8 takes the matvec path, larger M and f64 x the tiles.
#[test]
fn dequant_matmul_graph_with_u8_param_both_paths() {
    let mut rng = Rng::new("dequant_matmul_graph_with_u8_param_both_paths");
    for scheme in SCHEMES {
        let bl = scheme.block_len();
        let k = bl * (1 + rng.below(4));
        let n = 1 + rng.below(40);
        let rb = k / bl * scheme.block_bytes();
        let w = random_packed(&mut rng, scheme, n, k);
        for (m, dt) in [(1, DType::F32), (5, DType::F32), (8, DType::F32)]
            .into_iter()
            .chain([(9, DType::F32), (20, DType::F32), (3, DType::F64)])
        {
            let mut g = Graph::new("dq");
            let xi = g.input("x", Shape::new(&[m, k], dt)).unwrap();
            let wi = g.param("w", Shape::new(&[n, rb], DType::U8)).unwrap();
            let y = g.dequant_matmul(xi, wi, scheme).unwrap();
            g.set_outputs(vec![y]);
            let mut exe = CpuExecutable::new(g).unwrap();
            let wt = HostTensor::new(&[n, rb], DType::U8, w.clone()).unwrap();
            exe.set_param("w", &wt).unwrap();
            assert_eq!(
                exe.leaf_bytes(),
                n * rb,
                "{scheme:?}: the weight is its bytes"
            );
            let x = normals_f32(&mut rng, m * k);
            let xv: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let xt = HostTensor::from_f64_as(&[m, k], &xv, dt);
            let got = exe.run(&[("x", xt)]).unwrap().pop().unwrap().to_f64_vec();
            let want = reference(scheme, &w, n, k, &x);
            let e = rel_l2(&got, &want);
            assert!(e <= 1e-5, "{scheme:?} m {m} {dt}: rel-L2 {e}");
        }
    }
}

/// The tile path reads a U8 weight held as i64 (a computed U8 tensor) the same as bytes.
#[test]
fn tiled_path_reads_i64_and_byte_weights_alike() {
    let mut rng = Rng::new("tiled_path_reads_i64_and_byte_weights_alike");
    let scheme = QuantScheme::Q4_K;
    let (n, k, m) = (7, 512, 3);
    let rb = k / 256 * scheme.block_bytes();
    let w = random_packed(&mut rng, scheme, n, k);
    let wi: Vec<i64> = w.iter().map(|&b| b as i64).collect();
    let x = normals_f32(&mut rng, m * k);
    let run = |data: rlx_cpu::Buf, tiled: bool| {
        let (xs, ws, os) = ([m, k], [n, rb], [m, n]);
        let ins = [
            TensorView {
                shape: &xs,
                dtype: DType::F32,
                data: rlx_cpu::Buf::F32(&x),
            },
            TensorView {
                shape: &ws,
                dtype: DType::U8,
                data,
            },
        ];
        let mut out = vec![0f32; m * n];
        let ov = rlx_cpu::OutView {
            shape: &os,
            dtype: DType::F32,
            data: rlx_cpu::BufMut::F32(&mut out),
        };
        if tiled {
            rlx_cpu::ops::linalg::dequant_matmul_tiled(scheme, &ins, ov).unwrap();
        } else {
            rlx_cpu::ops::linalg::dequant_matmul(scheme, &ins, ov).unwrap();
        }
        out.iter().map(|&v| v as f64).collect::<Vec<f64>>()
    };
    let want = reference(scheme, &w, n, k, &x);
    for (name, got) in [
        ("tiled bytes", run(rlx_cpu::Buf::U8(&w), true)),
        ("tiled i64", run(rlx_cpu::Buf::I64(&wi), true)),
        ("matvec i64", run(rlx_cpu::Buf::I64(&wi), false)),
    ] {
        let e = rel_l2(&got, &want);
        assert!(e <= 1e-5, "{name}: rel-L2 {e}");
    }
    let bad: Vec<i64> = wi.iter().map(|&b| b + 256).collect();
    let (xs, ws, os) = ([m, k], [n, rb], [m, n]);
    let ins = [
        TensorView {
            shape: &xs,
            dtype: DType::F32,
            data: rlx_cpu::Buf::F32(&x),
        },
        TensorView {
            shape: &ws,
            dtype: DType::U8,
            data: rlx_cpu::Buf::I64(&bad),
        },
    ];
    let mut out = vec![0f32; m * n];
    let ov = rlx_cpu::OutView {
        shape: &os,
        dtype: DType::F32,
        data: rlx_cpu::BufMut::F32(&mut out),
    };
    let err = rlx_cpu::ops::linalg::dequant_matmul(scheme, &ins, ov).unwrap_err();
    assert!(err.to_string().contains("out of range"), "{err}");
}
