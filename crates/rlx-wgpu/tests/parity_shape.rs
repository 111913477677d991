//! wgpu parity of the shape group (rlx-testutil's case table: reshape, expand, transpose,
//! narrow, concat, gather, pad, slice in every moving dtype) against the CPU reference and
//! the f64 oracle. Data movement compares exactly.
mod common;
use common::*;

rlx_testutil::case_tests!(shape, wgpu);

/// Views of a leaf that start inside a word (a leading-axis narrow of a byte or half
/// tensor) feeding every mover: the readers rebase to the word and shift by elements.
#[test]
fn movers_read_unaligned_views() {
    use rlx_ir::{DType, Graph, NodeId};
    use rlx_testutil::cases::elementwise::graph;
    if !gpu() {
        return;
    }
    type Body = fn(&mut Graph, NodeId) -> NodeId;
    let bodies: [(&str, Body); 5] = [
        ("transpose", |g, v| g.transpose(v, &[1, 0]).unwrap()),
        ("pad", |g, v| g.pad(v, vec![[1, 2], [0, 3]], 3.0).unwrap()),
        ("concat", |g, v| g.concat(&[v, v], 1).unwrap()),
        ("slice", |g, v| {
            g.slice(v, &[1], &[-1], &[i64::MIN], &[-2]).unwrap()
        }),
        ("tile", |g, v| g.tile(v, &[2, 1]).unwrap()),
    ];
    let mut rng = Rng::new("movers_read_unaligned_views");
    for dt in [
        DType::U8,
        DType::Bool,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::I32,
    ] {
        for (what, body) in bodies {
            let build = move |d: DType| {
                graph(&[("x", &[7, 13], d)], |g, x| {
                    let v = g.narrow(x[0], 0, 1, 5).unwrap();
                    body(g, v)
                })
            };
            let data: Vec<f64> = match dt {
                DType::Bool => (0..91).map(|_| rng.below(2) as f64).collect(),
                DType::U8 => (0..91).map(|_| rng.below(256) as f64).collect(),
                d if d.is_float() => rng.normals(91),
                _ => (0..91)
                    .map(|_| rng.below(200001) as f64 - 100000.0)
                    .collect(),
            };
            let feeds = [feed("x", &[7, 13], data)];
            parity(&format!("unaligned {what}"), &build, &feeds, dt);
        }
    }
}
