//! Oracle tests of the ops added for ONNX import (Tile, GatherElements, GatherND,
//! ScatterElements, ScatterND, TopK, CumSum, Range, OneHot, the integer / bitwise Binary
//! ops): the per-op cases come from rlx-testutil's `index` table, run against their f64 /
//! exact oracles; below them the run-time errors a bad index or length must give.
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(index, cpu);

use rlx_cpu::{run_graph, CpuError};
use rlx_ir::{BinaryOp, DType, Graph, HostTensor, IrError, NodeId, ScatterReduction, Shape};

/// A graph of leaves `ins` (constants, so the test reads as the ONNX examples do) and the
/// node `body` makes, run on the CPU.
fn run(
    ins: &[(&[usize], &[f64], DType)],
    body: impl Fn(&mut Graph, &[NodeId]) -> NodeId,
) -> Result<HostTensor, CpuError> {
    let mut g = Graph::new("t");
    let ids: Vec<NodeId> = ins
        .iter()
        .map(|(d, v, dt)| g.constant(HostTensor::from_f64_as(d, v, *dt)).unwrap())
        .collect();
    let y = body(&mut g, &ids);
    g.set_outputs(vec![y]);
    Ok(run_graph(&g, &[], &[])?.remove(0))
}

fn values(t: &HostTensor) -> Vec<f64> {
    t.to_f64_vec()
}

/// The run-time error of a bad index names the node and the index.
fn assert_op_err(r: Result<HostTensor, CpuError>, want: &str) {
    match r {
        Err(e @ CpuError::Op { .. }) => {
            let m = e.to_string();
            assert!(m.contains(want), "{m}");
        }
        other => panic!("expected an op error with {want:?}, got {other:?}"),
    }
}

#[test]
fn onnx_examples() {
    // ONNX's Mod examples: the divisor's sign (fmod = 0) and C's fmod (fmod = 1).
    let a: &[f64] = &[-4.0, 7.0, 5.0, 4.0, -7.0, 8.0];
    let b: &[f64] = &[2.0, -3.0, 8.0, -2.0, 3.0, 5.0];
    let m = run(&[(&[6], a, DType::I64), (&[6], b, DType::I64)], |g, x| {
        g.modulo(x[0], x[1], false).unwrap()
    });
    assert_eq!(values(&m.unwrap()), [0.0, -2.0, 5.0, 0.0, 2.0, 3.0]);
    let af: &[f64] = &[-4.3, 7.2, 5.0, 4.3, -7.2, 8.0];
    let bf: &[f64] = &[2.1, -3.4, 8.0, -2.1, 3.4, 5.0];
    let m = run(&[(&[6], af, DType::F64), (&[6], bf, DType::F64)], |g, x| {
        g.modulo(x[0], x[1], true).unwrap()
    });
    let want = [-0.1, 0.4, 5.0, 0.1, -0.4, 3.0];
    for (g, w) in values(&m.unwrap()).iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{g} vs {w}");
    }
    // BitShift on uint8.
    let (x, s): (&[f64], &[f64]) = (&[16.0, 4.0, 1.0], &[1.0, 2.0, 3.0]);
    let r = run(&[(&[3], x, DType::U8), (&[3], s, DType::U8)], |g, v| {
        g.binary(BinaryOp::ShiftRight, v[0], v[1]).unwrap()
    });
    assert_eq!(values(&r.unwrap()), [8.0, 1.0, 0.0]);
    let l = run(&[(&[3], x, DType::U8), (&[3], s, DType::U8)], |g, v| {
        g.binary(BinaryOp::ShiftLeft, v[0], v[1]).unwrap()
    });
    assert_eq!(values(&l.unwrap()), [32.0, 16.0, 8.0]);
    // Not on Bool and on U8.
    let n = run(&[(&[3], &[1.0, 0.0, 1.0], DType::Bool)], |g, v| {
        g.bit_not(v[0]).unwrap()
    });
    assert_eq!(values(&n.unwrap()), [0.0, 1.0, 0.0]);
    let n = run(&[(&[2], &[0.0, 200.0], DType::U8)], |g, v| {
        g.bit_not(v[0]).unwrap()
    });
    assert_eq!(values(&n.unwrap()), [255.0, 55.0]);
}

