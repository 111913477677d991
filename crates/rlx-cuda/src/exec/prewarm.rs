//! A plan's kernel libraries compiled side by side before its lowering. Lowering asks for one
//! kernel at a time, in node order, so on a machine whose disk cache is empty NVRTC compiled a
//! model's libraries one after another (session 35: 47.5 s of SmolLM2's first load on an H100
//! host, its other 15 cores idle). The sources a graph will ask for follow from its ops; a
//! wrong guess costs one unused compile, never a wrong kernel: lowering still looks up every
//! kernel itself and compiles what it finds missing.
use crate::device::Gpu;
use crate::kernels::{Lib, Sfx, Src};
use rlx_ir::{Graph, Op, OpGroup, QuantScheme};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The hand-written sources (shards of the big libraries) that lowering `g` will ask for,
/// the big ones first (they bound the wall time of compiling them side by side). `planar`:
/// the leaves held in the planar row layout, by node id.
pub(crate) fn sources(g: &Graph, planar: &HashMap<usize, QuantScheme>) -> Vec<Src> {
    let mut big = Vec::new();
    let mut small = Vec::new();
    let add = |list: &mut Vec<Src>, s: Src| {
        if !list.contains(&s) {
            list.push(s);
        }
    };
    for n in &g.nodes {
        let float = || Sfx::float(n.shape.dtype).map_or("f32", |s| s.name());
        match &n.op {
            Op::DequantMatMul { scheme }
            | Op::FusedDequantMatMul { scheme, .. }
            | Op::Dequantize { scheme } => {
                let w = n.inputs.get(1).map(|w| w.0);
                let is_planar = !matches!(n.op, Op::Dequantize { .. })
                    && w.is_some_and(|w| planar.get(&w) == Some(scheme));
                let tag = crate::kernels::quant::shard_tag(*scheme, is_planar);
                add(&mut big, Src::Shard(Lib::Quant, tag));
                add(&mut small, Src::Shard(Lib::Quant, "base"));
                // The fused decode GEMV's norm and the prefill path's helpers.
                add(&mut small, Src::Lib(Lib::Norm));
            }
            Op::Attention(_) | Op::CachedAttention { .. } => {
                let tag = Lib::Attention.shard_of(&format!("_{}", float()));
                add(&mut big, Src::Shard(Lib::Attention, tag.unwrap_or("f32")));
            }
            op => {
                let lib = match op.kind().group() {
                    OpGroup::Norm => Lib::Norm,
                    OpGroup::Reduce => Lib::Reduce,
                    OpGroup::Shape | OpGroup::Index | OpGroup::Transformer => Lib::ShapeOps,
                    OpGroup::Linalg => Lib::Linalg,
                    OpGroup::Vision => Lib::Vision,
                    OpGroup::Audio => Lib::Audio,
                    // Elementwise work and regions are generated code, compiled per node.
                    _ => continue,
                };
                add(&mut small, Src::Lib(lib));
            }
        }
    }
    big.extend(small);
    big
}

/// Compile the sources of `srcs` not loaded yet side by side and load them; returns how many
/// were compiled. A source that fails is left to the lowering that needs it, which reports
/// the error with its node.
pub(crate) fn compile_all(gpu: &Gpu, srcs: &[Src]) -> usize {
    let todo: Vec<Src> = srcs.iter().filter(|s| !gpu.is_loaded(s)).cloned().collect();
    // One source gains nothing from a thread; lowering compiles it when it asks.
    if todo.len() < 2 || gpu.bind().is_err() {
        return 0;
    }
    let built = side_by_side(&todo, &gpu.arch);
    (todo.iter().zip(built))
        .filter_map(|(src, cubin)| Some((src, cubin.ok()?)))
        .filter(|(src, cubin)| gpu.load_module(&src.name(), cubin).is_ok())
        .count()
}

