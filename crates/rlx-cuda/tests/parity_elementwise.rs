//! GPU parity of the elementwise group: the per-op cases (Activation, Binary, Compare,
//! Where, Cast, StopGradient) come from rlx-testutil's case table; below them
//! ElementwiseRegion (chains, mixed dtypes, the resize prologue, fusion-made regions),
//! BatchElementwiseRegion and a big FusedSwiGLU (its per-op cases are in the transformer
//! table), against the CPU thunks.
mod common;
use common::*;
use rlx_ir::ChainOperand::{Input, Step};
use rlx_ir::ChainStep as S;
use rlx_ir::{
    Activation, BinaryOp, ChainStep, CompareOp, DType, Graph, NodeId, Op, RegionPrologue, Shape,
};
use rlx_opt::Pass;

rlx_testutil::case_tests!(elementwise, cuda);

/// Every float dtype the generated kernels compute in (f64 included).
const FLOATS64: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
const NONE: RegionPrologue = RegionPrologue::None;

fn numel(d: &[usize]) -> usize {
    d.iter().product()
}

fn input(g: &mut Graph, name: &str, dims: &[usize], dt: DType) -> NodeId {
    g.input(name, Shape::new(dims, dt)).unwrap()
}

/// A graph of one output computed from inputs named `x0`, `x1`, ... of the given shapes.
fn graph(ins: &[(&[usize], DType)], body: impl Fn(&mut Graph, &[NodeId]) -> NodeId) -> Graph {
    let mut g = Graph::new("elementwise");
    let ids: Vec<NodeId> = ins
        .iter()
        .enumerate()
        .map(|(k, (d, dt))| input(&mut g, &format!("x{k}"), d, *dt))
        .collect();
    let y = body(&mut g, &ids);
    g.set_outputs(vec![y]);
    g
}

fn ints(rng: &mut Rng, n: usize, lo: i64, hi: i64) -> Vec<f64> {
    (0..n)
        .map(|_| (lo + rng.below((hi - lo + 1) as usize) as i64) as f64)
        .collect()
}

/// Values that keep every comparison against the integers -1, 0, 1 far from a tie in any
/// dtype (so rounding to f16/bf16 flips none of them).
fn off_grid(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| rng.below(4) as f64 - 2.0 + 0.5 + rng.range(-0.3, 0.3))
        .collect()
}

fn region(g: &mut Graph, ins: &[NodeId], chain: &[ChainStep], prologue: RegionPrologue) -> NodeId {
    g.elementwise_region(ins, chain.to_vec(), prologue).unwrap()
}

#[test]
fn region_chains_with_broadcast_inputs() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_chains_with_broadcast_inputs");
    let chain = [
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Binary(BinaryOp::Add, Step(0), Input(2)),
        S::Activation(Activation::Silu, Step(1)),
        S::Binary(BinaryOp::Max, Step(2), Input(0)),
        S::Activation(Activation::Tanh, Step(3)),
        S::Binary(BinaryOp::Sub, Input(2), Step(4)),
    ];
    let shapes: [(&[usize], &[usize], &[usize]); 4] = [
        (&[2, 3, 5], &[5], &[]),
        (&[1, 9], &[4, 1], &[1]),
        (&[7, 1, 33], &[5, 33], &[7, 5, 1]),
        (&[129, 65], &[129, 65], &[129, 65]),
    ];
    for (a, b, c) in shapes {
        let feeds = vec![
            normal(&mut rng, "x0", a),
            normal(&mut rng, "x1", b),
            normal(&mut rng, "x2", c),
        ];
        let build = |dt| {
            graph(&[(a, dt), (b, dt), (c, dt)], |g, x| {
                region(g, x, &chain, NONE)
            })
        };
        for dt in FLOATS64 {
            parity(&format!("chain {a:?} {b:?} {c:?}"), &build, &feeds, dt);
        }
    }
}

#[test]
fn region_mixed_dtypes() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_mixed_dtypes");
    let (a, b, c): (&[usize], &[usize], &[usize]) = (&[9, 65], &[65], &[9, 1]);
    // compare -> where over an int cast -> square in f64 -> back to the float dtype.
    let mixed = |d: DType| {
        vec![
            S::Compare(CompareOp::Lt, Input(0), Input(1)),
            S::Cast(d, Input(2)),
            S::Where(Step(0), Step(1), Input(0)),
            S::Cast(DType::F64, Step(2)),
            S::Binary(BinaryOp::Mul, Step(3), Step(3)),
            S::Cast(d, Step(4)),
        ]
    };
    let feeds = vec![
        feed("x0", a, off_grid(&mut rng, numel(a))),
        feed("x1", b, ints(&mut rng, numel(b), -1, 1)),
        feed("x2", c, ints(&mut rng, numel(c), -3, 3)),
    ];
    let build = |d| {
        graph(&[(a, d), (b, d), (c, DType::I32)], |g, x| {
            region(g, x, &mixed(d), NONE)
        })
    };
    for dt in FLOATS64 {
        parity("mixed chain", &build, &feeds, dt);
    }
    // An integer result: float -> i32, times an i32 input, compare, u8 arithmetic.
    let chain = [
        S::Cast(DType::I32, Input(0)),
        S::Binary(BinaryOp::Mul, Step(0), Input(2)),
        S::Compare(CompareOp::Ge, Step(1), Input(2)),
        S::Cast(DType::U8, Step(1)),
        S::Binary(BinaryOp::Add, Step(3), Step(3)),
        S::Where(Step(2), Step(4), Step(3)),
    ];
    let feeds = vec![
        feed(
            "x0",
            a,
            off_grid(&mut rng, numel(a))
                .iter()
                .map(|v| 40.0 * v)
                .collect(),
        ),
        feed("x1", b, rng.normals(numel(b))),
        feed("x2", c, ints(&mut rng, numel(c), -20, 20)),
    ];
    for dt in FLOATS64 {
        let chain = &chain;
        let build = move |_: DType| {
            graph(&[(a, dt), (b, dt), (c, DType::I32)], |g, x| {
                region(g, x, chain, NONE)
            })
        };
        parity(&format!("int chain from {dt}"), &build, &feeds, DType::F32);
    }
}

