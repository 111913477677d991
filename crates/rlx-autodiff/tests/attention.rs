//! Finite-difference checks: Attention (each layout, every mask kind, GQA, v_head_dim,
//! custom scale, soft cap, queries that see no key) and Rope (both styles, partial rotation).
mod common;
use common::*;
use rlx_ir::{
    AttentionLayout, AttentionSpec, DType, Graph, HostTensor, MaskKind, Op, RopeStyle, Shape,
};

struct Case {
    name: &'static str,
    spec: AttentionSpec,
    q: Vec<usize>,
    k: Vec<usize>,
    v: Vec<usize>,
    mask: Option<Vec<usize>>,
}

#[test]
fn attention_vjp() {
    let mut rng = Rng::new("attention_vjp");
    let cases = vec![
        Case {
            name: "packed, no mask",
            spec: AttentionSpec::new(2, 4),
            q: vec![2, 3, 8],
            k: vec![2, 3, 8],
            v: vec![2, 3, 8],
            mask: None,
        },
        Case {
            name: "bshd causal, Sq < Sk (decode)",
            spec: AttentionSpec::new(2, 3)
                .causal()
                .layout(AttentionLayout::Bshd),
            q: vec![1, 2, 2, 3],
            k: vec![1, 4, 2, 3],
            v: vec![1, 4, 2, 3],
            mask: None,
        },
        Case {
            name: "bhsd sliding window, GQA 4/2, v_head_dim 5",
            spec: AttentionSpec::new(4, 3)
                .mask(MaskKind::SlidingWindow(2))
                .layout(AttentionLayout::Bhsd)
                .v_head_dim(5),
            q: vec![1, 4, 3, 3],
            k: vec![1, 2, 3, 3],
            v: vec![1, 2, 3, 5],
            mask: None,
        },
        Case {
            name: "packed custom mask, scale, softcap",
            spec: AttentionSpec::new(2, 2)
                .mask(MaskKind::Custom)
                .scale(0.7)
                .softcap(2.0),
            q: vec![2, 3, 4],
            k: vec![2, 4, 4],
            v: vec![2, 4, 4],
            mask: Some(vec![2, 4]),
        },
        Case {
            name: "bshd causal, Sq > Sk (first query sees nothing)",
            spec: AttentionSpec::new(1, 2)
                .causal()
                .layout(AttentionLayout::Bshd),
            q: vec![1, 3, 1, 2],
            k: vec![1, 2, 1, 2],
            v: vec![1, 2, 1, 2],
            mask: None,
        },
    ];
    for c in cases {
        let mut g = Graph::new("attn");
        let q = f64_input(&mut g, "q", &c.q);
        let k = f64_input(&mut g, "k", &c.k);
        let v = f64_input(&mut g, "v", &c.v);
        let mut ins = vec![q, k, v];
        let mut feed = vec![
            ("q", rng.tensor(&c.q)),
            ("k", rng.tensor(&c.k)),
            ("v", rng.tensor(&c.v)),
        ];
        if let Some(md) = &c.mask {
            let m = g.input("mask", Shape::new(md, DType::F64)).unwrap();
            ins.push(m);
            // Keep key 0 of every row; drop others at random.
            let n: usize = md.iter().product();
            let vals: Vec<f64> = (0..n)
                .map(|i| {
                    if i % md[1] == 0 || rng.uniform() < 0.5 {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            feed.push(("mask", HostTensor::from_f64(md, &vals)));
        }
        let y = g.add_node(Op::Attention(c.spec.clone()), &ins).unwrap();
        g.set_outputs(vec![y]);
        gradcheck(c.name, &g, &feed, &[q, k, v], &mut rng);
    }
}

#[test]
fn self_attention_shared_input_vjp() {
    // q = k = v = x: the three slots' contributions must add once each.
    let mut rng = Rng::new("self_attention_shared_input_vjp");
    let mut g = Graph::new("self");
    let x = f64_input(&mut g, "x", &[2, 3, 4]);
    let y = g
        .add_node(Op::Attention(AttentionSpec::new(2, 2).causal()), &[x, x, x])
        .unwrap();
    g.set_outputs(vec![y]);
    gradcheck(
        "self attention",
        &g,
        &[("x", rng.tensor(&[2, 3, 4]))],
        &[x],
        &mut rng,
    );
}

#[test]
fn rope_vjp() {
    let mut rng = Rng::new("rope_vjp");
    // (x dims, cos dims, head_dim, n_rot)
    let cases: [(&[usize], &[usize], usize, usize); 3] = [
        (&[2, 3, 8], &[3, 1, 2], 4, 4),
        (&[1, 2, 3, 6], &[3, 2], 6, 4),
        (&[2, 5, 6], &[5, 3], 6, 6),
    ];
    for style in [RopeStyle::Half, RopeStyle::Interleaved] {
        for (xd, cd, head_dim, n_rot) in cases {
            let mut g = Graph::new("rope");
            let x = f64_input(&mut g, "x", xd);
            let c = f64_input(&mut g, "cos", cd);
            let s = f64_input(&mut g, "sin", cd);
            let y = g
                .add_node(
                    Op::Rope {
                        head_dim,
                        n_rot,
                        style,
                    },
                    &[x, c, s],
                )
                .unwrap();
            g.set_outputs(vec![y]);
            let n: usize = cd.iter().product();
            let th = rng.uniforms(n, -3.0, 3.0);
            let cos: Vec<f64> = th.iter().map(|t| t.cos()).collect();
            let sin: Vec<f64> = th.iter().map(|t| t.sin()).collect();
            gradcheck(
                &format!("rope {style:?} {xd:?} n_rot {n_rot}"),
                &g,
                &[
                    ("x", rng.tensor(xd)),
                    ("cos", HostTensor::from_f64(cd, &cos)),
                    ("sin", HostTensor::from_f64(cd, &sin)),
                ],
                &[x],
                &mut rng,
            );
        }
    }
}