/// NVRTC (through the disk cache) on every source of `srcs`, up to one thread per core,
/// outside every lock; the results in the order of `srcs`.
pub fn side_by_side(srcs: &[Src], arch: &str) -> Vec<Result<Vec<u8>, crate::CudaError>> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, Result<Vec<u8>, crate::CudaError>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..cores.min(srcs.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(src) = srcs.get(i) else { break };
                        out.push((i, crate::nvrtc::compile(src, arch)));
                    }
                    out
                })
            })
            .collect();
        // A worker that panicked leaves its sources out; they are reported missing below.
        (workers.into_iter())
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    let mut it = done.into_iter().peekable();
    (0..srcs.len())
        .map(|i| match it.next_if(|(j, _)| *j == i) {
            Some((_, r)) => r,
            None => Err(crate::CudaError::Compile {
                name: srcs[i].name(),
                log: "the compiling thread panicked".into(),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{DType, Graph, Shape};

    fn names(srcs: &[Src]) -> Vec<String> {
        srcs.iter().map(|s| s.name()).collect()
    }

    /// A decode step's ops name the shards of their weight schemes and float type, the big
    /// shards first, each once; planar weights name the planar shards.
    #[test]
    fn sources_follow_the_graph() {
        let mut g = Graph::new("step");
        let x = g.input("x", Shape::new(&[1, 64], DType::F32)).unwrap();
        let w = g
            .param("w", Shape::new(&[32, 64 / 32 * 22], DType::U8))
            .unwrap();
        let w2 = g
            .param("w2", Shape::new(&[32, 64 / 32 * 22], DType::U8))
            .unwrap();
        let gamma = g.param("gamma", Shape::new(&[64], DType::F32)).unwrap();
        let h = g.rms_norm(x, gamma, None, -1, 1e-5).unwrap();
        let y = g.dequant_matmul(h, w, QuantScheme::Q5_0).unwrap();
        let y2 = g.dequant_matmul(h, w2, QuantScheme::Q5_0).unwrap();
        let _ = g.add(y, y2).unwrap();
        let got = names(&sources(&g, &HashMap::new()));
        assert_eq!(got, ["quant.q5_0", "norm", "quant.base"], "{got:?}");
        let planar = HashMap::from([(w.0, QuantScheme::Q5_0)]);
        let got = names(&sources(&g, &planar));
        assert_eq!(
            got,
            ["quant.q5_0p", "quant.q5_0", "norm", "quant.base"],
            "{got:?}"
        );
    }

    /// Sources compiled side by side come back in their own order: each CUBIN holds its own
    /// library's kernel (the names are `extern "C"`, so they sit in the symbol table as is).
    #[test]
    fn side_by_side_keeps_each_source_in_its_place() {
        if !crate::nvrtc::nvrtc_available() {
            let required = rlx_ir::env::flag(rlx_ir::env::Switch::RequireNvrtc);
            assert!(!required, "RLX_REQUIRE_NVRTC=1 but libnvrtc was not found");
            eprintln!("skipping: libnvrtc not found (set LD_LIBRARY_PATH to CUDA 13's lib folder)");
            return;
        }
        let srcs = [
            Src::Lib(Lib::Profile),
            Src::Lib(Lib::Linalg),
            Src::Lib(Lib::Profile),
        ];
        let kernel = ["rlx_spin", "mm_bias_act_f64", "rlx_spin"];
        let built = side_by_side(&srcs, "sm_90");
        assert_eq!(built.len(), srcs.len());
        for ((src, r), k) in srcs.iter().zip(built).zip(kernel) {
            let cubin = r.unwrap_or_else(|e| panic!("{}: {e}", src.name()));
            let has = cubin.windows(k.len()).any(|w| w == k.as_bytes());
            assert!(has, "{}'s CUBIN lacks {k}", src.name());
            let other = if k == "rlx_spin" {
                "mm_bias_act_f64"
            } else {
                "rlx_spin"
            };
            let stray = cubin.windows(other.len()).any(|w| w == other.as_bytes());
            assert!(!stray, "{}'s CUBIN holds {other}", src.name());
        }
    }
}
