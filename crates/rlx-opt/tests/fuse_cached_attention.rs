//! FuseCachedAttention: a decode block's `Attention(Rope(q), RopeCacheWrite(kc, k), CacheWrite
//! (vc, v), past)` becomes one `CachedAttention` (and without rotations, over two plain cache
//! writes); a write or a rotation read elsewhere, another position or other tables leave the
//! graph alone; `Pipeline::full` applies it after FuseRopeCacheWrite. On the CPU the fused
//! graph gives the unfused graph's values bit for bit over several decode steps — which
//! read the rows earlier steps wrote into the param caches — and so does its expansion.
mod common;
use common::{count, Rng};
use rlx_cpu::CpuExecutable;
use rlx_ir::{AttentionSpec, DType, Graph, HostTensor, MaskKind, OpKind, RopeStyle, Shape};
use rlx_opt::{Expand, FuseCachedAttention, FuseRopeCacheWrite, Pass};

const CTX: usize = 20;
const H: usize = 4;
const HKV: usize = 2;
const D: usize = 8;

#[derive(Clone, Copy)]
struct Case {
    dt: DType,
    rope: Option<(usize, RopeStyle)>,
    /// Query rows a step.
    s: usize,
    /// What breaks the pattern, if anything.
    spoil: Spoil,
}

#[derive(Clone, Copy, PartialEq)]
enum Spoil {
    None,
    /// The written v cache is also a graph output.
    SharedWrite,
    /// The attention's past is another input than the writes' position.
    OtherPast,
    /// q rotates with other tables than k.
    OtherTables,
}

/// Layer of a decoder over param caches; outputs the attention.
fn graph(c: Case) -> Graph {
    let mut g = Graph::new("cached_attention");
    let t = |g: &mut Graph, n: &str, dims: &[usize], dt: DType| g.input(n, Shape::new(dims, dt));
    let q = t(&mut g, "q", &[1, c.s, H * D], c.dt).unwrap();
    let k = t(&mut g, "k", &[1, c.s, HKV * D], c.dt).unwrap();
    let v = t(&mut g, "v", &[1, c.s, HKV * D], c.dt).unwrap();
    let pos = t(&mut g, "pos", &[1], DType::I64).unwrap();
    let kc = g.param("kc", Shape::new(&[1, CTX, HKV * D], c.dt)).unwrap();
    let vc = g.param("vc", Shape::new(&[1, CTX, HKV * D], c.dt)).unwrap();
    let (mut qr, mut kr) = (q, k);
    if let Some((n_rot, style)) = c.rope {
        let half = [c.s, 1, n_rot / 2];
        let cos = t(&mut g, "cos", &half, c.dt).unwrap();
        let sin = t(&mut g, "sin", &half, c.dt).unwrap();
        let (qc, qs) = if c.spoil == Spoil::OtherTables {
            (sin, cos)
        } else {
            (cos, sin)
        };
        qr = g.rope(q, qc, qs, D, n_rot, style).unwrap();
        kr = g.rope(k, cos, sin, D, n_rot, style).unwrap();
    }
    let kw = g.cache_write(kc, kr, pos, 1).unwrap();
    let vw = g.cache_write(vc, v, pos, 1).unwrap();
    let past = if c.spoil == Spoil::OtherPast {
        t(&mut g, "past", &[1], DType::I64).unwrap()
    } else {
        pos
    };
    let spec = AttentionSpec::new(H, D).mask(MaskKind::Causal);
    let a = g.attention_cached(qr, kw, vw, past, spec).unwrap();
    let mut outs = vec![a];
    if c.spoil == Spoil::SharedWrite {
        outs.push(vw);
    }
    g.set_outputs(outs);
    g
}

fn fused(g: &Graph) -> Graph {
    let h = FuseCachedAttention
        .run(&FuseRopeCacheWrite.run(g).unwrap())
        .unwrap();
    h.verify().unwrap();
    h
}

fn host(rng: &mut Rng, dims: &[usize], dt: DType, lo_hi: Option<(f64, f64)>) -> HostTensor {
    let n = dims.iter().product();
    let v = match lo_hi {
        Some((lo, hi)) => rng.uniforms(n, lo, hi),
        None => rng.normals(n),
    };
    HostTensor::from_f64_as(dims, &v, dt)
}