#[test]
fn top_k_ties_keep_the_lower_index_first() {
    let x: &[f64] = &[1.0, 3.0, 3.0, 2.0, 3.0, 1.0];
    for dt in [DType::F32, DType::I64] {
        let top = run(&[(&[6], x, dt)], |g, v| {
            g.top_k(v[0], 4, 0, true, true).unwrap().1
        });
        assert_eq!(values(&top.unwrap()), [1.0, 2.0, 4.0, 3.0], "{dt}");
        let low = run(&[(&[6], x, dt)], |g, v| {
            g.top_k(v[0], 3, -1, false, true).unwrap().1
        });
        assert_eq!(values(&low.unwrap()), [0.0, 5.0, 3.0], "{dt}");
    }
    // NaN counts as the largest.
    let y: &[f64] = &[0.5, f64::NAN, 2.0];
    let top = run(&[(&[3], y, DType::F32)], |g, v| {
        g.top_k(v[0], 2, 0, true, true).unwrap().1
    });
    assert_eq!(values(&top.unwrap()), [1.0, 2.0]);
}

#[test]
fn scatter_duplicates_combine_in_order() {
    let data: &[f64] = &[1.0, 2.0, 3.0, 4.0];
    let idx: &[f64] = &[1.0, -3.0, 3.0, 1.0];
    let upd: &[f64] = &[10.0, 20.0, 30.0, 40.0];
    let want = [
        (ScatterReduction::None, [1.0, 40.0, 3.0, 30.0]),
        (ScatterReduction::Add, [1.0, 72.0, 3.0, 34.0]),
        (ScatterReduction::Mul, [1.0, 16000.0, 3.0, 120.0]),
        (ScatterReduction::Max, [1.0, 40.0, 3.0, 30.0]),
        (ScatterReduction::Min, [1.0, 2.0, 3.0, 4.0]),
    ];
    for (red, w) in want {
        let ins: [(&[usize], &[f64], DType); 3] = [
            (&[4], data, DType::I64),
            (&[4], idx, DType::I64),
            (&[4], upd, DType::I64),
        ];
        let e = run(&ins, |g, x| {
            g.scatter_elements(x[0], x[1], x[2], 0, red).unwrap()
        });
        assert_eq!(values(&e.unwrap()), w, "elements {red:?}");
        let ins: [(&[usize], &[f64], DType); 3] = [
            (&[4], data, DType::I64),
            (&[4, 1], idx, DType::I64),
            (&[4], upd, DType::I64),
        ];
        let n = run(&ins, |g, x| g.scatter_nd(x[0], x[1], x[2], red).unwrap());
        assert_eq!(values(&n.unwrap()), w, "nd {red:?}");
    }
}

#[test]
fn bad_indices_and_lengths_are_run_errors() {
    let data: &[f64] = &[1.0, 2.0, 3.0, 4.0];
    let i = |v: f64| -> Vec<f64> { vec![0.0, v] };
    for bad in [4.0, -5.0] {
        let iv = i(bad);
        let r = run(
            &[(&[4], data, DType::F32), (&[2], &iv, DType::I64)],
            |g, x| g.gather_elements(x[0], x[1], 0).unwrap(),
        );
        assert_op_err(
            r,
            &format!("index {bad} is out of range for axis 0 of size 4"),
        );
        let r = run(
            &[
                (&[4], data, DType::F32),
                (&[2], &iv, DType::I32),
                (&[2], &[1.0, 2.0], DType::F32),
            ],
            |g, x| {
                g.scatter_elements(x[0], x[1], x[2], 0, ScatterReduction::Add)
                    .unwrap()
            },
        );
        assert_op_err(r, "out of range");
        let r = run(
            &[(&[4], data, DType::F32), (&[2, 1], &iv, DType::I64)],
            |g, x| g.gather_nd(x[0], x[1], 0).unwrap(),
        );
        assert_op_err(r, "out of range");
    }
    // Range built for 3 values but fed values that give 4.
    let one = |v: f64| (&[] as &[usize], vec![v]);
    let (s, l, d) = (one(0.0), one(4.0), one(1.0));
    let r = run(
        &[
            (s.0, &s.1, DType::F32),
            (l.0, &l.1, DType::F32),
            (d.0, &d.1, DType::F32),
        ],
        |g, x| g.range(x[0], x[1], x[2], 3).unwrap(),
    );
    assert_op_err(r, "give 4 values; the graph was built for 3");
}

