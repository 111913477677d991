//! The opset-27 sequence-model ops and ai.onnx.preview FlexAttention, each on a hand-built
//! one-node model against an independent plain f64 loop written from the operator's
//! definition: LinearAttention (all four update rules, GQA, per-key / per-head decay, shared
//! beta, erase gate, past state, explicit scale), CausalConvWithState (bias, past state, SiLU /
//! Swish, kernel size one, inputs shorter than the kernel) and FlexAttention (GQA, score_mod /
//! prob_mod subgraphs with their own initializers). Shapes and values are random (seeded),
//! in f64 so the comparison is tight; rejected attributes and inputs name the node.
mod common;
use common::*;
use prost::Message;
use rlx_ir::{DType, HostTensor};
use rlx_onnx::load_bytes;
use rlx_onnx::proto::{
    tensor_proto::DataType as P, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto,
};
use rlx_runtime::{Device, Session};
use rlx_testutil::Rng;

fn scalar_init(name: &str, v: f64) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(P::Double as i32),
        double_data: vec![v],
        ..Default::default()
    }
}

/// A named f64 input with its dims and values.
struct In {
    name: &'static str,
    dims: Vec<usize>,
    data: Vec<f64>,
}

/// One `op` node over `ins` (by position; None leaves an input slot empty) with `outs`
/// (name, dims) as the graph outputs, in `domain` at `opset`.
struct OneNode<'a> {
    op: &'a str,
    domain: &'a str,
    opset: i64,
    ins: &'a [Option<&'a In>],
    outs: &'a [(&'a str, Vec<usize>)],
    attrs: Vec<AttributeProto>,
}

