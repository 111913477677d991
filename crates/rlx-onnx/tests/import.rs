//! Import on hand-built models: a `Shape → Gather → Concat → Reshape` chain folds to a static
//! Reshape; initializers become params (large floats) or constants; an unsupported op is an
//! error naming node, op type and opset; Gemm against a plain f64 loop.
mod common;
use common::*;
use prost::Message;
use rlx_ir::{HostTensor, Op, OpKind};
use rlx_onnx::proto::{
    tensor_proto::DataType as P, tensor_shape_proto, type_proto, GraphProto, ModelProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
};
use rlx_onnx::{load_bytes, OnnxError};
use rlx_runtime::{Device, Session};
use rlx_testutil::Rng;

fn value(name: &str, dt: P, dims: &[i64]) -> ValueInfoProto {
    use tensor_shape_proto::{dimension::Value as D, Dimension};
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dt as i32),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(if d < 0 {
                                D::DimParam("batch".into())
                            } else {
                                D::DimValue(d)
                            }),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn model(graph: GraphProto, opset: i64) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(graph),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn shape_chain_folds_to_a_static_reshape() {
    let mut rng = Rng::new("shape_chain_folds_to_a_static_reshape");
    let (a, b, c) = (1 + rng.below(4), 1 + rng.below(4), 1 + rng.below(4));
    let g = GraphProto {
        name: Some("fold".into()),
        input: vec![value("x", P::Float, &[a as i64, b as i64, c as i64])],
        output: vec![value("y", P::Float, &[])],
        initializer: vec![init_i64("i0", &[1], &[0]), init_i64("m1", &[1], &[-1])],
        node: vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "i0"], &["d0"], vec![attr_i("axis", 0)]),
            node(
                "Concat",
                &["d0", "m1"],
                &["target"],
                vec![attr_i("axis", 0)],
            ),
            node("Reshape", &["x", "target"], &["y"], vec![]),
        ],
        ..Default::default()
    };
    let m = load_bytes(&model(g, 17), None, "fold").unwrap();
    let kinds: Vec<OpKind> = m.graph.nodes.iter().map(|n| n.op.kind()).collect();
    assert!(
        !kinds.contains(&OpKind::Gather) && !kinds.contains(&OpKind::Concat),
        "{kinds:?}"
    );
    let reshape = m.graph.nodes.iter().find_map(|n| match &n.op {
        Op::Reshape { shape } => Some(shape.clone()),
        _ => None,
    });
    assert_eq!(reshape, Some(vec![a as i64, -1]));
    let n = a * b * c;
    let x: Vec<f32> = rng.normals(n).iter().map(|&v| v as f32).collect();
    let exe = Session::new(Device::Cpu).compile(m.graph.clone()).unwrap();
    let y = exe
        .run_typed(&[("x", HostTensor::from_f32(&[a, b, c], &x))])
        .unwrap();
    assert_eq!(y[0].shape, vec![a, b * c]);
    assert_eq!(y[0].to_f32_vec(), x); // a reshape keeps row-major order
}

/// Gemm with transB, alpha, beta and a broadcast C, against a plain f64 loop; the large
/// weight becomes a param, the small bias a constant.
#[test]
fn gemm_matches_a_plain_loop() {
    let mut rng = Rng::new("gemm_matches_a_plain_loop");
    let (m_, k_, n_) = (2 + rng.below(5), 9 + rng.below(8), 9 + rng.below(8));
    let (alpha, beta) = (rng.range(0.5, 2.0) as f32, rng.range(-2.0, -0.5) as f32);
    let w: Vec<f32> = rng.normals(n_ * k_).iter().map(|&v| v as f32).collect();
    let bias: Vec<f32> = rng.normals(n_).iter().map(|&v| v as f32).collect();
    let bias = &bias[..n_.min(64)];
    let g = GraphProto {
        name: Some("gemm".into()),
        input: vec![value("a", P::Float, &[m_ as i64, k_ as i64])],
        output: vec![value("y", P::Float, &[])],
        initializer: vec![
            init_f32("w", &[n_ as i64, k_ as i64], &w),
            init_f32("bias", &[n_ as i64], bias),
        ],
        node: vec![node(
            "Gemm",
            &["a", "w", "bias"],
            &["y"],
            vec![
                attr_i("transB", 1),
                attr_f("alpha", alpha),
                attr_f("beta", beta),
            ],
        )],
        ..Default::default()
    };
    let m = load_bytes(&model(g, 13), None, "gemm").unwrap();
    assert_eq!(m.params.len(), 1);
    assert_eq!(m.params[0].0, "w");
    let a: Vec<f32> = rng.normals(m_ * k_).iter().map(|&v| v as f32).collect();
    let exe = Session::new(Device::Cpu).compile(m.graph.clone()).unwrap();
    for (name, v) in &m.params {
        exe.set_param_typed(name, v.clone()).unwrap();
    }
    let y = exe
        .run_typed(&[("a", HostTensor::from_f32(&[m_, k_], &a))])
        .unwrap()[0]
        .to_f64_vec();
    let mut want = vec![0.0f64; m_ * n_];
    for i in 0..m_ {
        for j in 0..n_ {
            let mut s = 0.0;
            for p in 0..k_ {
                s += a[i * k_ + p] as f64 * w[j * k_ + p] as f64;
            }
            want[i * n_ + j] = alpha as f64 * s + beta as f64 * bias[j] as f64;
        }
    }
    let err = rlx_testutil::rel_l2(&y, &want);
    assert!(err < 1e-5, "rel-L2 {err}");
}

