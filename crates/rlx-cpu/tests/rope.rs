//! Oracle tests of Rope that are not per-op cases (its cases, both pairings, partial
//! rotation, every x layout, per-batch angles and storage dtypes, come from rlx-testutil's
//! transformer case table and run in `attention.rs`): builder errors and a dynamic length.
mod common;
use common::*;
use rlx_cpu::CpuExecutable;
use rlx_ir::{DType, Dim, Graph, HostTensor, RopeStyle, Shape};
use rlx_testutil::cases::transformer::{RopeCase, XLayout};

#[test]
fn rope_builder_errors() {
    let f = DType::F32;
    let mut g = Graph::new("errors");
    let inp = |g: &mut Graph, dims: &[usize], dt: DType| {
        let n = g.len();
        g.input(format!("x{n}"), Shape::new(dims, dt)).unwrap()
    };
    let x = inp(&mut g, &[2, 4, 7, 8], f); // [B, H, S, D]
    let packed = inp(&mut g, &[2, 7, 32], f); // 4 heads of 8
    let c = inp(&mut g, &[7, 4], f);
    let c3 = inp(&mut g, &[7, 3], f);
    let c_s1 = inp(&mut g, &[7, 1, 4], f);
    let c_long = inp(&mut g, &[8, 4], f);
    let c_grow = inp(&mut g, &[3, 7, 4], f);
    let c_f16 = inp(&mut g, &[7, 4], DType::F16);
    let c_int = inp(&mut g, &[7, 4], DType::I64);
    let x_int = inp(&mut g, &[2, 4, 7, 8], DType::I32);
    let half = RopeStyle::Half;

    let bad: Vec<(&str, Result<_, _>)> = vec![
        ("odd n_rot", g.rope(x, c, c, 8, 7, half)),
        ("n_rot > head_dim", g.rope(x, c, c, 8, 10, half)),
        ("n_rot 0", g.rope(x, c, c, 8, 0, half)),
        ("head_dim 0", g.rope(x, c, c, 0, 8, half)),
        (
            "last dim not a multiple of head_dim",
            g.rope(packed, c_s1, c_s1, 5, 4, half),
        ),
        ("cos last dim != n_rot/2", g.rope(x, c3, c3, 8, 8, half)),
        ("cos and sin shapes differ", g.rope(x, c3, c, 8, 6, half)),
        ("cos too long", g.rope(x, c_long, c_long, 8, 8, half)),
        (
            "cos would grow the output",
            g.rope(x, c_grow, c_grow, 8, 8, half),
        ),
        ("packed x with [S, h] cos", g.rope(packed, c, c, 8, 8, half)),
        ("integer cos", g.rope(x, c_int, c_int, 8, 8, half)),
        ("integer x", g.rope(x_int, c, c, 8, 8, half)),
        (
            "two inputs",
            g.add_node(
                rlx_ir::Op::Rope {
                    head_dim: 8,
                    n_rot: 8,
                    style: half,
                },
                &[x, c],
            ),
        ),
    ];
    for (what, r) in bad {
        match r {
            Ok(id) => panic!("{what}: expected an error, got node {id}"),
            Err(e) => println!("{what}: {e}"),
        }
    }
    g.rope(x, c, c, 8, 8, half).unwrap();
    g.rope(packed, c_s1, c_s1, 8, 8, RopeStyle::Interleaved)
        .unwrap();
    g.rope(x, c_f16, c_f16, 8, 8, half).unwrap();
}

/// A symbolic sequence length in x and cos/sin: one compiled graph serves every length.
#[test]
fn rope_dynamic_sequence_length() {
    let mut rng = Rng::new("rope_dynamic_sequence_length");
    let (b, h, d, n_rot) = (2, 3, 8, 6);
    let half = n_rot / 2;
    let mut g = Graph::new("rope_dyn");
    let xs = Shape::with_dims(
        vec![b.into(), Dim::dynamic("S"), (h * d).into()],
        DType::F32,
    );
    let cs = Shape::with_dims(vec![Dim::dynamic("S"), 1.into(), half.into()], DType::F32);
    let xi = g.input("x", xs).unwrap();
    let ci = g.input("cos", cs.clone()).unwrap();
    let si = g.input("sin", cs).unwrap();
    let o = g.rope(xi, ci, si, d, n_rot, RopeStyle::Half).unwrap();
    g.set_outputs(vec![o]);
    let mut exe = CpuExecutable::new(g).unwrap();
    for s in [7, 1, 4] {
        let c = RopeCase::new(XLayout::Packed, (b, s, h, d), n_rot, RopeStyle::Half);
        let (xd, cd) = (c.x_dims(), c.cos_dims());
        let x = through(DType::F32, &rng.normals(xd.iter().product()));
        let cos = through(DType::F32, &rng.uniforms(s * half, -1.0, 1.0));
        let sin = through(DType::F32, &rng.uniforms(s * half, -1.0, 1.0));
        let out = exe
            .run(&[
                ("x", HostTensor::from_f64_as(&xd, &x, DType::F32)),
                ("cos", HostTensor::from_f64_as(&cd, &cos, DType::F32)),
                ("sin", HostTensor::from_f64_as(&cd, &sin, DType::F32)),
            ])
            .unwrap();
        assert_eq!(out[0].shape, xd);
        assert_close(
            &format!("{c:?}"),
            &out[0],
            &c.oracle(&x, &cos, &sin),
            DType::F32,
        );
    }
}
