//! Oracle tests of the shape group: the per-op cases (Reshape, Expand, Transpose, Narrow,
//! Concat, Gather, Pad, Slice) come from rlx-testutil's case table, run here against their
//! f64 oracles; below them the tests that are not per-op cases (a run error, TransformRegion,
//! dynamic and symbolic dims, bad builds).
mod common;
use common::*;
use rlx_ir::{DType, Dim, Graph, HostTensor, Shape, TransformStep};
use rlx_testutil::cases::shape::{ravel, unravel, DTYPES};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(shape, cpu);

/// Random values that every dtype holds: integers for int dtypes, normals otherwise.
fn values(rng: &mut Rng, n: usize, dt: DType) -> Vec<f64> {
    if dt.is_float() {
        through(dt, &rng.normals(n))
    } else {
        (0..n).map(|_| rng.below(2001) as f64 - 1000.0).collect()
    }
}

/// Build a one-input graph with `f`, run it on `x` and return the single output.
fn run_one(
    shape: &[usize],
    dt: DType,
    x: &[f64],
    f: impl FnOnce(&mut Graph, rlx_ir::NodeId) -> rlx_ir::NodeId,
) -> HostTensor {
    let mut g = Graph::new("t");
    let i = g.input("x", Shape::new(shape, dt)).unwrap();
    let o = f(&mut g, i);
    g.set_outputs(vec![o]);
    let mut out = run(&g, &[("x", HostTensor::from_f64_as(shape, x, dt))], &[]);
    out.remove(0)
}

fn check(what: &str, got: &HostTensor, shape: &[usize], want: &[f64], dt: DType) {
    assert_eq!(got.shape, shape, "{what}: shape");
    assert_eq!(got.dtype, dt, "{what}: dtype");
    // Data movement must be exact whatever the dtype.
    assert_eq!(got.to_f64_vec(), want, "{what} ({dt})");
}

#[test]
fn gather_index_out_of_range_is_a_run_error() {
    let mut g = Graph::new("gather");
    let d = g.input("x", Shape::new(&[3, 4], DType::F32)).unwrap();
    let i = g.input("i", Shape::new(&[2], DType::I64)).unwrap();
    let o = g.gather(d, i, 1).unwrap();
    g.set_outputs(vec![o]);
    for bad in [4i64, -5] {
        let ins = [
            ("x", HostTensor::from_f32(&[3, 4], &[0.5; 12])),
            ("i", HostTensor::from_i64(&[2], &[1, bad])),
        ];
        let err = rlx_cpu::run_graph(&g, &[], &ins).expect_err("out-of-range index");
        assert!(
            err.to_string().contains(&format!("index {bad}")),
            "message should name the index: {err}"
        );
    }
}

#[test]
fn transform_region_chain_matches_separate_ops() {
    let mut rng = Rng::new("transform_region_chain_matches_separate_ops");
    let shape = [2usize, 6, 5];
    let steps = vec![
        TransformStep::Reshape(vec![0, 3, -1]),
        TransformStep::Transpose(vec![2, 0, 1]),
        TransformStep::Narrow {
            axis: 0,
            start: 1,
            len: 7,
        },
        TransformStep::Reshape(vec![7, 1, 2, 3]),
        TransformStep::Expand(vec![Dim::Static(7), Dim::Static(4), 2.into(), 3.into()]),
    ];
    for dt in DTYPES {
        let x = values(&mut rng, 60, dt);
        let out = run_one(&shape, dt, &x, |g, i| {
            g.transform_region(i, steps.clone()).unwrap()
        });
        // Oracle: [2,6,5] -> [2,3,10] -> [10,2,3] -> rows 1..8 -> [7,1,2,3] -> [7,4,2,3].
        let os = [7usize, 4, 2, 3];
        let want: Vec<f64> = (0..os.iter().product())
            .map(|k| {
                let o = unravel(k, &os);
                let (t0, t1, t2) = (o[0] + 1, o[2], o[3]);
                // Element [t0, t1, t2] of the transposed [10,2,3] is [t1, t2, t0] of [2,3,10].
                x[ravel(&[t1, t2, t0], &[2, 3, 10])]
            })
            .collect();
        check("transform chain", &out, &os, &want, dt);
    }
    let mut g = Graph::new("bad");
    let i = g.input("x", Shape::new(&shape, DType::F32)).unwrap();
    let bad = vec![
        TransformStep::Reshape(vec![-1]),
        TransformStep::Transpose(vec![1, 0]),
    ];
    assert!(
        g.transform_region(i, bad).is_err(),
        "a bad step is a build error"
    );
}

