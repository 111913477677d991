//! Models that once made the importer panic, hang or allocate far beyond their size, found
//! by the `onnx_from_bytes` fuzz target (`fuzz/`), each rebuilt here from prost types: every
//! one must now be a typed error naming the node (or tensor) and what was wrong, or import
//! with the offending work left to run time.
mod common;
use common::*;
use prost::Message;
use rlx_onnx::proto::{
    tensor_proto::DataType as P, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, ValueInfoProto,
};
use rlx_onnx::{load_bytes, OnnxError};

fn model(
    opset: i64,
    inputs: Vec<ValueInfoProto>,
    init: Vec<TensorProto>,
    node: Vec<NodeProto>,
    out: &str,
) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            name: Some("hostile".into()),
            input: inputs,
            initializer: init,
            node,
            output: vec![value(out, P::Float, &[])],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

// AttributeProto.type INTS is 7.
fn attr_ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(7),
        ..Default::default()
    }
}

/// One node of opset `opset` over float inputs (name, dims), its first output the graph's.
fn one_node(opset: i64, inputs: &[(&str, &[usize])], n: NodeProto) -> Vec<u8> {
    let out = n.output[0].clone();
    let ins = inputs.iter().map(|(k, d)| value(k, P::Float, d)).collect();
    model(opset, ins, vec![], vec![n], &out)
}

/// The error of importing `bytes` (which must not import).
#[track_caller]
fn import_error(bytes: &[u8]) -> OnnxError {
    match load_bytes(bytes, None, "hostile.onnx") {
        Err(e) => e,
        Ok(_) => panic!("expected an error, it imported"),
    }
}

/// An error that names `want_node` and whose text contains `want_text`.
#[track_caller]
fn names(node: &str, text: &str, want_node: &str, want_text: &str) {
    assert_eq!(node, want_node, "{text}");
    assert!(text.contains(want_text), "{text:?} lacks {want_text:?}");
}

/// Importing `bytes` must be an `Unsupported` error about `want_node` naming `want_what`.
#[track_caller]
fn unsupported_error(bytes: &[u8], want_node: &str, want_what: &str) {
    match import_error(bytes) {
        OnnxError::Unsupported { node, what, .. } => names(&node, &what, want_node, want_what),
        e => panic!("expected an unsupported error, got {e}"),
    }
}

/// Importing `bytes` must be a `Node` error about `want_node` whose message contains
/// `want_msg`.
#[track_caller]
fn node_error(bytes: &[u8], want_node: &str, want_msg: &str) {
    match import_error(bytes) {
        OnnxError::Node { node, msg, .. } => names(&node, &msg, want_node, want_msg),
        e => panic!("expected a node error, got {e}"),
    }
}

/// 3-D Attention indexes the third dim of K to split heads: a 2-D K was an out-of-bounds
/// index (attention.rs heads_first).
#[test]
fn attention_with_a_key_of_the_wrong_rank() {
    let b = model(
        23,
        vec![
            value("q", P::Float, &[1, 2, 4]),
            value("k", P::Float, &[2, 4]),
            value("v", P::Float, &[1, 2, 4]),
        ],
        vec![],
        vec![node(
            "Attention",
            &["q", "k", "v"],
            &["y"],
            vec![attr_i("q_num_heads", 2), attr_i("kv_num_heads", 2)],
        )],
        "y",
    );
    node_error(&b, "Attention_y", "K must have rank 3");
}

/// `nonpad_kv_seqlen` built a key-position table as long as the declared key length with
/// no limit: a 2⁴⁰-long key was an 8 TiB allocation.
#[test]
fn attention_key_positions_for_a_huge_key_length() {
    let (q, kv): (&[usize], &[usize]) = (&[1, 1, 1, 4], &[1, 1, 1 << 40, 4]);
    let b = one_node(
        23,
        &[("q", q), ("k", kv), ("v", kv), ("len", &[1])],
        node(
            "Attention",
            &["q", "k", "v", "", "", "", "len"],
            &["y"],
            vec![],
        ),
    );
    unsupported_error(&b, "Attention_y", "a key position table of 1099511627776");
}

