//! Oracle tests of Attention: the per-op cases (every mask kind, GQA/MQA, decode, all
//! layouts, v_head_dim, scale, softcap, keep-mask and storage dtypes) and those of Rope and
//! FusedSwiGLU come from rlx-testutil's transformer case table; below them the tests that
//! are not per-op cases (exact zeros of rows without keys, softcap strength, dynamic
//! lengths, bad bound shapes, builder errors).
mod common;
use common::*;
use rlx_cpu::CpuExecutable;
use rlx_ir::{AttentionLayout, AttentionSpec, DType, Dim, Graph, HostTensor, MaskKind, Shape};
use rlx_testutil::cases::transformer::{Attn, LAYOUTS};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(transformer, cpu);

/// Rows that see no key are zeros, never NaN: causal with more queries than keys, and a
/// batch whose keep-mask is all zero.
#[test]
fn attention_rows_without_keys_are_zero() {
    let mut rng = Rng::new("attention_rows_without_keys_are_zero");
    for l in LAYOUTS {
        let c = Attn::new(l, 2, 5, 3, 2, 2, 4).mask(MaskKind::Causal);
        let n = |d: &[usize]| d.iter().product::<usize>();
        let q = through(DType::F32, &rng.normals(n(&c.q_dims())));
        let k = through(DType::F32, &rng.normals(n(&c.k_dims())));
        let v = through(DType::F32, &rng.normals(n(&c.v_dims())));
        let f = |name, d: Vec<usize>, x: &[f64]| (name, HostTensor::from_f64_as(&d, x, DType::F32));
        let feeds = [
            f("q", c.q_dims(), &q),
            f("k", c.k_dims(), &k),
            f("v", c.v_dims(), &v),
        ];
        let got = run(&c.graph(DType::F32, DType::Bool), &feeds, &[]);
        assert_close(
            &format!("{c:?}"),
            &got[0],
            &c.oracle(&q, &k, &v, None),
            DType::F32,
        );
        let g = got[0].to_f64_vec();
        // Queries 0 and 1 sit at positions -2 and -1: nothing to attend to.
        for b in 0..c.b {
            for h in 0..c.h {
                for i in 0..c.sq {
                    for e in 0..c.dv {
                        let x = g[c.idx((b, h, i, e), c.h, c.sq, c.dv)];
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
fn attention_softcap_changes_the_result() {
    let mut rng = Rng::new("attention_softcap_changes_the_result");
    let c = Attn::new(AttentionLayout::Bshd, 1, 6, 6, 2, 2, 8);
    let (qd, kd) = (c.q_dims(), c.k_dims());
    let n = |d: &[usize]| d.iter().product::<usize>();
    let q: Vec<f64> = rng.normals(n(&qd)).iter().map(|x| x * 3.0).collect();
    let k: Vec<f64> = rng.normals(n(&kd)).iter().map(|x| x * 3.0).collect();
    let v = rng.normals(n(&kd));
    let plain = c.oracle(&q, &k, &v, None);
    let capped = c.cap(2.0).oracle(&q, &k, &v, None);
    assert!(rel_l2(&capped, &plain) > 1e-2, "softcap too weak to test");

    let mut g = Graph::new("cap");
    let qi = g.input("q", Shape::new(&qd, DType::F64)).unwrap();
    let ki = g.input("k", Shape::new(&kd, DType::F64)).unwrap();
    let vi = g.input("v", Shape::new(&kd, DType::F64)).unwrap();
    let spec = c.cap(2.0).spec();
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
        let c = Attn::new(AttentionLayout::Packed, b, sq, sk, h, hkv, d).mask(MaskKind::Causal);
        let (qd, kd) = (c.q_dims(), c.k_dims());
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
            &c.oracle(&q, &k, &v, None),
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
