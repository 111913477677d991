//! FuseDequantMatMul: a decode step's RMS norm → packed GEMV → residual add becomes one
//! `FusedDequantMatMul`, in every combination the pattern allows (norm only, residual only,
//! both, residual on either side of the add); a norm or product that someone else reads is
//! left alone; the CPU gives the unfused graph's values bit for bit, fused and expanded.
mod common;
use common::compare::cpu;
use common::{count, Rng, Val};
use rlx_ir::{DType, Graph, Op, OpKind, QuantScheme, Shape};
use rlx_opt::{Expand, FuseDequantMatMul, FuseSwiGLU, FuseSwiGLUDequantMatMul, Pass};
use std::collections::HashMap;

const K: usize = 64;
const N: usize = 24;

struct Case {
    norm: bool,
    residual: bool,
    residual_first: bool,
    /// The norm's output is also a graph output (so it must stay).
    norm_shared: bool,
    /// The product is also a graph output (so the add cannot absorb it).
    product_shared: bool,
}

fn graph(c: &Case, scheme: QuantScheme, m: usize) -> Graph {
    let rb = K / scheme.block_len() * scheme.block_bytes();
    let mut g = Graph::new("dq");
    let x = g.input("x", Shape::new(&[1, m, K], DType::F32)).unwrap();
    let w = g.input("w", Shape::new(&[N, rb], DType::U8)).unwrap();
    let r = g.input("r", Shape::new(&[1, m, N], DType::F32)).unwrap();
    let gamma = g.param("gamma", Shape::new(&[K], DType::F32)).unwrap();
    let h = if c.norm {
        g.rms_norm(x, gamma, None, -1, 1e-6).unwrap()
    } else {
        x
    };
    let y = g.dequant_matmul(h, w, scheme).unwrap();
    let mut outs = vec![];
    let top = match (c.residual, c.residual_first) {
        (false, _) => y,
        (true, true) => g.add(r, y).unwrap(),
        (true, false) => g.add(y, r).unwrap(),
    };
    outs.push(top);
    if c.norm_shared && c.norm {
        outs.push(h);
    }
    if c.product_shared && c.residual {
        outs.push(y);
    }
    // The residual input is read even when no add uses it, so every graph has one signature.
    if !c.residual {
        outs.push(r);
    }
    g.set_outputs(outs);
    g
}

fn feeds(scheme: QuantScheme, m: usize, rng: &mut Rng) -> HashMap<String, Val> {
    let vals: Vec<f32> = rng.normals(N * K).iter().map(|&v| v as f32).collect();
    let packed = rlx_cpu::quant::quantize(scheme, &vals, N, K).unwrap();
    let rb = K / scheme.block_len() * scheme.block_bytes();
    let mut f = HashMap::new();
    f.insert(
        "x".into(),
        Val::new(&[1, m, K], DType::F32, rng.normals(m * K)),
    );
    let w: Vec<f64> = packed.iter().map(|&b| f64::from(b)).collect();
    f.insert("w".into(), Val::new(&[N, rb], DType::U8, w));
    f.insert(
        "r".into(),
        Val::new(&[1, m, N], DType::F32, rng.normals(m * N)),
    );
    let gamma: Vec<f64> = rng.normals(K).iter().map(|v| 1.0 + 0.5 * v).collect();
    f.insert("gamma".into(), Val::new(&[K], DType::F32, gamma));
    f
}