#[test]
fn dynamic_batch_replans_with_new_bindings() {
    let mut rng = Rng::new("dynamic_batch_replans_with_new_bindings");
    let mut g = Graph::new("dyn");
    let b = Dim::dynamic("B");
    let x = g
        .input("x", Shape::with_dims(vec![b.clone(), 6.into()], DType::F32))
        .unwrap();
    let r = g.reshape(x, &[0, 2, 3]).unwrap();
    assert_eq!(
        g.shape(r).unwrap().dims,
        vec![b.clone(), 2.into(), 3.into()]
    );
    let t = g.transpose(r, &[0, 2, 1]).unwrap();
    let f = g.reshape(t, &[0, -1]).unwrap();
    assert_eq!(g.shape(f).unwrap().dims, vec![b.clone(), 6.into()]);
    let flat = g.reshape(t, &[-1]).unwrap();
    assert!(g.shape(flat).unwrap().dims[0].as_static().is_none());
    let s = g.slice(f, &[0], &[-1], &[i64::MIN], &[-1]).unwrap();
    g.set_outputs(vec![s, flat]);
    let mut exe = rlx_cpu::CpuExecutable::new(g).unwrap();
    for batch in [2usize, 5, 2] {
        let v = rng.normals(batch * 6);
        let out = exe
            .run(&[("x", HostTensor::from_f64_as(&[batch, 6], &v, DType::F32))])
            .unwrap();
        let v = through(DType::F32, &v);
        // Row r of the result is input row (batch-1-r) read as [2,3] transposed.
        let mut want = vec![];
        for r in 0..batch {
            let row = batch - 1 - r;
            for j in 0..3 {
                for i in 0..2 {
                    want.push(v[row * 6 + i * 3 + j]);
                }
            }
        }
        assert_eq!(out[0].shape, vec![batch, 6]);
        assert_eq!(out[1].shape, vec![batch * 6]);
        assert_close(&format!("batch {batch}"), &out[0], &want, DType::F32);
    }
}

#[test]
fn shape_builders_reject_bad_params() {
    let mut g = Graph::new("bad");
    let x = g.input("x", Shape::new(&[3, 4], DType::F32)).unwrap();
    let y = g.input("y", Shape::new(&[3, 5], DType::F32)).unwrap();
    let yi = g.input("yi", Shape::new(&[3, 4], DType::I64)).unwrap();
    assert!(g.transpose(x, &[0, 0]).is_err(), "repeated perm");
    assert!(g.transpose(x, &[1]).is_err(), "short perm");
    assert!(g.transpose(x, &[0, 2]).is_err(), "perm out of range");
    assert!(g.reshape(x, &[5, 3]).is_err(), "size mismatch");
    assert!(g.reshape(x, &[-1, -1]).is_err(), "two -1");
    assert!(g.reshape(x, &[-1, 5]).is_err(), "-1 does not divide");
    assert!(g.reshape(x, &[0, 0, 0]).is_err(), "0 past the input rank");
    assert!(g.concat(&[x, y], 0).is_err(), "concat dim mismatch");
    assert!(g.concat(&[x, yi], 0).is_err(), "concat dtype mismatch");
    assert!(g.concat(&[], 0).is_err(), "concat of nothing");
    assert!(g.concat(&[x, y], 2).is_err(), "concat axis out of range");
    assert!(g.narrow(x, 2, 0, 1).is_err(), "narrow axis out of range");
    assert!(g.narrow(x, 1, 2, 3).is_err(), "narrow past the end");
    assert!(g.gather(x, yi, -3).is_err(), "gather axis out of range");
    assert!(g.expand_to(x, &[2, 5, 4]).is_err(), "expand 3 to 5");
    assert!(g.pad(x, vec![[1, 1]], 0.0).is_err(), "pad rank mismatch");
    assert!(g.slice(x, &[0], &[0], &[2], &[0]).is_err(), "zero step");
    assert!(
        g.slice(x, &[0, 0], &[0, 1], &[2, 3], &[]).is_err(),
        "repeated axis"
    );
    assert!(
        g.slice(x, &[2], &[0], &[1], &[]).is_err(),
        "slice axis out of range"
    );
    assert!(g.concat(&[x, y], 1).is_ok());
}

