//! Case table of the reduce group: Reduce (float and integer), Softmax, ArgMax,
//! SoftmaxCrossEntropy, SoftmaxCrossEntropyWithLogits and SoftmaxCrossEntropyBackward. The
//! table is the union of what the CPU oracle tests, the CUDA parity tests and the gradchecks
//! held: each list below names where its shapes came from. Draws: `draw` is what the oracle
//! check sees; `gpu` keeps sums off zero (a relative error of a cancelled sum says nothing)
//! and products short of drifting; `grad` keeps products tame for finite differences.
use super::elementwise::graph;
pub use super::reduce_oracle::*;
use crate::case::{Case, Draw, Input};
use crate::Rng;
use rlx_ir::{DType, ReduceOp};

pub const OPS: [ReduceOp; 5] = [
    ReduceOp::Sum,
    ReduceOp::Mean,
    ReduceOp::Max,
    ReduceOp::Min,
    ReduceOp::Prod,
];
/// The float dtypes the CUDA kernels of this group have (no f64 kernel).
pub const GPU_FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];
pub const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

type Axes = &'static [i64];

/// Sets one input's parity draw on a built case (the draws of a shared builder differ per
/// list of shapes).
pub trait GpuOn {
    fn gpu_on(self, input: usize, d: Draw) -> Case;
}

impl GpuOn for Case {
    fn gpu_on(mut self, input: usize, d: Draw) -> Case {
        self.inputs[input].gpu = Some(d);
        self
    }
}

/// Number of elements each output of a reduction gathers.
fn count(dims: &[usize], axes: &[i64]) -> usize {
    norm_axes(axes, dims.len())
        .iter()
        .map(|&a| dims[a])
        .product()
}

// ---- draws ----

/// The parity tests' data for `op`: sums and means offset by 1, products of magnitude
/// 0.5..1.5 with random sign, normals otherwise.
fn gpu_draw(op: ReduceOp) -> Draw {
    match op {
        ReduceOp::Prod => Draw::Signed(0.5, 1.5),
        ReduceOp::Sum | ReduceOp::Mean => {
            Draw::custom(|rng, n, _| rng.normals(n).into_iter().map(|v| v + 1.0).collect())
        }
        _ => Draw::Normal(1.0),
    }
}

/// The gradchecks' data: products near magnitude 1 with 30% negative, normals otherwise.
fn grad_draw(op: ReduceOp) -> Draw {
    match op {
        ReduceOp::Prod => Draw::custom(|rng, n, _| {
            rng.uniforms(n, 0.6, 1.4)
                .into_iter()
                .map(|v| if rng.uniform() < 0.3 { -v } else { v })
                .collect()
        }),
        _ => Draw::Normal(1.0),
    }
}

/// Random probability rows (softmax of normals) of width `c`: dense targets.
fn prob_rows(c: usize) -> Draw {
    Draw::custom(move |rng: &mut Rng, n, _| {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n / c {
            let e: Vec<f64> = (0..c).map(|_| (2.0 * rng.normal()).exp()).collect();
            let s: f64 = e.iter().sum();
            out.extend(e.iter().map(|v| v / s));
        }
        out
    })
}

// ---- reduce ----

/// One Reduce case: x of `dims` reduced by `op` over `axes`.
fn reduce_case(op: ReduceOp, dims: &[usize], axes: &[i64], keep: bool, draw: Draw) -> Case {
    let (d, a) = (dims.to_vec(), axes.to_vec());
    // The shape alone: the big cases' tables are built without a pass over their elements.
    let out = reduced_shape(dims, &norm_axes(axes, dims.len()), keep);
    let (od, oa) = (d.clone(), a.clone());
    Case::new(
        format!("Reduce {op:?} {dims:?} axes {axes:?} keep {keep}"),
        vec![Input::new("x", dims, draw)],
        move |dt| {
            graph(&[("x", &d, dt)], |g, x| {
                g.reduce(x[0], op, &a, keep).unwrap()
            })
        },
    )
    .out(&out)
    .oracle(move |v, dt| reduce_ref(op, &v[0], &od, &oa, keep, dt))
    .wrt(&["x"])
}

