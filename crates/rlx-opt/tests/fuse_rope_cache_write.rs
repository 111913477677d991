//! FuseRopeCacheWrite: a decode step's `CacheWrite(cache, Rope(k), pos)` becomes one
//! `RopeCacheWrite`, for both pairings, partial rotation, every float dtype, decode and
//! prefill rows; a Rope that someone else reads is left alone; `Pipeline::full` applies it;
//! the CPU writes the unfused graph's cache bit for bit, fused and expanded again.
mod common;
use common::compare::cpu;
use common::{count, Rng, Val};
use rlx_ir::{DType, Graph, Op, OpKind, RopeStyle, Shape};
use rlx_opt::{Expand, FuseRopeCacheWrite, Pass};
use std::collections::HashMap;

/// Cache rows, key heads, head size.
const C: usize = 24;
const H: usize = 3;
const D: usize = 8;

struct Case {
    dt: DType,
    style: RopeStyle,
    n_rot: usize,
    /// Rows written this step.
    s: usize,
    /// The rotated keys are also a graph output (so the Rope must stay).
    rope_shared: bool,
}

/// Rotated q (a graph output, as attention would read it) and k written into the cache.
fn graph(c: &Case) -> Graph {
    let half = c.n_rot / 2;
    let mut g = Graph::new("rope_cache");
    let cache = g.input("cache", Shape::new(&[1, C, H * D], c.dt)).unwrap();
    let q = g
        .input("q", Shape::new(&[1, c.s, 2 * H * D], c.dt))
        .unwrap();
    let k = g.input("k", Shape::new(&[1, c.s, H * D], c.dt)).unwrap();
    let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
    let cos = g.input("cos", Shape::new(&[c.s, 1, half], c.dt)).unwrap();
    let sin = g.input("sin", Shape::new(&[c.s, 1, half], c.dt)).unwrap();
    let qr = g.rope(q, cos, sin, D, c.n_rot, c.style).unwrap();
    let kr = g.rope(k, cos, sin, D, c.n_rot, c.style).unwrap();
    let w = g.cache_write(cache, kr, pos, 1).unwrap();
    let mut outs = vec![w, qr];
    if c.rope_shared {
        outs.push(kr);
    }
    g.set_outputs(outs);
    g
}

fn feeds(c: &Case, rng: &mut Rng) -> HashMap<String, Val> {
    let half = c.n_rot / 2;
    let mut f = HashMap::new();
    let mut put = |name: &str, dims: &[usize], dt: DType, v: Vec<f64>| {
        f.insert(name.to_string(), Val::new(dims, dt, v));
    };
    put("cache", &[1, C, H * D], c.dt, rng.normals(C * H * D));
    put(
        "q",
        &[1, c.s, 2 * H * D],
        c.dt,
        rng.normals(c.s * 2 * H * D),
    );
    put("k", &[1, c.s, H * D], c.dt, rng.normals(c.s * H * D));
    let p = rng.below(C - c.s + 1) as f64;
    put("pos", &[1], DType::I64, vec![p]);
    put(
        "cos",
        &[c.s, 1, half],
        c.dt,
        rng.uniforms(c.s * half, -1.0, 1.0),
    );
    put(
        "sin",
        &[c.s, 1, half],
        c.dt,
        rng.uniforms(c.s * half, -1.0, 1.0),
    );
    f
}

fn bits(v: &[Val]) -> Vec<Vec<u64>> {
    v.iter()
        .map(|t| t.data.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn rope_then_cache_write_fuses_and_writes_the_same_bits() {
    let mut rng = Rng::new("rope_then_cache_write_fuses_and_writes_the_same_bits");
    for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        for style in [RopeStyle::Half, RopeStyle::Interleaved] {
            for (n_rot, s) in [(D, 1), (4, 1), (D, 5), (2, 7)] {
                let c = Case {
                    dt,
                    style,
                    n_rot,
                    s,
                    rope_shared: false,
                };
                let what = format!("{dt} {style:?} n_rot={n_rot} rows={s}");
                let g = graph(&c);
                let h = FuseRopeCacheWrite.run(&g).unwrap();
                h.verify().unwrap();
                let want = Op::RopeCacheWrite {
                    axis: 1,
                    head_dim: D,
                    n_rot,
                    style,
                };
                let fused: Vec<&Op> = (h.nodes.iter())
                    .filter(|n| n.op.kind() == OpKind::RopeCacheWrite)
                    .map(|n| &n.op)
                    .collect();
                assert_eq!(fused, vec![&want], "{what}");
                assert_eq!(count(&h, OpKind::CacheWrite), 0, "{what}");
                assert_eq!(count(&h, OpKind::Rope), 1, "{what}: q's Rope stays");
                // Several positions per graph: the cache must match wherever the rows land.
                for _ in 0..3 {
                    let f = feeds(&c, &mut rng);
                    let base = bits(&cpu(&g, &f));
                    assert_eq!(bits(&cpu(&h, &f)), base, "{what}: fused values differ");
                    let e = Expand::all().run(&h).unwrap();
                    assert_eq!(count(&e, OpKind::RopeCacheWrite), 0);
                    assert_eq!(count(&e, OpKind::CacheWrite), 1);
                    assert_eq!(bits(&cpu(&e, &f)), base, "{what}: expanded values differ");
                }
            }
        }
    }
}

#[test]
fn a_rope_read_elsewhere_is_left_alone() {
    let c = Case {
        dt: DType::F32,
        style: RopeStyle::Half,
        n_rot: D,
        s: 1,
        rope_shared: true,
    };
    let h = FuseRopeCacheWrite.run(&graph(&c)).unwrap();
    assert_eq!(count(&h, OpKind::RopeCacheWrite), 0);
    assert_eq!(count(&h, OpKind::CacheWrite), 1);
    assert_eq!(count(&h, OpKind::Rope), 2);
}

#[test]
fn the_full_pipeline_fuses_it() {
    let c = Case {
        dt: DType::F32,
        style: RopeStyle::Interleaved,
        n_rot: D,
        s: 1,
        rope_shared: false,
    };
    let h = rlx_opt::optimize(&graph(&c)).unwrap();
    assert_eq!(count(&h, OpKind::RopeCacheWrite), 1);
    assert_eq!(count(&h, OpKind::CacheWrite), 0);
}
