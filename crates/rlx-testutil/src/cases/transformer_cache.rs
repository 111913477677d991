//! Case table of the KV-cache pieces of the transformer group: `CacheWrite` (rows written
//! in place at a run-time position, every axis and dtype), `RopeCacheWrite` (the rows
//! rotated on the way in: every x layout, both pairings, partial rotation, per-batch
//! angles) and attention over a cache
//! (`AttentionSpec::past`: only `past + Sq` keys valid, queries at `past + i`), each with a
//! plain f64 loop for an oracle. The position is drawn fresh per run, from an empty cache
//! to a full one.
use super::transformer::{attention_case, GPU_FLOATS, PLAIN};
use super::transformer_oracle::{Attn, CosForm, RopeCase, XLayout, LAYOUTS, STYLES, XLAYOUTS};
use crate::case::{Case, Draw, Input};
use rlx_ir::{AttentionLayout, CachedRope, DType, Graph, MaskKind, RopeStyle, Shape};

/// Cache `dims` (`new` has `s` rows on `axis`) written at a random position.
fn cache_write_case(dims: &'static [usize], axis: usize, s: usize) -> Case {
    let c = dims[axis];
    let mut new_dims = dims.to_vec();
    new_dims[axis] = s;
    let nd = new_dims.clone();
    let inputs = vec![
        Input::new("cache", dims, Draw::Normal(1.0)),
        Input::new("new", &new_dims, Draw::Normal(1.0)),
        Input::new("pos", &[1], Draw::Ints(0, (c - s) as i64)).of(DType::I64),
    ];
    let build = move |dt: DType| {
        let mut g = Graph::new("cache_write");
        let cache = g.input("cache", Shape::new(dims, dt)).unwrap();
        let new = g.input("new", Shape::new(&nd, dt)).unwrap();
        let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
        let w = g.cache_write(cache, new, pos, axis).unwrap();
        g.set_outputs(vec![w]);
        g
    };
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    Case::new(
        format!("cache_write {dims:?} axis {axis} rows {s}"),
        inputs,
        build,
    )
    .out(dims)
    .oracle(move |v, _| {
        let (cache, new, pos) = (&v[0], &v[1], v[2][0] as usize);
        let mut out = cache.clone();
        for o in 0..outer {
            for r in 0..s {
                for e in 0..inner {
                    out[(o * c + pos + r) * inner + e] = new[(o * s + r) * inner + e];
                }
            }
        }
        out
    })
    .no_grad()
}

