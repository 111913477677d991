//! The verifier: one test per class of broken graph, each checking the error names the
//! node and says what is wrong. Uses elementwise ops, whose shape rules exist.
use rlx_ir::*;

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

/// x f32[2, 3], y f32[3] (named), z = x + y.
fn base() -> (Graph, NodeId, NodeId, NodeId) {
    let mut g = Graph::new("v");
    let x = g.input("x", f32s(&[2, 3])).unwrap();
    let y = g.param("y", f32s(&[3])).unwrap();
    let z = g.add(x, y).unwrap();
    g.set_outputs(vec![z]);
    (g, x, y, z)
}

/// The verifier's error, which must be `Verify` for `node`; returns its message.
fn verify_err(g: &Graph, node: NodeId) -> String {
    match g.verify() {
        Err(e @ IrError::Verify { node: n, .. }) => {
            assert_eq!(n, node, "wrong node named: {e}");
            let text = e.to_string();
            assert!(text.contains(&node.to_string()), "{text}");
            let IrError::Verify { msg, .. } = e else {
                unreachable!()
            };
            msg
        }
        other => panic!("expected a Verify error for {node}, got {other:?}"),
    }
}

#[test]
fn well_formed_graphs_verify() {
    let (g, ..) = base();
    g.verify().unwrap();
    let mut g = Graph::new("dyn");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 4.into()], DType::BF16),
        )
        .unwrap();
    let c = g.scalar(0.5, DType::BF16).unwrap();
    let m = g.mul(x, c).unwrap();
    let cmp = g.add_node(Op::Compare(CompareOp::Lt), &[m, x]).unwrap();
    let w = g.add_node(Op::Where, &[cmp, m, x]).unwrap();
    let f = g.cast(w, DType::F32).unwrap();
    g.set_outputs(vec![f, x]);
    g.verify().unwrap();
    Graph::new("empty").verify().unwrap();
}