#[test]
fn unsupported_op_names_node_op_type_and_opset() {
    let g = GraphProto {
        name: Some("u".into()),
        input: vec![value("x", P::Float, &[2])],
        output: vec![value("y", P::Float, &[2])],
        node: vec![node("NoSuchOp", &["x"], &["y"], vec![])],
        ..Default::default()
    };
    let e = load_bytes(&model(g, 19), None, "u").unwrap_err();
    match &e {
        OnnxError::Unsupported {
            node,
            op_type,
            opset,
            ..
        } => {
            assert_eq!(
                (node.as_str(), op_type.as_str(), *opset),
                ("NoSuchOp_y", "NoSuchOp", 19)
            );
        }
        other => panic!("{other}"),
    }
    assert!(e.to_string().contains("NoSuchOp") && e.to_string().contains("opset 19"));
}

/// A symbolic `dim_param` becomes a dynamic dim.
#[test]
fn dim_param_becomes_a_dynamic_dim() {
    let g = GraphProto {
        name: Some("d".into()),
        input: vec![value("x", P::Float, &[-1, 4])],
        output: vec![value("y", P::Float, &[])],
        node: vec![node("Relu", &["x"], &["y"], vec![])],
        ..Default::default()
    };
    let m = load_bytes(&model(g, 13), None, "d").unwrap();
    let (_, s) = m.graph.inputs().next().unwrap();
    assert_eq!(
        s.dims,
        vec![rlx_ir::Dim::dynamic("batch"), rlx_ir::Dim::Static(4)]
    );
}

/// DynamicQuantizeLinear against the operator's definition computed here in f64: scale =
/// (max(0, x_max) − min(0, x_min)) / 255, zero point = saturate(round(−min / scale)), y =
/// saturate(round(x / scale) + zp), rounding half to even; and an all-zero x, whose range is
/// empty, gets scale 1 and zero point 0 (as ONNX Runtime and the reference evaluator) instead
/// of 0 and NaN quotients.
#[test]
fn dynamic_quantize_linear_matches_its_definition() {
    let mut rng = Rng::new("dynamic_quantize_linear_matches_its_definition");
    let g = GraphProto {
        name: Some("dql".into()),
        input: vec![value("x", P::Float, &[3, 7])],
        output: vec![
            value("y", P::Uint8, &[3, 7]),
            value("s", P::Float, &[]),
            value("z", P::Uint8, &[]),
        ],
        node: vec![node(
            "DynamicQuantizeLinear",
            &["x"],
            &["y", "s", "z"],
            vec![],
        )],
        ..Default::default()
    };
    let m = load_bytes(&model(g, 11), None, "dql").unwrap();
    let exe = Session::new(Device::Cpu).compile(m.graph.clone()).unwrap();
    let shift = rng.range(-1.5, 1.5);
    let random: Vec<f32> = rng
        .normals(21)
        .iter()
        .map(|&v| (v + shift) as f32)
        .collect();
    for x in [random, vec![0.0f32; 21]] {
        let out = exe
            .run_typed(&[("x", HostTensor::from_f32(&[3, 7], &x))])
            .unwrap();
        let hi = x.iter().fold(0.0f64, |a, &v| a.max(v as f64));
        let lo = x.iter().fold(0.0f64, |a, &v| a.min(v as f64));
        // f32 like the op: the scale is an f32 value.
        let scale = if hi == lo {
            1.0
        } else {
            ((hi - lo) as f32 / 255.0) as f64
        };
        let zp = (-lo / scale).round_ties_even().clamp(0.0, 255.0);
        let want: Vec<i64> = x
            .iter()
            .map(|&v| ((v as f64 / scale).round_ties_even() + zp).clamp(0.0, 255.0) as i64)
            .collect();
        assert_eq!(out[1].to_f64_vec(), vec![scale], "scale");
        assert_eq!(out[2].to_i64_vec(), vec![zp as i64], "zero point");
        let got = out[0].to_i64_vec();
        // x / scale in f32 vs f64 may land on opposite sides of a tie: one step at most,
        // and only where the f64 quotient sits within 1e-4 of k + ½.
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let q = x[i] as f64 / scale;
            let near_tie = (q - q.floor() - 0.5).abs() < 1e-4;
            assert!(
                g == w || (near_tie && (g - w).abs() == 1),
                "y[{i}] = {g}, want {w} (x {}, scale {scale})",
                x[i]
            );
        }
    }
}
