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

/// A KV-cache param written in place by CacheWrite and read by attention over the cache:
/// step after step, replayed from one captured graph (position in device memory), the GPU
/// matches the CPU, and the device cache holds exactly the rows written so far.
#[test]
fn cache_write_steps_replay_one_captured_graph() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("cache_write_steps_replay_one_captured_graph");
    let (ctx, h, hkv, d) = (48usize, 4usize, 2usize, 16usize);
    let w = hkv * d;
    let build = |s: usize| {
        let mut g = Graph::new("decode");
        let kc = g
            .param("k_cache", Shape::new(&[1, ctx, w], DType::F32))
            .unwrap();
        let vc = g
            .param("v_cache", Shape::new(&[1, ctx, w], DType::F32))
            .unwrap();
        let q = g
            .input("q", Shape::new(&[1, s, h * d], DType::F32))
            .unwrap();
        let k = g.input("k", Shape::new(&[1, s, w], DType::F32)).unwrap();
        let v = g.input("v", Shape::new(&[1, s, w], DType::F32)).unwrap();
        let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
        let kw = g.cache_write(kc, k, pos, 1).unwrap();
        let vw = g.cache_write(vc, v, pos, 1).unwrap();
        let spec = AttentionSpec::new(h, d).causal();
        let o = g.attention_cached(q, kw, vw, pos, spec).unwrap();
        g.set_outputs(vec![o]);
        g
    };
    for s in [1usize, 3] {
        let g = build(s);
        let mut cpu = rlx_cpu::CpuExecutable::new(g.clone()).unwrap();
        let mut gpu = compile_gpu(&g, CudaOptions::strict());
        let zeros = HostTensor::from_f32(&[1, ctx, w], &vec![0.0; ctx * w]);
        for name in ["k_cache", "v_cache"] {
            cpu.set_param(name, &zeros).unwrap();
            gpu.set_param(name, &zeros).unwrap();
        }
        let mut want_k = vec![0f32; ctx * w];
        let mut pos = 0usize;
        while pos + s <= ctx {
            let mut draw =
                |n: usize| -> Vec<f32> { rng.normals(n).into_iter().map(|x| x as f32).collect() };
            let (q, k, v) = (draw(s * h * d), draw(s * w), draw(s * w));
            want_k[pos * w..(pos + s) * w].copy_from_slice(&k);
            let ins = [
                ("q", HostTensor::from_f32(&[1, s, h * d], &q)),
                ("k", HostTensor::from_f32(&[1, s, w], &k)),
                ("v", HostTensor::from_f32(&[1, s, w], &v)),
                ("pos", HostTensor::from_i64(&[1], &[pos as i64])),
            ];
            let c = cpu.run(&ins).unwrap();
            let gg = gpu.run(&ins).unwrap();
            compare(&format!("s={s} pos={pos}"), &gg[0], &c[0], 1e-5);
            pos += s;
        }
        let dev = gpu.param_value("k_cache").unwrap().to_f32_vec();
        assert_eq!(
            dev, want_k,
            "s={s}: the device cache holds the written rows"
        );
    }
}
