//! Proto builders shared by the hand-built-model tests (composed.rs, import.rs,
//! sequence_ops.rs): attributes by type, one node, integer and f32 initializers. Each test
//! file uses a subset, hence the dead-code allowance.
#![allow(dead_code)]
use rlx_onnx::proto::{
    tensor_proto::DataType as P, tensor_shape_proto, type_proto, AttributeProto, GraphProto,
    NodeProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// A tensor value of element type `dt` with static dims.
pub fn value(name: &str, dt: P, dims: &[usize]) -> ValueInfoProto {
    use tensor_shape_proto::{dimension::Value as D, Dimension};
    let dim = (dims.iter())
        .map(|&d| Dimension {
            value: Some(D::DimValue(d as i64)),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dt as i32),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A node named after its op and first output.
pub fn node(op: &str, ins: &[&str], outs: &[&str], attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_{}", outs[0])),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        attribute,
        ..Default::default()
    }
}

// AttributeProto.type codes: FLOAT 1, INT 2, STRING 3, GRAPH 5.
pub fn attr_f(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        f: Some(v),
        r#type: Some(1),
        ..Default::default()
    }
}

pub fn attr_i(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(2),
        ..Default::default()
    }
}

pub fn attr_s(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec()),
        r#type: Some(3),
        ..Default::default()
    }
}

pub fn attr_g(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        g: Some(g),
        r#type: Some(5),
        ..Default::default()
    }
}

pub fn init_i64(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(P::Int64 as i32),
        int64_data: v.to_vec(),
        ..Default::default()
    }
}

pub fn init_f32(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(P::Float as i32),
        raw_data: Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        ..Default::default()
    }
}
