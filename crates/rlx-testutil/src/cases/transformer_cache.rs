//! Case table of the KV-cache pieces of the transformer group: `CacheWrite` (rows written
//! in place at a run-time position, every axis and dtype) and attention over a cache
//! (`AttentionSpec::past`: only `past + Sq` keys valid, queries at `past + i`), each with a
//! plain f64 loop for an oracle. The position is drawn fresh per run, from an empty cache
//! to a full one.
use super::transformer::{attention_case, GPU_FLOATS, PLAIN};
use super::transformer_oracle::{Attn, LAYOUTS};
use crate::case::{Case, Draw, Input};
use rlx_ir::{DType, Graph, MaskKind, Shape};

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
