//! Shape arithmetic that would wrap past `usize::MAX` (or make a tensor larger than
//! `isize::MAX` bytes) is an error from the builder and from `verify`, never a wrapped
//! shape that a backend then trips over; and input / param names are unique.
use rlx_ir::*;

const MAX: usize = usize::MAX;

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

/// A message saying the size wraps or exceeds what a tensor can hold.
fn too_big(msg: &str) -> bool {
    msg.contains("overflows") || msg.contains("isize::MAX")
}

/// The builder's error message for `op` on fresh inputs of `shapes` (each an Input).
fn build_err(op: Op, shapes: &[Shape]) -> String {
    let mut g = Graph::new("b");
    let ins: Vec<NodeId> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| g.input(format!("x{i}"), s.clone()).unwrap())
        .collect();
    match g.add_node(op.clone(), &ins) {
        Err(e @ IrError::Build { .. }) => e.to_string(),
        other => panic!("{op:?} on {shapes:?} should not build, got {other:?}"),
    }
}

/// `verify` must fail on a graph holding `op` over `shapes` declared as `out`.
fn verify_rejects(op: Op, shapes: &[Shape], out: Shape) -> String {
    let mut g = Graph::new("v");
    let ins: Vec<NodeId> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| g.input(format!("x{i}"), s.clone()).unwrap())
        .collect();
    let n = g.push_node(op, ins, out);
    g.set_outputs(vec![n]);
    match g.verify() {
        Err(e) => e.to_string(),
        Ok(()) => panic!("verify accepted {}", g.nodes[n.0].op.kind()),
    }
}

#[test]
fn pad_whose_sum_wraps_is_an_error() {
    // The reproducer: before + after = 2^64 wrapped to 0, giving f32[2 + 0 + ...].
    let op = Op::Pad {
        pads: vec![[MAX, 1]],
        value: 0.0,
    };
    let msg = build_err(op.clone(), &[f32s(&[2])]);
    assert!(msg.contains("overflows"), "{msg}");
    // The wrapped shape the old rule gave (2 + 0) must not verify either.
    let msg = verify_rejects(op, &[f32s(&[2])], f32s(&[2]));
    assert!(msg.contains("overflows"), "{msg}");
    // Before + after fit, but the dim plus them does not.
    let msg = build_err(
        Op::Pad {
            pads: vec![[MAX - 1, 0]],
            value: 0.0,
        },
        &[f32s(&[2])],
    );
    assert!(msg.contains("overflows"), "{msg}");
    // A padded size that fits usize but not isize::MAX bytes.
    let msg = build_err(
        Op::Pad {
            pads: vec![[1 << 62, 0]],
            value: 0.0,
        },
        &[f32s(&[2])],
    );
    assert!(too_big(&msg), "{msg}");
}

#[test]
fn numel_does_not_wrap() {
    assert_eq!(f32s(&[MAX, 256]).numel(), None);
    assert_eq!(f32s(&[1 << 32, 1 << 32]).numel(), None);
    assert_eq!(f32s(&[1 << 62, 4]).numel(), None);
    assert_eq!(f32s(&[1 << 61, 4]).byte_size(), None);
    assert_eq!(f32s(&[3, 4]).numel(), Some(12));
    assert_eq!(f32s(&[3, 4]).byte_size(), Some(48));
    assert_eq!(f32s(&[0, MAX]).numel(), Some(0));
    assert_eq!(
        Shape::with_dims(vec![Dim::dynamic("B"), 4.into()], DType::F32).numel(),
        None
    );
}

