//! Case table of the transformer group: Attention here (every mask kind, GQA/MQA, decode,
//! all layouts, v_head_dim, score scale, softcap, keep-mask dtypes, storage dtypes), Rope and
//! FusedSwiGLU in `transformer_rope.rs`; geometry and f64 oracles in `transformer_oracle.rs`.
//! Cases from the old CPU oracle tests keep their dtypes and also run parity (f32/f16/bf16:
//! the CUDA kernels have no f64) but not gradcheck (finite differences cost four runs per
//! element); the old parity cases are parity only (their oracle loops would take minutes);
//! the old gradcheck cases take all three checks. Draws: `draw` is the oracle check's,
//! `gpu` rounds q/k/v to bf16 so every storage dtype holds the same values as the f64
//! oracle graph, and keep-masks leave at least one key per row there; `grad` keeps key 0.
pub use super::transformer_cache::*;
pub use super::transformer_oracle::*;
pub use super::transformer_rope::*;
use crate::case::{Case, Draw, Input};
use rlx_ir::{AttentionLayout, DType, MaskKind};

/// The float dtypes the CUDA kernels take.
pub const GPU_FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// How an attention case draws its inputs beyond the geometry.
#[derive(Clone, Copy, Debug)]
pub struct Draws {
    /// Standard deviation of q and k (large values make the softcap bite).
    pub amp: f64,
    pub mask_dtype: DType,
    /// Parity keep-masks: the last batch item masks every key (its rows must be zeros).
    pub blank_last: bool,
}

pub const PLAIN: Draws = Draws {
    amp: 1.0,
    mask_dtype: DType::Bool,
    blank_last: false,
};

/// Normals of standard deviation `amp`, rounded to bf16.
fn bf16_normals(amp: f64) -> Draw {
    Draw::custom(move |rng, n, _| {
        rng.normals(n)
            .into_iter()
            .map(|x| half::bf16::from_f64(x * amp).to_f64())
            .collect()
    })
}

/// A keep-mask `[b, sk]`: the oracle check keeps each key with p 0.6; parity also keeps one
/// random key per row (or none in the last batch item under `blank_last`); gradcheck keeps
/// key 0 of every row and each other with p 0.5.
fn keep_input(b: usize, sk: usize, dr: Draws) -> Input {
    let cpu = Draw::custom(|rng, n, _| (0..n).map(|_| rng.chance(0.6) as u8 as f64).collect());
    let gpu = Draw::custom(move |rng, _, _| {
        let mut keep = Vec::with_capacity(b * sk);
        for bi in 0..b {
            let mut row: Vec<f64> = (0..sk).map(|_| rng.chance(0.6) as u8 as f64).collect();
            if dr.blank_last && bi + 1 == b {
                row.fill(0.0);
            } else if sk > 0 {
                row[rng.below(sk)] = 1.0;
            }
            keep.extend(row);
        }
        keep
    });
    let grad = Draw::custom(move |rng, n, _| {
        (0..n)
            .map(|i| (i % sk == 0 || rng.chance(0.5)) as u8 as f64)
            .collect()
    });
    Input::new("mask", &[b, sk], cpu)
        .of(dr.mask_dtype)
        .gpu(gpu)
        .grad(grad)
}

/// The case of one attention problem (f32, every check; callers narrow it).
pub fn attention_case(a: Attn, dr: Draws) -> Case {
    let mut inputs = vec![
        Input::new("q", &a.q_dims(), Draw::Normal(dr.amp)).gpu(bf16_normals(dr.amp)),
        Input::new("k", &a.k_dims(), Draw::Normal(dr.amp)).gpu(bf16_normals(dr.amp)),
        Input::new("v", &a.v_dims(), Draw::Normal(1.0)).gpu(bf16_normals(1.0)),
    ];
    if a.mask == MaskKind::Custom {
        inputs.push(keep_input(a.b, a.sk, dr));
    }
    if a.past {
        // Anywhere from an empty cache to a full one.
        let most = a.sk.saturating_sub(a.sq) as i64;
        inputs.push(Input::new("past", &[1], Draw::Ints(0, most)).of(DType::I64));
    }
    let name = format!(
        "attention {:?} b{} sq{} sk{} h{}/{} d{}/{} {:?} scale {:?} cap {:?} amp {} mask {}{}{}",
        a.layout,
        a.b,
        a.sq,
        a.sk,
        a.h,
        a.hkv,
        a.d,
        a.dv,
        a.mask,
        a.scale,
        a.cap,
        dr.amp,
        dr.mask_dtype,
        if dr.blank_last { " blank last" } else { "" },
        if a.past { " cached" } else { "" }
    );
    Case::new(name, inputs, move |dt| a.graph(dt, dr.mask_dtype))
        .out(&a.out_dims())
        .oracle(move |v, _| {
            let keep = (a.mask == MaskKind::Custom).then(|| v[3].as_slice());
            let past = a.past.then(|| v[v.len() - 1][0] as usize);
            a.oracle_past(&v[0], &v[1], &v[2], keep, past)
        })
        .wrt(&["q", "k", "v"])
}

