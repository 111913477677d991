//! Oracle tests of the region group: the per-op cases (ElementwiseRegion chains, casts,
//! compare + where, integer chains, the resize prologue, BatchElementwiseRegion) come from
//! rlx-testutil's case table, run here against their f64 oracles; below them the tests that
//! are not per-op cases (dynamic dims, the builder's errors, a region against its unfused
//! graph).
mod common;
use common::*;
use rlx_ir::ChainOperand::{Input, Step};
use rlx_ir::ChainStep as S;
use rlx_ir::RegionPrologue;
use rlx_ir::{Activation, BinaryOp, CompareOp, DType, Dim, Graph, HostTensor, NodeId, Shape};
use rlx_testutil::cases::region_oracle::upsample;
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(region, cpu);

struct Feeds {
    graph: Graph,
    feeds: Vec<(String, HostTensor)>,
}

impl Feeds {
    fn new(name: &str) -> Feeds {
        Feeds {
            graph: Graph::new(name),
            feeds: vec![],
        }
    }
    /// An input holding `v` (already rounded into `dt`).
    fn input(&mut self, shape: &[usize], v: &[f64], dt: DType) -> NodeId {
        let name = format!("in{}", self.feeds.len());
        let id = self.graph.input(&name, Shape::new(shape, dt)).unwrap();
        self.feeds
            .push((name, HostTensor::from_f64_as(shape, v, dt)));
        id
    }
    fn run(mut self, outs: Vec<NodeId>) -> Vec<HostTensor> {
        self.graph.set_outputs(outs);
        let feeds: Vec<(&str, HostTensor)> = self
            .feeds
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect();
        run(&self.graph, &feeds, &[])
    }
}

#[test]
fn dynamic_dims_infer_and_run() {
    let mut rng = Rng::new("region_dynamic");
    let mut g = Graph::new("dyn");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 6.into()], DType::F32),
        )
        .unwrap();
    let b = g.input("b", Shape::new(&[6], DType::F32)).unwrap();
    let y = g
        .elementwise_region(
            &[x, b],
            vec![S::Binary(BinaryOp::Add, Input(0), Input(1))],
            RegionPrologue::None,
        )
        .unwrap();
    assert_eq!(g.shape(y).unwrap().dims, vec![Dim::dynamic("B"), 6.into()]);
    let img = g
        .input(
            "img",
            Shape::with_dims(
                vec![1.into(), 2.into(), Dim::dynamic("H"), 3.into()],
                DType::F32,
            ),
        )
        .unwrap();
    let up = g
        .elementwise_region(
            &[img],
            vec![S::Activation(Activation::Neg, Input(0))],
            RegionPrologue::ResizeNearest2x,
        )
        .unwrap();
    assert_eq!(
        g.shape(up).unwrap().dims,
        vec![1.into(), 2.into(), Dim::dynamic("2*H"), 6.into()]
    );
    g.set_outputs(vec![y, up]);
    let xv = through(DType::F32, &rng.normals(30));
    let bv = through(DType::F32, &rng.normals(6));
    let iv = through(DType::F32, &rng.normals(18));
    let out = run(
        &g,
        &[
            ("x", HostTensor::from_f64_as(&[5, 6], &xv, DType::F32)),
            ("b", HostTensor::from_f64_as(&[6], &bv, DType::F32)),
            (
                "img",
                HostTensor::from_f64_as(&[1, 2, 3, 3], &iv, DType::F32),
            ),
        ],
        &[],
    );
    assert_eq!(out[0].shape, [5, 6]);
    let want: Vec<f64> = (0..30).map(|k| xv[k] + bv[k % 6]).collect();
    assert_close("dynamic add", &out[0], &want, DType::F32);
    assert_eq!(out[1].shape, [1, 2, 6, 6]);
    let want: Vec<f64> = upsample(&iv, &[1, 2, 3, 3]).iter().map(|v| -v).collect();
    assert_close("dynamic resize", &out[1], &want, DType::F32);
}

