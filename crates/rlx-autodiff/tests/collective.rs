//! Gradients of the collectives by finite differences over simulated ranks. Each rank's
//! loss is `Σ c_r ⊙ coll(x_r)` with its own random weights `c_r`; the function checked is
//! the sum of every rank's loss (what the VJPs differentiate), perturbing one element of
//! one rank's input at a time. f64 throughout, so central differences are exact to ~1e-9.
use rlx_autodiff::grad_with_loss;
use rlx_ir::{CollectiveReduce, DType, Graph, HostTensor, Shape};
use rlx_runtime::Mesh;
use rlx_testutil::{rel_l2, Rng};

#[derive(Clone, Copy, Debug)]
enum Coll {
    AllReduce(CollectiveReduce),
    AllGather(usize),
    ReduceScatter(CollectiveReduce, usize),
}

/// `loss = Σ c ⊙ coll(x)` and its gradient in x; c has coll(x)'s shape.
fn graph(c: Coll, dims: &[usize], ranks: usize) -> (Graph, Vec<usize>) {
    let mut g = Graph::new("coll_grad");
    let x = g.input("x", Shape::new(dims, DType::F64)).unwrap();
    let y = match c {
        Coll::AllReduce(r) => g.all_reduce(x, r),
        Coll::AllGather(axis) => g.all_gather(x, axis, ranks),
        Coll::ReduceScatter(r, axis) => g.reduce_scatter(x, r, axis, ranks),
    }
    .unwrap();
    let ydims = g.shape(y).unwrap().static_dims().unwrap();
    let w = g.input("c", Shape::new(&ydims, DType::F64)).unwrap();
    let p = g.mul(y, w).unwrap();
    let axes: Vec<i64> = (0..dims.len() as i64).collect();
    let l = g.reduce(p, rlx_ir::ReduceOp::Sum, &axes, false).unwrap();
    let l = g.reshape(l, &[1]).unwrap();
    g.set_outputs(vec![l]);
    let x = g
        .nodes
        .iter()
        .find(|n| n.name.as_deref() == Some("x"))
        .map(|n| n.id);
    (grad_with_loss(&g, &[x.unwrap()]).unwrap(), ydims)
}

/// Every rank's (loss, dx) for inputs `xs` and weights `cs`.
fn run(
    mesh: &Mesh,
    g: &Graph,
    dims: &[usize],
    ydims: &[usize],
    xs: &[Vec<f64>],
    cs: &[Vec<f64>],
) -> Vec<(f64, Vec<f64>)> {
    mesh.run(|r, s| -> Result<(f64, Vec<f64>), rlx_runtime::Error> {
        let exe = s.compile(g.clone())?;
        let out = exe.run_typed(&[
            ("x", HostTensor::from_f64_as(dims, &xs[r], DType::F64)),
            ("c", HostTensor::from_f64_as(ydims, &cs[r], DType::F64)),
        ])?;
        Ok((out[0].to_f64_vec()[0], out[1].to_f64_vec()))
    })
    .unwrap()
}

#[test]
fn collective_gradients_match_finite_differences() {
    let mut rng = Rng::new("collective_gradients_match_finite_differences");
    let mut checked = 0;
    for ranks in [1usize, 2, 3] {
        let mesh = Mesh::cpu(ranks).unwrap();
        let dims = [2, 2 * ranks, 3];
        let n: usize = dims.iter().product();
        for c in [
            Coll::AllReduce(CollectiveReduce::Sum),
            Coll::AllReduce(CollectiveReduce::Mean),
            Coll::AllGather(0),
            Coll::AllGather(1),
            Coll::ReduceScatter(CollectiveReduce::Sum, 1),
            Coll::ReduceScatter(CollectiveReduce::Mean, 1),
        ] {
            let (g, ydims) = graph(c, &dims, ranks);
            let m: usize = ydims.iter().product();
            let xs: Vec<Vec<f64>> = (0..ranks).map(|_| rng.normals(n)).collect();
            let cs: Vec<Vec<f64>> = (0..ranks).map(|_| rng.normals(m)).collect();
            let base = run(&mesh, &g, &dims, &ydims, &xs, &cs);
            let h = 1e-5;
            let total = |xs: &[Vec<f64>]| -> f64 {
                run(&mesh, &g, &dims, &ydims, xs, &cs)
                    .iter()
                    .map(|(l, _)| l)
                    .sum()
            };
            for s in 0..ranks {
                let mut fd = Vec::with_capacity(n);
                for i in 0..n {
                    let mut up = xs.clone();
                    up[s][i] += h;
                    let mut dn = xs.clone();
                    dn[s][i] -= h;
                    fd.push((total(&up) - total(&dn)) / (2.0 * h));
                }
                let err = rel_l2(&base[s].1, &fd);
                assert!(err < 1e-7, "{c:?} ranks {ranks} rank {s}: rel-L2 {err:.3e}");
                checked += 1;
            }
        }
    }
    println!("{checked} (collective, rank) gradients checked");
}

#[test]
fn a_max_collective_has_no_gradient() {
    let mut g = Graph::new("max");
    let x = g.input("x", Shape::new(&[3], DType::F32)).unwrap();
    let y = g.all_reduce(x, CollectiveReduce::Max).unwrap();
    let l = g.reduce(y, rlx_ir::ReduceOp::Sum, &[0], true).unwrap();
    g.set_outputs(vec![l]);
    let e = grad_with_loss(&g, &[x]).unwrap_err().to_string();
    assert!(e.contains("Max"), "{e}");
}