fn model(m: &OneNode) -> Vec<u8> {
    let node = NodeProto {
        op_type: Some(m.op.into()),
        domain: Some(m.domain.into()),
        name: Some(format!("my_{}", m.op)),
        input: (m.ins.iter())
            .map(|i| i.map_or(String::new(), |i| i.name.to_string()))
            .collect(),
        output: m.outs.iter().map(|o| o.0.to_string()).collect(),
        attribute: m.attrs.clone(),
        ..Default::default()
    };
    let g = GraphProto {
        name: Some("g".into()),
        input: m
            .ins
            .iter()
            .flatten()
            .map(|i| value(i.name, P::Double, &i.dims))
            .collect(),
        output: m.outs.iter().map(|(n, d)| value(n, P::Double, d)).collect(),
        node: vec![node],
        ..Default::default()
    };
    let mut opset_import = vec![OperatorSetIdProto {
        domain: Some(String::new()),
        version: Some(m.opset),
    }];
    if !m.domain.is_empty() {
        opset_import.push(OperatorSetIdProto {
            domain: Some(m.domain.into()),
            version: Some(1),
        });
    }
    ModelProto {
        ir_version: Some(10),
        opset_import,
        graph: Some(g),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Import and run on the CPU; every output as f64.
fn run(m: &OneNode) -> Vec<Vec<f64>> {
    let loaded = load_bytes(&model(m), None, "sequence_ops").unwrap();
    let exe = Session::new(Device::Cpu)
        .compile(loaded.graph.clone())
        .unwrap();
    for (name, v) in &loaded.params {
        exe.set_param_typed(name, v.clone()).unwrap();
    }
    let feeds: Vec<(&str, HostTensor)> = (m.ins.iter().flatten())
        .map(|i| {
            (
                i.name,
                HostTensor::from_f64_as(&i.dims, &i.data, DType::F64),
            )
        })
        .collect();
    let outs = exe.run_typed(&feeds).unwrap();
    outs.iter().map(|t| t.to_f64_vec()).collect()
}

/// The import error's message.
fn import_error(m: &OneNode) -> String {
    match load_bytes(&model(m), None, "sequence_ops") {
        Ok(_) => panic!("{} imported, an error was expected", m.op),
        Err(e) => e.to_string(),
    }
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

/// One LinearAttention case's shape and options.
struct La {
    rule: &'static str,
    b: usize,
    t: usize,
    hkv: usize,
    group: usize,
    dk: usize,
    dv: usize,
    per_key_decay: bool,
    shared_beta: bool,
    erase: bool,
    past: bool,
    scale: Option<f64>,
}

/// The definition, step by step: per (batch, KV head) a d_k × d_v state S; at each t
/// decay S by exp(g) along d_k (gated rules), recall r = Sᵀ(e ⊙ k) and write
/// β(v − r) (delta rules) or v, S += k ⊗ write, and each of the KV head's query heads reads
/// scale · qᵀS. Returns (output [B, T, Hq·d_v], final state [B, Hkv, d_k, d_v]).
#[allow(clippy::too_many_arguments)]
fn la_ref(
    p: &La,
    q: &[f64],
    k: &[f64],
    v: &[f64],
    past: Option<&[f64]>,
    decay: Option<&[f64]>,
    beta: Option<&[f64]>,
    erase: Option<&[f64]>,
) -> (Vec<f64>, Vec<f64>) {
    let (b, t, hkv, dk, dv) = (p.b, p.t, p.hkv, p.dk, p.dv);
    let hq = hkv * p.group;
    let scale = p.scale.unwrap_or(1.0 / (dk as f64).sqrt());
    let mut out = vec![0.0; b * t * hq * dv];
    let mut state = past.map_or(vec![0.0; b * hkv * dk * dv], <[f64]>::to_vec);
    let gw = if p.per_key_decay { dk } else { 1 };
    let bw = if p.shared_beta { 1 } else { hkv };
    for bi in 0..b {
        for h in 0..hkv {
            let s = &mut state[(bi * hkv + h) * dk * dv..][..dk * dv];
            for ti in 0..t {
                let kk = |i: usize| k[((bi * t + ti) * hkv + h) * dk + i];
                let vv = |j: usize| v[((bi * t + ti) * hkv + h) * dv + j];
                if let Some(g) = decay {
                    for i in 0..dk {
                        let gi = if gw == 1 { 0 } else { i };
                        let f = g[((bi * t + ti) * hkv + h) * gw + gi].exp();
                        for j in 0..dv {
                            s[i * dv + j] *= f;
                        }
                    }
                }
                let mut w: Vec<f64> = (0..dv).map(vv).collect();
                if let Some(be) = beta {
                    let bt = be[(bi * t + ti) * bw + if bw == 1 { 0 } else { h }];
                    for (j, wj) in w.iter_mut().enumerate() {
                        let mut r = 0.0;
                        for i in 0..dk {
                            let e = erase.map_or(1.0, |e| e[((bi * t + ti) * hkv + h) * dk + i]);
                            r += s[i * dv + j] * e * kk(i);
                        }
                        *wj = bt * (*wj - r);
                    }
                }
                for i in 0..dk {
                    for j in 0..dv {
                        s[i * dv + j] += kk(i) * w[j];
                    }
                }
                for gq in 0..p.group {
                    let qh = h * p.group + gq;
                    for j in 0..dv {
                        let mut o = 0.0;
                        for i in 0..dk {
                            o += q[((bi * t + ti) * hq + qh) * dk + i] * s[i * dv + j];
                        }
                        out[((bi * t + ti) * hq + qh) * dv + j] = scale * o;
                    }
                }
            }
        }
    }
    (out, state)
}

#[test]
fn linear_attention_matches_the_recurrence() {
    let mut rng = Rng::new("linear_attention_matches_the_recurrence");
    for round in 0..12 {
        let rule = ["linear", "gated", "delta", "gated_delta"][round % 4];
        let (gating, delta) = (rule.starts_with("gated"), rule.contains("delta"));
        let p = La {
            rule,
            b: 1 + rng.below(2),
            t: 1 + rng.below(5),
            hkv: 1 + rng.below(2),
            group: 1 + rng.below(3),
            dk: 1 + rng.below(4),
            dv: 1 + rng.below(4),
            per_key_decay: rng.below(2) == 0,
            shared_beta: rng.below(2) == 0,
            erase: delta && rng.below(2) == 0,
            past: rng.below(2) == 0,
            scale: (rng.below(2) == 0).then(|| rng.range(0.2, 2.0)),
        };
        let (b, t, hq) = (p.b, p.t, p.hkv * p.group);
        let mk = |name, w: usize, data: Vec<f64>| In {
            name,
            dims: vec![b, t, w],
            data,
        };
        let q = mk("q", hq * p.dk, rng.normals(b * t * hq * p.dk));
        let k = mk("k", p.hkv * p.dk, rng.normals(b * t * p.hkv * p.dk));
        let v = mk("v", p.hkv * p.dv, rng.normals(b * t * p.hkv * p.dv));
        let gw = p.hkv * if p.per_key_decay { p.dk } else { 1 };
        let decay = gating.then(|| mk("decay", gw, rng.uniforms(b * t * gw, -1.0, 0.0)));
        let bw = if p.shared_beta { 1 } else { p.hkv };
        let beta = delta.then(|| mk("beta", bw, rng.uniforms(b * t * bw, 0.0, 1.0)));
        let ew = p.hkv * p.dk;
        let erase = p
            .erase
            .then(|| mk("erase", ew, rng.uniforms(b * t * ew, 0.0, 1.0)));
        let sdims = vec![b, p.hkv, p.dk, p.dv];
        let past = p.past.then(|| In {
            name: "past",
            data: rng.normals(sdims.iter().product()),
            dims: sdims.clone(),
        });
        let mut attrs = vec![
            attr_i("q_num_heads", hq as i64),
            attr_i("kv_num_heads", p.hkv as i64),
            attr_s("update_rule", p.rule),
        ];
        if let Some(s) = p.scale {
            attrs.push(attr_f("scale", s as f32));
        }
        let ins = [
            Some(&q),
            Some(&k),
            Some(&v),
            past.as_ref(),
            decay.as_ref(),
            beta.as_ref(),
            erase.as_ref(),
        ];
        let outs = [("y", vec![b, t, hq * p.dv]), ("state", sdims)];
        let got = run(&OneNode {
            op: "LinearAttention",
            domain: "",
            opset: 27,
            ins: &ins,
            outs: &outs,
            attrs,
        });
        // The attribute is an f32: the reference uses the same rounded value.
        let p = La {
            scale: p.scale.map(|s| s as f32 as f64),
            ..p
        };
        let data = |i: &Option<In>| i.as_ref().map(|i| i.data.clone());
        let (want_y, want_s) = la_ref(
            &p,
            &q.data,
            &k.data,
            &v.data,
            data(&past).as_deref(),
            data(&decay).as_deref(),
            data(&beta).as_deref(),
            data(&erase).as_deref(),
        );
        let what = format!(
            "{rule} b{b} t{t} hkv{} g{} dk{} dv{}",
            p.hkv, p.group, p.dk, p.dv
        );
        close(&got[0], &want_y, 1e-10, &format!("{what} output"));
        close(&got[1], &want_s, 1e-10, &format!("{what} state"));
    }
}

#[test]
fn linear_attention_rejects_what_it_does_not_do() {
    let mk = |name| In {
        name,
        dims: vec![1, 2, 4],
        data: vec![0.5; 8],
    };
    let (q, decay) = (mk("q"), mk("decay"));
    let heads = || vec![attr_i("q_num_heads", 2), attr_i("kv_num_heads", 2)];
    let outs = [("y", vec![1, 2, 4]), ("state", vec![1, 2, 2, 2])];
    let case = |ins: &[Option<&In>], attrs: Vec<AttributeProto>| {
        import_error(&OneNode {
            op: "LinearAttention",
            domain: "",
            opset: 27,
            ins,
            outs: &outs,
            attrs,
        })
    };
    let three = [Some(&q), Some(&q), Some(&q)];
    let mut a = heads();
    a.push(attr_s("update_rule", "linear"));
    a.push(attr_i("mystery", 1));
    let e = case(&three, a);
    assert!(
        e.contains("my_LinearAttention") && e.contains("mystery"),
        "{e}"
    );
    let mut a = heads();
    a.push(attr_s("update_rule", "linear"));
    let e = case(&[Some(&q), Some(&q), Some(&q), None, Some(&decay)], a);
    assert!(
        e.contains("my_LinearAttention") && e.contains("decay"),
        "{e}"
    );
    // The default rule (gated_delta) needs decay and beta.
    let e = case(&three, heads());
    assert!(e.contains("requires decay"), "{e}");
    let mut a = heads();
    a.push(attr_s("update_rule", "softmax"));
    let e = case(&three, a);
    assert!(e.contains("update_rule \"softmax\""), "{e}");
    let long = In {
        name: "q",
        dims: vec![1, 4097, 2],
        data: vec![0.5; 8194],
    };
    let mut a = vec![attr_i("q_num_heads", 1), attr_i("kv_num_heads", 1)];
    a.push(attr_s("update_rule", "linear"));
    let e = import_error(&OneNode {
        op: "LinearAttention",
        domain: "",
        opset: 27,
        ins: &[Some(&long), Some(&long), Some(&long)],
        outs: &[("y", vec![1, 4097, 2]), ("state", vec![1, 1, 2, 2])],
        attrs: a,
    });
    assert!(
        e.contains("my_LinearAttention") && e.contains("4097"),
        "{e}"
    );
}

#[test]
fn causal_conv_with_state_matches_a_loop() {
    let mut rng = Rng::new("causal_conv_with_state_matches_a_loop");
    for round in 0..10 {
        let (b, ch, len, k) = (
            1 + rng.below(2),
            1 + rng.below(4),
            1 + rng.below(6),
            1 + rng.below(5),
        );
        let act = ["none", "silu", "swish"][round % 3];
        let x = In {
            name: "x",
            dims: vec![b, ch, len],
            data: rng.normals(b * ch * len),
        };
        let w = In {
            name: "w",
            dims: vec![ch, 1, k],
            data: rng.normals(ch * k),
        };
        let bias = (rng.below(2) == 0).then(|| In {
            name: "bias",
            dims: vec![ch],
            data: rng.normals(ch),
        });
        let past = (rng.below(2) == 0).then(|| In {
            name: "past",
            dims: vec![b, ch, k - 1],
            data: rng.normals(b * ch * (k - 1)),
        });
        let mut attrs = vec![];
        if act != "none" || rng.below(2) == 0 {
            attrs.push(attr_s("activation", act));
        }
        let got = run(&OneNode {
            op: "CausalConvWithState",
            domain: "",
            opset: 27,
            ins: &[Some(&x), Some(&w), bias.as_ref(), past.as_ref()],
            outs: &[("y", vec![b, ch, len]), ("state", vec![b, ch, k - 1])],
            attrs,
        });
        let (mut want_y, mut want_s) = (vec![], vec![]);
        for bi in 0..b {
            for c in 0..ch {
                // The padded row: the carried state (or zeros), then the input.
                let mut seq: Vec<f64> = match &past {
                    Some(p) => p.data[(bi * ch + c) * (k - 1)..][..k - 1].to_vec(),
                    None => vec![0.0; k - 1],
                };
                seq.extend(&x.data[(bi * ch + c) * len..][..len]);
                for t in 0..len {
                    let mut acc = bias.as_ref().map_or(0.0, |b| b.data[c]);
                    for j in 0..k {
                        acc += w.data[c * k + j] * seq[t + j];
                    }
                    if act != "none" {
                        acc /= 1.0 + (-acc).exp();
                    }
                    want_y.push(acc);
                }
                want_s.extend(&seq[len..]);
            }
        }
        let what = format!("{act} b{b} c{ch} l{len} k{k}");
        close(&got[0], &want_y, 1e-12, &format!("{what} output"));
        close(&got[1], &want_s, 0.0, &format!("{what} state"));
    }
}

#[test]
fn causal_conv_with_state_rejects_what_it_does_not_do() {
    let x = In {
        name: "x",
        dims: vec![1, 2, 3],
        data: vec![0.5; 6],
    };
    let w = In {
        name: "w",
        dims: vec![2, 1, 2],
        data: vec![0.25; 4],
    };
    let case = |w: &In, attrs| {
        import_error(&OneNode {
            op: "CausalConvWithState",
            domain: "",
            opset: 27,
            ins: &[Some(&x), Some(w)],
            outs: &[("y", vec![1, 2, 3]), ("state", vec![1, 2, 1])],
            attrs,
        })
    };
    let e = case(&w, vec![attr_s("activation", "gelu")]);
    assert!(
        e.contains("my_CausalConvWithState") && e.contains("gelu"),
        "{e}"
    );
    let e = case(&w, vec![attr_i("ndim", 1)]);
    assert!(e.contains("ndim"), "{e}");
    let w3 = In {
        name: "w",
        dims: vec![2, 2, 2],
        data: vec![0.25; 8],
    };
    let e = case(&w3, vec![]);
    assert!(e.contains("weight"), "{e}");
}

/// A one-node subgraph `out = op(x, c)` with scalar initializer `c`.
fn modifier(op: &str, x: &str, c: f64, dims: &[usize]) -> GraphProto {
    GraphProto {
        name: Some(format!("{op}_mod")),
        input: vec![value(x, P::Double, dims)],
        output: vec![value(&format!("{x}_out"), P::Double, dims)],
        initializer: vec![scalar_init(&format!("{x}_c"), c)],
        node: vec![NodeProto {
            op_type: Some(op.into()),
            input: vec![x.into(), format!("{x}_c")],
            output: vec![format!("{x}_out")],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn flex_attention_matches_a_loop() {
    let mut rng = Rng::new("flex_attention_matches_a_loop");
    for round in 0..6 {
        let (b, hkv, g) = (1 + rng.below(2), 1 + rng.below(2), 1 + rng.below(3));
        let (l, s, e, ev) = (
            1 + rng.below(4),
            1 + rng.below(5),
            1 + rng.below(4),
            1 + rng.below(4),
        );
        let hq = hkv * g;
        let mk = |name, dims: Vec<usize>, rng: &mut Rng| In {
            name,
            data: rng.normals(dims.iter().product()),
            dims,
        };
        let q = mk("q", vec![b, hq, l, e], &mut rng);
        let k = mk("k", vec![b, hkv, s, e], &mut rng);
        let v = mk("v", vec![b, hkv, s, ev], &mut rng);
        let bias = rng.range(-1.0, 1.0);
        let pscale = rng.range(0.5, 2.0);
        let scale = (round % 2 == 0).then(|| rng.range(0.1, 1.0) as f32 as f64);
        let sdims = [b, hq, l, s];
        let mut attrs = vec![];
        if let Some(sc) = scale {
            attrs.push(attr_f("scale", sc as f32));
        }
        let (score_mod, prob_mod) = (round % 3 != 1, round % 3 != 2);
        if score_mod {
            attrs.push(attr_g("score_mod", modifier("Add", "sc", bias, &sdims)));
        }
        if prob_mod {
            attrs.push(attr_g("prob_mod", modifier("Mul", "pr", pscale, &sdims)));
        }
        let got = run(&OneNode {
            op: "FlexAttention",
            domain: "ai.onnx.preview",
            opset: 26,
            ins: &[Some(&q), Some(&k), Some(&v)],
            outs: &[("y", vec![b, hq, l, ev])],
            attrs,
        });
        let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
        let mut want = vec![];
        for bi in 0..b {
            for h in 0..hq {
                let kh = h / g;
                for i in 0..l {
                    let mut sc: Vec<f64> = (0..s)
                        .map(|j| {
                            let dot: f64 = (0..e)
                                .map(|d| {
                                    q.data[((bi * hq + h) * l + i) * e + d]
                                        * k.data[((bi * hkv + kh) * s + j) * e + d]
                                })
                                .sum();
                            dot * scale + if score_mod { bias } else { 0.0 }
                        })
                        .collect();
                    let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
                    for x in sc.iter_mut() {
                        *x = (*x - m).exp() / z * if prob_mod { pscale } else { 1.0 };
                    }
                    for d in 0..ev {
                        let y: f64 = (0..s)
                            .map(|j| sc[j] * v.data[((bi * hkv + kh) * s + j) * ev + d])
                            .sum();
                        want.push(y);
                    }
                }
            }
        }
        let what = format!("b{b} hkv{hkv} g{g} l{l} s{s} e{e} ev{ev}");
        close(&got[0], &want, 1e-12, &what);
    }
}