/// Float Reduce: the CPU's axis sets (f32; half and f64 storage), the GPU's row, column
/// and strided paths in every float dtype, rank 0, and the gradchecks' shapes.
pub fn reduce() -> Vec<Case> {
    let mut cases = vec![];
    let cpu: [(&[usize], Axes); 10] = [
        (&[3, 5, 7], &[1]),
        (&[3, 5, 7], &[-1]),
        (&[3, 5, 7], &[0, 2]),
        (&[3, 5, 7], &[-3, -1]),
        (&[3, 5, 7], &[]),
        (&[2, 3, 4, 5], &[1, -1]),
        (&[2, 3, 4, 5], &[0, 1, 2, 3]),
        (&[9], &[0]),
        (&[11], &[]),
        (&[1, 13], &[-1]),
    ];
    for (dims, axes) in cpu {
        for op in OPS {
            for keep in [false, true] {
                let c = reduce_case(op, dims, axes, keep, Draw::Signed(0.6, 1.4));
                cases.push(c.gpu_on(0, gpu_draw(op)).no_grad());
            }
        }
    }
    for axes in [&[-2i64][..], &[0, 2]] {
        for op in OPS {
            let c = reduce_case(op, &[5, 6, 3], axes, false, Draw::Signed(0.6, 1.4));
            let c = c.gpu_on(0, gpu_draw(op)).no_grad();
            cases.push(
                c.dtypes(&[DType::F16, DType::BF16, DType::F64])
                    .parity_dtypes(&[DType::F16, DType::BF16]),
            );
        }
    }
    // The GPU's paths; keep alternates as it did there (rows even, columns odd).
    let rows: [(&[usize], Axes); 9] = [
        (&[7, 33], &[-1]),
        (&[129, 7], &[1]),
        (&[3, 5, 7], &[1, 2]),
        (&[33, 1000], &[-1]),
        (&[5, 5000], &[1]),
        (&[1, 20000], &[-1]),
        (&[300, 2000], &[-1]),
        (&[2, 3, 4, 5], &[]),
        (&[1, 7, 1, 33], &[0, 1, 2, 3]),
    ];
    let cols: [(&[usize], Axes); 9] = [
        (&[1000, 33], &[0]),
        (&[7, 129, 33], &[1]),
        (&[7, 129, 33], &[-2]),
        (&[5, 3, 7, 9], &[1, 2]),
        (&[5, 7, 9, 11], &[0, 2]),
        (&[5, 7, 9, 11], &[-3, -1]),
        (&[1, 7, 1, 33], &[0, 1, 2]),
        (&[4, 1, 6], &[1]),
        (&[3, 1, 5, 1, 2, 1, 3, 2], &[0, 2, 6]),
    ];
    let paths = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r, i.is_multiple_of(2)));
    let paths = paths.chain(cols.iter().enumerate().map(|(i, c)| (c, i % 2 == 1)));
    for (&(dims, axes), keep) in paths {
        for op in OPS {
            // bf16 products drift by ~1e-3 per factor: keep them to short reductions.
            if op == ReduceOp::Prod && count(dims, axes) > 40 {
                continue;
            }
            let c = reduce_case(op, dims, axes, keep, gpu_draw(op));
            cases.push(c.dtypes(&GPU_FLOATS).no_grad());
        }
    }
    // Rank 0 (the CPU's; the GPU's lowering of a scalar reduction was never checked).
    for (op, keep) in [(ReduceOp::Sum, false), (ReduceOp::Max, true)] {
        let c = reduce_case(op, &[], &[], keep, Draw::Normal(1.0));
        cases.push(c.dtypes(&[DType::F64]).no_parity());
    }
    cases.push(reduce_case(
        ReduceOp::Mean,
        &[2, 3, 4],
        &[],
        true,
        Draw::Normal(1.0),
    ));
    let grad: [(&[usize], Axes); 5] = [
        (&[3, 5], &[1]),
        (&[3, 5], &[-2]),
        (&[2, 3, 4], &[0, 2]),
        (&[2, 3, 4], &[]),
        (&[7], &[0]),
    ];
    for op in OPS {
        for (dims, axes) in grad {
            for keep in [false, true] {
                cases.push(reduce_case(op, dims, axes, keep, grad_draw(op)).only_grad());
            }
        }
    }
    cases
}

