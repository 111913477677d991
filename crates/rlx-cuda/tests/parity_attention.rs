//! GPU parity: Attention — every mask kind, GQA, decode (few queries, many keys: the
//! split-over-keys path), custom keep-masks of several dtypes, softcap, score scale,
//! v_head_dim ≠ head_dim, all three layouts, odd lengths and the usual head dims.
//! Feeds are rounded to bf16 precision so every storage dtype holds them exactly and the
//! f64 oracle sees the same inputs.
mod common;
use common::*;
use rlx_cuda::CudaOptions;
use rlx_ir::{AttentionLayout, AttentionSpec, DType, Graph, MaskKind, Shape};

const LAYOUTS: [AttentionLayout; 3] = [
    AttentionLayout::Packed,
    AttentionLayout::Bshd,
    AttentionLayout::Bhsd,
];

#[derive(Clone, Copy, Debug)]
struct Case {
    layout: AttentionLayout,
    b: usize,
    sq: usize,
    sk: usize,
    h: usize,
    hkv: usize,
    d: usize,
    dv: usize,
    mask: MaskKind,
    scale: Option<f32>,
    cap: Option<f32>,
    /// Standard deviation of q and k.
    amp: f64,
    mask_dtype: DType,
    /// Custom masks: the last batch item masks every key (its rows must be zeros).
    blank_last: bool,
}

fn case(layout: AttentionLayout, b: usize, sq: usize, sk: usize, h: usize, d: usize) -> Case {
    Case {
        layout,
        b,
        sq,
        sk,
        h,
        hkv: h,
        d,
        dv: d,
        mask: MaskKind::None,
        scale: None,
        cap: None,
        amp: 1.0,
        mask_dtype: DType::Bool,
        blank_last: false,
    }
}

impl Case {
    fn mask(self, mask: MaskKind) -> Case {
        Case { mask, ..self }
    }
    fn kv_heads(self, hkv: usize) -> Case {
        Case { hkv, ..self }
    }
    fn v_dim(self, dv: usize) -> Case {
        Case { dv, ..self }
    }
    fn dims(&self, heads: usize, seq: usize, size: usize) -> Vec<usize> {
        match self.layout {
            AttentionLayout::Packed => vec![self.b, seq, heads * size],
            AttentionLayout::Bshd => vec![self.b, seq, heads, size],
            AttentionLayout::Bhsd => vec![self.b, heads, seq, size],
        }
    }
    fn spec(&self) -> AttentionSpec {
        let mut s = AttentionSpec::new(self.h, self.d)
            .layout(self.layout)
            .mask(self.mask);
        if self.dv != self.d {
            s = s.v_head_dim(self.dv);
        }
        if let Some(x) = self.scale {
            s = s.scale(x);
        }
        if let Some(c) = self.cap {
            s = s.softcap(c);
        }
        s
    }
    fn graph(&self, dtype: DType) -> Graph {
        let mut g = Graph::new("attention");
        let q = g
            .input("q", Shape::new(&self.dims(self.h, self.sq, self.d), dtype))
            .unwrap();
        let k = g
            .input(
                "k",
                Shape::new(&self.dims(self.hkv, self.sk, self.d), dtype),
            )
            .unwrap();
        let v = g
            .input(
                "v",
                Shape::new(&self.dims(self.hkv, self.sk, self.dv), dtype),
            )
            .unwrap();
        let m = (self.mask == MaskKind::Custom).then(|| {
            g.input("mask", Shape::new(&[self.b, self.sk], self.mask_dtype))
                .unwrap()
        });
        let o = g.attention(q, k, v, m, self.spec()).unwrap();
        g.set_outputs(vec![o]);
        g
    }
    fn feeds(&self, rng: &mut Rng) -> Vec<Feed> {
        let rounded = |rng: &mut Rng, dims: &[usize], amp: f64| -> Vec<f64> {
            let n = dims.iter().product();
            rng.normals(n)
                .into_iter()
                .map(|x| bf16_round(x * amp))
                .collect()
        };
        let (qd, kd, vd) = (
            self.dims(self.h, self.sq, self.d),
            self.dims(self.hkv, self.sk, self.d),
            self.dims(self.hkv, self.sk, self.dv),
        );
        let mut f = vec![
            feed("q", &qd, rounded(rng, &qd, self.amp)),
            feed("k", &kd, rounded(rng, &kd, self.amp)),
            feed("v", &vd, rounded(rng, &vd, 1.0)),
        ];
        if self.mask == MaskKind::Custom {
            let mut keep = Vec::with_capacity(self.b * self.sk);
            for bi in 0..self.b {
                let mut row: Vec<f64> = (0..self.sk)
                    .map(|_| (rng.uniform() < 0.6) as u8 as f64)
                    .collect();
                if self.blank_last && bi + 1 == self.b {
                    row.fill(0.0);
                } else if self.sk > 0 {
                    // At least one key to attend to per row.
                    row[rng.below(self.sk)] = 1.0;
                }
                keep.extend(row);
            }
            f.push(feed("mask", &[self.b, self.sk], keep));
        }
        f
    }
}