#[test]
fn verify_rejects_shapes_that_cannot_exist() {
    // [2^62, 4] f32: 2^64 elements·bytes, accepted before.
    for dims in [
        &[1usize << 62, 4][..],
        &[MAX, 256],
        &[1 << 61, 1],          // 2^63 bytes: fits usize but not isize
        &[0, 1 << 40, 1 << 40], // empty, yet its row stride overflows
    ] {
        let mut g = Graph::new("big");
        let x = g.push_node(
            Op::Input { name: "x".into() },
            vec![],
            Shape::new(dims, DType::F32),
        );
        g.set_outputs(vec![x]);
        let e = g.verify().expect_err("oversized input verified");
        let text = e.to_string();
        assert!(
            matches!(e, IrError::Verify { node, .. } if node == x),
            "{text}"
        );
        assert!(
            text.contains("isize::MAX") || text.contains("overflows"),
            "{text}"
        );
        // The builder refuses the same shape.
        let mut g = Graph::new("big");
        assert!(g.input("x", Shape::new(dims, DType::F32)).is_err());
        assert!(g.param("w", Shape::new(dims, DType::F32)).is_err());
    }
    // The largest f32 tensor that can exist still verifies, as do empty ones.
    for dims in [&[(isize::MAX as usize) / 4][..], &[0, 1 << 20], &[0]] {
        let mut g = Graph::new("ok");
        let x = g.input("x", Shape::new(dims, DType::F32)).unwrap();
        g.set_outputs(vec![x]);
        g.verify().unwrap();
    }
}

#[test]
fn oversized_static_part_of_a_dynamic_shape_is_rejected() {
    let s = Shape::with_dims(vec![Dim::dynamic("B"), (1usize << 62).into()], DType::F32);
    let mut g = Graph::new("d");
    assert!(g.input("x", s).is_err());
}

#[test]
fn expand_and_reshape_to_oversized_targets_are_errors() {
    let msg = build_err(
        Op::Expand {
            shape: vec![Dim::Static(1 << 40), Dim::Static(1 << 40)],
        },
        &[f32s(&[1, 1])],
    );
    assert!(msg.contains("overflows"), "{msg}");
    // The product of the target wraps to exactly the input's count (2^64 + 4 ≡ 4).
    let msg = build_err(
        Op::Reshape {
            shape: vec![1 << 32, 1 << 32],
        },
        &[f32s(&[4])],
    );
    assert!(msg.contains("overflows"), "{msg}");
    // A 1-element input reshapes to anything, but not to a tensor that cannot exist.
    let msg = build_err(
        Op::Reshape {
            shape: vec![1 << 62],
        },
        &[f32s(&[1])],
    );
    assert!(too_big(&msg), "{msg}");
    // -1 inferred from a target whose known part overflows.
    let msg = build_err(
        Op::Reshape {
            shape: vec![-1, 1 << 33, 1 << 33],
        },
        &[f32s(&[4])],
    );
    assert!(msg.contains("overflows"), "{msg}");
}

#[test]
fn concat_sum_that_wraps_is_an_error() {
    // Each input is empty (a 0 dim), so each can exist; the concatenated axis wraps.
    let big = f32s(&[0, 1 << 60]);
    let msg = build_err(Op::Concat { axis: 1 }, &[big.clone(), big.clone()]);
    assert!(too_big(&msg), "{msg}");
    let msg = build_err(
        Op::Concat { axis: 1 },
        &[
            Shape::new(&[0, 1 << 61], DType::U8),
            Shape::new(&[0, 1 << 61], DType::U8),
            Shape::new(&[0, 1 << 61], DType::U8),
            Shape::new(&[0, 1 << 61], DType::U8),
            Shape::new(&[0, 1 << 61], DType::U8),
            Shape::new(&[0, 1 << 61], DType::U8),
            Shape::new(&[0, 1 << 61], DType::U8),
            Shape::new(&[0, 1 << 61], DType::U8),
        ],
    );
    assert!(msg.contains("overflows"), "{msg}");
}

#[test]
fn narrow_past_the_end_and_slice_of_a_huge_dim_do_not_wrap() {
    let msg = build_err(
        Op::Narrow {
            axis: 0,
            start: MAX,
            len: 2,
        },
        &[f32s(&[4])],
    );
    assert!(msg.contains("out of range"), "{msg}");
    // A dim above i64::MAX (possible in an empty tensor of bytes) sliced with extreme
    // bounds: the count stays within the dim.
    let top = i64::MAX as usize;
    assert_eq!(ops::shape_ops::slice_range(MAX, 0, i64::MAX, 1), (0, top));
    // i64::MIN from the end of a dim of 2^64 − 1 is index 2^63 − 1.
    assert_eq!(
        ops::shape_ops::slice_range(MAX, i64::MIN, i64::MAX, 1),
        (top, 0)
    );
    assert_eq!(
        ops::shape_ops::slice_range(MAX, -1, i64::MIN, -1),
        (MAX - 1, top)
    );
    assert_eq!(
        ops::shape_ops::slice_range(10, i64::MIN, i64::MAX, i64::MIN),
        (0, 0)
    );
    assert_eq!(ops::shape_ops::slice_range(10, 9, i64::MIN, -3), (9, 4));
    assert_eq!(ops::shape_ops::slice_range(10, 1, 8, i64::MAX), (1, 1));
}