/// Big reductions: parity only (blocks split and combined; 16M values into one).
pub fn reduce_big() -> Vec<Case> {
    let big: [(&[usize], Axes, bool, &[ReduceOp]); 5] = [
        // Bias-gradient shape: few columns, many rows. Sums of values around 1 stay below
        // f16's 65504.
        (&[40000, 10], &[0], false, &[ReduceOp::Sum, ReduceOp::Max]),
        (&[4096, 4096], &[0], false, &[ReduceOp::Sum, ReduceOp::Min]),
        (&[4096, 4096], &[1], true, &[ReduceOp::Mean]),
        // One output from 16M values: a sum would overflow f16, so mean and max.
        (&[4096, 4096], &[], false, &[ReduceOp::Mean, ReduceOp::Max]),
        (&[64, 3, 100000], &[-1], false, &[ReduceOp::Mean]),
    ];
    let mut cases = vec![];
    for (dims, axes, keep, ops) in big {
        for &op in ops {
            let c = reduce_case(op, dims, axes, keep, gpu_draw(op));
            cases.push(c.dtypes(&GPU_FLOATS).only_parity());
        }
    }
    cases
}

/// Integer Reduce, exact: the CPU's small values (products wrap in the dtype) and the GPU's
/// row / column / multi-axis paths.
pub fn reduce_int() -> Vec<Case> {
    let ints = [DType::I32, DType::I64];
    let mut cases = vec![];
    for op in OPS {
        for (axes, keep) in [(&[1i64][..], true), (&[-1, 0], false), (&[], false)] {
            let c = reduce_case(op, &[4, 3, 5], axes, keep, Draw::Ints(-4, 4));
            cases.push(c.dtypes(&ints).no_grad());
        }
    }
    let gpu: [(&[usize], Axes); 5] = [
        (&[7, 33], &[-1]),
        (&[33, 5000], &[1]),
        (&[1000, 7], &[0]),
        (&[5, 7, 9], &[0, 2]),
        (&[2, 3, 4], &[]),
    ];
    for (i, (dims, axes)) in gpu.into_iter().enumerate() {
        for op in OPS {
            let draw = if op == ReduceOp::Prod {
                Draw::Ints(-3, 3)
            } else {
                Draw::Ints(-1000, 1000)
            };
            let c = reduce_case(op, dims, axes, i.is_multiple_of(2), draw);
            cases.push(c.dtypes(&ints).no_grad());
        }
    }
    cases
}

// ---- softmax, argmax ----

fn softmax_case(dims: &[usize], axis: i64, draw: Draw) -> Case {
    let (d, od) = (dims.to_vec(), dims.to_vec());
    Case::new(
        format!("Softmax {dims:?} axis {axis}"),
        vec![Input::new("x", dims, draw)],
        move |dt| graph(&[("x", &d, dt)], |g, x| g.softmax(x[0], axis).unwrap()),
    )
    .out(dims)
    .oracle(move |v, _| softmax_ref(&v[0], &od, axis))
    .wrt(&["x"])
}

/// Softmax: the CPU's axes with normal and large (×1000) logits in every float dtype, the
/// GPU's warp / block / streaming rows and strided axes, the gradchecks' shapes.
pub fn softmax() -> Vec<Case> {
    let mut cases = vec![];
    let cpu: [(&[usize], i64); 5] = [
        (&[3, 7], -1),
        (&[3, 7], 0),
        (&[2, 5, 3], 1),
        (&[2, 5, 3], -3),
        (&[13], 0),
    ];
    for (dims, axis) in cpu {
        for scale in [1.0, 1000.0] {
            let c = softmax_case(dims, axis, Draw::Normal(scale));
            let c = c.dtypes(&FLOATS).parity_dtypes(&GPU_FLOATS).no_grad();
            cases.push(Case {
                name: format!("{} scale {scale}", c.name),
                ..c
            });
        }
    }
    let gpu: [(&[usize], i64); 15] = [
        (&[7, 33], -1),
        (&[13, 1], 1),
        (&[4096, 384], -1),
        (&[9, 513], -1),
        (&[33, 1000], 1),
        (&[129, 2000], -1),
        (&[5, 5000], -1),
        (&[7, 9000], -1),
        (&[2, 12000], -1),
        (&[3, 30522], -1),
        (&[33, 129, 7], 1),
        (&[1000, 5], 0),
        (&[5, 7, 9, 11], -3),
        (&[3, 4000, 2], -2),
        (&[1, 1], 0),
    ];
    for (dims, axis) in gpu {
        let c = softmax_case(dims, axis, Draw::Normal(1.0));
        cases.push(c.dtypes(&GPU_FLOATS).no_grad());
    }
    for (dims, axis) in [(&[3usize, 5][..], -1i64), (&[2, 3, 4], 1), (&[4, 3], 0)] {
        cases.push(softmax_case(dims, axis, Draw::Normal(1.0)).only_grad());
    }
    cases
}