/// An old CPU oracle case: its dtypes, parity where the kernels take them, no gradcheck.
fn cpu(a: Attn, dr: Draws, dtypes: &[DType]) -> Case {
    let c = attention_case(a, dr).dtypes(dtypes).no_grad();
    if dtypes.contains(&DType::F64) {
        c.no_parity()
    } else {
        c
    }
}

fn cpu32(a: Attn) -> Case {
    cpu(a, PLAIN, &[DType::F32])
}

/// An old parity case: the GPU floats, parity only.
fn gpu(a: Attn, dr: Draws) -> Case {
    attention_case(a, dr).dtypes(&GPU_FLOATS).only_parity()
}

fn gpu_plain(a: Attn) -> Case {
    gpu(a, PLAIN)
}

use AttentionLayout as L;
use MaskKind as M;

/// No mask, causal and sliding windows on each layout.
pub fn attention_masks() -> Vec<Case> {
    let mut cases = vec![];
    for l in LAYOUTS {
        for (b, sq, sk, h, hkv, d) in [(2, 7, 7, 3, 3, 5), (1, 5, 9, 2, 2, 16), (3, 1, 1, 1, 1, 3)]
        {
            cases.push(cpu32(Attn::new(l, b, sq, sk, h, hkv, d)));
        }
        for (b, s, h, d) in [(2, 9, 4, 8), (1, 7, 3, 5)] {
            cases.push(cpu32(Attn::new(l, b, s, s, h, h, d).mask(M::Causal)));
        }
        for w in [1, 3, 4, 20] {
            let m = M::SlidingWindow(w);
            cases.push(cpu32(Attn::new(l, 2, 13, 13, 4, 2, 5).mask(m)));
            cases.push(cpu32(Attn::new(l, 1, 2, 9, 3, 3, 6).mask(m)));
        }
        for m in [M::None, M::Causal, M::SlidingWindow(5), M::Custom] {
            cases.push(gpu_plain(Attn::new(l, 2, 33, 33, 3, 3, 32).mask(m)));
            cases.push(gpu_plain(Attn::new(l, 1, 129, 129, 2, 2, 64).mask(m)));
        }
    }
    cases
}

/// The usual head sizes over odd lengths, and head sizes off the vector loads.
pub fn attention_head_dims() -> Vec<Case> {
    let mut cases = vec![];
    for d in [32, 64, 80, 128] {
        for s in [1, 7, 33, 129, 257] {
            for m in [M::None, M::Causal] {
                // Every layout (the old test drew one at random per shape).
                for l in LAYOUTS {
                    cases.push(gpu_plain(Attn::new(l, 2, s, s, 2, 2, d).mask(m)));
                }
            }
        }
    }
    for l in LAYOUTS {
        cases.push(gpu_plain(Attn::new(l, 2, 19, 19, 3, 3, 7)));
        cases.push(gpu_plain(Attn::new(l, 1, 3, 40, 2, 2, 5).mask(M::Causal)));
    }
    cases
}

/// Grouped-query and multi-query heads.
pub fn attention_gqa() -> Vec<Case> {
    let mut cases = vec![];
    for l in LAYOUTS {
        for m in [M::None, M::Causal] {
            for (b, s, h, hkv, d) in [(2, 7, 6, 2, 5), (2, 6, 6, 1, 4), (1, 5, 8, 4, 3)] {
                cases.push(cpu32(Attn::new(l, b, s, s, h, hkv, d).mask(m)));
            }
        }
        for m in [M::None, M::Causal, M::SlidingWindow(17)] {
            cases.push(gpu_plain(Attn::new(l, 2, 129, 129, 8, 2, 64).mask(m)));
            cases.push(gpu_plain(Attn::new(l, 2, 1, 300, 8, 2, 64).mask(m)));
        }
        cases.push(gpu_plain(Attn::new(l, 1, 40, 40, 6, 1, 32)));
    }
    cases
}

