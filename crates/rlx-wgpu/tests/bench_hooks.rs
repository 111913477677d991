//! The hooks `rlx bench` times the wgpu backend through: `profile_runs` (GPU timestamps per
//! kernel) and `time_replays` (replays with the inputs resident, bound updates applied on
//! the device each time).
mod common;
use common::*;
use rlx_ir::{BinaryOp, DType, Graph, HostTensor, Op, Shape};

/// `(name, tensor)` pairs of f32 feeds.
fn tensors(feeds: &[Feed]) -> Vec<(String, HostTensor)> {
    feeds
        .iter()
        .map(|(name, dims, v)| (name.clone(), HostTensor::from_f64_as(dims, v, DType::F32)))
        .collect()
}

/// The profiler times real dispatches: a matmul graph profiled over two runs reports two
/// runs, one dispatch a run of the product's kernel with a positive time, and leaves the
/// executable computing what it did.
#[test]
fn profile_times_kernels() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("wgpu profile_times_kernels");
    let (m, k, n) = (40, 24, 33);
    let mut g = Graph::new("profiled");
    let a = g.input("a", Shape::new(&[m, k], DType::F32)).unwrap();
    let b = g.input("b", Shape::new(&[k, n], DType::F32)).unwrap();
    let y = g.add_node(Op::MatMul, &[a, b]).unwrap();
    g.set_outputs(vec![y]);
    let feeds = vec![
        normal(&mut rng, "a", &[m, k]),
        normal(&mut rng, "b", &[k, n]),
    ];
    let mut exe = rlx_wgpu::WgpuExecutable::new(g.clone(), 0, Default::default()).unwrap();
    let tensors: Vec<(String, rlx_ir::HostTensor)> = feeds
        .iter()
        .map(|(name, dims, v)| {
            (
                name.clone(),
                rlx_ir::HostTensor::from_f64_as(dims, v, DType::F32),
            )
        })
        .collect();
    let pairs: Vec<(&str, rlx_ir::HostTensor)> = tensors
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    let checked = exe.check(&pairs).unwrap();
    let Some(p) = exe.profile_runs(&checked, 2).unwrap() else {
        eprintln!("profile_times_kernels: the adapter has no timestamp queries; skipped");
        return;
    };
    assert_eq!(p.runs(), 2);
    let rows = p.rows();
    let mm = rows
        .iter()
        .find(|r| r.0.starts_with("matmul"))
        .expect("the matmul's row");
    assert_eq!(mm.1, 1, "{rows:?}");
    assert!(mm.2 > 0.0, "no time measured: {rows:?}");
    let got = run_gpu_exe(&mut exe, &g, &feeds);
    let want = run_cpu(&g, &feeds);
    let err = rel_l2(&got[0].to_f64_vec(), &want[0].to_f64_vec());
    assert!(err < 1e-5, "after profiling: rel-L2 {err:e}");
}

/// Timed replays apply the bound update every time: `p <- p * a + b` over 2 warm-up and 3
/// timed replays leaves `p` as the CPU computes five steps of it, and the time is positive.
#[test]
fn time_replays_apply_updates() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("wgpu time_replays_apply_updates");
    let n = 70;
    let mut g = Graph::new("stepped");
    let p = g.param("p", Shape::new(&[n], DType::F32)).unwrap();
    let a = g.input("a", Shape::new(&[n], DType::F32)).unwrap();
    let b = g.input("b", Shape::new(&[n], DType::F32)).unwrap();
    let pa = g.binary(BinaryOp::Mul, p, a).unwrap();
    let y = g.binary(BinaryOp::Add, pa, b).unwrap();
    g.set_outputs(vec![y]);
    let p0 = rng.normals(n);
    let feeds = vec![
        feed(
            "a",
            &[n],
            rng.normals(n).iter().map(|v| 0.5 + 0.2 * v).collect(),
        ),
        normal(&mut rng, "b", &[n]),
    ];
    let mut exe = rlx_wgpu::WgpuExecutable::new(g.clone(), 0, Default::default()).unwrap();
    exe.set_param("p", &HostTensor::from_f64_as(&[n], &p0, DType::F32))
        .unwrap();
    let owned = tensors(&feeds);
    let pairs: Vec<(&str, HostTensor)> =
        owned.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let checked = exe.check(&pairs).unwrap();
    let ms = exe.time_replays(&checked, &[(0, "p")], 2, 3).unwrap();
    assert!(ms > 0.0, "replay time {ms}");
    let got = exe.param_value("p").unwrap().to_f64_vec();
    let (av, bv) = (&feeds[0].2, &feeds[1].2);
    let want: Vec<f64> = (0..n)
        .map(|i| {
            let (ai, bi) = (av[i] as f32, bv[i] as f32);
            (0..5).fold(p0[i] as f32, |v, _| v * ai + bi) as f64
        })
        .collect();
    let err = rel_l2(&got, &want);
    assert!(err < 1e-5, "p after five replays: rel-L2 {err:e}");
}
