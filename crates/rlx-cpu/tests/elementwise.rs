//! Oracle tests: Activation, Binary, Compare, Where, Cast, StopGradient.
mod common;
use common::*;
use rlx_ir::{Activation, DType, Graph, HostTensor, Shape};

#[test]
fn binary_add_broadcasts_against_f64_oracle() {
    let mut rng = Rng::new("binary_add_broadcast");
    let (a_shape, b_shape, o_shape) = ([3usize, 1, 5], [4usize, 1], [3usize, 4, 5]);
    let a = rng.normals(15);
    let b = rng.normals(4);
    let mut g = Graph::new("add");
    let x = g.input("a", Shape::new(&a_shape, DType::F32)).unwrap();
    let y = g.input("b", Shape::new(&b_shape, DType::F32)).unwrap();
    let s = g.add(x, y).unwrap();
    let t = g.activation(Activation::Tanh, s).unwrap();
    g.set_outputs(vec![t]);
    let out = run(
        &g,
        &[
            ("a", HostTensor::from_f64_as(&a_shape, &a, DType::F32)),
            ("b", HostTensor::from_f64_as(&b_shape, &b, DType::F32)),
        ],
        &[],
    );
    let a32 = through(DType::F32, &a);
    let b32 = through(DType::F32, &b);
    let mut want = vec![];
    for i in 0..o_shape[0] {
        for j in 0..o_shape[1] {
            for k in 0..o_shape[2] {
                want.push((a32[i * 5 + k] + b32[j]).tanh());
            }
        }
    }
    assert_eq!(out[0].shape, o_shape);
    assert_close("tanh(a+b)", &out[0], &want, DType::F32);
}