fn err_of(r: Result<NodeId, rlx_ir::IrError>) -> String {
    match r {
        Ok(id) => panic!("expected an error, got node {id}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_regions_are_errors() {
    let mut g = Graph::new("bad");
    let f = g.input("f", Shape::new(&[2, 3], DType::F32)).unwrap();
    let h = g.input("h", Shape::new(&[2, 3], DType::F16)).unwrap();
    let i = g.input("i", Shape::new(&[2, 3], DType::I64)).unwrap();
    let w = g.input("w", Shape::new(&[4], DType::F32)).unwrap();
    let img3 = g.input("img3", Shape::new(&[2, 3, 4], DType::F32)).unwrap();
    let none = RegionPrologue::None;
    let exp = |o| S::Activation(Activation::Exp, o);

    let e = err_of(g.elementwise_region(&[f, h], vec![exp(Input(2))], none));
    assert!(e.contains("Input(2)"), "{e}");
    let e = err_of(g.elementwise_region(&[f], vec![exp(Step(0))], none));
    assert!(e.contains("not an earlier step"), "{e}");
    let e = err_of(g.elementwise_region(
        &[f],
        vec![S::Binary(BinaryOp::Add, Input(0), Step(1)), exp(Input(0))],
        none,
    ));
    assert!(e.contains("not an earlier step"), "{e}");
    let e = err_of(g.elementwise_region(&[f], vec![], none));
    assert!(e.contains("empty"), "{e}");
    // dtype mismatches
    assert!(g
        .elementwise_region(
            &[f, i],
            vec![S::Binary(BinaryOp::Mul, Input(0), Input(1))],
            none
        )
        .is_err());
    assert!(g
        .elementwise_region(
            &[f, h],
            vec![S::Compare(CompareOp::Lt, Input(0), Input(1))],
            none
        )
        .is_err());
    assert!(g
        .elementwise_region(
            &[i, f, h],
            vec![S::Where(Input(0), Input(1), Input(2))],
            none
        )
        .is_err());
    assert!(g
        .elementwise_region(&[i], vec![exp(Input(0))], none)
        .is_err());
    assert!(g
        .elementwise_region(
            &[f],
            vec![S::Cast(DType::I32, Input(0)), exp(Step(0))],
            none
        )
        .is_err());
    // shapes
    assert!(g
        .elementwise_region(&[f, w], vec![exp(Input(0))], none)
        .is_err());
    assert!(g
        .elementwise_region(&[], vec![exp(Input(0))], none)
        .is_err());
    assert!(g
        .elementwise_region(
            &[img3],
            vec![exp(Input(0))],
            RegionPrologue::ResizeNearest2x
        )
        .is_err());
    assert!(g
        .elementwise_region(&[f, NodeId(999)], vec![exp(Input(0))], none)
        .is_err());

    // batch regions
    let s1 = g.input("s1", Shape::new(&[1, 3], DType::F32)).unwrap();
    let s2 = g.input("s2", Shape::new(&[1, 3], DType::F32)).unwrap();
    let s4 = g.input("s4", Shape::new(&[1, 4], DType::F32)).unwrap();
    let s1h = g.input("s1h", Shape::new(&[1, 3], DType::F16)).unwrap();
    let wide = g.input("wide", Shape::new(&[5, 3], DType::F32)).unwrap();
    let add01 = vec![S::Binary(BinaryOp::Add, Input(0), Input(1))];
    assert!(g
        .batch_elementwise_region(&[s1, s2], vec![exp(Input(0))], 0, none)
        .is_err());
    assert!(g
        .batch_elementwise_region(&[s1, s2], vec![exp(Input(0))], 3, none)
        .is_err());
    assert!(
        g.batch_elementwise_region(&[f, f], vec![exp(Input(0))], 2, none)
            .is_err(),
        "samples must be [1, ..]"
    );
    assert!(
        g.batch_elementwise_region(&[s1, s4], vec![exp(Input(0))], 2, none)
            .is_err(),
        "samples of different shapes"
    );
    assert!(
        g.batch_elementwise_region(&[s1, s1h], vec![exp(Input(0))], 2, none)
            .is_err(),
        "samples of different dtypes"
    );
    // Input(1) is the first shared input; with none shared it does not exist.
    let e = err_of(g.batch_elementwise_region(&[s1, s2], add01.clone(), 2, none));
    assert!(e.contains("Input(1)"), "{e}");
    assert!(
        g.batch_elementwise_region(&[s1, s2, wide], add01.clone(), 2, none)
            .is_err(),
        "a shared input may not widen axis 0"
    );
    assert!(g
        .batch_elementwise_region(&[s1, s2], vec![], 2, none)
        .is_err());
    // The well-formed versions build.
    let ok = g
        .batch_elementwise_region(&[s1, s2, w], vec![exp(Input(0))], 2, none)
        .map(|id| g.shape(id).unwrap().clone());
    assert!(ok.is_err(), "shared [4] does not broadcast with [1, 3]");
    let good = g
        .batch_elementwise_region(&[s1, s2, s1], add01, 2, none)
        .unwrap();
    assert_eq!(g.shape(good).unwrap(), &Shape::new(&[2, 3], DType::F32));
}

/// Fusion relies on this: a region gives bit for bit what its unfused ops give (each step
/// settles into its dtype exactly as the executor settles each op's output). The values
/// themselves are checked against f64 oracles above.
#[test]
fn region_matches_its_unfused_graph_exactly() {
    let mut rng = Rng::new("region_equals_unfused");
    let chain = vec![
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Activation(Activation::Gelu, Step(0)),
        S::Cast(DType::BF16, Step(1)),
        S::Cast(DType::F16, Step(2)),
        S::Compare(CompareOp::Lt, Step(3), Input(0)),
        S::Where(Step(4), Step(3), Input(1)),
        S::Cast(DType::I32, Step(5)),
        S::Cast(DType::F16, Step(6)),
        S::Binary(BinaryOp::Add, Step(7), Step(5)),
    ];
    let (sa, sb) = ([3usize, 1, 11], [5usize, 1]);
    let a = through(
        DType::F16,
        &(0..33).map(|_| 3.0 * rng.normal()).collect::<Vec<_>>(),
    );
    let b = through(
        DType::F16,
        &(0..5).map(|_| 3.0 * rng.normal()).collect::<Vec<_>>(),
    );
    let mut f = Feeds::new("fused_vs_unfused");
    let ai = f.input(&sa, &a, DType::F16);
    let bi = f.input(&sb, &b, DType::F16);
    let fused = f
        .graph
        .elementwise_region(&[ai, bi], chain.clone(), RegionPrologue::None)
        .unwrap();
    let g = &mut f.graph;
    let mut steps: Vec<NodeId> = vec![];
    for step in &chain {
        let node = |o: &rlx_ir::ChainOperand| match *o {
            Input(0) => ai,
            Input(_) => bi,
            Step(j) => steps[j],
        };
        let id = match step {
            S::Activation(act, x) => g.activation(*act, node(x)),
            S::Binary(op, x, y) => g.binary(*op, node(x), node(y)),
            S::Cast(to, x) => g.cast(node(x), *to),
            S::Compare(op, x, y) => g.add_node(rlx_ir::Op::Compare(*op), &[node(x), node(y)]),
            S::Where(c, x, y) => g.add_node(rlx_ir::Op::Where, &[node(c), node(x), node(y)]),
        }
        .unwrap();
        steps.push(id);
    }
    let last = steps[steps.len() - 1];
    let out = f.run(vec![fused, last]);
    assert_eq!(out[0].shape, [3, 5, 11]);
    assert_eq!(out[0], out[1]);
}
