//! Oracle tests: Attention (every mask kind, GQA/MQA, decode, all layouts, v_head_dim,
//! scale, softcap, storage dtypes) and its builder errors.
mod common;
use common::*;
use rlx_cpu::CpuExecutable;
use rlx_ir::{AttentionLayout, AttentionSpec, DType, Dim, Graph, HostTensor, MaskKind, Shape};

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
    dtype: DType,
    /// Standard deviation of q and k (large values make the softcap bite).
    amp: f64,
}

impl Case {
    fn new(
        layout: AttentionLayout,
        b: usize,
        sq: usize,
        sk: usize,
        h: usize,
        hkv: usize,
        d: usize,
    ) -> Case {
        Case {
            layout,
            b,
            sq,
            sk,
            h,
            hkv,
            d,
            dv: d,
            mask: MaskKind::None,
            scale: None,
            cap: None,
            dtype: DType::F32,
            amp: 1.0,
        }
    }
    fn mask(self, mask: MaskKind) -> Case {
        Case { mask, ..self }
    }
    fn dtype(self, dtype: DType) -> Case {
        Case { dtype, ..self }
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
}

/// Flat index of element (b, h, s, e) of a tensor with `heads` heads, `seq` positions and
/// head size `size`, stored in `layout`.
fn idx(
    layout: AttentionLayout,
    p: (usize, usize, usize, usize),
    heads: usize,
    seq: usize,
    size: usize,
) -> usize {
    let (b, h, s, e) = p;
    match layout {
        // [B, S, H*D]: head h owns columns h*D .. h*D + D of row (b, s).
        AttentionLayout::Packed => b * seq * (heads * size) + s * (heads * size) + (h * size + e),
        AttentionLayout::Bshd => ((b * seq + s) * heads + h) * size + e,
        AttentionLayout::Bhsd => ((b * heads + h) * seq + s) * size + e,
    }
}

/// Plain f64 attention: explicit loops, the mask rules of `MaskKind` written out.
fn oracle(c: &Case, q: &[f64], k: &[f64], v: &[f64], keep: Option<&[f64]>) -> Vec<f64> {
    let scale = c.scale.map_or(1.0 / (c.d as f64).sqrt(), |s| s as f64);
    let mut out = vec![f64::NAN; c.b * c.sq * c.h * c.dv];
    for b in 0..c.b {
        for h in 0..c.h {
            let kvh = h / (c.h / c.hkv);
            for i in 0..c.sq {
                let pos = c.sk as i64 - c.sq as i64 + i as i64;
                let mut logits: Vec<(usize, f64)> = vec![];
                for j in 0..c.sk {
                    let jj = j as i64;
                    let visible = match c.mask {
                        MaskKind::None => true,
                        MaskKind::Causal => jj <= pos,
                        MaskKind::SlidingWindow(w) => jj <= pos && pos - jj < w as i64,
                        MaskKind::Custom => keep.unwrap()[b * c.sk + j] != 0.0,
                    };
                    if !visible {
                        continue;
                    }
                    let mut s = 0.0;
                    for e in 0..c.d {
                        s += q[idx(c.layout, (b, h, i, e), c.h, c.sq, c.d)]
                            * k[idx(c.layout, (b, kvh, j, e), c.hkv, c.sk, c.d)];
                    }
                    s *= scale;
                    if let Some(cap) = c.cap {
                        let cap = cap as f64;
                        s = cap * (s / cap).tanh();
                    }
                    logits.push((j, s));
                }
                let m = logits.iter().map(|l| l.1).fold(f64::NEG_INFINITY, f64::max);
                let den: f64 = logits.iter().map(|l| (l.1 - m).exp()).sum();
                for e in 0..c.dv {
                    let mut acc = 0.0;
                    for &(j, s) in &logits {
                        acc += (s - m).exp() / den
                            * v[idx(c.layout, (b, kvh, j, e), c.hkv, c.sk, c.dv)];
                    }
                    out[idx(c.layout, (b, h, i, e), c.h, c.sq, c.dv)] = acc;
                }
            }
        }
    }
    out
}

/// Run one case on the CPU and its oracle; returns (got, want, output shape).
fn run_case(c: &Case, rng: &mut Rng, mask_dtype: DType) -> (HostTensor, Vec<f64>) {
    let (qd, kd, vd) = (
        c.dims(c.h, c.sq, c.d),
        c.dims(c.hkv, c.sk, c.d),
        c.dims(c.hkv, c.sk, c.dv),
    );
    let n = |d: &[usize]| d.iter().product::<usize>();
    let scaled = |v: Vec<f64>| v.into_iter().map(|x| x * c.amp).collect::<Vec<_>>();
    let q = through(c.dtype, &scaled(rng.normals(n(&qd))));
    let k = through(c.dtype, &scaled(rng.normals(n(&kd))));
    let v = through(c.dtype, &rng.normals(n(&vd)));
    let keep: Option<Vec<f64>> = (c.mask == MaskKind::Custom).then(|| {
        (0..c.b * c.sk)
            .map(|_| (rng.uniform() < 0.6) as u8 as f64)
            .collect()
    });

    let mut g = Graph::new("attention");
    let qi = g.input("q", Shape::new(&qd, c.dtype)).unwrap();
    let ki = g.input("k", Shape::new(&kd, c.dtype)).unwrap();
    let vi = g.input("v", Shape::new(&vd, c.dtype)).unwrap();
    let mut feeds = vec![
        ("q", HostTensor::from_f64_as(&qd, &q, c.dtype)),
        ("k", HostTensor::from_f64_as(&kd, &k, c.dtype)),
        ("v", HostTensor::from_f64_as(&vd, &v, c.dtype)),
    ];
    let mi = match &keep {
        Some(m) => {
            feeds.push(("mask", HostTensor::from_f64_as(&[c.b, c.sk], m, mask_dtype)));
            Some(
                g.input("mask", Shape::new(&[c.b, c.sk], mask_dtype))
                    .unwrap(),
            )
        }
        None => None,
    };
    let o = g.attention(qi, ki, vi, mi, c.spec()).unwrap();
    g.set_outputs(vec![o]);
    let out = run(&g, &feeds, &[]);
    assert_eq!(out[0].shape, c.dims(c.h, c.sq, c.dv), "{c:?}");
    assert_eq!(out[0].dtype, c.dtype);
    let want = oracle(c, &q, &k, &v, keep.as_deref());
    (out.into_iter().next().unwrap(), want)
}

fn check(c: &Case, rng: &mut Rng) {
    let (got, want) = run_case(c, rng, DType::Bool);
    assert_close(&format!("{c:?}"), &got, &want, c.dtype);
}

#[test]
fn attention_no_mask_each_layout() {
    let mut rng = Rng::new("attention_no_mask_each_layout");
    for l in LAYOUTS {
        check(&Case::new(l, 2, 7, 7, 3, 3, 5), &mut rng);
        check(&Case::new(l, 1, 5, 9, 2, 2, 16), &mut rng);
        check(&Case::new(l, 3, 1, 1, 1, 1, 3), &mut rng);
    }
}

#[test]
fn attention_causal_each_layout() {
    let mut rng = Rng::new("attention_causal_each_layout");
    for l in LAYOUTS {
        check(
            &Case::new(l, 2, 9, 9, 4, 4, 8).mask(MaskKind::Causal),
            &mut rng,
        );
        check(
            &Case::new(l, 1, 7, 7, 3, 3, 5).mask(MaskKind::Causal),
            &mut rng,
        );
    }
}

#[test]
fn attention_grouped_and_multi_query() {
    let mut rng = Rng::new("attention_grouped_and_multi_query");
    for l in LAYOUTS {
        for mask in [MaskKind::None, MaskKind::Causal] {
            check(&Case::new(l, 2, 7, 7, 6, 2, 5).mask(mask), &mut rng);
            check(&Case::new(l, 2, 6, 6, 6, 1, 4).mask(mask), &mut rng);
            check(&Case::new(l, 1, 5, 5, 8, 4, 3).mask(mask), &mut rng);
        }
    }
}

#[test]
fn attention_causal_decode_queries_are_the_last_positions() {
    let mut rng = Rng::new("attention_causal_decode");
    for l in LAYOUTS {
        check(
            &Case::new(l, 2, 1, 11, 4, 2, 8).mask(MaskKind::Causal),
            &mut rng,
        );
        check(
            &Case::new(l, 2, 3, 10, 6, 2, 5).mask(MaskKind::Causal),
            &mut rng,
        );
        check(
            &Case::new(l, 1, 3, 7, 3, 1, 7).mask(MaskKind::Causal),
            &mut rng,
        );
    }
}

#[test]
fn attention_sliding_window() {
    let mut rng = Rng::new("attention_sliding_window");
    for l in LAYOUTS {
        for w in [1, 3, 4, 20] {
            let m = MaskKind::SlidingWindow(w);
            check(&Case::new(l, 2, 13, 13, 4, 2, 5).mask(m), &mut rng);
            check(&Case::new(l, 1, 2, 9, 3, 3, 6).mask(m), &mut rng);
        }
    }
}

#[test]
fn attention_custom_keep_mask() {
    let mut rng = Rng::new("attention_custom_keep_mask");
    for l in LAYOUTS {
        for mask_dtype in [DType::Bool, DType::F32, DType::I64] {
            let c = Case::new(l, 3, 7, 7, 4, 2, 5).mask(MaskKind::Custom);
            let (got, want) = run_case(&c, &mut rng, mask_dtype);
            assert_close(&format!("{c:?} mask {mask_dtype}"), &got, &want, c.dtype);
            let c = Case::new(l, 2, 3, 11, 2, 1, 6).mask(MaskKind::Custom);
            let (got, want) = run_case(&c, &mut rng, mask_dtype);
            assert_close(&format!("{c:?} mask {mask_dtype}"), &got, &want, c.dtype);
        }
    }
}

/// Rows that see no key are zeros, never NaN: causal with more queries than keys, and a
/// batch whose keep-mask is all zero.
#[test]
fn attention_rows_without_keys_are_zero() {
    let mut rng = Rng::new("attention_rows_without_keys_are_zero");
    for l in LAYOUTS {
        let c = Case::new(l, 2, 5, 3, 2, 2, 4).mask(MaskKind::Causal);
        let (got, want) = run_case(&c, &mut rng, DType::Bool);
        assert_close(&format!("{c:?}"), &got, &want, c.dtype);
        let g = got.to_f64_vec();
        // Queries 0 and 1 sit at positions -2 and -1: nothing to attend to.
        for b in 0..c.b {
            for h in 0..c.h {
                for i in 0..c.sq {
                    for e in 0..c.dv {
                        let x = g[idx(l, (b, h, i, e), c.h, c.sq, c.dv)];
                        if i < 2 {
                            assert_eq!(x, 0.0, "{c:?} row {i}");
                        } else {
                            assert!(x.is_finite());
                        }
                    }
                }
            }
        }
    }

    // Custom: batch 1 masks every key.
    let (b, s, h, d) = (2, 6, 2, 4);
    let mut g = Graph::new("masked");
    let dims = [b, s, h * d];
    let q = rng.normals(b * s * h * d);
    let qi = g.input("q", Shape::new(&dims, DType::F32)).unwrap();
    let mi = g.input("m", Shape::new(&[b, s], DType::F32)).unwrap();
    let o = g
        .attention(
            qi,
            qi,
            qi,
            mi,
            AttentionSpec::new(h, d).mask(MaskKind::Custom),
        )
        .unwrap();
    g.set_outputs(vec![o]);
    let mut keep = vec![0.0; b * s];
    keep[..s].fill(1.0);
    let out = run(
        &g,
        &[
            ("q", HostTensor::from_f64_as(&dims, &q, DType::F32)),
            ("m", HostTensor::from_f64_as(&[b, s], &keep, DType::F32)),
        ],
        &[],
    );
    let got = out[0].to_f64_vec();
    let half = s * h * d;
    assert!(got[..half].iter().all(|x| x.is_finite()) && got[..half].iter().any(|&x| x != 0.0));
    assert!(
        got[half..].iter().all(|&x| x == 0.0),
        "fully masked batch must be zeros"
    );
}

#[test]
fn attention_v_head_dim_differs() {
    let mut rng = Rng::new("attention_v_head_dim_differs");
    for l in LAYOUTS {
        for (d, dv) in [(6, 4), (4, 7), (5, 1)] {
            let mut c = Case::new(l, 2, 7, 7, 4, 2, d).mask(MaskKind::Causal);
            c.dv = dv;
            check(&c, &mut rng);
            let mut c = Case::new(l, 1, 2, 9, 3, 1, d).mask(MaskKind::Custom);
            c.dv = dv;
            check(&c, &mut rng);
        }
    }
}

#[test]
fn attention_score_scale_and_softcap() {
    let mut rng = Rng::new("attention_score_scale_and_softcap");
    for l in LAYOUTS {
        let mut c = Case::new(l, 2, 7, 7, 4, 2, 8).mask(MaskKind::Causal);
        c.scale = Some(0.37);
        check(&c, &mut rng);

        let mut c = Case::new(l, 2, 9, 9, 4, 2, 8).mask(MaskKind::SlidingWindow(5));
        c.cap = Some(5.0);
        c.amp = 3.0;
        check(&c, &mut rng);
        c.scale = Some(0.21);
        check(&c, &mut rng);
    }
}

#[test]
fn attention_softcap_changes_the_result() {
    let mut rng = Rng::new("attention_softcap_changes_the_result");
    let mut c = Case::new(AttentionLayout::Bshd, 1, 6, 6, 2, 2, 8);
    c.amp = 3.0;
    let (qd, kd) = (c.dims(c.h, c.sq, c.d), c.dims(c.hkv, c.sk, c.d));
    let n = |d: &[usize]| d.iter().product::<usize>();
    let q: Vec<f64> = rng.normals(n(&qd)).iter().map(|x| x * 3.0).collect();
    let k: Vec<f64> = rng.normals(n(&kd)).iter().map(|x| x * 3.0).collect();
    let v = rng.normals(n(&kd));
    let plain = oracle(&c, &q, &k, &v, None);
    let capped = oracle(
        &Case {
            cap: Some(2.0),
            ..c
        },
        &q,
        &k,
        &v,
        None,
    );
    assert!(rel_l2(&capped, &plain) > 1e-2, "softcap too weak to test");

    let mut g = Graph::new("cap");
    let qi = g.input("q", Shape::new(&qd, DType::F64)).unwrap();
    let ki = g.input("k", Shape::new(&kd, DType::F64)).unwrap();
    let vi = g.input("v", Shape::new(&kd, DType::F64)).unwrap();
    let spec = Case {
        cap: Some(2.0),
        ..c
    }
    .spec();
    let o = g.attention(qi, ki, vi, None, spec).unwrap();
    g.set_outputs(vec![o]);
    let out = run(
        &g,
        &[
            ("q", HostTensor::from_f64(&qd, &q)),
            ("k", HostTensor::from_f64(&kd, &k)),
            ("v", HostTensor::from_f64(&kd, &v)),
        ],
        &[],
    );
    assert_close("capped f64", &out[0], &capped, DType::F64);
}

#[test]
fn attention_half_and_double_storage() {
    let mut rng = Rng::new("attention_half_and_double_storage");
    for dtype in [DType::F16, DType::BF16, DType::F64] {
        for l in LAYOUTS {
            check(
                &Case::new(l, 2, 7, 7, 6, 2, 5)
                    .mask(MaskKind::Causal)
                    .dtype(dtype),
                &mut rng,
            );
            check(
                &Case::new(l, 2, 3, 10, 4, 1, 8)
                    .mask(MaskKind::SlidingWindow(4))
                    .dtype(dtype),
                &mut rng,
            );
            check(
                &Case::new(l, 2, 5, 5, 2, 2, 6)
                    .mask(MaskKind::Custom)
                    .dtype(dtype),
                &mut rng,
            );
            let mut c = Case::new(l, 1, 4, 4, 3, 3, 6).dtype(dtype);
            c.dv = 3;
            c.scale = Some(0.5);
            c.cap = Some(4.0);
            c.amp = 2.0;
            check(&c, &mut rng);
        }
    }
}

/// Big enough that the work is split across threads.
#[test]
fn attention_larger_problem() {
    let mut rng = Rng::new("attention_larger_problem");
    for l in LAYOUTS {
        check(
            &Case::new(l, 2, 67, 67, 8, 2, 32).mask(MaskKind::Causal),
            &mut rng,
        );
        check(
            &Case::new(l, 3, 1, 129, 8, 8, 24)
                .mask(MaskKind::Causal)
                .dtype(DType::F64),
            &mut rng,
        );
    }
}

/// Symbolic sequence lengths: one compiled graph runs prefill and decode shapes.
#[test]
fn attention_dynamic_sequence_lengths() {
    let mut rng = Rng::new("attention_dynamic_sequence_lengths");
    let (b, h, hkv, d) = (2, 4, 2, 5);
    let mut g = Graph::new("dyn");
    let sym = |s: &str, heads: usize| {
        Shape::with_dims(
            vec![b.into(), Dim::dynamic(s), (heads * d).into()],
            DType::F32,
        )
    };
    let qi = g.input("q", sym("S", h)).unwrap();
    let ki = g.input("k", sym("T", hkv)).unwrap();
    let vi = g.input("v", sym("T", hkv)).unwrap();
    let o = g
        .attention(qi, ki, vi, None, AttentionSpec::new(h, d).causal())
        .unwrap();
    assert_eq!(g.shape(o).unwrap().dims[1], Dim::dynamic("S"));
    g.set_outputs(vec![o]);
    let mut exe = CpuExecutable::new(g).unwrap();
    for (sq, sk) in [(7, 7), (1, 8), (3, 11)] {
        let c = Case::new(AttentionLayout::Packed, b, sq, sk, h, hkv, d).mask(MaskKind::Causal);
        let (qd, kd) = (c.dims(h, sq, d), c.dims(hkv, sk, d));
        let q = through(DType::F32, &rng.normals(qd.iter().product()));
        let k = through(DType::F32, &rng.normals(kd.iter().product()));
        let v = through(DType::F32, &rng.normals(kd.iter().product()));
        let out = exe
            .run(&[
                ("q", HostTensor::from_f64_as(&qd, &q, DType::F32)),
                ("k", HostTensor::from_f64_as(&kd, &k, DType::F32)),
                ("v", HostTensor::from_f64_as(&kd, &v, DType::F32)),
            ])
            .unwrap();
        assert_eq!(out[0].shape, qd);
        assert_close(
            &format!("{c:?}"),
            &out[0],
            &oracle(&c, &q, &k, &v, None),
            DType::F32,
        );
    }
}

/// Symbols that bind to sizes the op cannot take fail at run time with an error.
#[test]
fn attention_bad_bound_shapes_are_errors() {
    let mut rng = Rng::new("attention_bad_bound_shapes_are_errors");
    let mut g = Graph::new("dyn");
    let sh = |s: &str| Shape::with_dims(vec![1.into(), Dim::dynamic(s), 8.into()], DType::F32);
    let qi = g.input("q", sh("S")).unwrap();
    let ki = g.input("k", sh("T1")).unwrap();
    let vi = g.input("v", sh("T2")).unwrap();
    let o = g
        .attention(qi, ki, vi, None, AttentionSpec::new(2, 4))
        .unwrap();
    g.set_outputs(vec![o]);
    let t = |s: usize, rng: &mut Rng| {
        HostTensor::from_f64_as(&[1, s, 8], &rng.normals(s * 8), DType::F32)
    };
    let r = rlx_cpu::run_graph(
        &g,
        &[],
        &[
            ("q", t(3, &mut rng)),
            ("k", t(4, &mut rng)),
            ("v", t(5, &mut rng)),
        ],
    );
    let e = r.expect_err("k and v with different lengths must fail");
    assert!(e.to_string().contains("sequence length"), "{e}");
}

#[test]
fn attention_builder_accepts_none_node_and_some() {
    let mut g = Graph::new("api");
    let q = g.input("q", Shape::new(&[1, 3, 8], DType::F32)).unwrap();
    let m = g.input("m", Shape::new(&[1, 3], DType::Bool)).unwrap();
    let spec = AttentionSpec::new(2, 4);
    g.attention(q, q, q, None, spec.clone()).unwrap();
    g.attention(q, q, q, m, spec.clone().mask(MaskKind::Custom))
        .unwrap();
    g.attention(q, q, q, Some(m), spec.mask(MaskKind::Custom))
        .unwrap();
}

#[test]
fn attention_builder_errors() {
    let f = DType::F32;
    let mut g = Graph::new("errors");
    let inp = |g: &mut Graph, dims: &[usize], dt: DType| {
        let n = g.len();
        g.input(format!("x{n}"), Shape::new(dims, dt)).unwrap()
    };
    let q = inp(&mut g, &[2, 5, 32], f); // 4 heads of 8
    let k3 = inp(&mut g, &[2, 5, 24], f); // 3 KV heads of 8: 4 is no multiple of 3
    let k2 = inp(&mut g, &[2, 5, 16], f); // 2 KV heads
    let k_odd = inp(&mut g, &[2, 5, 20], f); // not a multiple of head_dim
    let v6 = inp(&mut g, &[2, 6, 16], f); // Sk 6 vs 5
    let kb = inp(&mut g, &[3, 5, 16], f); // batch 3 vs 2
    let k_f64 = inp(&mut g, &[2, 5, 16], DType::F64);
    let q_int = inp(&mut g, &[2, 5, 32], DType::I64);
    let m = inp(&mut g, &[2, 5], DType::Bool);
    let m_bad = inp(&mut g, &[2, 4], DType::Bool);
    let q4 = inp(&mut g, &[2, 5, 4, 8], f);
    let k4 = inp(&mut g, &[2, 5, 2, 8], f);
    let v4_heads = inp(&mut g, &[2, 5, 1, 8], f);
    let spec = AttentionSpec::new(4, 8);

    let bad: Vec<(&str, Result<_, _>)> = vec![
        (
            "heads 4 over 3 kv heads",
            g.attention(q, k3, k3, None, spec.clone()),
        ),
        (
            "k last dim not a multiple",
            g.attention(q, k_odd, k_odd, None, spec.clone()),
        ),
        (
            "Sk of k and v differ",
            g.attention(q, k2, v6, None, spec.clone()),
        ),
        ("batch differs", g.attention(q, kb, kb, None, spec.clone())),
        (
            "dtype differs",
            g.attention(q, k_f64, k_f64, None, spec.clone()),
        ),
        ("integer q", g.attention(q_int, k2, k2, None, spec.clone())),
        (
            "Custom without mask",
            g.attention(q, k2, k2, None, spec.clone().mask(MaskKind::Custom)),
        ),
        (
            "Causal with mask",
            g.attention(q, k2, k2, m, spec.clone().causal()),
        ),
        ("None with mask", g.attention(q, k2, k2, m, spec.clone())),
        (
            "mask of wrong Sk",
            g.attention(q, k2, k2, m_bad, spec.clone().mask(MaskKind::Custom)),
        ),
        (
            "SlidingWindow(0)",
            g.attention(
                q,
                k2,
                k2,
                None,
                spec.clone().mask(MaskKind::SlidingWindow(0)),
            ),
        ),
        (
            "q last != H*D",
            g.attention(q, k2, k2, None, AttentionSpec::new(3, 8)),
        ),
        (
            "zero heads",
            g.attention(q, k2, k2, None, AttentionSpec::new(0, 8)),
        ),
        (
            "zero head_dim",
            g.attention(q, k2, k2, None, AttentionSpec::new(4, 0)),
        ),
        (
            "v head size",
            g.attention(q, k2, k2, None, spec.clone().v_head_dim(5)),
        ),
        (
            "softcap 0",
            g.attention(q, k2, k2, None, spec.clone().softcap(0.0)),
        ),
        (
            "nan scale",
            g.attention(q, k2, k2, None, spec.clone().scale(f32::NAN)),
        ),
        (
            "3-D input to Bshd",
            g.attention(q, k2, k2, None, spec.clone().layout(AttentionLayout::Bshd)),
        ),
        (
            "4-D input to Packed",
            g.attention(q4, k4, k4, None, spec.clone()),
        ),
        (
            "v kv heads differ",
            g.attention(
                q4,
                k4,
                v4_heads,
                None,
                spec.clone().layout(AttentionLayout::Bshd),
            ),
        ),
        (
            "Bhsd reads heads from dim 1",
            g.attention(q4, k4, k4, None, spec.clone().layout(AttentionLayout::Bhsd)),
        ),
        (
            "two inputs",
            g.add_node(rlx_ir::Op::Attention(spec.clone()), &[q, k2]),
        ),
    ];
    for (what, r) in bad {
        match r {
            Ok(id) => panic!("{what}: expected an error, got node {id}"),
            Err(e) => println!("{what}: {e}"),
        }
    }
    // The good neighbours of those calls build.
    g.attention(q, k2, k2, None, spec.clone()).unwrap();
    g.attention(q, k2, k2, m, spec.clone().mask(MaskKind::Custom))
        .unwrap();
    g.attention(q4, k4, k4, None, spec.clone().layout(AttentionLayout::Bshd))
        .unwrap();
    g.attention(q, k2, k2, None, spec.mask(MaskKind::SlidingWindow(1)))
        .unwrap();
}
