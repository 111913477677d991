//! The portable path under test on any adapter: the linalg, norm and reduce case tables
//! lowered with `WgpuOptions::portable` (as for an adapter without subgroups or f16
//! arithmetic), so the workgroup-memory reductions stay checked where the adapter would
//! take subgroup ones.
mod common;
use common::*;

rlx_testutil::case_tests!(linalg, portable);
rlx_testutil::case_tests!(norm, portable);
rlx_testutil::case_tests!(reduce, portable);

use rlx_ir::{DType, Graph, Op, QuantScheme, Shape};
use rlx_wgpu::lower::{lower_node, LowerEnv, NodeCtx, Step};
use rlx_wgpu::shader::{translate_all, WTensor};
use rlx_wgpu::Caps;

/// The GEMV kernels of `x [m, k]` times a `[k, n]` matrix (`quant`: a Q8_0 weight `[n, ..]`)
/// as lowered for `caps`.
fn gemv_sources(caps: &Caps, m: usize, k: usize, n: usize, quant: bool) -> Vec<String> {
    let mut g = Graph::new("gemv");
    let x = g.input("x", Shape::new(&[m, k], DType::F32)).unwrap();
    let (w, op) = if quant {
        let rb = k / 32 * 34;
        let w = g.input("w", Shape::new(&[n, rb], DType::U8)).unwrap();
        let op = Op::DequantMatMul {
            scheme: QuantScheme::Q8_0,
        };
        (w, op)
    } else {
        (
            g.input("w", Shape::new(&[k, n], DType::F32)).unwrap(),
            Op::MatMul,
        )
    };
    let y = g.add_node(op, &[x, w]).unwrap();
    let node = &g.nodes[y.0];
    let t = |slab: usize, id: rlx_ir::NodeId| {
        let s = &g.nodes[id.0].shape;
        WTensor {
            slab,
            off: 0,
            dims: s.static_dims().unwrap(),
            dtype: s.dtype,
        }
    };
    let mut env = LowerEnv::new(3);
    let mut ctx = NodeCtx {
        node,
        ins: vec![t(0, x), t(1, w)],
        out: t(2, y),
        caps,
        env: &mut env,
    };
    lower_node(&mut ctx).unwrap_or_else(|e| panic!("m={m} k={k} n={n}: {e:?}"));
    (env.steps.iter())
        .filter_map(|s| match s {
            Step::Kernel(k) => Some(k.src.clone()),
            _ => None,
        })
        .collect()
}

/// Without an adapter: the GEMVs use subgroup operations exactly where the caps have them,
/// for every smallest subgroup size, and translate to every backend either way.
#[test]
fn gemv_subgroups_only_where_the_caps_have_them() {
    for (subgroups, sg_min) in [(false, 4), (true, 1), (true, 4), (true, 8), (true, 32)] {
        let caps = Caps {
            subgroups,
            subgroup_min: sg_min,
            ..Caps::portable()
        };
        for (m, k, n, quant) in [
            (1, 64, 1, false),
            (1, 96, 5, false),
            (1, 300, 64, false),
            (1, 37, 700, false),
            (1, 32, 9, true),
            (3, 256, 40, true),
            (8, 2048, 7, true),
            (1, 8192, 3, true),
        ] {
            for src in gemv_sources(&caps, m, k, n, quant) {
                assert_eq!(
                    src.contains("subgroup_size"),
                    subgroups,
                    "m={m} k={k} n={n} quant={quant} subgroups={subgroups}"
                );
                translate_all("gemv", &src).unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}
