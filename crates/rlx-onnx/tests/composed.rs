//! Translators that compose an ONNX op from several IR ops, each on a hand-built one-node
//! model against an independent plain f64 loop: Atan / Asin / Acos, CumProd (every
//! exclusive / reverse combination), Pad's edge / reflect / wrap modes, Det, DFT and an
//! unrolled Scan. Inputs are random (seeded), in f64 so the comparison is tight.
mod common;
use common::*;
use prost::Message;
use rlx_ir::HostTensor;
use rlx_onnx::load_bytes;
use rlx_onnx::proto::{
    tensor_proto::DataType as P, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto,
};
use rlx_runtime::{Device, Session};
use rlx_testutil::Rng;

/// Import a one-graph model, run it on the CPU with one f64 input `x`, return output 0.
fn run(g: GraphProto, opset: i64, dims: &[usize], x: &[f64]) -> HostTensor {
    let bytes = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(g),
        ..Default::default()
    }
    .encode_to_vec();
    let m = load_bytes(&bytes, None, "composed").unwrap();
    let exe = Session::new(Device::Cpu).compile(m.graph.clone()).unwrap();
    for (name, v) in &m.params {
        exe.set_param_typed(name, v.clone()).unwrap();
    }
    let x = HostTensor::from_f64_as(dims, x, rlx_ir::DType::F64);
    exe.run_typed(&[("x", x)]).unwrap().remove(0)
}

fn graph(nodes: Vec<NodeProto>, dims: &[usize], inits: Vec<TensorProto>) -> GraphProto {
    GraphProto {
        name: Some("g".into()),
        input: vec![value("x", P::Double, dims)],
        output: vec![value("y", P::Double, &[])],
        initializer: inits,
        node: nodes,
        ..Default::default()
    }
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}[{i}]: got {g}, want {w}");
    }
}

#[test]
fn inverse_trig_matches_std() {
    let mut rng = Rng::new("inverse_trig_matches_std");
    let n = 64;
    // atan over a wide range (both sides of |x| = 1, huge values, ±inf).
    let mut x: Vec<f64> = (0..n)
        .map(|_| rng.normal() * 10f64.powf(rng.range(-3.0, 6.0)))
        .collect();
    x.extend([0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, 1e300]);
    let y = run(
        graph(
            vec![node("Atan", &["x"], &["y"], vec![])],
            &[x.len()],
            vec![],
        ),
        13,
        &[x.len()],
        &x,
    );
    let want: Vec<f64> = x.iter().map(|v| v.atan()).collect();
    close(&y.to_f64_vec(), &want, 1e-11, "atan");
    let mut u = rng.uniforms(n, -1.0, 1.0);
    u.extend([1.0, -1.0, 0.0, 0.999_999]);
    for (op, f) in [("Asin", f64::asin as fn(f64) -> f64), ("Acos", f64::acos)] {
        let g = graph(vec![node(op, &["x"], &["y"], vec![])], &[u.len()], vec![]);
        let y = run(g, 13, &[u.len()], &u);
        let want: Vec<f64> = u.iter().map(|&v| f(v)).collect();
        close(&y.to_f64_vec(), &want, 1e-9, op);
    }
}

#[test]
fn cumprod_matches_a_loop() {
    let mut rng = Rng::new("cumprod_matches_a_loop");
    let (a, l, b) = (1 + rng.below(3), 2 + rng.below(5), 1 + rng.below(3));
    let x: Vec<f64> = rng.uniforms(a * l * b, -2.0, 2.0);
    for (ex, rev) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let attrs = vec![attr_i("exclusive", ex), attr_i("reverse", rev)];
        let nodes = vec![node("CumProd", &["x", "ax"], &["y"], attrs)];
        let g = graph(nodes, &[a, l, b], vec![init_i64("ax", &[], &[1])]);
        let y = run(g, 26, &[a, l, b], &x).to_f64_vec();
        let mut want = vec![0.0; x.len()];
        for i in 0..a {
            for k in 0..b {
                for j in 0..l {
                    let mut p = 1.0;
                    for t in 0..l {
                        let inside = match (ex, rev) {
                            (0, 0) => t <= j,
                            (1, 0) => t < j,
                            (0, _) => t >= j,
                            _ => t > j,
                        };
                        if inside {
                            p *= x[(i * l + t) * b + k];
                        }
                    }
                    want[(i * l + j) * b + k] = p;
                }
            }
        }
        close(&y, &want, 1e-12, &format!("cumprod ex={ex} rev={rev}"));
    }
}

#[test]
fn pad_modes_match_a_loop() {
    let mut rng = Rng::new("pad_modes_match_a_loop");
    let (h, w) = (2 + rng.below(4), 2 + rng.below(4));
    let x = rng.normals(h * w);
    for mode in ["edge", "reflect", "wrap"] {
        // Reflect pads at most d − 1 per side (ONNX's limit); the others may go further.
        let cap = |d: usize| if mode == "reflect" { d - 1 } else { 2 * d };
        let p: Vec<i64> = [h, w, h, w]
            .iter()
            .map(|&d| rng.below(cap(d) + 1) as i64)
            .collect();
        let nodes = vec![node(
            "Pad",
            &["x", "pads"],
            &["y"],
            vec![attr_s("mode", mode)],
        )];
        let g = graph(nodes, &[h, w], vec![init_i64("pads", &[4], &p)]);
        let y = run(g, 18, &[h, w], &x);
        let (oh, ow) = (h + (p[0] + p[2]) as usize, w + (p[1] + p[3]) as usize);
        assert_eq!(y.shape, vec![oh, ow], "{mode}");
        let map = |i: i64, d: usize| -> usize {
            let d = d as i64;
            let r = match mode {
                "edge" => i.clamp(0, d - 1),
                "wrap" => ((i % d) + d) % d,
                _ => {
                    // Walk the reflection step by step (independent of a closed form).
                    let mut v = i;
                    while v < 0 || v >= d {
                        v = if v < 0 { -v } else { 2 * (d - 1) - v };
                    }
                    v
                }
            };
            r as usize
        };
        let mut want = vec![];
        for i in 0..oh as i64 {
            for j in 0..ow as i64 {
                want.push(x[map(i - p[0], h) * w + map(j - p[1], w)]);
            }
        }
        assert_eq!(y.to_f64_vec(), want, "{mode} pads {p:?}");
    }
}