/// Outputs (bit patterns) of `g` over `steps` decode steps from position `start`, caches
/// starting from `init` (the same draws for every graph given the same `seed`).
fn steps(g: &Graph, c: Case, seed: u64, start: usize, steps: usize) -> Vec<Vec<u64>> {
    let mut rng = Rng::seeded(seed);
    let mut exe = CpuExecutable::new(g.clone()).unwrap();
    for p in ["kc", "vc"] {
        let init = host(&mut rng, &[1, CTX, HKV * D], c.dt, None);
        exe.set_param(p, &init).unwrap();
    }
    let mut outs = Vec::new();
    for step in 0..steps {
        let mut ins = vec![
            ("q", host(&mut rng, &[1, c.s, H * D], c.dt, None)),
            ("k", host(&mut rng, &[1, c.s, HKV * D], c.dt, None)),
            ("v", host(&mut rng, &[1, c.s, HKV * D], c.dt, None)),
            (
                "pos",
                HostTensor::from_i64(&[1], &[(start + step * c.s) as i64]),
            ),
        ];
        if let Some((n_rot, _)) = c.rope {
            let half = [c.s, 1, n_rot / 2];
            ins.push(("cos", host(&mut rng, &half, c.dt, Some((-1.0, 1.0)))));
            ins.push(("sin", host(&mut rng, &half, c.dt, Some((-1.0, 1.0)))));
        }
        for out in exe.run(&ins).unwrap() {
            outs.push(out.to_f64_vec().iter().map(|x| x.to_bits()).collect());
        }
    }
    outs
}

#[test]
fn a_decode_block_fuses_and_computes_the_same_bits() {
    let ropes = [
        Some((D, RopeStyle::Half)),
        Some((4, RopeStyle::Interleaved)),
        None,
    ];
    let mut rng = Rng::new("a_decode_block_fuses_and_computes_the_same_bits");
    for dt in [DType::F32, DType::F16, DType::F64] {
        for rope in ropes {
            for s in [1, 3] {
                let c = Case {
                    dt,
                    rope,
                    s,
                    spoil: Spoil::None,
                };
                let what = format!("{dt} {rope:?} rows={s}");
                let g = graph(c);
                let h = fused(&g);
                assert_eq!(count(&h, OpKind::CachedAttention), 1, "{what}");
                for k in [OpKind::CacheWrite, OpKind::RopeCacheWrite, OpKind::Rope] {
                    assert_eq!(count(&h, k), 0, "{what}: {k} left");
                }
                assert_eq!(count(&h, OpKind::Attention), 0, "{what}");
                let e = Expand::all().run(&h).unwrap();
                assert_eq!(count(&e, OpKind::CachedAttention), 0, "{what}");
                assert_eq!(count(&e, OpKind::CacheWrite), 2, "{what}");
                let seed = rng.next_u64();
                let start = rng.below(CTX - 4 * s);
                let base = steps(&g, c, seed, start, 4);
                assert_eq!(
                    steps(&h, c, seed, start, 4),
                    base,
                    "{what}: fused values differ"
                );
                assert_eq!(
                    steps(&e, c, seed, start, 4),
                    base,
                    "{what}: expanded values differ"
                );
            }
        }
    }
}

#[test]
fn anything_else_is_left_alone() {
    for spoil in [Spoil::SharedWrite, Spoil::OtherPast, Spoil::OtherTables] {
        let c = Case {
            dt: DType::F32,
            rope: Some((D, RopeStyle::Half)),
            s: 1,
            spoil,
        };
        let h = fused(&graph(c));
        assert_eq!(count(&h, OpKind::CachedAttention), 0);
        assert_eq!(count(&h, OpKind::Attention), 1);
        assert_eq!(
            count(&h, OpKind::CacheWrite) + count(&h, OpKind::RopeCacheWrite),
            2
        );
    }
}

#[test]
fn the_full_pipeline_fuses_it() {
    let c = Case {
        dt: DType::F32,
        rope: Some((D, RopeStyle::Half)),
        s: 1,
        spoil: Spoil::None,
    };
    let h = rlx_opt::optimize(&graph(c)).unwrap();
    assert_eq!(count(&h, OpKind::CachedAttention), 1);
    assert_eq!(count(&h, OpKind::Attention), 0);
}