#[test]
fn conv_pool_and_resize_sizes_that_wrap_are_errors() {
    // Padding whose doubling wraps.
    let spec = ConvSpec::new([1, 1]).padding([MAX / 2 + 1, 0]);
    let msg = build_err(Op::Conv(spec), &[f32s(&[1, 1, 4, 4]), f32s(&[1, 1, 1, 1])]);
    assert!(msg.contains("overflows"), "{msg}");
    // Dilation × (kernel − 1) wraps.
    let spec = ConvSpec::new([3, 1]).dilation([MAX / 2 + 1, 1]);
    let msg = build_err(Op::Conv(spec), &[f32s(&[1, 1, 4, 4]), f32s(&[1, 1, 3, 1])]);
    assert!(msg.contains("overflows"), "{msg}");
    // Backward input: weight in-channels × groups wraps.
    let spec = ConvSpec::new([1, 1]).groups(1 << 33);
    let msg = build_err(
        Op::Conv2dBackwardInput {
            spec,
            input_hw: [1, 1],
        },
        &[f32s(&[1, 0, 1, 1]), f32s(&[0, 1 << 31, 1, 1])],
    );
    assert!(msg.contains("overflows"), "{msg}");
    // Doubling a dim of an empty tensor past what can exist.
    let msg = build_err(
        Op::ResizeNearest2x,
        &[Shape::new(&[0, 1, 1 << 62, 1], DType::U8)],
    );
    assert!(too_big(&msg), "{msg}");
}

#[test]
fn attention_head_products_that_wrap_are_errors() {
    let spec = AttentionSpec::new(1 << 33, 1 << 31);
    let q = f32s(&[1, 1, 0]);
    let msg = build_err(Op::Attention(spec), &[q.clone(), q.clone(), q]);
    assert!(msg.contains("overflows"), "{msg}");
}

#[test]
fn duplicate_input_and_param_names_are_typed_errors() {
    // The builder refuses a second leaf of the same kind and name, naming both nodes.
    let mut g = Graph::new("dup");
    let a = g.input("x", f32s(&[2])).unwrap();
    let e = g.input("x", f32s(&[3])).unwrap_err();
    assert_eq!(
        e,
        IrError::DuplicateName {
            kind: OpKind::Input,
            name: "x".into(),
            first: a,
            second: NodeId(1),
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("\"x\"") && text.contains("%0") && text.contains("%1"),
        "{text}"
    );
    let w = g.param("w", f32s(&[2])).unwrap();
    let e = g.param("w", f32s(&[2])).unwrap_err();
    assert!(
        matches!(e, IrError::DuplicateName { kind: OpKind::Param, first, .. } if first == w),
        "{e}"
    );
    // An input and a param are looked up separately, so one name for both is allowed.
    g.param("x", f32s(&[2])).unwrap();

    // A graph made without the builder (a decoded file, a rewrite) fails verify.
    for kind in [OpKind::Input, OpKind::Param] {
        let leaf = |name: &str| match kind {
            OpKind::Input => Op::Input { name: name.into() },
            _ => Op::Param { name: name.into() },
        };
        let mut g = Graph::new("dup");
        let a = g.push_node(leaf("p"), vec![], f32s(&[2]));
        let _other = g.push_node(leaf("q"), vec![], f32s(&[2]));
        let b = g.push_node(leaf("p"), vec![], f32s(&[2]));
        let s = g.add(a, b).unwrap();
        g.set_outputs(vec![s]);
        assert_eq!(
            g.verify(),
            Err(IrError::DuplicateName {
                kind,
                name: "p".into(),
                first: a,
                second: b,
            })
        );
    }
}
