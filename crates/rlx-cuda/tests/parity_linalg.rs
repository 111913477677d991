//! GPU parity of the linalg group: the per-op cases (MatMul in NumPy semantics with rank-1
//! operands and broadcast batch dims, operands through views, FusedMatMulBiasAct with every
//! activation, DequantMatMul in the decode GEMV and the dequantise-then-GEMM paths) come from
//! rlx-testutil's case table; below them the big-shape launches, against the CPU reference
//! and the f64 oracle.
mod common;
use common::*;
use rlx_ir::{Activation, DType, Graph, Shape};

rlx_testutil::case_tests!(linalg, cuda);

fn mm_graph(ash: &[usize], bsh: &[usize], dt: DType) -> Graph {
    let mut g = Graph::new("matmul");
    let a = g.input("a", Shape::new(ash, dt)).unwrap();
    let b = g.input("b", Shape::new(bsh, dt)).unwrap();
    let z = g.matmul(a, b).unwrap();
    g.set_outputs(vec![z]);
    g
}

/// A's entries scaled by 1/sqrt(K) keep outputs O(1) in every dtype.
fn mm_feeds(rng: &mut Rng, ash: &[usize], bsh: &[usize]) -> Vec<Feed> {
    let k = ash[ash.len() - 1] as f64;
    let n: usize = ash.iter().product();
    vec![
        feed(
            "a",
            ash,
            rng.normals(n).iter().map(|v| v / k.sqrt()).collect(),
        ),
        normal(rng, "b", bsh),
    ]
}

fn fused_graph(ash: &[usize], wsh: &[usize], act: Option<Activation>, dt: DType) -> Graph {
    let n = wsh[wsh.len() - 1];
    let mut g = Graph::new("fused");
    let a = g.input("a", Shape::new(ash, dt)).unwrap();
    let w = g.input("w", Shape::new(wsh, dt)).unwrap();
    let b = g.input("bias", Shape::new(&[n], dt)).unwrap();
    let z = g.matmul_bias_act(a, w, b, act).unwrap();
    g.set_outputs(vec![z]);
    g
}

#[test]
fn matmul_big_f16_and_f32() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("matmul_big_f16_and_f32");
    let s: &[usize] = &[2048, 2048];
    let feeds = mm_feeds(&mut rng, s, s);
    parity("matmul 2048³", &|d| mm_graph(s, s, d), &feeds, DType::F16);
    let (ash, bsh): (&[usize], &[usize]) = (&[8, 512, 1024], &[1024, 4099]);
    let feeds = mm_feeds(&mut rng, ash, bsh);
    parity(
        "matmul [8,512,1024]@[1024,4099]",
        &|d| mm_graph(ash, bsh, d),
        &feeds,
        DType::F32,
    );
    let (ash, wsh): (&[usize], &[usize]) = (&[4, 257, 1024], &[1024, 3000]);
    let feeds = vec![
        feed(
            "a",
            ash,
            rng.normals(4 * 257 * 1024)
                .iter()
                .map(|v| v / 32.0)
                .collect(),
        ),
        normal(&mut rng, "w", wsh),
        normal(&mut rng, "bias", &[3000]),
    ];
    for act in [Some(Activation::GeluApprox), Some(Activation::Gelu)] {
        parity(
            &format!("fused big {act:?}"),
            &|d| fused_graph(ash, wsh, act, d),
            &feeds,
            DType::BF16,
        );
    }
}