/// det by Gaussian elimination with partial pivoting in f64.
fn det_ref(m: &[f64], n: usize) -> f64 {
    let mut a = m.to_vec();
    let mut det = 1.0;
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&i, &j| a[i * n + col].abs().total_cmp(&a[j * n + col].abs()))
            .unwrap_or(col);
        if piv != col {
            for k in 0..n {
                a.swap(piv * n + k, col * n + k);
            }
            det = -det;
        }
        let d = a[col * n + col];
        det *= d;
        if d == 0.0 {
            return 0.0;
        }
        for r in col + 1..n {
            let f = a[r * n + col] / d;
            for k in col..n {
                a[r * n + k] -= f * a[col * n + k];
            }
        }
    }
    det
}

#[test]
fn det_matches_elimination() {
    let mut rng = Rng::new("det_matches_elimination");
    for n in 1..=5 {
        let b = 1 + rng.below(3);
        let x = rng.normals(b * n * n);
        let g = graph(
            vec![node("Det", &["x"], &["y"], vec![])],
            &[b, n, n],
            vec![],
        );
        let y = run(g, 13, &[b, n, n], &x);
        assert_eq!(y.shape, vec![b]);
        let want: Vec<f64> = x.chunks(n * n).map(|m| det_ref(m, n)).collect();
        close(&y.to_f64_vec(), &want, 1e-10, &format!("det {n}x{n}"));
    }
}

#[test]
fn dft_matches_a_naive_sum() {
    let mut rng = Rng::new("dft_matches_a_naive_sum");
    let (b, len) = (1 + rng.below(3), 3 + rng.below(6));
    let x = rng.normals(b * len);
    for (onesided, inverse, dft_len) in [(0, 0, len), (1, 0, len), (0, 1, len), (0, 0, len + 2)] {
        let attrs = vec![
            attr_i("onesided", onesided),
            attr_i("inverse", inverse),
            attr_i("axis", 1),
        ];
        let nodes = vec![node("DFT", &["x", "n"], &["y"], attrs)];
        let inits = vec![init_i64("n", &[], &[dft_len as i64])];
        let y = run(graph(nodes, &[b, len, 1], inits), 17, &[b, len, 1], &x).to_f64_vec();
        let bins = if onesided != 0 {
            dft_len / 2 + 1
        } else {
            dft_len
        };
        let sign = if inverse != 0 { 1.0 } else { -1.0 };
        let scale = if inverse != 0 {
            1.0 / dft_len as f64
        } else {
            1.0
        };
        let mut want = vec![];
        for r in 0..b {
            for k in 0..bins {
                let (mut re, mut im) = (0.0, 0.0);
                for t in 0..len.min(dft_len) {
                    let ang = sign * 2.0 * std::f64::consts::PI * (k * t) as f64 / dft_len as f64;
                    re += x[r * len + t] * ang.cos();
                    im += x[r * len + t] * ang.sin();
                }
                want.extend([re * scale, im * scale]);
            }
        }
        close(
            &y,
            &want,
            1e-9,
            &format!("dft onesided={onesided} inverse={inverse}"),
        );
    }
}

/// Scan with one state and one scan input: a running sum whose per-step output is
/// `state · 2`, unrolled at import; both directions.
#[test]
fn scan_unrolls_like_a_loop() {
    let mut rng = Rng::new("scan_unrolls_like_a_loop");
    let (t, d) = (1 + rng.below(5), 1 + rng.below(4));
    let x = rng.normals(t * d);
    for dir in [0, 1] {
        let body = GraphProto {
            name: Some("body".into()),
            input: vec![value("s_in", P::Double, &[d]), value("xt", P::Double, &[d])],
            output: vec![value("s_out", P::Double, &[d]), value("o", P::Double, &[d])],
            node: vec![
                node("Add", &["s_in", "xt"], &["s_out"], vec![]),
                node("Add", &["s_out", "s_out"], &["o"], vec![]),
            ],
            ..Default::default()
        };
        let attrs = vec![
            attr_g("body", body),
            attr_i("num_scan_inputs", 1),
            AttributeProto {
                name: Some("scan_input_directions".into()),
                ints: vec![dir],
                r#type: Some(7),
                ..Default::default()
            },
        ];
        let nodes = vec![
            node("Sub", &["x", "x"], &["zeros"], vec![]),
            node(
                "ReduceSum",
                &["zeros", "ax0"],
                &["s0"],
                vec![attr_i("keepdims", 0)],
            ),
            node("Scan", &["s0", "x"], &["final", "y"], attrs),
        ];
        let g = graph(nodes, &[t, d], vec![init_i64("ax0", &[1], &[0])]);
        let y = run(g, 16, &[t, d], &x).to_f64_vec();
        let mut s = vec![0.0; d];
        let mut want = vec![];
        for step in 0..t {
            let row = if dir == 0 { step } else { t - 1 - step };
            for k in 0..d {
                s[k] += x[row * d + k];
                want.push(2.0 * s[k]);
            }
        }
        close(&y, &want, 1e-12, &format!("scan dir={dir}"));
    }
}
