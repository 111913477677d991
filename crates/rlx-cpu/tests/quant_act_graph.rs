//! `CpuExecutable::set_quant_act`: under `QuantAct::Q8` the DequantMatMul and
//! FusedDequantMatMul thunks multiply 8-bit activations (`quant::matmul_q8`) at any M, for
//! quantised weights only; F16 / BF16 weights and the default mode are untouched.
use rlx_cpu::quant::{matmul_q8, matvec};
use rlx_cpu::{CpuExecutable, QuantAct};
use rlx_ir::{DType, Graph, HostTensor, NodeId, Op, QuantScheme, Shape};
use rlx_testutil::cases::linalg::{random_packed, SCHEMES};
use rlx_testutil::Rng;

fn f32s(rng: &mut Rng, n: usize) -> Vec<f32> {
    rng.normals(n).iter().map(|&v| v as f32).collect()
}

fn run(g: &Graph, qa: QuantAct, params: &[(&str, HostTensor)], x: &HostTensor) -> Vec<f32> {
    let mut exe = CpuExecutable::new(g.clone()).unwrap();
    exe.set_quant_act(qa);
    assert_eq!(exe.quant_act(), qa);
    for (name, v) in params {
        exe.set_param(name, v).unwrap();
    }
    exe.run(&[("x", x.clone())]).unwrap()[0].to_f32_vec()
}

#[test]
fn dequant_matmul_honours_quant_act() {
    let mut rng = Rng::new("dequant_matmul_honours_quant_act");
    for scheme in SCHEMES {
        let bl = scheme.block_len();
        let k = bl * (1 + 2 * rng.below(3));
        let n = 1 + rng.below(40);
        let rb = k / bl * scheme.block_bytes();
        let w = random_packed(&mut rng, scheme, n, k);
        let wt = HostTensor::new(&[n, rb], DType::U8, w.clone()).unwrap();
        // Decode and prefill shapes (the latter the tiled kernels where the CPU has them).
        for m in [1, 3, 12] {
            let mut g = Graph::new("dq");
            let xi = g.input("x", Shape::new(&[m, k], DType::F32)).unwrap();
            let wi = g.param("w", Shape::new(&[n, rb], DType::U8)).unwrap();
            let y = g.dequant_matmul(xi, wi, scheme).unwrap();
            g.set_outputs(vec![y]);
            let x = f32s(&mut rng, m * k);
            let xt = HostTensor::from_f32(&[m, k], &x);
            let ps = [("w", wt.clone())];
            let q8 = run(&g, QuantAct::Q8, &ps, &xt);
            let f32 = run(&g, QuantAct::F32, &ps, &xt);
            if scheme.is_half() {
                assert_eq!(q8, f32, "{scheme:?} m {m}: half weights ignore the mode");
                continue;
            }
            let mut want = vec![0f32; m * n];
            matmul_q8(scheme, &w, n, k, &x, &mut want).unwrap();
            assert_eq!(q8, want, "{scheme:?} m {m}: the thunk is matmul_q8");
            if m == 1 {
                let mut strict = vec![0f32; n];
                matvec(scheme, &w, n, k, &x, &mut strict).unwrap();
                assert_eq!(
                    f32, strict,
                    "{scheme:?}: the default mode is the f32 product"
                );
            }
            assert_ne!(q8, f32, "{scheme:?} m {m}: the mode changed nothing");
        }
    }
}

/// FusedDequantMatMul (RmsNorm and residual folded in) under Q8 equals its unfused graph
/// under Q8, bit for bit.
#[test]
fn fused_dequant_matmul_honours_quant_act() {
    let mut rng = Rng::new("fused_dequant_matmul_honours_quant_act");
    for scheme in [QuantScheme::Q4_1, QuantScheme::Q8_0, QuantScheme::Q6_K] {
        let bl = scheme.block_len();
        let (k, n) = (bl * (1 + rng.below(3)), 1 + rng.below(30));
        let rb = k / bl * scheme.block_bytes();
        let w = random_packed(&mut rng, scheme, n, k);
        for m in [1, 10] {
            let build = |fused: bool| {
                let mut g = Graph::new("fdq");
                let xi = g.input("x", Shape::new(&[m, k], DType::F32)).unwrap();
                let wi = g.param("w", Shape::new(&[n, rb], DType::U8)).unwrap();
                let gi = g.param("gamma", Shape::new(&[k], DType::F32)).unwrap();
                let ri = g.param("r", Shape::new(&[m, n], DType::F32)).unwrap();
                let y: NodeId = if fused {
                    let op = Op::FusedDequantMatMul {
                        scheme,
                        norm_eps: Some(1e-5),
                        residual: true,
                        glu: None,
                    };
                    g.add_node(op, &[xi, wi, gi, ri]).unwrap()
                } else {
                    let op = Op::RmsNorm {
                        axis: -1,
                        eps: 1e-5,
                    };
                    let h = g.add_node(op, &[xi, gi]).unwrap();
                    let p = g.dequant_matmul(h, wi, scheme).unwrap();
                    g.add_node(Op::Binary(rlx_ir::BinaryOp::Add), &[p, ri])
                        .unwrap()
                };
                g.set_outputs(vec![y]);
                g
            };
            let x = HostTensor::from_f32(&[m, k], &f32s(&mut rng, m * k));
            let ps = [
                (
                    "w",
                    HostTensor::new(&[n, rb], DType::U8, w.clone()).unwrap(),
                ),
                ("gamma", HostTensor::from_f32(&[k], &f32s(&mut rng, k))),
                ("r", HostTensor::from_f32(&[m, n], &f32s(&mut rng, m * n))),
            ];
            let fused = run(&build(true), QuantAct::Q8, &ps, &x);
            let unfused = run(&build(false), QuantAct::Q8, &ps, &x);
            assert_eq!(fused, unfused, "{scheme:?} m {m}");
            assert_ne!(
                fused,
                run(&build(true), QuantAct::F32, &ps, &x),
                "{scheme:?}"
            );
        }
    }
}