/// A builder error names the op; shapes are checked when the node is added.
fn build_err(f: impl FnOnce(&mut Graph) -> Result<NodeId, IrError>) -> String {
    let mut g = Graph::new("t");
    match f(&mut g) {
        Err(e @ IrError::Build { .. }) => e.to_string(),
        other => panic!("expected a build error, got {other:?}"),
    }
}

#[test]
fn bad_shapes_are_typed_build_errors() {
    let input =
        |g: &mut Graph, name: &str, d: &[usize], dt| g.input(name, Shape::new(d, dt)).unwrap();
    let m = build_err(|g| {
        let x = input(g, "x", &[3, 4], DType::F32);
        let i = input(g, "i", &[3], DType::I64);
        g.gather_elements(x, i, 0)
    });
    assert!(m.contains("GatherElements") && m.contains("rank"), "{m}");
    let m = build_err(|g| {
        let x = input(g, "x", &[3, 4], DType::F32);
        let i = input(g, "i", &[2, 4], DType::F32);
        g.gather_elements(x, i, 0)
    });
    assert!(m.contains("must be integers"), "{m}");
    let m = build_err(|g| {
        let x = input(g, "x", &[3, 4], DType::F32);
        let i = input(g, "i", &[2, 5], DType::I64);
        let u = input(g, "u", &[2, 5], DType::F32);
        g.scatter_elements(x, i, u, 0, ScatterReduction::None)
    });
    assert!(m.contains("exceed data"), "{m}");
    let m = build_err(|g| {
        let x = input(g, "x", &[3, 4], DType::F32);
        let i = input(g, "i", &[2, 1], DType::I64);
        let u = input(g, "u", &[2, 3], DType::F32);
        g.scatter_nd(x, i, u, ScatterReduction::Add)
    });
    assert!(m.contains("updates") && m.contains("[2, 4]"), "{m}");
    let m = build_err(|g| {
        let x = input(g, "x", &[3, 4], DType::F32);
        let i = input(g, "i", &[2, 3], DType::I64);
        g.gather_nd(x, i, 0)
    });
    assert!(m.contains("index depth 3"), "{m}");
    let m = build_err(|g| {
        let x = input(g, "x", &[3, 4], DType::F32);
        g.tile(x, &[2])
    });
    assert!(m.contains("repeats"), "{m}");
    let m = build_err(|g| {
        let x = input(g, "x", &[3, 4], DType::F32);
        g.top_k(x, 5, 1, true, true).map(|p| p.1)
    });
    assert!(m.contains("k = 5"), "{m}");
    let m = build_err(|g| {
        let a = input(g, "a", &[3], DType::F32);
        g.binary(BinaryOp::BitAnd, a, a)
    });
    assert!(m.contains("BitAnd needs integer"), "{m}");
    let m = build_err(|g| {
        let i = input(g, "i", &[3], DType::I64);
        let v = input(g, "v", &[3], DType::F32);
        g.one_hot(i, v, 4, -1)
    });
    assert!(m.contains("[off, on]"), "{m}");
    let m = build_err(|g| {
        let s = input(g, "s", &[], DType::F32);
        let l = input(g, "l", &[], DType::I64);
        g.range(s, l, s, 3)
    });
    assert!(m.contains("one numeric dtype"), "{m}");
}
