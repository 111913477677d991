//! The collectives on simulated ranks (`LocalGroup`, a thread per rank) against an f64
//! oracle written out here: random values per rank, 1 to 4 ranks, every reduction, float and
//! integer dtypes, leading and inner axes. Plus the failure paths: a group of one without a
//! communicator, a rank that fails (the others must not hang), ranks whose graphs differ.
use rlx_cpu::{Communicator, CpuExecutable, LocalGroup};
use rlx_ir::{CollectiveReduce, DType, Graph, HostTensor, Shape};
use rlx_testutil::{rel_l2, Rng};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
enum Coll {
    AllReduce(CollectiveReduce),
    AllGather(usize),
    ReduceScatter(CollectiveReduce, usize),
}

fn graph(c: Coll, dims: &[usize], dtype: DType, ranks: usize) -> Graph {
    let mut g = Graph::new("coll");
    let x = g.input("x", Shape::new(dims, dtype)).unwrap();
    let y = match c {
        Coll::AllReduce(r) => g.all_reduce(x, r),
        Coll::AllGather(axis) => g.all_gather(x, axis, ranks),
        Coll::ReduceScatter(r, axis) => g.reduce_scatter(x, r, axis, ranks),
    }
    .unwrap();
    g.set_outputs(vec![y]);
    g
}

/// Row-major index helpers for the oracle: `(outer, axis, inner)` of `dims` at `axis`.
fn split(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        dims[..axis].iter().product(),
        dims[axis],
        dims[axis + 1..].iter().product(),
    )
}