/// RNN, GRU and LSTM unroll one step per time step: a declared sequence of 2⁴⁰ steps asked
/// for trillions of nodes (and an 8 TiB vector of step outputs).
#[test]
fn rnn_over_a_huge_sequence_is_refused() {
    let b = one_node(
        14,
        &[
            ("x", &[1 << 40, 1, 2]),
            ("w", &[1, 3, 2]),
            ("r", &[1, 3, 3]),
        ],
        node(
            "RNN",
            &["x", "w", "r"],
            &["y"],
            vec![attr_i("hidden_size", 3)],
        ),
    );
    unsupported_error(&b, "RNN_y", "a sequence of 1099511627776 steps");
}

/// `g · hidden_size` overflowed before W's dims were checked against it.
#[test]
fn gru_with_an_overflowing_hidden_size() {
    let b = one_node(
        14,
        &[("x", &[2, 1, 2]), ("w", &[1, 3, 2]), ("r", &[1, 3, 1])],
        node(
            "GRU",
            &["x", "w", "r"],
            &["y"],
            vec![attr_i("hidden_size", i64::MAX)],
        ),
    );
    node_error(&b, "GRU_y", "overflows");
}

/// LRN added one Gather per window offset: `size = i64::MAX` was an endless loop growing the
/// graph. Offsets past the channel count add nothing, so the window is clipped and the model
/// imports with the same few nodes as a window of 2·C + 1.
#[test]
fn lrn_with_a_huge_window_is_clipped_to_the_channels() {
    let b = one_node(
        13,
        &[("x", &[1, 3, 2, 2])],
        node("LRN", &["x"], &["y"], vec![attr_i("size", i64::MAX)]),
    );
    let m = load_bytes(&b, None, "hostile.onnx").expect("a clipped window imports");
    assert!(m.graph.nodes.len() < 100, "{} nodes", m.graph.nodes.len());
}

/// A reduction over an empty axis is a constant of the output's shape, built on the host
/// without a limit: 2⁴⁰ elements here.
#[test]
fn reduction_over_an_empty_axis_of_a_huge_tensor() {
    let reduce = || {
        node(
            "ReduceSum",
            &["x"],
            &["y"],
            vec![attr_ints("axes", &[0]), attr_i("keepdims", 1)],
        )
    };
    let b = one_node(11, &[("x", &[0, 1 << 20, 1 << 20])], reduce());
    unsupported_error(&b, "ReduceSum_y", "an empty reduction's output");
}

/// DepthToSpace checked `C % (b·b)` with `b·b` overflowing.
#[test]
fn depth_to_space_with_a_huge_blocksize() {
    let b = one_node(
        13,
        &[("x", &[1, 0, 1, 1])],
        node(
            "DepthToSpace",
            &["x"],
            &["y"],
            vec![attr_i("blocksize", 1 << 33)],
        ),
    );
    node_error(&b, "DepthToSpace_y", "for blocksize 8589934592");
}

/// SAME padding computed `ceil(size / stride) − 1` in usize: a spatial dim of 0 underflowed.
#[test]
fn same_padded_pool_over_an_empty_dim() {
    let b = one_node(
        12,
        &[("x", &[1, 1, 0, 4])],
        node(
            "MaxPool",
            &["x"],
            &["y"],
            vec![
                attr_ints("kernel_shape", &[2, 2]),
                attr_s("auto_pad", "SAME_LOWER"),
            ],
        ),
    );
    // An empty image may import or be refused; it must not underflow.
    if let Err(e) = load_bytes(&b, None, "hostile.onnx") {
        assert!(e.to_string().contains("MaxPool_y"), "{e}");
    }
}

