//! Plumbing of the CUDA executor independent of any kernel family: device discovery, NVRTC
//! on the device's architecture, params resident on the device, views, the CPU-fallback
//! path for every node, in-place updates and the disk cache of compiled modules.
mod common;
use common::*;
use rlx_cuda::kernels::{Lib, Src};
use rlx_cuda::{CudaOptions, Gpu};
use rlx_ir::*;

#[test]
fn device_compiles_every_source_for_its_arch() {
    if !gpu() {
        return;
    }
    let g = Gpu::get(0).unwrap();
    println!("GPU 0: {} ({})", g.name, g.arch);
    for lib in Lib::ALL {
        let cubin = rlx_cuda::nvrtc::compile(&Src::Lib(lib), &g.arch).unwrap();
        assert!(!cubin.is_empty());
    }
}

#[test]
fn every_kind_of_node_survives_the_fallback_path() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("every_kind_of_node_survives_the_fallback_path");
    let build = |dt: DType| {
        let mut g = Graph::new("smoke");
        let x = g.input("x", Shape::new(&[5, 12], dt)).unwrap();
        let w = g.param("w", Shape::new(&[12, 7], dt)).unwrap();
        let h = g.matmul(x, w).unwrap();
        let h = g.reshape(h, &[35i64]).unwrap();
        let h = g.activation(Activation::Tanh, h).unwrap();
        let h = g.reshape(h, &[5i64, 7]).unwrap();
        let s = g.softmax(h, -1).unwrap();
        g.set_outputs(vec![s, h]);
        g
    };
    let feeds = vec![
        normal(&mut rng, "x", &[5, 12]),
        normal(&mut rng, "w", &[12, 7]),
    ];
    let all = OpKindSet::all();
    for graph_on in [true, false] {
        let mut o = CudaOptions::strict();
        o.cuda_graph = graph_on;
        parity_with("smoke", &build, &feeds, DType::F32, o, all);
    }
}
