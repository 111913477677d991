//! GPU parity of the elementwise and region groups: the per-op cases (Activation, Binary,
//! Compare, Where, Cast, StopGradient; ElementwiseRegion, BatchElementwiseRegion) come from
//! rlx-testutil's case tables (FusedSwiGLU's are in the transformer table); below them a region made
//! by fusion, against the CPU thunks.
mod common;
use common::*;
use rlx_ir::{Activation, DType, Graph, NodeId, Op, Shape};
use rlx_opt::Pass;

rlx_testutil::case_tests!(elementwise, cuda);
rlx_testutil::case_tests!(region, cuda);

/// Every float dtype the generated kernels compute in (f64 included).
const FLOATS64: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

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