fn reduce(vals: &[f64], r: CollectiveReduce) -> f64 {
    match r {
        CollectiveReduce::Sum => vals.iter().sum(),
        CollectiveReduce::Mean => vals.iter().sum::<f64>() / vals.len() as f64,
        CollectiveReduce::Max => vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// What rank `rank` must get, from every rank's input.
fn oracle(c: Coll, dims: &[usize], xs: &[Vec<f64>], rank: usize) -> Vec<f64> {
    let n = xs[0].len();
    let ranks = xs.len();
    let reduced = |r: CollectiveReduce| -> Vec<f64> {
        (0..n)
            .map(|i| reduce(&xs.iter().map(|x| x[i]).collect::<Vec<_>>(), r))
            .collect()
    };
    match c {
        Coll::AllReduce(r) => reduced(r),
        Coll::AllGather(axis) => {
            let (outer, len, inner) = split(dims, axis);
            let mut out = Vec::with_capacity(n * ranks);
            for o in 0..outer {
                for x in xs {
                    out.extend_from_slice(&x[o * len * inner..(o + 1) * len * inner]);
                }
            }
            out
        }
        Coll::ReduceScatter(r, axis) => {
            let full = reduced(r);
            let (outer, len, inner) = split(dims, axis);
            let piece = len / ranks;
            let mut out = Vec::new();
            for o in 0..outer {
                for a in rank * piece..(rank + 1) * piece {
                    let at = (o * len + a) * inner;
                    out.extend_from_slice(&full[at..at + inner]);
                }
            }
            out
        }
    }
}

/// Run `g` on `ranks` simulated ranks, rank r fed `xs[r]`.
fn run_group(g: &Graph, dims: &[usize], dtype: DType, xs: &[Vec<f64>]) -> Vec<HostTensor> {
    let comms = LocalGroup::with_timeout(xs.len(), Duration::from_secs(60));
    std::thread::scope(|s| {
        let hs: Vec<_> = (comms.into_iter().zip(xs))
            .map(|(c, x)| {
                let g = g.clone();
                s.spawn(move || {
                    let mut exe = CpuExecutable::new(g).unwrap();
                    exe.set_communicator(Arc::new(c));
                    let t = HostTensor::from_f64_as(dims, x, dtype);
                    exe.run(&[("x", t)]).unwrap().remove(0)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Values of `dtype` the rank's input holds: integers as whole numbers, halves rounded.
fn values(rng: &mut Rng, n: usize, dtype: DType) -> Vec<f64> {
    let raw = rng.normals(n);
    let t = HostTensor::from_f64_as(
        &[n],
        &raw.iter().map(|v| v * 20.0).collect::<Vec<_>>(),
        dtype,
    );
    t.to_f64_vec()
}

#[test]
fn collectives_match_the_f64_oracle() {
    let mut rng = Rng::new("collectives_match_the_f64_oracle");
    let mut cases = 0;
    for ranks in 1..=4usize {
        for dtype in [DType::F32, DType::F64, DType::F16, DType::I64, DType::I32] {
            let reductions: Vec<CollectiveReduce> = if dtype.is_float() {
                CollectiveReduce::ALL.to_vec()
            } else {
                vec![CollectiveReduce::Sum, CollectiveReduce::Max]
            };
            // [outer, ranks·k, inner]: the axis divides for ReduceScatter; axis 0 and 1 both
            // exercised (NCCL's contiguous case and the strided one).
            let k = 1 + rng.below(3);
            let dims = [2 + rng.below(3), ranks * k, 1 + rng.below(4)];
            let n: usize = dims.iter().product();
            let mut colls: Vec<Coll> =
                vec![Coll::AllGather(0), Coll::AllGather(1), Coll::AllGather(2)];
            for &r in &reductions {
                colls.extend([Coll::AllReduce(r), Coll::ReduceScatter(r, 1)]);
            }
            for c in colls {
                let xs: Vec<Vec<f64>> = (0..ranks).map(|_| values(&mut rng, n, dtype)).collect();
                let g = graph(c, &dims, dtype, ranks);
                let outs = run_group(&g, &dims, dtype, &xs);
                for (rank, out) in outs.iter().enumerate() {
                    let want = oracle(c, &dims, &xs, rank);
                    // The oracle's values rounded to the dtype, as the op's output is.
                    let want = HostTensor::from_f64_as(&[want.len()], &want, dtype).to_f64_vec();
                    let got = out.to_f64_vec();
                    assert_eq!(got.len(), want.len(), "{c:?} {dtype} ranks {ranks}");
                    let tol = if dtype == DType::F16 { 1e-3 } else { 1e-6 };
                    let err = rel_l2(&got, &want);
                    assert!(
                        err <= tol && got.iter().all(|v| !v.is_nan()),
                        "{c:?} {dtype} ranks {ranks} rank {rank}: rel-L2 {err:.3e}"
                    );
                }
                // Every rank of an all-reduce / all-gather holds the same bits.
                if matches!(c, Coll::AllReduce(_) | Coll::AllGather(_)) {
                    assert!(outs.iter().all(|o| o.data == outs[0].data), "{c:?} {dtype}");
                }
                cases += 1;
            }
        }
    }
    println!("{cases} collective cases over 1–4 ranks");
    assert!(cases > 100);
}

#[test]
fn a_group_of_one_needs_no_communicator() {
    let mut rng = Rng::new("a_group_of_one_needs_no_communicator");
    let x = values(&mut rng, 12, DType::F32);
    for c in [
        Coll::AllReduce(CollectiveReduce::Mean),
        Coll::AllGather(1),
        Coll::ReduceScatter(CollectiveReduce::Sum, 0),
    ] {
        let mut exe = CpuExecutable::new(graph(c, &[3, 4], DType::F32, 1)).unwrap();
        let out = exe.run(&[("x", HostTensor::from_f64_as(&[3, 4], &x, DType::F32))]);
        assert_eq!(out.unwrap()[0].to_f64_vec(), x, "{c:?}");
    }
    // A gather over 2 ranks cannot run without a group of 2: an error naming the node.
    let mut exe = CpuExecutable::new(graph(Coll::AllGather(0), &[3, 4], DType::F32, 2)).unwrap();
    let e = exe
        .run(&[("x", HostTensor::from_f64_as(&[3, 4], &x, DType::F32))])
        .unwrap_err()
        .to_string();
    assert!(e.contains("AllGather") && e.contains("2 ranks"), "{e}");
}

#[test]
fn a_failed_rank_aborts_the_others() {
    // Rank 1 fails before its collective; rank 0 must return an error, not wait forever.
    let g = graph(Coll::AllReduce(CollectiveReduce::Sum), &[4], DType::F32, 2);
    let comms = LocalGroup::with_timeout(2, Duration::from_secs(60));
    let (c0, c1) = (comms[0].clone(), comms[1].clone());
    let t0 = std::time::Instant::now();
    let r0 = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let mut exe = CpuExecutable::new(g.clone()).unwrap();
            exe.set_communicator(Arc::new(c0));
            exe.run(&[("x", HostTensor::from_f32(&[4], &[1.0, 2.0, 3.0, 4.0]))])
        });
        std::thread::sleep(Duration::from_millis(50));
        c1.abort("rank 1 failed to load its weights");
        h.join().unwrap()
    });
    let e = r0.unwrap_err().to_string();
    assert!(e.contains("aborted") && e.contains("rank 1 failed"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[test]
fn ranks_that_reach_different_collectives_are_an_error() {
    let comms = LocalGroup::with_timeout(2, Duration::from_secs(60));
    let graphs = [
        graph(Coll::AllReduce(CollectiveReduce::Sum), &[4], DType::F32, 2),
        graph(Coll::AllGather(0), &[4], DType::F32, 2),
    ];
    let errs: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (comms.into_iter().zip(graphs))
            .map(|(c, g)| {
                s.spawn(move || {
                    let mut exe = CpuExecutable::new(g).unwrap();
                    exe.set_communicator(Arc::new(c));
                    let x = HostTensor::from_f32(&[4], &[1.0, -2.0, 0.5, 3.0]);
                    exe.run(&[("x", x)]).unwrap_err().to_string()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for e in &errs {
        assert!(e.contains("reached"), "{e}");
    }
}

#[test]
fn a_rank_that_never_comes_times_out() {
    let comms = LocalGroup::with_timeout(2, Duration::from_millis(200));
    let e = comms[0]
        .exchange("AllReduce n1", rlx_cpu::Storage::F32(vec![1.0]))
        .unwrap_err();
    assert!(e.to_string().contains("waited"), "{e}");
    // The group is aborted for the late rank too.
    let e = comms[1]
        .exchange("AllReduce n1", rlx_cpu::Storage::F32(vec![1.0]))
        .unwrap_err();
    assert!(e.to_string().contains("aborted"), "{e}");
}
