//! wgpu parity of the reduce group (rlx-testutil's case tables: Reduce over every axes set
//! in float and integer dtypes, Softmax, ArgMax and the softmax cross-entropy family)
//! against the CPU reference and the f64 oracle.
mod common;
use common::*;

rlx_testutil::case_tests!(reduce, wgpu);

/// CumSum's cases live in the index group's table (which lets CumSum fall back); its
/// lowering lives here, so they run here with no fallback allowed.
#[test]
fn cumsum_lowered() {
    let mut cases = rlx_testutil::cases::index::cumsum();
    for c in &mut cases {
        c.fallback = OpKindSet::empty();
    }
    wgpu::check("index::cumsum", &cases);
}

/// Lines longer than one workgroup (the carry across blocks), along the last axis and a
/// strided one, every exclusive / reverse form, in f32 and i32.
#[test]
fn cumsum_long_lines() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("cumsum_long_lines");
    for (dims, axis) in [(vec![3usize, 1000], 1i64), (vec![700, 2], 0)] {
        for (ex, rev) in [(false, false), (true, false), (false, true), (true, true)] {
            for dt in [rlx_ir::DType::F32, rlx_ir::DType::I32] {
                let n: usize = dims.iter().product();
                let data = if dt.is_float() {
                    rng.normals(n).into_iter().map(|v| v + 0.5).collect()
                } else {
                    (0..n)
                        .map(|_| (rng.uniform() * 2001.0).floor() - 1000.0)
                        .collect()
                };
                let d = dims.clone();
                let build = move |t: rlx_ir::DType| {
                    let mut g = rlx_ir::Graph::new("cumsum");
                    let x = g.input("x", rlx_ir::Shape::new(&d, t)).unwrap();
                    let y = g.cumsum(x, axis, ex, rev).unwrap();
                    g.set_outputs(vec![y]);
                    g
                };
                let name = format!("cumsum {dims:?} axis {axis} ex {ex} rev {rev}");
                parity(&name, &build, &[feed("x", &dims, data)], dt);
            }
        }
    }
}