fn bits(v: &[Val]) -> Vec<Vec<u64>> {
    v.iter()
        .map(|t| t.data.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn norm_gemv_residual_fuse_into_one_node() {
    let mut rng = Rng::new("norm_gemv_residual_fuse_into_one_node");
    for scheme in [QuantScheme::Q8_0, QuantScheme::Q4_1, QuantScheme::Q5_0] {
        for m in [1usize, 5, 12] {
            for (norm, residual, residual_first) in [
                (true, false, false),
                (false, true, false),
                (false, true, true),
                (true, true, false),
                (true, true, true),
            ] {
                let c = Case {
                    norm,
                    residual,
                    residual_first,
                    norm_shared: false,
                    product_shared: false,
                };
                let what = format!("{scheme:?} m={m} norm={norm} residual={residual}");
                let g = graph(&c, scheme, m);
                let h = FuseDequantMatMul.run(&g).unwrap();
                h.verify().unwrap();
                let want = Op::FusedDequantMatMul {
                    scheme,
                    norm_eps: norm.then_some(1e-6),
                    residual,
                    glu: None,
                };
                let fused: Vec<&Op> = (h.nodes.iter())
                    .filter(|n| n.op.kind() == OpKind::FusedDequantMatMul)
                    .map(|n| &n.op)
                    .collect();
                assert_eq!(fused, vec![&want], "{what}");
                for k in [OpKind::RmsNorm, OpKind::DequantMatMul, OpKind::Binary] {
                    assert_eq!(count(&h, k), 0, "{what}: {k} left");
                }
                let f = feeds(scheme, m, &mut rng);
                let base = bits(&cpu(&g, &f));
                assert_eq!(bits(&cpu(&h, &f)), base, "{what}: fused values differ");
                let e = Expand::all().run(&h).unwrap();
                assert_eq!(count(&e, OpKind::FusedDequantMatMul), 0);
                assert_eq!(bits(&cpu(&e, &f)), base, "{what}: expanded values differ");
            }
        }
    }
}

#[test]
fn shared_norm_or_product_is_left_alone() {
    let scheme = QuantScheme::Q8_0;
    // A norm someone else reads stays; the residual still fuses.
    let c = Case {
        norm: true,
        residual: true,
        residual_first: true,
        norm_shared: true,
        product_shared: false,
    };
    let h = FuseDequantMatMul.run(&graph(&c, scheme, 1)).unwrap();
    assert_eq!(count(&h, OpKind::RmsNorm), 1);
    let fused: Vec<&Op> = (h.nodes.iter())
        .filter(|n| n.op.kind() == OpKind::FusedDequantMatMul)
        .map(|n| &n.op)
        .collect();
    let want = Op::FusedDequantMatMul {
        scheme,
        norm_eps: None,
        residual: true,
        glu: None,
    };
    assert_eq!(fused, vec![&want]);
    // A product someone else reads keeps its add; the norm still fuses into the product.
    let c = Case {
        norm: true,
        residual: true,
        residual_first: false,
        norm_shared: false,
        product_shared: true,
    };
    let h = FuseDequantMatMul.run(&graph(&c, scheme, 1)).unwrap();
    assert_eq!(count(&h, OpKind::Binary), 1);
    assert_eq!(count(&h, OpKind::RmsNorm), 0);
    assert_eq!(count(&h, OpKind::FusedDequantMatMul), 1);
    // Neither: nothing to do.
    let c = Case {
        norm: false,
        residual: false,
        residual_first: false,
        norm_shared: false,
        product_shared: false,
    };
    let g = graph(&c, scheme, 1);
    let h = FuseDequantMatMul.run(&g).unwrap();
    assert_eq!(count(&h, OpKind::FusedDequantMatMul), 0);
    assert_eq!(count(&h, OpKind::DequantMatMul), 1);
}

/// `silu(gate)·up` of a gate/up product's halves → down GEMV (+ residual): the SwiGLU folds
/// into the down product (`glu: Some(gate_first)`), with the CPU's values unchanged bit for
/// bit, fused and expanded back; a SwiGLU someone else reads stays.
#[test]
fn swiglu_folds_into_the_down_product() {
    let mut rng = Rng::new("swiglu_folds_into_the_down_product");
    let scheme = QuantScheme::Q4_1;
    for m in [1usize, 4, 11] {
        for gate_first in [true, false] {
            for (residual, shared) in [(true, false), (false, false), (true, true)] {
                let what =
                    format!("m={m} gate_first={gate_first} residual={residual} shared={shared}");
                let rb = K / scheme.block_len() * scheme.block_bytes();
                let mut g = Graph::new("glu");
                let x = g
                    .input("x", Shape::new(&[1, m, 2 * K], DType::F32))
                    .unwrap();
                let w = g.input("w", Shape::new(&[N, rb], DType::U8)).unwrap();
                let r = g.input("r", Shape::new(&[1, m, N], DType::F32)).unwrap();
                let a = g.narrow(x, -1, 0, K).unwrap();
                let b = g.narrow(x, -1, K, K).unwrap();
                let (gate, up) = if gate_first { (a, b) } else { (b, a) };
                let act = g.activation(rlx_ir::Activation::Silu, gate).unwrap();
                let hmul = g.mul(act, up).unwrap();
                let y = g.dequant_matmul(hmul, w, scheme).unwrap();
                let top = if residual { g.add(y, r).unwrap() } else { y };
                let mut outs = vec![top, r];
                if shared {
                    outs.push(hmul);
                }
                g.set_outputs(outs);
                let h = FuseSwiGLU.run(&FuseDequantMatMul.run(&g).unwrap()).unwrap();
                assert_eq!(count(&h, OpKind::FusedSwiGLU), 1, "{what}: {h}");
                let h = FuseSwiGLUDequantMatMul.run(&h).unwrap();
                h.verify().unwrap();
                let fused: Vec<&Op> = (h.nodes.iter())
                    .filter(|n| n.op.kind() == OpKind::FusedDequantMatMul)
                    .map(|n| &n.op)
                    .collect();
                if shared {
                    assert_eq!(count(&h, OpKind::FusedSwiGLU), 1, "{what}");
                    continue;
                }
                let want = Op::FusedDequantMatMul {
                    scheme,
                    norm_eps: None,
                    residual,
                    glu: Some(gate_first),
                };
                assert_eq!(fused, vec![&want], "{what}: {h}");
                assert_eq!(count(&h, OpKind::FusedSwiGLU), 0, "{what}");
                let mut f = feeds(scheme, m, &mut rng);
                f.insert(
                    "x".into(),
                    Val::new(&[1, m, 2 * K], DType::F32, rng.normals(m * 2 * K)),
                );
                let base = bits(&cpu(&g, &f));
                assert_eq!(bits(&cpu(&h, &f)), base, "{what}: fused values differ");
                let e = Expand::all().run(&h).unwrap();
                assert_eq!(count(&e, OpKind::FusedDequantMatMul), 0);
                assert_eq!(bits(&cpu(&e, &f)), base, "{what}: expanded values differ");
            }
        }
    }
}

/// One norm read by three products of different schemes (a Q4_K_M model's q, k and v):
/// each product absorbs the norm and the norm's node goes away; the values are the unfused
/// graph's bit for bit. With a fourth, non-product reader the norm stays and nothing fuses.
#[test]
fn a_norm_read_by_several_products_fuses_into_each() {
    let mut rng = Rng::new("a_norm_read_by_several_products_fuses_into_each");
    let schemes = [QuantScheme::Q5_0, QuantScheme::Q5_0, QuantScheme::Q8_0];
    for also_elsewhere in [false, true] {
        let mut g = Graph::new("qkv");
        let x = g.input("x", Shape::new(&[1, 2, K], DType::F32)).unwrap();
        let gamma = g.param("gamma", Shape::new(&[K], DType::F32)).unwrap();
        let h = g.rms_norm(x, gamma, None, -1, 1e-6).unwrap();
        let mut outs = Vec::new();
        for (i, s) in schemes.iter().enumerate() {
            let rb = K / s.block_len() * s.block_bytes();
            let w = g
                .input(format!("w{i}"), Shape::new(&[N, rb], DType::U8))
                .unwrap();
            outs.push(g.dequant_matmul(h, w, *s).unwrap());
        }
        if also_elsewhere {
            outs.push(g.add(h, h).unwrap());
        }
        g.set_outputs(outs);
        let f = FuseDequantMatMul.run(&g).unwrap();
        f.verify().unwrap();
        let (fused, norms) = (
            count(&f, OpKind::FusedDequantMatMul),
            count(&f, OpKind::RmsNorm),
        );
        if also_elsewhere {
            assert_eq!((fused, norms), (0, 1));
            continue;
        }
        assert_eq!((fused, norms), (3, 0));
        let mut feeds = HashMap::new();
        feeds.insert(
            "x".to_string(),
            Val::new(&[1, 2, K], DType::F32, rng.normals(2 * K)),
        );
        let gamma: Vec<f64> = rng.normals(K).iter().map(|v| 1.0 + 0.5 * v).collect();
        feeds.insert("gamma".to_string(), Val::new(&[K], DType::F32, gamma));
        for (i, s) in schemes.iter().enumerate() {
            let vals: Vec<f32> = rng.normals(N * K).iter().map(|&v| v as f32).collect();
            let packed = rlx_cpu::quant::quantize(*s, &vals, N, K).unwrap();
            let w: Vec<f64> = packed.iter().map(|&b| f64::from(b)).collect();
            let rb = K / s.block_len() * s.block_bytes();
            feeds.insert(format!("w{i}"), Val::new(&[N, rb], DType::U8, w));
        }
        assert_eq!(bits(&cpu(&f, &feeds)), bits(&cpu(&g, &feeds)));
    }
}
