//! Collectives on the GPU through NCCL. One GPU is one rank: the group here has a single
//! rank, so each collective's value is its input's, and what is checked is the plumbing
//! around it — the NCCL call's pointers, counts and types, its capture into the CUDA graph
//! between kernels that produce and consume its buffers, the strided path of a gather or
//! scatter along an inner axis, replays with new inputs — against the CPU reference. The
//! arithmetic over several ranks is the CPU reference's (`rlx-cpu/tests/collective.rs`).
mod common;
use common::*;
use rlx_cuda::{CudaExecutable, CudaOptions, NcclComm, Precision};
use rlx_ir::*;

/// `y = coll(tanh(x·w)) · 2`, so kernels run before and after the collective.
fn graph(c: &Op, dt: DType) -> Graph {
    let mut g = Graph::new("coll");
    let x = g.input("x", Shape::new(&[6, 16], dt)).unwrap();
    let w = g.param("w", Shape::new(&[16, 8], dt)).unwrap();
    let h = g.matmul(x, w).unwrap();
    let h = g.activation(Activation::Tanh, h).unwrap();
    let y = g.add_node(c.clone(), &[h]).unwrap();
    let two = g.scalar(2.0, dt).unwrap();
    let y = g.mul(y, two).unwrap();
    g.set_outputs(vec![y]);
    g
}

fn ops() -> Vec<Op> {
    let mut v = vec![];
    for reduce in CollectiveReduce::ALL {
        v.push(Op::AllReduce { reduce });
        for axis in [0, 1] {
            v.push(Op::ReduceScatter {
                reduce,
                axis,
                ranks: 1,
            });
        }
    }
    v.extend([0, 1].map(|axis| Op::AllGather { axis, ranks: 1 }));
    v
}

#[test]
fn nccl_collectives_of_one_rank_match_the_cpu() {
    if !gpu() {
        return;
    }
    let version = rlx_cuda::nccl::version().expect("NCCL must load on a CUDA machine");
    println!("NCCL {version}");
    let comm = NcclComm::init_all(&[0])
        .expect("ncclCommInitAll on cuda:0")
        .remove(0);
    let mut rng = Rng::new("nccl_collectives_of_one_rank_match_the_cpu");
    let mut checked = 0;
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for op in ops() {
            let g = graph(&op, dt);
            for cuda_graph in [true, false] {
                let mut o = CudaOptions::strict();
                o.cuda_graph = cuda_graph;
                let mut exe =
                    CudaExecutable::new_rank(g.clone(), 0, o, Some(comm.clone())).unwrap();
                let native = exe
                    .dispatch()
                    .iter()
                    .all(|(_, k, why)| why.is_none() || k.is_leaf());
                assert!(native, "{op:?}: {:?}", exe.dispatch());
                // Replays with fresh inputs: the captured NCCL call reads the new values.
                for _ in 0..3 {
                    let feeds = vec![
                        normal(&mut rng, "x", &[6, 16]),
                        normal(&mut rng, "w", &[16, 8]),
                    ];
                    let got = run_gpu_exe(&mut exe, &g, &feeds);
                    let want = run_cpu(&g, &feeds);
                    compare(
                        &format!("{op:?} {dt} graph={cuda_graph}"),
                        &got[0],
                        &want[0],
                        tol(dt, Precision::F32),
                    );
                    checked += 1;
                }
            }
        }
    }
    println!("{checked} NCCL runs checked");
}

#[test]
fn without_a_communicator_a_group_of_one_is_a_copy() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("without_a_communicator_a_group_of_one_is_a_copy");
    for op in ops() {
        let g = graph(&op, DType::F32);
        let mut exe = compile_gpu(&g, CudaOptions::strict());
        let feeds = vec![
            normal(&mut rng, "x", &[6, 16]),
            normal(&mut rng, "w", &[16, 8]),
        ];
        let got = run_gpu_exe(&mut exe, &g, &feeds);
        compare(&format!("{op:?}"), &got[0], &run_cpu(&g, &feeds)[0], 1e-5);
    }
}

#[test]
fn a_communicator_of_another_gpu_is_refused() {
    if !gpu() {
        return;
    }
    let comm = NcclComm::init_all(&[0]).unwrap().remove(0);
    let g = graph(
        &Op::AllReduce {
            reduce: CollectiveReduce::Sum,
        },
        DType::F32,
    );
    let e = CudaExecutable::new_rank(g, 1, CudaOptions::strict(), Some(comm));
    assert!(e.is_err());
}

/// Collectives beside the main stream: three all-reduces of intermediate values while
/// independent kernels run on, their inputs' arena slots free for reuse once read, and
/// the results consumed late (as a data-parallel backward pass does with its buckets).
/// Captured or not, every replay matches the CPU.
#[test]
fn collectives_overlapping_kernels_match_the_cpu() {
    if !gpu() {
        return;
    }
    let comm = NcclComm::init_all(&[0]).unwrap().remove(0);
    let mut g = Graph::new("overlap");
    let x = g.input("x", Shape::new(&[32, 64], DType::F32)).unwrap();
    let w = g.param("w", Shape::new(&[64, 64], DType::F32)).unwrap();
    let mut h = x;
    let mut reduced = vec![];
    for _ in 0..3 {
        h = g.matmul(h, w).unwrap();
        h = g.activation(Activation::Tanh, h).unwrap();
        let sq = g.mul(h, h).unwrap();
        reduced.push(g.all_reduce(sq, CollectiveReduce::Mean).unwrap());
    }
    let mut y = h;
    for r in reduced.into_iter().rev() {
        y = g.add(y, r).unwrap();
    }
    g.set_outputs(vec![y]);
    let mut rng = Rng::new("collectives_overlapping_kernels_match_the_cpu");
    for cuda_graph in [true, false] {
        let mut o = CudaOptions::strict();
        o.cuda_graph = cuda_graph;
        let mut exe = CudaExecutable::new_rank(g.clone(), 0, o, Some(comm.clone())).unwrap();
        for _ in 0..4 {
            let feeds = vec![
                normal(&mut rng, "x", &[32, 64]),
                normal(&mut rng, "w", &[64, 64]),
            ];
            let got = run_gpu_exe(&mut exe, &g, &feeds);
            compare("overlap", &got[0], &run_cpu(&g, &feeds)[0], 1e-5);
        }
    }
}