/// LpPool scaled by the window's element count, an i64 product of kernel_shape that
/// overflowed for a large 3-D window.
#[test]
fn lp_pool_with_a_huge_window() {
    let k = 1 << 12;
    let b = one_node(
        18,
        &[("x", &[1, 1, k, k, k])],
        node(
            "LpPool",
            &["x"],
            &["y"],
            vec![attr_ints("kernel_shape", &[k as i64; 3])],
        ),
    );
    if let Err(e) = load_bytes(&b, None, "hostile.onnx") {
        assert!(e.to_string().contains("LpPool_y"), "{e}");
    }
}

/// A per-channel zero point for a 0-d weight indexed the reshape target past its rank.
#[test]
fn conv_integer_with_a_scalar_weight_and_a_channel_zero_point() {
    let u8v = |n: &str, d: &[usize]| value(n, P::Uint8, d);
    let b = model(
        10,
        vec![u8v("x", &[1, 1, 3, 3]), u8v("w", &[]), u8v("wz", &[3])],
        vec![],
        vec![node("ConvInteger", &["x", "w", "", "wz"], &["y"], vec![])],
        "y",
    );
    node_error(
        &b,
        "ConvInteger_y",
        "a per-channel vector of 3 for an operand of rank 0",
    );
}

/// ConvTranspose sliced `output_shape` to its last k entries and indexed them: an empty
/// one was out of bounds; huge strides overflowed the i64 padding arithmetic.
#[test]
fn conv_transpose_with_hostile_geometry() {
    let ct = |attrs| node("ConvTranspose", &["x", "w"], &["y"], attrs);
    let ins: [(&str, &[usize]); 2] = [("x", &[1, 1, 3, 3]), ("w", &[1, 1, 2, 2])];
    let b = one_node(11, &ins, ct(vec![attr_ints("output_shape", &[])]));
    node_error(&b, "ConvTranspose_y", "output_shape [] for 2 spatial dims");
    let b = one_node(11, &ins, ct(vec![attr_ints("strides", &[i64::MAX, 1])]));
    node_error(&b, "ConvTranspose_y", "strides");
    let b = one_node(
        11,
        &ins,
        ct(vec![attr_ints("output_shape", &[1, i64::MIN])]),
    );
    node_error(&b, "ConvTranspose_y", "output_shape");
}

/// MaxUnpool inferred its output size in i64 from attributes and multiplied it out in
/// usize: a huge kernel overflowed both.
#[test]
fn max_unpool_with_a_huge_kernel() {
    let b = model(
        11,
        vec![
            value("x", P::Float, &[1, 1, 2, 2]),
            value("i", P::Int64, &[1, 1, 2, 2]),
        ],
        vec![],
        vec![node(
            "MaxUnpool",
            &["x", "i"],
            &["y"],
            vec![attr_ints("kernel_shape", &[i64::MAX, 2])],
        )],
        "y",
    );
    unsupported_error(
        &b,
        "MaxUnpool_y",
        "a MaxUnpool output of 18446744073709551615",
    );
}

/// A tensor's dims are a claim: 2³⁶ declared elements with no data reserved 1 GiB before
/// the data was found missing.
#[test]
fn initializer_declaring_huge_dims_without_data() {
    let t = TensorProto {
        name: Some("w".into()),
        dims: vec![1 << 36],
        data_type: Some(P::Float as i32),
        ..Default::default()
    };
    let b = model(13, vec![], vec![t], vec![], "w");
    match load_bytes(&b, None, "hostile.onnx") {
        Err(OnnxError::Tensor { name, msg }) => {
            assert_eq!(name, "w");
            assert!(msg.contains("holds 0 values"), "{msg}");
        }
        other => panic!("expected a tensor error, got {other:?}"),
    }
}

/// Einsum looked each label's size up by its position in the input's dims: more labels
/// than the input has dims indexed past them.
#[test]
fn einsum_with_more_labels_than_dims() {
    let b = one_node(
        12,
        &[("x", &[2]), ("y", &[2, 3])],
        node(
            "Einsum",
            &["x", "y"],
            &["z"],
            vec![attr_s("equation", "ij,jk->ik")],
        ),
    );
    node_error(&b, "Einsum_z", "operand 0 has 2 labels for rank 1");
}