pub fn cache_write() -> Vec<Case> {
    let mut cases = vec![];
    // [B, Ctx, Hkv·D] (the decoders' layout), [B, H, Ctx, D], a whole-cache write, axis 0.
    let shapes: [(&'static [usize], usize, usize); 6] = [
        (&[1, 40, 24], 1, 1),
        (&[1, 40, 24], 1, 9),
        (&[2, 3, 17, 8], 2, 4),
        (&[1, 16, 6], 1, 16),
        (&[12, 5], 0, 3),
        (&[1, 300, 576], 1, 7),
    ];
    for (dims, axis, s) in shapes {
        let c = cache_write_case(dims, axis, s);
        cases.push(c.clone().dtypes(&GPU_FLOATS));
        cases.push(c.dtypes(&[DType::F64, DType::I64]).no_parity());
    }
    cases
}

/// Decode (one query) and prefill chunks over a cache: every layout, mask kind, GQA.
pub fn attention_cached() -> Vec<Case> {
    let mut cases = vec![];
    let masks = [MaskKind::None, MaskKind::Causal, MaskKind::SlidingWindow(5)];
    for l in LAYOUTS {
        for m in masks {
            for (b, sq, sk, h, hkv, d) in [(1, 1, 40, 4, 2, 16), (2, 5, 23, 3, 1, 8)] {
                let a = Attn::new(l, b, sq, sk, h, hkv, d).mask(m).cached();
                cases.push(attention_case(a, PLAIN).dtypes(&GPU_FLOATS).no_grad());
            }
        }
    }
    // The decoders' shapes: SmolLM2 (9 / 3 heads of 64) and a Custom keep-mask (batch 1).
    let smol = Attn::new(LAYOUTS[0], 1, 1, 300, 9, 3, 64).mask(MaskKind::Causal);
    cases.push(
        attention_case(smol.cached(), PLAIN)
            .dtypes(&GPU_FLOATS)
            .no_grad(),
    );
    let prefill = Attn::new(LAYOUTS[0], 1, 37, 300, 9, 3, 64).mask(MaskKind::Causal);
    cases.push(
        attention_case(prefill.cached(), PLAIN)
            .dtypes(&GPU_FLOATS)
            .no_grad(),
    );
    let custom = Attn::new(LAYOUTS[0], 1, 2, 30, 2, 2, 8).mask(MaskKind::Custom);
    cases.push(
        attention_case(custom.cached(), PLAIN)
            .dtypes(&GPU_FLOATS)
            .no_grad(),
    );
    cases
}

/// `RopeCacheWrite` of the rope problem `r` (its x is the new rows) into a cache of `c`
/// rows along the sequence axis of r's layout, at a random position.
fn rope_cache_write_case(r: RopeCase, c: usize) -> Case {
    let (xd, cd) = (r.x_dims(), r.cos_dims());
    let axis = match r.layout {
        XLayout::Bhsd => 2,
        XLayout::Rows => 0,
        XLayout::Bshd | XLayout::Packed => 1,
    };
    let mut cache_dims = xd.clone();
    cache_dims[axis] = c;
    let inputs = vec![
        Input::new("cache", &cache_dims, Draw::Normal(1.0)),
        Input::new("new", &xd, Draw::Normal(1.0)),
        Input::new("pos", &[1], Draw::Ints(0, (c - r.s) as i64)).of(DType::I64),
        Input::new("cos", &cd, Draw::Uniform(-1.0, 1.0)),
        Input::new("sin", &cd, Draw::Uniform(-1.0, 1.0)),
    ];
    let (cdims, nd, tdims) = (cache_dims.clone(), xd.clone(), cd.clone());
    let build = move |dt: DType| {
        let mut g = Graph::new("rope_cache_write");
        let cache = g.input("cache", Shape::new(&cdims, dt)).unwrap();
        let new = g.input("new", Shape::new(&nd, dt)).unwrap();
        let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
        let cos = g.input("cos", Shape::new(&tdims, dt)).unwrap();
        let sin = g.input("sin", Shape::new(&tdims, dt)).unwrap();
        let w = g
            .rope_cache_write(cache, new, pos, cos, sin, axis, r.d, r.n_rot, r.style)
            .unwrap();
        g.set_outputs(vec![w]);
        g
    };
    let outer: usize = cache_dims[..axis].iter().product();
    let inner: usize = cache_dims[axis + 1..].iter().product();
    let s = r.s;
    Case::new(
        format!(
            "rope_cache_write {:?} {:?} x {xd:?} cos {cd:?} n_rot {} into {c} rows",
            r.style, r.layout, r.n_rot
        ),
        inputs,
        build,
    )
    .out(&cache_dims)
    .oracle(move |v, _| {
        // Rotate in f64 (the Rope oracle), then copy the rows in at pos.
        let rotated = r.oracle(&v[1], &v[3], &v[4]);
        let (mut out, pos) = (v[0].clone(), v[2][0] as usize);
        for o in 0..outer {
            for row in 0..s {
                for e in 0..inner {
                    out[(o * c + pos + row) * inner + e] = rotated[(o * s + row) * inner + e];
                }
            }
        }
        out
    })
    .no_grad()
}

pub fn rope_cache_write() -> Vec<Case> {
    let mut cases = vec![];
    for l in XLAYOUTS {
        for st in STYLES {
            // (b, s, h, d, n_rot, cos form, cache rows): decode, prefill, partial rotation
            // with per-batch angles, the SmolLM2 key row (3 heads of 64).
            let problems = [
                (1, 1, 2, 8, 8, CosForm::Seq, 20),
                (2, 5, 3, 8, 4, CosForm::PerBatch, 11),
                (1, 1, 3, 64, 64, CosForm::Seq, 300),
            ];
            for (b, s, h, d, n_rot, form, c) in problems {
                let r = RopeCase::new(l, (b, s, h, d), n_rot, st).cos(form);
                let case = rope_cache_write_case(r, c);
                cases.push(case.clone().dtypes(&GPU_FLOATS));
                cases.push(case.dtypes(&[DType::F64]).no_parity());
            }
        }
    }
    cases
}

/// One `CachedAttention` problem: attention `a` (its `sk` the cache length) with this
/// call's k/v rows written into the caches at a random position first, q and k rotated
/// (`n_rot` > 0, f32 tables one row per query).
fn cached_attention_case(a: Attn, rope: Option<(usize, RopeStyle)>) -> Case {
    let (b, sq, ctx, h, hkv, d) = (a.b, a.sq, a.sk, a.h, a.hkv, a.d);
    let xl = match a.layout {
        AttentionLayout::Bshd => XLayout::Bshd,
        _ => XLayout::Packed,
    };
    let new_k = Attn { sk: sq, ..a }.k_dims();
    let (cache_k, cache_v) = (a.k_dims(), a.v_dims());
    let half = rope.map_or(1, |(n, _)| n / 2);
    let mut inputs = vec![
        Input::new("q", &a.q_dims(), Draw::Normal(1.0)),
        Input::new("k", &new_k, Draw::Normal(1.0)),
        Input::new("v", &new_k, Draw::Normal(1.0)),
        Input::new("k_cache", &cache_k, Draw::Normal(1.0)),
        Input::new("v_cache", &cache_v, Draw::Normal(1.0)),
        Input::new("pos", &[1], Draw::Ints(0, (ctx - sq) as i64)).of(DType::I64),
    ];
    if rope.is_some() {
        for t in ["cos", "sin"] {
            inputs.push(Input::new(t, &[sq, 1, half], Draw::Uniform(-1.0, 1.0)).of(DType::F32));
        }
    }
    let (qd, nk) = (a.q_dims(), new_k.clone());
    let build = move |dt: DType| {
        let mut g = Graph::new("cached_attention");
        let id = |g: &mut Graph, n: &str, dims: &[usize], t: DType| {
            g.input(n, Shape::new(dims, t)).unwrap()
        };
        let q = id(&mut g, "q", &qd, dt);
        let k = id(&mut g, "k", &nk, dt);
        let v = id(&mut g, "v", &nk, dt);
        let kc = id(&mut g, "k_cache", &cache_k, dt);
        let vc = id(&mut g, "v_cache", &cache_v, dt);
        let pos = id(&mut g, "pos", &[1], DType::I64);
        let tables = rope.map(|(n_rot, style)| {
            let cos = id(&mut g, "cos", &[sq, 1, half], DType::F32);
            let sin = id(&mut g, "sin", &[sq, 1, half], DType::F32);
            (CachedRope { n_rot, style }, cos, sin)
        });
        let spec = a.spec();
        let o = g
            .cached_attention([q, k, v], [kc, vc], pos, tables, spec)
            .unwrap();
        g.set_outputs(vec![o]);
        g
    };
    let name = format!(
        "cached_attention {:?} b{b} sq{sq} ctx{ctx} h{h}/{hkv} d{d} {:?} rope {rope:?}",
        a.layout, a.mask
    );
    Case::new(name, inputs, build)
        .out(&a.out_dims())
        .oracle(move |v, _| {
            let pos = v[5][0] as usize;
            let (q, k) = match rope {
                Some((n_rot, style)) => {
                    let r = |heads| RopeCase::new(xl, (b, sq, heads, d), n_rot, style);
                    (
                        r(h).oracle(&v[0], &v[6], &v[7]),
                        r(hkv).oracle(&v[1], &v[6], &v[7]),
                    )
                }
                None => (v[0].clone(), v[1].clone()),
            };
            // Both layouts keep the sequence on axis 1: rows of hkv·d values.
            let row = hkv * d;
            let write = |cache: &[f64], new: &[f64]| {
                let mut c = cache.to_vec();
                for bi in 0..b {
                    for r in 0..sq {
                        let (dst, src) = ((bi * ctx + pos + r) * row, (bi * sq + r) * row);
                        c[dst..dst + row].copy_from_slice(&new[src..src + row]);
                    }
                }
                c
            };
            let (kc, vc) = (write(&v[3], &k), write(&v[4], &v[2]));
            a.oracle_past(&q, &kc, &vc, None, Some(pos))
        })
        .no_grad()
}

/// The fused attention block over KV caches: the decode kernel's shapes (SmolLM2's heads,
/// partial and interleaved rotation, a window, several query rows, a context long enough
/// for several chunks) and the paths that run the ops it stands for (prefill, a head size
/// the decode kernel does not take, no rotation).
pub fn cached_attention() -> Vec<Case> {
    use AttentionLayout::{Bshd, Packed};
    let half = Some((64, RopeStyle::Half));
    let problems = [
        (
            Attn::new(Packed, 1, 1, 300, 9, 3, 64).mask(MaskKind::Causal),
            half,
        ),
        (
            Attn::new(Packed, 1, 1, 40, 4, 2, 32).mask(MaskKind::SlidingWindow(5)),
            Some((16, RopeStyle::Interleaved)),
        ),
        (
            Attn::new(Bshd, 2, 3, 23, 4, 1, 16).mask(MaskKind::Causal),
            Some((16, RopeStyle::Half)),
        ),
        (
            Attn::new(Packed, 1, 1, 1200, 9, 3, 64).mask(MaskKind::Causal),
            half,
        ),
        (
            Attn::new(Packed, 1, 1, 64, 2, 2, 64).mask(MaskKind::None),
            None,
        ),
        (
            Attn::new(Packed, 1, 37, 300, 9, 3, 64).mask(MaskKind::Causal),
            half,
        ),
        (
            Attn::new(Packed, 1, 1, 50, 4, 2, 24).mask(MaskKind::Causal),
            Some((24, RopeStyle::Half)),
        ),
    ];
    let mut cases = vec![];
    for (a, rope) in problems {
        let c = cached_attention_case(a.cached(), rope);
        cases.push(c.clone().dtypes(&GPU_FLOATS));
        cases.push(c.dtypes(&[DType::F64]).no_parity());
    }
    cases
}