/// Nearest bf16 value (round to nearest even), as f64.
fn bf16_round(x: f64) -> f64 {
    let b = (x as f32).to_bits();
    let r = b.wrapping_add(0x7fff + ((b >> 16) & 1)) & 0xffff_0000;
    f32::from_bits(r) as f64
}

fn check(name: &str, c: &Case, rng: &mut Rng) {
    let feeds = c.feeds(rng);
    for dt in FLOATS {
        parity(&format!("{name} {c:?}"), &|d| c.graph(d), &feeds, dt);
    }
}

#[test]
fn attention_mask_kinds_each_layout() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_mask_kinds_each_layout");
    for l in LAYOUTS {
        for m in [
            MaskKind::None,
            MaskKind::Causal,
            MaskKind::SlidingWindow(5),
            MaskKind::Custom,
        ] {
            check("masks", &case(l, 2, 33, 33, 3, 32).mask(m), &mut rng);
            check("masks", &case(l, 1, 129, 129, 2, 64).mask(m), &mut rng);
        }
    }
}

#[test]
fn attention_head_dims_and_odd_lengths() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_head_dims_and_odd_lengths");
    for d in [32, 64, 80, 128] {
        for s in [1, 7, 33, 129, 257] {
            for m in [MaskKind::None, MaskKind::Causal] {
                let l = LAYOUTS[rng.below(3)];
                check("dims", &case(l, 2, s, s, 2, d).mask(m), &mut rng);
            }
        }
    }
    // Head sizes that are not a multiple of 4 take the scalar load paths.
    for l in LAYOUTS {
        check("odd d", &case(l, 2, 19, 19, 3, 7), &mut rng);
        check(
            "odd d",
            &case(l, 1, 3, 40, 2, 5).mask(MaskKind::Causal),
            &mut rng,
        );
    }
}

#[test]
fn attention_grouped_query_heads() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_grouped_query_heads");
    for l in LAYOUTS {
        for m in [
            MaskKind::None,
            MaskKind::Causal,
            MaskKind::SlidingWindow(17),
        ] {
            check(
                "gqa",
                &case(l, 2, 129, 129, 8, 64).kv_heads(2).mask(m),
                &mut rng,
            );
            check(
                "gqa",
                &case(l, 2, 1, 300, 8, 64).kv_heads(2).mask(m),
                &mut rng,
            );
        }
        check("mqa", &case(l, 1, 40, 40, 6, 32).kv_heads(1), &mut rng);
    }
}

#[test]
fn attention_decode_causal_and_sliding() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_decode_causal_and_sliding");
    for l in LAYOUTS {
        for m in [
            MaskKind::Causal,
            MaskKind::SlidingWindow(1),
            MaskKind::SlidingWindow(100),
        ] {
            // Split-over-keys path (few queries), one and many chunks.
            check(
                "decode",
                &case(l, 2, 1, 257, 4, 64).kv_heads(2).mask(m),
                &mut rng,
            );
            check(
                "decode",
                &case(l, 1, 3, 1000, 4, 128).kv_heads(1).mask(m),
                &mut rng,
            );
            check("decode", &case(l, 1, 7, 33, 2, 32).mask(m), &mut rng);
            // Query tiles that are the last positions of a longer key sequence.
            check("decode", &case(l, 1, 16, 300, 2, 64).mask(m), &mut rng);
            check("decode", &case(l, 1, 33, 129, 2, 80).mask(m), &mut rng);
        }
        check(
            "decode none",
            &case(l, 1, 1, 4096, 8, 128).kv_heads(2),
            &mut rng,
        );
        check(
            "decode long",
            &case(l, 1, 1, 4096, 8, 128)
                .kv_heads(2)
                .mask(MaskKind::Causal),
            &mut rng,
        );
    }
}