#[test]
fn symbolic_shape_rules() {
    let (b, s) = (Dim::dynamic("B"), Dim::dynamic("S"));
    let mut g = Graph::new("sym");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![b.clone(), s.clone(), 4.into()], DType::F32),
        )
        .unwrap();
    let dims = |g: &Graph, id| g.shape(id).unwrap().dims.clone();
    // -1 resolves to a symbol when the remaining factor is exactly one symbol.
    let r = g.reshape(x, &[0, 4, -1]).unwrap();
    assert_eq!(dims(&g, r), vec![b.clone(), 4.into(), s.clone()]);
    let r = g.reshape(x, &[-1, 0, 4]).unwrap();
    assert_eq!(dims(&g, r), vec![b.clone(), s.clone(), 4.into()]);
    // Otherwise it is a new symbol, and it still runs once B and S are bound.
    let r = g.reshape(x, &[0, -1]).unwrap();
    assert_eq!(dims(&g, r)[0], b);
    assert!(dims(&g, r)[1].as_static().is_none());
    let c = g.concat(&[x, x], 1).unwrap();
    assert!(dims(&g, c)[1].as_static().is_none());
    assert_eq!(dims(&g, c)[2], Dim::Static(4));
    let p = g.pad(x, vec![[0, 0], [1, 1], [0, 2]], 0.0).unwrap();
    assert_eq!(dims(&g, p)[2], Dim::Static(6));
    let e = g
        .expand(x, vec![2.into(), b.clone(), 1.into(), 4.into()])
        .unwrap();
    assert_eq!(dims(&g, e), vec![2.into(), b.clone(), s.clone(), 4.into()]);
    let steps = vec![
        TransformStep::Reshape(vec![0, 0, 1, 4]),
        TransformStep::Expand(vec![b.clone(), s.clone(), 3.into(), 4.into()]),
    ];
    let tr = g.transform_region(x, steps).unwrap();
    assert_eq!(dims(&g, tr), vec![b.clone(), s.clone(), 3.into(), 4.into()]);
    g.set_outputs(vec![r, c, p, e, tr]);
    let mut rng = Rng::new("symbolic_shape_rules");
    let mut exe = rlx_cpu::CpuExecutable::new(g).unwrap();
    for (bb, ss) in [(2usize, 3usize), (1, 5)] {
        let v = rng.normals(bb * ss * 4);
        let out = exe
            .run(&[("x", HostTensor::from_f64_as(&[bb, ss, 4], &v, DType::F32))])
            .unwrap();
        let v = through(DType::F32, &v);
        assert_eq!(out[0].shape, vec![bb, ss * 4]);
        assert_close("reshape [0,-1]", &out[0], &v, DType::F32);
        assert_eq!(out[1].shape, vec![bb, 2 * ss, 4]);
        assert_eq!(out[2].shape, vec![bb, ss + 2, 6]);
        // Symbols inside Expand targets are bound per run too.
        assert_eq!(out[3].shape, vec![2, bb, ss, 4]);
        let twice: Vec<f64> = v.iter().chain(&v).cloned().collect();
        assert_close("expand [2,B,1,4]", &out[3], &twice, DType::F32);
        assert_eq!(out[4].shape, vec![bb, ss, 3, 4]);
        let want: Vec<f64> = (0..bb * ss * 12).map(|k| v[(k / 12) * 4 + k % 4]).collect();
        assert_close("region expand [B,S,3,4]", &out[4], &want, DType::F32);
    }
}
