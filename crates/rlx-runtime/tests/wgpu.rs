//! `Device::Wgpu` through the public API: a clear error for an adapter that is not there;
//! with an adapter (lavapipe in CI), the CPU's outputs, a dispatch report, and verify mode.
mod common;
use common::mlp_attn;
use rlx_ir::{DType, HostTensor};
use rlx_runtime::{CompileOptions, Device, Error, Session};
use rlx_testutil::{rel_l2, Rng};

#[test]
fn devices_parse_and_print() {
    assert_eq!(Device::parse("wgpu"), Some(Device::Wgpu(0)));
    assert_eq!(Device::parse("wgpu:2"), Some(Device::Wgpu(2)));
    assert_eq!(Device::parse("cuda:1"), Some(Device::Cuda(1)));
    assert_eq!(Device::parse("wgpu:x"), None);
    assert_eq!(Device::parse("metal"), None);
    assert_eq!(Device::Wgpu(3).to_string(), "wgpu:3");
}

#[test]
fn a_missing_adapter_is_device_unavailable_with_the_reason() {
    match Session::new(Device::Wgpu(99)).compile(mlp_attn()) {
        Err(Error::DeviceUnavailable { device, reason }) => {
            assert_eq!(device, "wgpu:99");
            assert!(reason.contains("adapter"), "{reason}");
        }
        Err(e) => panic!("expected DeviceUnavailable, got {e}"),
        Ok(_) => panic!("compiled for adapter 99"),
    }
}

#[test]
fn wgpu_matches_the_cpu_and_verifies() {
    if !rlx_wgpu::gpu_or_skip() {
        return;
    }
    let g = mlp_attn();
    let mut rng = Rng::new("wgpu_matches_the_cpu");
    let x = rng.normals(3 * 21 * 64);
    let params: Vec<(&str, Vec<usize>, Vec<f64>)> = vec![
        (
            "w1",
            vec![64, 64],
            rng.normals(64 * 64).iter().map(|v| v / 8.0).collect(),
        ),
        ("b1", vec![64], rng.normals(64)),
        ("gamma", vec![64], rng.uniforms(64, 0.5, 1.5)),
    ];
    let run = |device: Device, opts: CompileOptions| -> Vec<f64> {
        let c = Session::new(device).compile_with(&g, &opts).unwrap();
        for (n, d, v) in &params {
            c.set_param_typed(n, HostTensor::from_f64_as(d, v, DType::F32))
                .unwrap();
        }
        if device != Device::Cpu {
            assert!(
                !c.dispatch().is_empty(),
                "a static graph is lowered at compile"
            );
        }
        let out = c
            .run_typed(&[("x", HostTensor::from_f64_as(&[3, 21, 64], &x, DType::F32))])
            .unwrap();
        out[0].to_f64_vec()
    };
    let cpu = run(Device::Cpu, CompileOptions::default());
    let gpu = run(Device::Wgpu(0), CompileOptions::default());
    let e = rel_l2(&gpu, &cpu);
    assert!(e <= 1e-5, "wgpu vs cpu rel-L2 {e:.3e}");
    // Verify mode compares every node with the CPU reference and passes on a right plan.
    let verified = run(Device::Wgpu(0), CompileOptions::default().verify(true));
    assert!(rel_l2(&verified, &cpu) <= 1e-5);
}