#[test]
fn attention_rows_without_keys_are_zero() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_rows_without_keys_are_zero");
    for l in LAYOUTS {
        // More queries than keys: the first queries sit before every key.
        check(
            "empty rows",
            &case(l, 2, 40, 20, 2, 32).mask(MaskKind::Causal),
            &mut rng,
        );
        check(
            "empty rows",
            &case(l, 2, 5, 3, 2, 32).mask(MaskKind::Causal),
            &mut rng,
        );
        // A batch item whose keep-mask is all zero, both paths.
        for sq in [1, 70] {
            let mut c = case(l, 3, sq, 70, 2, 64).mask(MaskKind::Custom);
            c.blank_last = true;
            check("blank mask", &c, &mut rng);
        }
    }
}

#[test]
fn attention_custom_keep_mask_dtypes() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_custom_keep_mask_dtypes");
    for l in LAYOUTS {
        for md in [DType::Bool, DType::U8, DType::F32, DType::I64] {
            for (sq, sk) in [(129, 129), (1, 257), (7, 1000), (40, 33)] {
                let mut c = case(l, 2, sq, sk, 4, 32).kv_heads(2).mask(MaskKind::Custom);
                c.mask_dtype = md;
                check("custom", &c, &mut rng);
            }
        }
    }
}

#[test]
fn attention_softcap_and_score_scale() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_softcap_and_score_scale");
    for l in LAYOUTS {
        for (sq, sk) in [(65, 65), (1, 300), (9, 9)] {
            let mut c = case(l, 2, sq, sk, 4, 64).kv_heads(2).mask(MaskKind::Causal);
            c.scale = Some(0.37);
            check("scale", &c, &mut rng);
            let mut c = case(l, 2, sq, sk, 4, 64).mask(MaskKind::SlidingWindow(20));
            c.cap = Some(5.0);
            c.amp = 2.0;
            check("softcap", &c, &mut rng);
            c.scale = Some(0.21);
            check("softcap+scale", &c, &mut rng);
        }
    }
}

#[test]
fn attention_v_head_dim_differs() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_v_head_dim_differs");
    for l in LAYOUTS {
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
                let c = case(l, 2, sq, sk, 2, d).v_dim(dv).mask(MaskKind::Causal);
                check("v dim", &c, &mut rng);
            }
        }
        let c = case(l, 1, 50, 50, 2, 256).v_dim(200).mask(MaskKind::Custom);
        check("v dim custom", &c, &mut rng);
    }
}

/// The encoder benchmark's shape (MiniLM: 12 heads of 32, 128 tokens) with and without a
/// padding keep-mask, at batch 1 and 32.
/// The lowering times its query-tile variants and keeps the fastest, so which one a shape
/// gets depends on the GPU: force each in turn (64/32/16 query rows for the SIMT kernel,
/// 4/2/1 warps for the tensor-core one) over head sizes, masks and ragged tiles.
#[test]
fn attention_every_tile_variant() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_every_tile_variant");
    let cases = [
        case(AttentionLayout::Packed, 2, 45, 45, 3, 32).mask(MaskKind::Causal),
        case(AttentionLayout::Bhsd, 1, 70, 83, 2, 64).mask(MaskKind::Custom),
        case(AttentionLayout::Bshd, 2, 33, 33, 2, 128).mask(MaskKind::SlidingWindow(9)),
        case(AttentionLayout::Packed, 1, 37, 37, 2, 80),
        case(AttentionLayout::Bhsd, 2, 29, 29, 2, 7),
    ];
    for c in &cases {
        let feeds = c.feeds(&mut rng);
        for variant in 0..3 {
            let opts = CudaOptions {
                force_variant: Some(variant),
                ..CudaOptions::strict()
            };
            for dt in FLOATS {
                parity_with(
                    &format!("variant {variant} {c:?}"),
                    &|d| c.graph(d),
                    &feeds,
                    dt,
                    opts.clone(),
                    OpKindSet::empty(),
                );
            }
        }
    }
}

#[test]
fn attention_encoder_shapes() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_encoder_shapes");
    for b in [1, 32] {
        check(
            "encoder",
            &case(AttentionLayout::Packed, b, 128, 128, 12, 32),
            &mut rng,
        );
        let c = case(AttentionLayout::Packed, b, 128, 128, 12, 32).mask(MaskKind::Custom);
        check("encoder masked", &c, &mut rng);
    }
}

#[test]
fn attention_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("attention_big");
    check(
        "big",
        &case(AttentionLayout::Bhsd, 4, 1024, 1024, 12, 64),
        &mut rng,
    );
    check(
        "big causal",
        &case(AttentionLayout::Packed, 4, 1024, 1024, 12, 64).mask(MaskKind::Causal),
        &mut rng,
    );
}