fn argmax_case(what: &str, dims: &[usize], axis: i64, keep: bool, draw: Draw) -> Case {
    let (d, od) = (dims.to_vec(), dims.to_vec());
    let a = norm_axes(&[axis], dims.len());
    let out = reduced_shape(dims, &a, keep);
    Case::new(
        format!("ArgMax {what}{dims:?} axis {axis} keep {keep}"),
        vec![Input::new("x", dims, draw)],
        move |dt| graph(&[("x", &d, dt)], |g, x| g.argmax(x[0], axis, keep).unwrap()),
    )
    .out(&out)
    .out_dtype(|_| DType::I64)
    .oracle(move |v, _| argmax_ref(&v[0], &od, axis))
    .exact()
}

/// ArgMax (first index on ties): the CPU's few-level values in float and integer dtypes,
/// the GPU's rows and strided axes with distinct values and with ties.
pub fn argmax() -> Vec<Case> {
    let mut cases = vec![];
    let cpu_dt = [DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64];
    for (axis, keep) in [(1i64, false), (-1, true), (0, true)] {
        let c = argmax_case("ties ", &[4, 6, 5], axis, keep, Draw::Ints(-2, 1));
        let gpu_dt = [DType::F32, DType::BF16, DType::I32, DType::I64];
        cases.push(c.dtypes(&cpu_dt).parity_dtypes(&gpu_dt));
    }
    let gpu: [(&[usize], i64); 10] = [
        (&[7, 33], -1),
        (&[129, 1], 1),
        (&[4096, 10], 1),
        (&[33, 1000], -1),
        (&[5, 5000], 1),
        (&[3, 30522], -1),
        (&[33, 129, 7], 1),
        (&[1000, 5], 0),
        (&[5, 7, 9, 11], -3),
        (&[7], 0),
    ];
    let with_ints = [DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64];
    for (i, (dims, axis)) in gpu.into_iter().enumerate() {
        let keep = i.is_multiple_of(2);
        let spread = argmax_case("", dims, axis, keep, Draw::Normal(1.0));
        cases.push(spread.dtypes(&GPU_FLOATS));
        let ties = argmax_case("ties ", dims, axis, keep, Draw::Ints(0, 3));
        cases.push(ties.dtypes(&with_ints));
    }
    cases
}

// ---- cross entropy ----

/// Logits `[n, c]` and targets: dense `[n, c]` in the case dtype, or labels `[n]` of `lt`.
fn ce_inputs(n: usize, c: usize, x: Draw, t: Draw, labels: Option<DType>) -> Vec<Input> {
    let t = match labels {
        Some(lt) => Input::new("y", &[n], Draw::Ints(0, c as i64 - 1)).of(lt),
        None => Input::new("t", &[n, c], t),
    };
    vec![Input::new("x", &[n, c], x), t]
}

/// SoftmaxCrossEntropy (dense targets) or SoftmaxCrossEntropyWithLogits (labels of `lt`).
fn ce_case(n: usize, c: usize, x: Draw, t: Draw, labels: Option<DType>) -> Case {
    let name = match labels {
        Some(lt) => format!("SoftmaxCrossEntropyWithLogits [{n}, {c}] labels {lt}"),
        None => format!("SoftmaxCrossEntropy [{n}, {c}]"),
    };
    Case::new(name, ce_inputs(n, c, x, t, labels), move |dt| {
        let ins: [(&str, &[usize], DType); 2] = match labels {
            Some(lt) => [("x", &[n, c], dt), ("y", &[n], lt)],
            None => [("x", &[n, c], dt), ("t", &[n, c], dt)],
        };
        graph(&ins, |g, i| match labels {
            Some(_) => g.softmax_cross_entropy_with_logits(i[0], i[1]).unwrap(),
            None => g.softmax_cross_entropy(i[0], i[1]).unwrap(),
        })
    })
    .out(&[n])
    .oracle(move |v, _| cross_entropy_ref(&v[0], &v[1], labels.is_none(), n, c))
}

/// The GPU's shapes of the cross-entropy family: one row of one class up to 30522 classes.
const CE_SHAPES: [(usize, usize); 7] = [
    (7, 10),
    (1, 1),
    (4096, 10),
    (33, 1000),
    (129, 2000),
    (5, 30522),
    (3, 7),
];

