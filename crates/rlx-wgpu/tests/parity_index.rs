//! wgpu parity of the index group (rlx-testutil's case table: tile, gather/scatter
//! elements and ND with every reduction, one-hot, range, and the composites that expand
//! into core ops) against the CPU reference and the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(index, wgpu);

/// i64 scatters and Range with values far past 32 bits: the word-pair arithmetic (carry,
/// wrapping product, signed compare) against the CPU's i64, exactly; and sub-word data
/// (u8, f16) combined through their word scratch.
#[test]
fn wide_integer_scatters_and_range() {
    use rlx_ir::{DType, ScatterReduction as R};
    use rlx_testutil::cases::elementwise::graph;
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("wide_integer_scatters_and_range");
    for dt in [DType::I64, DType::U8, DType::F16] {
        for red in [R::None, R::Add, R::Mul, R::Max, R::Min] {
            let build = move |d: DType| {
                graph(
                    &[
                        ("x", &[6, 5], d),
                        ("i", &[9, 1], DType::I64),
                        ("u", &[9, 5], d),
                    ],
                    |g, x| g.scatter_nd(x[0], x[1], x[2], red).unwrap(),
                )
            };
            let wide = |rng: &mut Rng, n: usize| -> Vec<f64> {
                match dt {
                    DType::I64 => (0..n)
                        .map(|_| (rng.below(1 << 20) as f64 - 524288.0) * 7919.0 * 4099.0)
                        .collect(),
                    DType::U8 => (0..n).map(|_| rng.below(256) as f64).collect(),
                    _ => rng.normals(n),
                }
            };
            let idx: Vec<f64> = (0..9).map(|_| rng.below(12) as f64 - 6.0).collect();
            let feeds = [
                feed("x", &[6, 5], wide(&mut rng, 30)),
                feed("i", &[9, 1], idx),
                feed("u", &[9, 5], wide(&mut rng, 45)),
            ];
            parity(&format!("scatter_nd {dt} {red:?}"), &build, &feeds, dt);
        }
    }
    let build = |d: DType| {
        graph(&[("s", &[], d), ("l", &[], d), ("d", &[], d)], |g, x| {
            g.range(x[0], x[1], x[2], 7).unwrap()
        })
    };
    let (s, d) = (-5_000_000_123.0, 3_000_000_007.0);
    let feeds = [
        feed("s", &[], vec![s]),
        feed("l", &[], vec![s + 6.5 * d]),
        feed("d", &[], vec![d]),
    ];
    parity("range i64 wide", &build, &feeds, DType::I64);
}