/// Decode: few queries, the last positions of many keys (the split-over-keys path).
pub fn attention_decode() -> Vec<Case> {
    let mut cases = vec![];
    for l in LAYOUTS {
        for (b, sq, sk, h, hkv, d) in [(2, 1, 11, 4, 2, 8), (2, 3, 10, 6, 2, 5), (1, 3, 7, 3, 1, 7)]
        {
            cases.push(cpu32(Attn::new(l, b, sq, sk, h, hkv, d).mask(M::Causal)));
        }
        for m in [M::Causal, M::SlidingWindow(1), M::SlidingWindow(100)] {
            for (b, sq, sk, h, hkv, d) in [
                (2, 1, 257, 4, 2, 64),
                (1, 3, 1000, 4, 1, 128),
                (1, 7, 33, 2, 2, 32),
                (1, 16, 300, 2, 2, 64),
                (1, 33, 129, 2, 2, 80),
            ] {
                cases.push(gpu_plain(Attn::new(l, b, sq, sk, h, hkv, d).mask(m)));
            }
        }
        cases.push(gpu_plain(Attn::new(l, 1, 1, 4096, 8, 2, 128)));
        cases.push(gpu_plain(
            Attn::new(l, 1, 1, 4096, 8, 2, 128).mask(M::Causal),
        ));
    }
    cases
}

/// Rows that see no key: causal with more queries than keys, a blank keep-mask row.
pub fn attention_empty_rows() -> Vec<Case> {
    let mut cases = vec![];
    for l in LAYOUTS {
        cases.push(cpu32(Attn::new(l, 2, 5, 3, 2, 2, 4).mask(M::Causal)));
        cases.push(gpu_plain(Attn::new(l, 2, 40, 20, 2, 2, 32).mask(M::Causal)));
        cases.push(gpu_plain(Attn::new(l, 2, 5, 3, 2, 2, 32).mask(M::Causal)));
        for sq in [1, 70] {
            let dr = Draws {
                blank_last: true,
                ..PLAIN
            };
            cases.push(gpu(Attn::new(l, 3, sq, 70, 2, 2, 64).mask(M::Custom), dr));
        }
    }
    cases
}

/// Custom keep-masks of each dtype.
pub fn attention_custom() -> Vec<Case> {
    let mut cases = vec![];
    for l in LAYOUTS {
        for mask_dtype in [DType::Bool, DType::F32, DType::I64] {
            let dr = Draws {
                mask_dtype,
                ..PLAIN
            };
            cases.push(cpu(
                Attn::new(l, 3, 7, 7, 4, 2, 5).mask(M::Custom),
                dr,
                &[DType::F32],
            ));
            cases.push(cpu(
                Attn::new(l, 2, 3, 11, 2, 1, 6).mask(M::Custom),
                dr,
                &[DType::F32],
            ));
        }
        for mask_dtype in [DType::Bool, DType::U8, DType::F32, DType::I64] {
            for (sq, sk) in [(129, 129), (1, 257), (7, 1000), (40, 33)] {
                let dr = Draws {
                    mask_dtype,
                    ..PLAIN
                };
                cases.push(gpu(Attn::new(l, 2, sq, sk, 4, 2, 32).mask(M::Custom), dr));
            }
        }
    }
    cases
}

/// A v head size other than the q/k head size.
pub fn attention_v_dim() -> Vec<Case> {
    let mut cases = vec![];
    for l in LAYOUTS {
        for (d, dv) in [(6, 4), (4, 7), (5, 1)] {
            cases.push(cpu32(
                Attn::new(l, 2, 7, 7, 4, 2, d).v_dim(dv).mask(M::Causal),
            ));
            cases.push(cpu32(
                Attn::new(l, 1, 2, 9, 3, 1, d).v_dim(dv).mask(M::Custom),
            ));
        }
        for (d, dv) in [
            (64, 32),
            (32, 80),
            (80, 128),
            (128, 64),
            (7, 5),
            (16, 256),
            (256, 256),
        ] {
            for (sq, sk) in [(33, 33), (1, 200), (100, 130)] {
                cases.push(gpu_plain(
                    Attn::new(l, 2, sq, sk, 2, 2, d).v_dim(dv).mask(M::Causal),
                ));
            }
        }
        cases.push(gpu_plain(
            Attn::new(l, 1, 50, 50, 2, 2, 256)
                .v_dim(200)
                .mask(M::Custom),
        ));
    }
    cases
}

/// A given score scale, a logit softcap (q/k large enough that it bites), and both.
pub fn attention_scale_softcap() -> Vec<Case> {
    let mut cases = vec![];
    let amp = |amp| Draws { amp, ..PLAIN };
    for l in LAYOUTS {
        cases.push(cpu32(
            Attn::new(l, 2, 7, 7, 4, 2, 8).mask(M::Causal).scale(0.37),
        ));
        let c = Attn::new(l, 2, 9, 9, 4, 2, 8)
            .mask(M::SlidingWindow(5))
            .cap(5.0);
        cases.push(cpu(c, amp(3.0), &[DType::F32]));
        cases.push(cpu(c.scale(0.21), amp(3.0), &[DType::F32]));
        for (sq, sk) in [(65, 65), (1, 300), (9, 9)] {
            let c = Attn::new(l, 2, sq, sk, 4, 2, 64)
                .mask(M::Causal)
                .scale(0.37);
            cases.push(gpu_plain(c));
            let c = Attn::new(l, 2, sq, sk, 4, 4, 64)
                .mask(M::SlidingWindow(20))
                .cap(5.0);
            cases.push(gpu(c, amp(2.0)));
            cases.push(gpu(c.scale(0.21), amp(2.0)));
        }
    }
    cases
}