#[test]
fn region_made_by_fusion() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_made_by_fusion");
    let (a, b): (&[usize], &[usize]) = (&[17, 129], &[129]);
    let feeds = vec![normal(&mut rng, "x0", a), normal(&mut rng, "x1", b)];
    // gelu(x * w + w) - sigmoid(x), fused into one region.
    let build = |dt| {
        let g = graph(&[(a, dt), (b, dt)], |g, x| {
            let m = g.mul(x[0], x[1]).unwrap();
            let s = g.add(m, x[1]).unwrap();
            let h = g.activation(Activation::Gelu, s).unwrap();
            let q = g.activation(Activation::Sigmoid, x[0]).unwrap();
            g.sub(h, q).unwrap()
        });
        let f = rlx_opt::FuseElementwise.run(&g).unwrap();
        let regions = f
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::ElementwiseRegion { .. }))
            .count();
        assert_eq!(regions, 1, "fusion made one region");
        f
    };
    for dt in FLOATS64 {
        parity("fused region", &build, &feeds, dt);
    }
}

#[test]
fn region_resize_prologue() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("region_resize_prologue");
    let x: &[usize] = &[2, 3, 5, 7];
    let chain = [
        S::Binary(BinaryOp::Add, Input(0), Input(1)),
        S::Activation(Activation::Relu, Step(0)),
    ];
    for b in [
        &[3usize, 1, 1][..],
        &[14],
        &[2, 3, 10, 14],
        &[2, 1, 1, 1, 1],
    ] {
        let feeds = vec![normal(&mut rng, "x0", x), normal(&mut rng, "x1", b)];
        let build = |dt| {
            graph(&[(x, dt), (b, dt)], |g, i| {
                region(g, i, &chain, RegionPrologue::ResizeNearest2x)
            })
        };
        for dt in FLOATS64 {
            parity(&format!("resize + {b:?}"), &build, &feeds, dt);
        }
    }
    let x: &[usize] = &[1, 4, 33, 17];
    let feeds = vec![normal(&mut rng, "x0", x)];
    let build = |dt| {
        graph(&[(x, dt)], |g, i| {
            region(
                g,
                i,
                &[S::Activation(Activation::Sigmoid, Input(0))],
                RegionPrologue::ResizeNearest2x,
            )
        })
    };
    for dt in FLOATS64 {
        parity("resize alone", &build, &feeds, dt);
    }
}

#[test]
fn batch_region_samples_and_shared_inputs() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("batch_region_samples_and_shared_inputs");
    let chain = vec![
        S::Binary(BinaryOp::Sub, Input(0), Input(1)),
        S::Binary(BinaryOp::Mul, Step(0), Input(2)),
    ];
    // (samples, sample dims, shared mean dims, prologue); 70 samples take two launches.
    let cases: [(usize, &[usize], &[usize], RegionPrologue); 4] = [
        (3, &[1, 4, 6, 5], &[4, 1, 1], NONE),
        (
            2,
            &[1, 4, 3, 5],
            &[4, 1, 1],
            RegionPrologue::ResizeNearest2x,
        ),
        (70, &[1, 4, 33], &[4, 1], NONE),
        (1, &[1, 129], &[129], NONE),
    ];
    for (nb, s, m, prologue) in cases {
        let mut feeds: Vec<Feed> = (0..nb)
            .map(|k| normal(&mut rng, &format!("s{k}"), s))
            .collect();
        feeds.push(normal(&mut rng, "mean", m));
        feeds.push(feed("scale", &[1], vec![rng.range(0.5, 2.0)]));
        let build = |dt| {
            let mut g = Graph::new("batch");
            let mut ins: Vec<NodeId> = (0..nb)
                .map(|k| input(&mut g, &format!("s{k}"), s, dt))
                .collect();
            ins.push(input(&mut g, "mean", m, dt));
            ins.push(input(&mut g, "scale", &[1], dt));
            let y = g
                .batch_elementwise_region(&ins, chain.clone(), nb, prologue)
                .unwrap();
            g.set_outputs(vec![y]);
            g
        };
        for dt in FLOATS64 {
            parity(
                &format!("batch x{nb} {s:?} {prologue:?}"),
                &build,
                &feeds,
                dt,
            );
        }
    }
}

#[test]
fn big_region_and_swiglu() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("big_region_and_swiglu");
    let (a, b): (&[usize], &[usize]) = (&[64, 257, 257], &[257]);
    let feeds = vec![normal(&mut rng, "x0", a), normal(&mut rng, "x1", b)];
    let chain = [
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Activation(Activation::GeluApprox, Step(0)),
        S::Binary(BinaryOp::Add, Step(1), Input(0)),
    ];
    let build = |dt| graph(&[(a, dt), (b, dt)], |g, x| region(g, x, &chain, NONE));
    for dt in [DType::F32, DType::BF16] {
        parity("big region", &build, &feeds, dt);
    }
    let d: &[usize] = &[1024, 8192];
    let feeds = vec![normal(&mut rng, "x0", d)];
    let build = |dt| graph(&[(d, dt)], |g, x| g.swiglu(x[0], false, None).unwrap());
    for dt in [DType::F32, DType::F16] {
        parity("big swiglu", &build, &feeds, dt);
    }
}
