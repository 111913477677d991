//! Oracle tests of the vision group: the per-op cases (Conv in 2-D and the 1-D
//! `[N,C,1,L]` form, its input and weight gradients, Pool, MaxPool2dBackward,
//! ResizeNearest2x) come from rlx-testutil's case table, run here against their f64
//! oracles; below them the tests that are not per-op cases (dynamic dims, bad builds).
mod common;
use common::*;
use rlx_ir::{ConvSpec, DType, Dim, Graph, HostTensor, PoolKind, PoolSpec, Shape};
use rlx_testutil::cases::numel;
use rlx_testutil::cases::vision::{conv_ref, Geo};
use rlx_testutil::run::cpu;

rlx_testutil::case_tests!(vision, cpu);

fn tensor(shape: &[usize], v: &[f64], dtype: DType) -> HostTensor {
    HostTensor::from_f64_as(shape, v, dtype)
}

#[test]
fn conv2d_dynamic_dims_run_with_concrete_shapes() {
    let mut rng = Rng::new("conv2d_dynamic_batch");
    let spec = ConvSpec::new([3, 5]).stride([2, 3]).padding([1, 2]);
    let c = Geo {
        x: [1, 4, 11, 10],
        o: 6,
        spec,
        bias: false,
        one_d: false,
    };
    let mut g = Graph::new("conv_dyn");
    let x_dims = vec![Dim::dynamic("B"), c.x[1].into(), "H".into(), "W".into()];
    let xi = g.input("x", Shape::with_dims(x_dims, DType::F32)).unwrap();
    let wi = g.input("w", Shape::new(&c.w(), DType::F32)).unwrap();
    let y = g.conv2d(xi, wi, c.spec).unwrap();
    let dims = &g.shape(y).unwrap().dims;
    assert_eq!(dims[0], Dim::dynamic("B"));
    assert!(matches!(
        (&dims[2], &dims[3]),
        (Dim::Dynamic(_), Dim::Dynamic(_))
    ));
    // A size-preserving conv keeps the symbol.
    let same = ConvSpec::new(spec.kernel_size).padding([1, 2]);
    let y2 = g.conv2d(xi, wi, same).unwrap();
    assert_eq!(g.shape(y2).unwrap().dims[2], Dim::dynamic("H"));
    g.set_outputs(vec![y]);
    let (xs, ws) = (c.x, c.w());
    let x = through(DType::F32, &rng.normals(numel(&xs)));
    let w = through(DType::F32, &rng.normals(numel(&ws)));
    let got = run(
        &g,
        &[
            ("x", tensor(&xs, &x, DType::F32)),
            ("w", tensor(&ws, &w, DType::F32)),
        ],
        &[],
    );
    assert_eq!(got[0].shape, c.y());
    assert_close(
        "dynamic conv",
        &got[0],
        &conv_ref(&c, &x, &w, None),
        DType::F32,
    );
}