/// Half and double storage (f64 has no CUDA kernel: oracle only).
pub fn attention_storage() -> Vec<Case> {
    let mut cases = vec![];
    for dtypes in [&[DType::F16, DType::BF16][..], &[DType::F64]] {
        for l in LAYOUTS {
            cases.push(cpu(
                Attn::new(l, 2, 7, 7, 6, 2, 5).mask(M::Causal),
                PLAIN,
                dtypes,
            ));
            let c = Attn::new(l, 2, 3, 10, 4, 1, 8).mask(M::SlidingWindow(4));
            cases.push(cpu(c, PLAIN, dtypes));
            cases.push(cpu(
                Attn::new(l, 2, 5, 5, 2, 2, 6).mask(M::Custom),
                PLAIN,
                dtypes,
            ));
            let c = Attn::new(l, 1, 4, 4, 3, 3, 6).v_dim(3).scale(0.5).cap(4.0);
            cases.push(cpu(c, Draws { amp: 2.0, ..PLAIN }, dtypes));
        }
    }
    cases
}

/// Big enough that the CPU splits the work across threads.
pub fn attention_large() -> Vec<Case> {
    let mut cases = vec![];
    for l in LAYOUTS {
        cases.push(cpu32(Attn::new(l, 2, 67, 67, 8, 2, 32).mask(M::Causal)));
        let c = Attn::new(l, 3, 1, 129, 8, 8, 24).mask(M::Causal);
        cases.push(cpu(c, PLAIN, &[DType::F64]));
    }
    cases
}

/// The encoder benchmark's shape (MiniLM: 12 heads of 32, 128 tokens), plain and with a
/// padding keep-mask, at batch 1 and 32; and big prefill problems.
pub fn attention_big() -> Vec<Case> {
    let mut cases = vec![];
    for b in [1, 32] {
        cases.push(gpu_plain(Attn::new(L::Packed, b, 128, 128, 12, 12, 32)));
        cases.push(gpu_plain(
            Attn::new(L::Packed, b, 128, 128, 12, 12, 32).mask(M::Custom),
        ));
    }
    cases.push(gpu_plain(Attn::new(L::Bhsd, 4, 1024, 1024, 12, 12, 64)));
    cases.push(gpu_plain(
        Attn::new(L::Packed, 4, 1024, 1024, 12, 12, 64).mask(M::Causal),
    ));
    cases
}

/// Gradchecks (every check): each layout, every mask kind, GQA, v_head_dim, scale and
/// softcap, a query that sees no key, and q = k = v fed by one input.
pub fn attention_grad() -> Vec<Case> {
    let f64_mask = Draws {
        mask_dtype: DType::F64,
        ..PLAIN
    };
    let mut cases = vec![
        attention_case(Attn::new(L::Packed, 2, 3, 3, 2, 2, 4), PLAIN),
        attention_case(Attn::new(L::Bshd, 1, 2, 4, 2, 2, 3).mask(M::Causal), PLAIN),
        attention_case(
            Attn::new(L::Bhsd, 1, 3, 3, 4, 2, 3)
                .mask(M::SlidingWindow(2))
                .v_dim(5),
            PLAIN,
        ),
        attention_case(
            Attn::new(L::Packed, 2, 3, 4, 2, 2, 2)
                .mask(M::Custom)
                .scale(0.7)
                .cap(2.0),
            f64_mask,
        ),
        attention_case(Attn::new(L::Bshd, 1, 3, 2, 1, 1, 2).mask(M::Causal), PLAIN),
    ];
    // The three slots' contributions to a shared input must add once each.
    let a = Attn::new(L::Packed, 2, 3, 3, 2, 2, 2).mask(M::Causal);
    let x = Input::new("x", &a.q_dims(), Draw::Normal(1.0)).gpu(bf16_normals(1.0));
    cases.push(
        Case::new("self attention q = k = v", vec![x], move |dt| {
            let mut g = rlx_ir::Graph::new("self");
            let x = g.input("x", rlx_ir::Shape::new(&a.q_dims(), dt)).unwrap();
            let y = g.attention(x, x, x, None, a.spec()).unwrap();
            g.set_outputs(vec![y]);
            g
        })
        .out(&a.out_dims())
        .oracle(move |v, _| a.oracle(&v[0], &v[0], &v[0], None))
        .wrt(&["x"]),
    );
    cases
}