#[test]
fn input_that_is_not_earlier() {
    let (mut g, x, ..) = base();
    // Node 3 reads node 4, which comes after it.
    let bad = g.push_node(Op::Binary(BinaryOp::Mul), vec![x, NodeId(4)], f32s(&[2, 3]));
    g.push_node(Op::Activation(Activation::Relu), vec![x], f32s(&[2, 3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("%4") && msg.contains("topological"), "{msg}");

    // A node reading itself.
    let (mut g, x, ..) = base();
    let me = NodeId(g.len());
    g.push_node(Op::Binary(BinaryOp::Add), vec![x, me], f32s(&[2, 3]));
    let msg = verify_err(&g, me);
    assert!(msg.contains(&me.to_string()), "{msg}");

    // A node reading one that does not exist at all.
    let (mut g, x, ..) = base();
    let bad = g.push_node(
        Op::Binary(BinaryOp::Add),
        vec![x, NodeId(99)],
        f32s(&[2, 3]),
    );
    let msg = verify_err(&g, bad);
    assert!(msg.contains("%99"), "{msg}");
}

#[test]
fn id_that_does_not_match_its_index() {
    let (mut g, ..) = base();
    g.nodes[1].id = NodeId(7);
    let msg = verify_err(&g, NodeId(7));
    assert!(msg.contains("index 1") && msg.contains("%7"), "{msg}");
}

#[test]
fn leaf_with_inputs() {
    let (mut g, x, y, _) = base();
    g.nodes[y.0].inputs = vec![x];
    let msg = verify_err(&g, y);
    assert!(msg.contains("leaf") && msg.contains("no inputs"), "{msg}");
    // The error shows the node's name.
    let e = g.verify().unwrap_err().to_string();
    assert!(e.contains("\"y\"") && e.contains("Param"), "{e}");

    let mut g = Graph::new("c");
    let x = g.input("x", f32s(&[1])).unwrap();
    let c = g.push_node(
        Op::Constant {
            data: 1f32.to_le_bytes().to_vec(),
        },
        vec![x],
        f32s(&[1]),
    );
    let msg = verify_err(&g, c);
    assert!(msg.contains("leaf"), "{msg}");
}

#[test]
fn constant_with_wrong_byte_length() {
    let mut g = Graph::new("c");
    let c = g
        .constant_f32(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap();
    g.verify().unwrap();
    let Op::Constant { data } = &mut g.nodes[c.0].op else {
        unreachable!()
    };
    data.truncate(20);
    let msg = verify_err(&g, c);
    assert!(msg.contains("24 bytes") && msg.contains("20"), "{msg}");

    // Same bytes, but the declared dtype is wider than what they hold.
    let mut g = Graph::new("c");
    let c = g.push_node(
        Op::Constant {
            data: vec![0; 6 * 4],
        },
        vec![],
        Shape::new(&[2, 3], DType::F64),
    );
    let msg = verify_err(&g, c);
    assert!(msg.contains("48 bytes") && msg.contains("24"), "{msg}");

    // A dynamic dim, and dims whose byte size overflows: errors, not panics.
    let mut g = Graph::new("c");
    let c = g.push_node(
        Op::Constant { data: vec![0; 4] },
        vec![],
        Shape::with_dims(vec![Dim::dynamic("N")], DType::F32),
    );
    let msg = verify_err(&g, c);
    assert!(msg.contains("dynamic"), "{msg}");
    let mut g = Graph::new("c");
    let c = g.push_node(
        Op::Constant { data: vec![0; 4] },
        vec![],
        Shape::new(&[usize::MAX / 2, 3], DType::F32),
    );
    let msg = verify_err(&g, c);
    assert!(msg.contains("overflows"), "{msg}");
}

#[test]
fn declared_shape_differs_from_inferred() {
    // Wrong dims from broadcasting.
    let (mut g, x, y, _) = base();
    let bad = g.push_node(Op::Binary(BinaryOp::Sub), vec![x, y], f32s(&[2, 4]));
    let msg = verify_err(&g, bad);
    assert!(
        msg.contains("declared shape f32[2, 4]") && msg.contains("give f32[2, 3]"),
        "{msg}"
    );
    // Compare gives Bool, not the operand type.
    let (mut g, x, y, _) = base();
    let bad = g.push_node(Op::Compare(CompareOp::Ge), vec![x, y], f32s(&[2, 3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("bool[2, 3]"), "{msg}");
    // Cast declared with the source dtype.
    let (mut g, x, ..) = base();
    let bad = g.push_node(Op::Cast { to: DType::I32 }, vec![x], f32s(&[2, 3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("i32[2, 3]"), "{msg}");
    // Activation declared with a symbolic dim where the input is static.
    let (mut g, x, ..) = base();
    let bad = g.push_node(
        Op::Activation(Activation::Tanh),
        vec![x],
        Shape::with_dims(vec![Dim::dynamic("B"), 3.into()], DType::F32),
    );
    let msg = verify_err(&g, bad);
    assert!(msg.contains("f32[B, 3]"), "{msg}");
    // Where broadcasting all three inputs.
    let (mut g, x, y, _) = base();
    let c = g.push_node(
        Op::Compare(CompareOp::Eq),
        vec![x, y],
        Shape::new(&[2, 3], DType::Bool),
    );
    let bad = g.push_node(Op::Where, vec![c, y, y], f32s(&[3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("f32[2, 3]"), "{msg}");
}

#[test]
fn wrong_arity() {
    let (mut g, x, y, _) = base();
    let bad = g.push_node(Op::Binary(BinaryOp::Add), vec![x], f32s(&[2, 3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("takes 2 inputs, got 1"), "{msg}");

    let (mut g, x, y2, _) = base();
    let bad = g.push_node(Op::Where, vec![x, y2], f32s(&[2, 3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("takes 3 inputs, got 2"), "{msg}");

    let (mut g, x, ..) = base();
    let bad = g.push_node(Op::Activation(Activation::Exp), vec![x, y], f32s(&[2, 3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("takes 1 inputs, got 2"), "{msg}");

    let (mut g, ..) = base();
    let bad = g.push_node(Op::Cast { to: DType::F16 }, vec![], f32s(&[2, 3]));
    let msg = verify_err(&g, bad);
    assert!(msg.contains("got 0"), "{msg}");
}

#[test]
fn dtype_mismatch() {
    let mut g = Graph::new("d");
    let a = g.input("a", f32s(&[4])).unwrap();
    let b = g.input("b", Shape::new(&[4], DType::F16)).unwrap();
    let i = g.input("i", Shape::new(&[4], DType::I64)).unwrap();
    let bad = g.push_node(Op::Binary(BinaryOp::Mul), vec![a, b], f32s(&[4]));
    g.set_name(bad, "mixed").unwrap();
    let msg = verify_err(&g, bad);
    assert!(
        msg.contains("dtypes differ") && msg.contains("f16"),
        "{msg}"
    );
    assert!(g.verify().unwrap_err().to_string().contains("\"mixed\""));

    let mut g2 = g.clone();
    g2.nodes.truncate(3);
    let bad = g2.push_node(
        Op::Compare(CompareOp::Lt),
        vec![a, i],
        Shape::new(&[4], DType::Bool),
    );
    let msg = verify_err(&g2, bad);
    assert!(msg.contains("i64"), "{msg}");

    let mut g3 = g.clone();
    g3.nodes.truncate(3);
    let c = g3.push_node(
        Op::Compare(CompareOp::Lt),
        vec![a, a],
        Shape::new(&[4], DType::Bool),
    );
    let bad = g3.push_node(Op::Where, vec![c, a, b], f32s(&[4]));
    let msg = verify_err(&g3, bad);
    assert!(msg.contains("branch dtypes differ"), "{msg}");

    let mut g4 = g.clone();
    g4.nodes.truncate(3);
    let bad = g4.push_node(
        Op::Activation(Activation::Sqrt),
        vec![i],
        Shape::new(&[4], DType::I64),
    );
    let msg = verify_err(&g4, bad);
    assert!(msg.contains("float") && msg.contains("i64"), "{msg}");
}

#[test]
fn output_that_does_not_exist() {
    let (mut g, x, _, z) = base();
    g.set_outputs(vec![z, NodeId(9), x]);
    match g.verify() {
        Err(IrError::BadOutput(id)) => assert_eq!(id, NodeId(9)),
        other => panic!("expected BadOutput(%9), got {other:?}"),
    }
    assert!(g.verify().unwrap_err().to_string().contains("%9"));
}

#[test]
fn first_broken_node_is_reported() {
    // Two broken nodes: the earlier one is named.
    let (mut g, x, y, _) = base();
    let first = g.push_node(Op::Binary(BinaryOp::Add), vec![x], f32s(&[2, 3]));
    g.push_node(Op::Binary(BinaryOp::Add), vec![x, y], f32s(&[9]));
    verify_err(&g, first);
}