#[test]
fn vision_builders_reject_bad_shapes_and_params() {
    let f32s = |d: &[usize]| Shape::new(d, DType::F32);
    let mut g = Graph::new("bad");
    let x = g.input("x", f32s(&[2, 6, 8, 8])).unwrap();
    let w33 = g.input("w", f32s(&[4, 6, 3, 3])).unwrap();
    let w_grp = g.input("wg", f32s(&[4, 3, 3, 3])).unwrap();
    let w_rank3 = g.input("w3", f32s(&[4, 6, 3])).unwrap();
    let w_big = g.input("wbig", f32s(&[4, 6, 11, 11])).unwrap();
    let w_odd_o = g.input("wo", f32s(&[5, 3, 3, 3])).unwrap();
    let w64 = g
        .input("w64", Shape::new(&[4, 6, 3, 3], DType::F64))
        .unwrap();
    let xi = g
        .input("xi", Shape::new(&[2, 6, 8, 8], DType::I32))
        .unwrap();
    let b5 = g.input("b5", f32s(&[5])).unwrap();
    let x3 = g.input("x3", f32s(&[6, 8, 8])).unwrap();
    let s3 = ConvSpec::new([3, 3]);
    // Channel mismatch: w expects 3·1 input channels.
    assert!(g.conv2d(x, w_grp, s3).is_err());
    // Groups: 6 channels but weight wants 6·2 = 12; and C not divisible by groups.
    assert!(g.conv2d(x, w33, s3.groups(2)).is_err());
    assert!(g.conv2d(x, w_grp, s3.groups(4)).is_err());
    // O = 5 not divisible by groups 2.
    assert!(g.conv2d(x, w_odd_o, s3.groups(2)).is_err());
    assert!(g.conv2d(x, w_grp, s3.groups(0)).is_err());
    assert!(g.conv2d(x, w_rank3, s3).is_err());
    assert!(g.conv2d(x3, w33, s3).is_err());
    assert!(g.conv2d(x, w_big, ConvSpec::new([11, 11])).is_err());
    assert!(g.conv2d(x, w33, s3.dilation([4, 4])).is_err());
    // kernel_size disagrees with w.
    assert!(g.conv2d(x, w33, ConvSpec::new([3, 5])).is_err());
    assert!(g.conv2d(x, w33, s3.stride([0, 1])).is_err());
    assert!(g.conv2d(x, w64, s3).is_err());
    assert!(g.conv2d(xi, w33, s3).is_err());
    assert!(g.conv2d_bias(x, w33, b5, s3).is_err());
    // Sanity: the good call works, with a padded kernel as large as the padded input.
    assert!(g.conv2d(x, w33, s3).is_ok());
    assert!(g
        .conv2d(x, w_big, ConvSpec::new([11, 11]).padding([2, 2]))
        .is_ok());
    // Backward ops: dy of the wrong spatial size / channels.
    let dy = g.input("dy", f32s(&[2, 4, 6, 6])).unwrap();
    let dy_bad = g.input("dyb", f32s(&[2, 4, 5, 6])).unwrap();
    let dy_c = g.input("dyc", f32s(&[2, 5, 6, 6])).unwrap();
    assert!(g.conv2d_backward_input(dy, w33, s3, [8, 8]).is_ok());
    assert!(g.conv2d_backward_input(dy_bad, w33, s3, [8, 8]).is_err());
    assert!(g.conv2d_backward_input(dy_c, w33, s3, [8, 8]).is_err());
    assert!(g.conv2d_backward_input(dy, w33, s3, [2, 2]).is_err());
    assert!(g.conv2d_backward_weight(x, dy, s3).is_ok());
    assert!(g.conv2d_backward_weight(x, dy_bad, s3).is_err());
    assert!(g.conv2d_backward_weight(x, dy_c, s3.groups(2)).is_err());
    assert!(g.conv2d_backward_weight(x, dy, s3.groups(4)).is_err());
    // Pooling.
    assert!(g.max_pool2d(x, [3, 3], [2, 2], [1, 1]).is_ok());
    assert!(g.max_pool2d(x, [3, 3], [2, 2], [2, 1]).is_err());
    assert!(g.avg_pool2d(x, [9, 3], [1, 1], [0, 0]).is_err());
    assert!(g.avg_pool2d(x, [2, 2], [0, 2], [0, 0]).is_err());
    assert!(g.max_pool2d(x3, [2, 2], [2, 2], [0, 0]).is_err());
    assert!(g.max_pool2d(xi, [2, 2], [2, 2], [0, 0]).is_err());
    let avg = PoolSpec {
        kind: PoolKind::Avg,
        kernel_size: [2, 2],
        stride: [2, 2],
        padding: [0, 0],
    };
    let pdy = g.input("pdy", f32s(&[2, 6, 4, 4])).unwrap();
    let pdy_bad = g.input("pdyb", f32s(&[2, 6, 4, 3])).unwrap();
    assert!(g.max_pool2d_backward(x, pdy, avg).is_err());
    let max = PoolSpec {
        kind: PoolKind::Max,
        ..avg
    };
    assert!(g.max_pool2d_backward(x, pdy, max).is_ok());
    assert!(g.max_pool2d_backward(x, pdy_bad, max).is_err());
    assert!(g.resize_nearest2x(x3).is_err());
}