/// SoftmaxCrossEntropy and SoftmaxCrossEntropyWithLogits: the CPU's shapes (scaled logits,
/// unnormalised targets, every label dtype), the GPU's shapes (probability rows, one label
/// dtype per shape in turn), and the gradchecks (dense: logits and targets; labels: logits).
pub fn cross_entropy() -> Vec<Case> {
    let mut cases = vec![];
    let cpu_dt = [DType::F32, DType::F64, DType::BF16];
    let gpu_dt = [DType::F32, DType::BF16];
    for (n, c) in [(7usize, 5usize), (1, 3), (4, 11)] {
        let x = || Draw::Normal(3.0);
        let mut set = vec![ce_case(n, c, x(), Draw::Uniform(0.0, 1.0), None)];
        for lt in [DType::I64, DType::I32, DType::F32] {
            set.push(ce_case(n, c, x(), Draw::Uniform(0.0, 1.0), Some(lt)));
        }
        cases.extend(set.into_iter().map(|k| {
            k.dtypes(&cpu_dt)
                .parity_dtypes(&gpu_dt)
                .gpu_on(0, Draw::Normal(1.0))
        }));
    }
    let label_types = [DType::I64, DType::I32, DType::F32];
    for (i, (n, c)) in CE_SHAPES.into_iter().enumerate() {
        let dense = ce_case(n, c, Draw::Normal(1.0), prob_rows(c), None);
        cases.push(dense.dtypes(&GPU_FLOATS));
        let lt = label_types[i % label_types.len()];
        let sparse = ce_case(n, c, Draw::Normal(1.0), Draw::Normal(1.0), Some(lt));
        cases.push(sparse.dtypes(&GPU_FLOATS));
    }
    for (n, c) in [(4, 5), (3, 7)] {
        // Dense targets not normalised: the rule must not assume rows sum to 1.
        let dense = ce_case(n, c, Draw::Normal(1.0), Draw::Uniform(0.0, 1.0), None);
        cases.push(dense.wrt(&["x", "t"]).only_grad());
        for lt in [DType::I64, DType::I32] {
            let sparse = ce_case(n, c, Draw::Normal(1.0), Draw::Normal(1.0), Some(lt));
            cases.push(sparse.wrt(&["x"]).only_grad());
        }
    }
    cases
}

/// SoftmaxCrossEntropyBackward of logits, labels (`[n]` of `lt`) or dense targets, d_loss.
fn ce_backward_case(n: usize, c: usize, x: Draw, t: Draw, labels: Option<DType>) -> Case {
    let name = match labels {
        Some(lt) => format!("SoftmaxCrossEntropyBackward [{n}, {c}] labels {lt}"),
        None => format!("SoftmaxCrossEntropyBackward [{n}, {c}] dense"),
    };
    let mut ins = ce_inputs(n, c, x, t, labels);
    ins.push(Input::new("d", &[n], Draw::Normal(1.0)));
    Case::new(name, ins, move |dt| {
        let ins: [(&str, &[usize], DType); 3] = match labels {
            Some(lt) => [("x", &[n, c], dt), ("y", &[n], lt), ("d", &[n], dt)],
            None => [("x", &[n, c], dt), ("t", &[n, c], dt), ("d", &[n], dt)],
        };
        graph(&ins, |g, i| {
            g.softmax_cross_entropy_backward(i[0], i[1], i[2]).unwrap()
        })
    })
    .out(&[n, c])
    .oracle(move |v, _| cross_entropy_backward_ref(&v[0], &v[1], labels.is_none(), &v[2], n, c))
}

/// SoftmaxCrossEntropyBackward: the CPU's shapes (labels and dense targets, f32 and f64) and
/// the GPU's shapes (label dtypes in turn, probability rows).
pub fn cross_entropy_backward() -> Vec<Case> {
    let mut cases = vec![];
    for (n, c) in [(6usize, 7usize), (3, 2)] {
        for labels in [Some(DType::I64), None] {
            let k = ce_backward_case(n, c, Draw::Normal(2.0), Draw::Uniform(0.0, 1.0), labels);
            let k = k.gpu_on(0, Draw::Normal(1.0));
            cases.push(
                k.dtypes(&[DType::F32, DType::F64])
                    .parity_dtypes(&[DType::F32]),
            );
        }
    }
    let label_types = [DType::I64, DType::F32, DType::I32];
    for (i, (n, c)) in CE_SHAPES.into_iter().enumerate() {
        let lt = label_types[i % label_types.len()];
        for labels in [Some(lt), None] {
            let k = ce_backward_case(n, c, Draw::Normal(1.0), prob_rows(c), labels);
            cases.push(k.dtypes(&GPU_FLOATS));
        }
    }
    cases
}
