//! `Device::Cuda` through the public API: a clear error without a GPU; with one, the same
//! outputs as the CPU under every precision policy, a complete dispatch report, and training
//! steps with bound updates.
mod common;
use common::mlp_attn;
use rlx_ir::{DType, HostTensor};
use rlx_runtime::{CompileOptions, Device, Error, Precision, Session};
use rlx_testutil::{rel_l2, Rng};

#[test]
fn cuda_device_is_unavailable_with_a_reason_or_matches_the_cpu() {
    let g = mlp_attn();
    let s = Session::new(Device::Cuda(0));
    if rlx_cuda::check_available(0).is_err() {
        match s.compile(&g) {
            Err(Error::DeviceUnavailable { device, reason }) => {
                assert_eq!(device, "cuda:0");
                assert!(!reason.is_empty());
            }
            Err(e) => panic!("expected DeviceUnavailable, got {e}"),
            Ok(_) => panic!("compiled for a GPU that is not there"),
        }
        assert_eq!(Device::best(), Device::Cpu);
    }
    if !rlx_cuda::gpu_or_skip(0) {
        return;
    }
    let mut rng = Rng::new("cuda_device_matches_the_cpu");
    let x = rng.normals(3 * 21 * 64);
    let params: Vec<(&str, Vec<f64>)> = vec![
        ("w1", rng.normals(64 * 64).iter().map(|v| v / 8.0).collect()),
        ("b1", rng.normals(64)),
        ("gamma", rng.uniforms(64, 0.5, 1.5)),
    ];
    let run = |device: Device, opts: CompileOptions| -> Vec<f64> {
        let c = Session::new(device).compile_with(&g, &opts).unwrap();
        for (n, v) in &params {
            let dims = if *n == "w1" { vec![64, 64] } else { vec![64] };
            c.set_param_typed(n, HostTensor::from_f64_as(&dims, v, DType::F32))
                .unwrap();
        }
        if device != Device::Cpu {
            let fallbacks: Vec<_> = c.dispatch().into_iter().filter(|d| d.2.is_some()).collect();
            assert!(
                fallbacks.is_empty(),
                "{:?} fell back: {fallbacks:?}",
                opts.precision
            );
        }
        let out = c
            .run_typed(&[("x", HostTensor::from_f64_as(&[3, 21, 64], &x, DType::F32))])
            .unwrap();
        out[0].to_f64_vec()
    };
    let cpu = run(Device::Cpu, CompileOptions::default());
    for (p, tol) in [
        (Precision::F32, 1e-5),
        (Precision::Tf32, 1e-3),
        (Precision::Bf16, 1e-2),
        (Precision::F16, 1e-2),
    ] {
        let gpu = run(Device::Cuda(0), CompileOptions::default().precision(p));
        let e = rel_l2(&gpu, &cpu);
        println!("precision {p}: rel-L2 vs CPU f32 {e:.2e}");
        assert!(e <= tol, "precision {p}: rel-L2 {e:.3e} > {tol:.0e}");
    }
    let verified = run(Device::Cuda(0), CompileOptions::default().verify(true));
    assert!(rel_l2(&verified, &cpu) <= 1e-5);
}

/// A one-GPU NCCL mesh through the public API: `Mesh::cuda(&[0])` compiles a graph whose
/// all-reduce and inner-axis all-gather run as NCCL calls (natively, no CPU fallback) and
/// match the CPU; two ranks on one GPU are refused (NCCL allows one rank per GPU).
#[test]
fn a_one_gpu_nccl_mesh_matches_the_cpu() {
    if !rlx_cuda::gpu_or_skip(0) {
        return;
    }
    use rlx_ir::{CollectiveReduce, Graph, Shape};
    let mut g = Graph::new("mesh");
    let x = g.input("x", Shape::new(&[4, 6], DType::F32)).unwrap();
    let s = g.all_reduce(x, CollectiveReduce::Sum).unwrap();
    let t = g.activation(rlx_ir::Activation::Tanh, s).unwrap();
    let y = g.all_gather(t, 1, 1).unwrap();
    g.set_outputs(vec![y]);
    let mesh = rlx_runtime::Mesh::cuda(&[0]).unwrap();
    let mut rng = Rng::new("a_one_gpu_nccl_mesh_matches_the_cpu");
    let xv = rng.normals(24);
    let feed = HostTensor::from_f64_as(&[4, 6], &xv, DType::F32);
    let got = mesh
        .run(|_, s| -> Result<Vec<f64>, Error> {
            let c = s.compile(&g)?;
            let fallbacks: Vec<_> = c.dispatch().into_iter().filter(|d| d.2.is_some()).collect();
            assert!(fallbacks.is_empty(), "{fallbacks:?}");
            Ok(c.run_typed(&[("x", feed.clone())])?[0].to_f64_vec())
        })
        .unwrap();
    let cpu = Session::new(Device::Cpu).compile(&g).unwrap();
    let want = cpu.run_typed(&[("x", feed.clone())]).unwrap()[0].to_f64_vec();
    let err = rel_l2(&got[0], &want);
    assert!(err < 1e-5, "rel-L2 {err:.3e}");
    assert!(rlx_runtime::Mesh::cuda(&[0, 0]).is_err());
}
