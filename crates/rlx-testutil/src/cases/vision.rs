//! Case table of the vision group: Conv (2-D, the 1-D form, groups, depthwise, 1×1, H = 1
//! with 2-D parameters), Conv2dBackwardInput, Conv2dBackwardWeight, Pool (max, average),
//! MaxPool2dBackward and ResizeNearest2x, with the oracles of `vision_oracle`. Each
//! geometry is the union of what the CPU oracle tests, the CUDA parity tests and the
//! gradchecks used before the table. The device kernels are f32 / f16 / bf16 only (f64
//! would fall back), so f64 is an oracle-only copy of each conv and pool case; resize moves
//! elements of any dtype and takes every dtype everywhere. Parity draws max-pool inputs
//! from a grid exact in every dtype (ties are real, the first-max rule is what is checked);
//! gradchecks draw them spaced apart so no step crosses a tie.
use super::elementwise::graph;
pub use super::vision_oracle::*;
use super::{numel, Dims};
use crate::case::{Case, Draw, Input};
use crate::Rng;
use rlx_ir::{Activation, ConvSpec, DType, Graph, PoolKind, PoolSpec};

/// The dtypes the device kernels compute in; f64 is added as an oracle-only copy.
pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Gradchecks cost four runs per element: only geometries of at most this many x and w
/// elements take one.
const GRAD_BUDGET: usize = 700;

// ---- geometries ----

fn g2(x: [usize; 4], o: usize, spec: ConvSpec, bias: bool) -> Geo {
    Geo {
        x,
        o,
        spec,
        bias,
        one_d: false,
    }
}

/// The 1-D form: x `[n, c, 1, l]`, kernel `[k, 1]`, length parameters at index 0.
fn g1(x: [usize; 4], o: usize, spec: ConvSpec, bias: bool) -> Geo {
    Geo {
        one_d: true,
        ..g2(x, o, spec, bias)
    }
}

/// A 1-D conv's spec from (k, stride, padding, dilation, groups).
fn spec1((k, s, p, d, g): (usize, usize, usize, usize, usize)) -> ConvSpec {
    ConvSpec::new([k, 1])
        .stride([s, 1])
        .padding([p, 0])
        .dilation([d, 1])
        .groups(g)
}

/// A 2-D spec from kernel, stride, padding, dilation, groups.
fn spec2(k: [usize; 2], s: [usize; 2], p: [usize; 2], d: [usize; 2], g: usize) -> ConvSpec {
    ConvSpec::new(k).stride(s).padding(p).dilation(d).groups(g)
}

fn spec3() -> ConvSpec {
    ConvSpec::new([3, 3])
}

/// The CPU oracle tests' geometries: stride, padding, dilation, groups (depthwise and
/// channel-multiplier), 1×1, odd sizes, kernels as large as the (padded) input; a bias on
/// every other one.
pub(crate) fn cpu_geos() -> Vec<Geo> {
    let one = [1, 1];
    let list = [
        ([2, 3, 7, 9], 5, spec2([3, 3], one, [0, 0], one, 1)),
        ([1, 4, 11, 10], 6, spec2([3, 5], [2, 3], [1, 2], one, 1)),
        ([3, 5, 9, 13], 7, spec2([3, 3], [1, 2], [2, 1], [2, 3], 1)),
        ([2, 6, 8, 7], 4, spec2([3, 2], [2, 1], [1, 1], [1, 2], 2)),
        ([2, 6, 9, 9], 6, spec2([3, 3], one, one, one, 6)),
        ([1, 4, 10, 5], 8, spec2([5, 3], [3, 1], [2, 1], one, 4)),
        ([3, 9, 6, 5], 10, spec2([1, 1], one, [0, 0], one, 1)),
        ([2, 6, 7, 8], 9, spec2([1, 1], [2, 2], [0, 1], one, 3)),
        ([1, 3, 4, 4], 2, spec2([4, 4], one, [0, 0], one, 1)),
        ([2, 2, 3, 3], 3, spec2([5, 5], one, [2, 2], one, 1)),
    ];
    let mut geos: Vec<Geo> = list
        .iter()
        .enumerate()
        .map(|(i, &(x, o, s))| g2(x, o, s, i % 2 == 1))
        .collect();
    // The half / f64 storage test took the depthwise one with a bias too.
    geos.push(Geo {
        bias: true,
        ..geos[4]
    });
    // The 1-D form against the plain 1-D loop, and the geometry of its gradient test.
    for ((n, c, l, o), k) in [
        ((2, 3, 17, 4), (3, 1, 1, 1, 1)),
        ((1, 4, 23, 6), (5, 2, 2, 1, 2)),
        ((3, 6, 19, 6), (3, 3, 0, 2, 6)),
        ((2, 2, 9, 5), (1, 2, 0, 1, 1)),
        ((1, 8, 31, 4), (7, 4, 3, 3, 4)),
        ((2, 4, 13, 6), (3, 2, 2, 2, 2)),
    ] {
        geos.push(g1([n, c, 1, l], o, spec1(k), true));
    }
    // On an H = 1 input, index-1 parameters that are not neutral keep the 2-D reading.
    geos.push(g2(
        [2, 4, 1, 9],
        3,
        spec2(one, [2, 2], [0, 1], one, 1),
        false,
    ));
    geos.push(g2(
        [1, 3, 1, 11],
        5,
        spec2([3, 1], [1, 2], [1, 0], one, 1),
        false,
    ));
    geos
}

/// The gradchecks' geometries (the last one the 1-D form).
pub(crate) fn grad_geos() -> Vec<Geo> {
    vec![
        g2([1, 2, 5, 5], 3, spec3(), true),
        g2(
            [2, 2, 6, 5],
            2,
            spec2([2, 3], [2, 1], [1, 1], [1, 1], 1),
            false,
        ),
        g2(
            [1, 4, 7, 7],
            4,
            spec2([3, 3], [1, 1], [1, 0], [2, 2], 2),
            true,
        ),
        g1([2, 3, 1, 9], 2, spec1((3, 2, 1, 1, 1)), true),
    ]
}

/// The parity tests' geometries: the direct and im2col + GEMM routes, short reductions,
/// aligned and unaligned groups, depthwise, pointwise, the 1-D form.
fn parity_geos() -> Vec<Geo> {
    let p1 = spec3().padding([1, 1]);
    let k1 = ConvSpec::new([1, 1]);
    let k5 = ConvSpec::new([5, 5]).padding([2, 2]);
    vec![
        g2([2, 3, 7, 9], 5, p1, true),
        g2([3, 6, 13, 13], 7, spec3(), false),
        g2(
            [2, 4, 13, 13],
            6,
            spec3().stride([2, 2]).padding([2, 2]),
            false,
        ),
        g2([2, 5, 29, 31], 20, p1.stride([2, 2]), true),
        g2(
            [2, 3, 29, 31],
            17,
            spec3().dilation([2, 2]).padding([2, 2]),
            true,
        ),
        g2([2, 3, 29, 31], 7, k5, true),
        g2(
            [2, 4, 11, 13],
            10,
            spec2([3, 5], [2, 1], [1, 2], [1, 2], 1),
            false,
        ),
        g2([1, 8, 9, 9], 24, p1, false),
        g2([2, 6, 5, 5], 3, ConvSpec::new([5, 5]), true),
        // Short reductions run direct.
        g2([3, 1, 13, 13], 8, p1, true),
        g2([2, 1, 7, 9], 5, p1.stride([2, 2]), false),
        g2([2, 2, 9, 7], 4, ConvSpec::new([2, 2]), true),
        // Group slices 256-byte aligned take the grouped GEMM route; unaligned ones the
        // direct kernels.
        g2([2, 8, 8, 8], 16, p1.groups(2), true),
        g2([2, 8, 8, 8], 64, p1.groups(2), false),
        g2([3, 8, 8, 8], 16, p1.groups(2), false),
        g2([2, 8, 9, 7], 10, p1.groups(2), true),
        g2([2, 8, 13, 13], 12, spec3().stride([2, 2]).groups(4), false),
        g2([2, 6, 13, 13], 6, p1.groups(6), true),
        g2([2, 4, 9, 11], 8, k5.groups(4), false),
        g2(
            [2, 5, 29, 31],
            5,
            spec2([3, 3], [2, 2], [2, 2], [2, 2], 5),
            true,
        ),
        // Pointwise.
        g2([2, 32, 7, 9], 12, k1, false),
        g2([2, 32, 7, 9], 12, k1, true),
        g2([2, 5, 7, 9], 3, k1, true),
        g2([2, 32, 9, 9], 16, k1.stride([2, 2]), false),
        g2([2, 32, 7, 9], 160, k1, false),
        g2([2, 64, 8, 8], 320, k1.groups(2), false),
        // The 1-D form.
        g1([2, 5, 1, 37], 6, spec1((3, 2, 1, 1, 1)), true),
        g1([2, 8, 1, 41], 32, spec1((5, 1, 2, 2, 1)), false),
        g1([3, 12, 1, 50], 18, spec1((3, 1, 1, 1, 3)), true),
    ]
}

/// The MNIST / digits CNN layers and a column buffer above the per-chunk budget (several
/// image chunks): parity only.
fn big_geos() -> Vec<Geo> {
    let s = spec3().padding([1, 1]);
    vec![
        g2([128, 1, 28, 28], 16, s, true),
        g2([128, 16, 14, 14], 32, s, true),
        g2([128, 1, 28, 28], 32, s, true),
        g2([128, 32, 14, 14], 64, s, true),
        g2(
            [6, 32, 128, 128],
            8,
            ConvSpec::new([5, 5]).padding([2, 2]),
            true,
        ),
    ]
}

/// Every conv geometry of the oracle sets.
pub fn conv_geos() -> Vec<Geo> {
    let mut v = cpu_geos();
    v.extend(grad_geos());
    v.extend(parity_geos());
    v
}

/// The geometries of the gradient ops: bias plays no part, so equal ones are kept once.
fn backward_geos(geos: Vec<Geo>) -> Vec<Geo> {
    let mut out: Vec<Geo> = vec![];
    for g in geos {
        let g = Geo { bias: false, ..g };
        if !out.contains(&g) {
            out.push(g);
        }
    }
    out
}

fn label(op: &str, g: &Geo) -> String {
    let s = &g.spec;
    format!(
        "{op} x{:?} o{} k{:?} s{:?} p{:?} d{:?} g{}{}{}",
        g.x,
        g.o,
        s.kernel_size,
        s.stride,
        s.padding,
        s.dilation,
        s.groups,
        if g.bias { " bias" } else { "" },
        if g.one_d { " 1-D" } else { "" }
    )
}

/// Each case in the device dtypes, then an f64 copy for the oracle check alone.
fn with_f64(cases: Vec<Case>) -> Vec<Case> {
    let mut out = vec![];
    for c in cases {
        if c.checks.oracle {
            out.push(c.clone().dtypes(&[DType::F64]).no_parity().no_grad());
        }
        out.push(c);
    }
    out
}

// ---- conv ----

fn conv_case(geo: Geo) -> Case {
    let (xs, ws, ys) = (geo.x, geo.w(), geo.y());
    let mut ins = vec![
        Input::new("x", &xs, Draw::Normal(1.0)),
        Input::new("w", &ws, Draw::Normal(1.0)),
    ];
    if geo.bias {
        ins.push(Input::new("b", &[geo.o], Draw::Normal(1.0)));
    }
    let c = Case::new(label("Conv", &geo), ins, move |dt| {
        let bd = [geo.o];
        let mut leaves: Vec<(&str, &[usize], DType)> = vec![("x", &xs, dt), ("w", &ws, dt)];
        if geo.bias {
            leaves.push(("b", &bd, dt));
        }
        graph(&leaves, |g, v| {
            if geo.bias {
                g.conv2d_bias(v[0], v[1], v[2], geo.spec).unwrap()
            } else {
                g.conv2d(v[0], v[1], geo.spec).unwrap()
            }
        })
    })
    .dtypes(&FLOATS)
    .out(&ys)
    .oracle(move |v, _| conv_ref(&geo, &v[0], &v[1], geo.bias.then(|| &v[2][..])))
    .wrt(if geo.bias {
        &["x", "w", "b"]
    } else {
        &["x", "w"]
    });
    if numel(&xs) + numel(&ws) <= GRAD_BUDGET {
        c
    } else {
        c.no_grad()
    }
}

/// The gradient ops have no VJP rule of their own: oracle and parity only.
fn backward_input_case(geo: Geo) -> Case {
    let (xs, ws, ys) = (geo.x, geo.w(), geo.y());
    let ins = vec![
        Input::new("dy", &ys, Draw::Normal(1.0)),
        Input::new("w", &ws, Draw::Normal(1.0)),
    ];
    Case::new(label("Conv2dBackwardInput", &geo), ins, move |dt| {
        graph(&[("dy", &ys, dt), ("w", &ws, dt)], |g, v| {
            g.conv2d_backward_input(v[0], v[1], geo.spec, [xs[2], xs[3]])
                .unwrap()
        })
    })
    .dtypes(&FLOATS)
    .out(&xs)
    .oracle(move |v, _| conv_dx_ref(&geo, &v[0], &v[1]))
}

fn backward_weight_case(geo: Geo) -> Case {
    let (xs, ws, ys) = (geo.x, geo.w(), geo.y());
    let ins = vec![
        Input::new("x", &xs, Draw::Normal(1.0)),
        Input::new("dy", &ys, Draw::Normal(1.0)),
    ];
    Case::new(label("Conv2dBackwardWeight", &geo), ins, move |dt| {
        graph(&[("x", &xs, dt), ("dy", &ys, dt)], |g, v| {
            g.conv2d_backward_weight(v[0], v[1], geo.spec).unwrap()
        })
    })
    .dtypes(&FLOATS)
    .out(&ws)
    .oracle(move |v, _| conv_dw_ref(&geo, &v[0], &v[1]))
}

pub fn conv() -> Vec<Case> {
    with_f64(conv_geos().into_iter().map(conv_case).collect())
}

pub fn conv_backward_input() -> Vec<Case> {
    let geos = backward_geos(conv_geos());
    with_f64(geos.into_iter().map(backward_input_case).collect())
}

pub fn conv_backward_weight() -> Vec<Case> {
    let geos = backward_geos(conv_geos());
    with_f64(geos.into_iter().map(backward_weight_case).collect())
}

/// The big layers, forward and both gradients: parity only.
pub fn conv_big() -> Vec<Case> {
    let mut cases = vec![];
    for geo in big_geos() {
        cases.push(conv_case(geo).only_parity());
        cases.push(backward_input_case(geo).only_parity());
        cases.push(backward_weight_case(geo).only_parity());
    }
    cases
}

// ---- pool ----

/// Values on a coarse grid, exact in every float dtype.
pub fn grid_values(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| (rng.below(64) as f64 - 32.0) / 8.0)
        .collect()
}

/// Distinct values 0.05 apart, shuffled: no finite-difference step crosses a max tie.
fn spaced(rng: &mut Rng, n: usize) -> Vec<f64> {
    let mut v: Vec<f64> = (0..n).map(|i| i as f64 * 0.05).collect();
    for i in (1..n).rev() {
        v.swap(i, rng.below(i + 1));
    }
    v
}

fn pspec(kind: PoolKind, k: [usize; 2], s: [usize; 2], p: [usize; 2]) -> PoolSpec {
    PoolSpec {
        kind,
        kernel_size: k,
        stride: s,
        padding: p,
    }
}

/// (x dims, kernel, stride, padding) of a pool.
type PoolGeo = ([usize; 4], [usize; 2], [usize; 2], [usize; 2]);

/// The parity tests' pools, the last two MNIST-sized.
const PARITY_POOLS: [PoolGeo; 9] = [
    ([2, 3, 7, 9], [2, 2], [2, 2], [0, 0]),
    ([2, 3, 13, 13], [3, 3], [2, 2], [1, 1]),
    ([1, 4, 29, 31], [3, 3], [1, 1], [1, 1]),
    ([2, 3, 11, 10], [3, 2], [1, 2], [1, 1]),
    ([2, 2, 9, 17], [1, 3], [1, 3], [0, 1]),
    ([2, 3, 8, 8], [4, 4], [4, 4], [2, 2]),
    ([3, 2, 7, 7], [5, 5], [2, 3], [2, 1]),
    ([128, 16, 28, 28], [2, 2], [2, 2], [0, 0]),
    ([128, 32, 14, 14], [2, 2], [2, 2], [0, 0]),
];

/// The pool geometries of a kind: the CPU oracle tests', the gradchecks' and the parity
/// tests'.
pub fn pool_geos(kind: PoolKind) -> Vec<([usize; 4], PoolSpec)> {
    let sp = |k, s, p| pspec(kind, k, s, p);
    let mut v = vec![
        ([2, 3, 8, 8], sp([2, 2], [2, 2], [0, 0])),
        ([1, 4, 9, 11], sp([3, 3], [2, 2], [1, 1])),
        ([2, 2, 13, 7], sp([3, 2], [1, 3], [1, 0])),
        ([3, 1, 7, 10], sp([5, 4], [2, 3], [2, 2])),
        ([1, 5, 6, 5], sp([3, 3], [1, 1], [1, 1])),
    ];
    let grad = match kind {
        PoolKind::Max => [sp([2, 2], [2, 2], [0, 0]), sp([3, 2], [1, 2], [1, 1])],
        PoolKind::Avg => [sp([2, 2], [2, 2], [0, 0]), sp([3, 3], [2, 1], [1, 1])],
    };
    v.extend(grad.map(|s| ([2, 3, 5, 6], s)));
    v.extend(PARITY_POOLS.map(|(x, k, s, p)| (x, sp(k, s, p))));
    v
}

fn pool_label(op: &str, xs: &[usize; 4], s: &PoolSpec) -> String {
    let (k, st, p) = (s.kernel_size, s.stride, s.padding);
    format!("{op} {:?} {xs:?} k{k:?} s{st:?} p{p:?}", s.kind)
}

/// A pool graph built by `pool2d` (`explicit`) or by the kind's own builder.
pub fn pool_graph(dt: DType, xs: &[usize], spec: PoolSpec, explicit: bool) -> Graph {
    graph(&[("x", xs, dt)], |g, v| {
        let (k, s, p) = (spec.kernel_size, spec.stride, spec.padding);
        match (explicit, spec.kind) {
            (true, _) => g.pool2d(v[0], spec).unwrap(),
            (false, PoolKind::Max) => g.max_pool2d(v[0], k, s, p).unwrap(),
            (false, PoolKind::Avg) => g.avg_pool2d(v[0], k, s, p).unwrap(),
        }
    })
}

pub fn max_pool_backward_graph(dt: DType, xs: &[usize], spec: PoolSpec) -> Graph {
    let ys = pool_out(xs.try_into().unwrap(), &spec);
    graph(&[("x", xs, dt), ("dy", &ys, dt)], |g, v| {
        g.max_pool2d_backward(v[0], v[1], spec).unwrap()
    })
}

fn pool_case(xs: [usize; 4], spec: PoolSpec, explicit: bool) -> Case {
    let mut x = Input::new("x", &xs, Draw::Normal(1.0)).grad(Draw::custom(|r, n, _| spaced(r, n)));
    if spec.kind == PoolKind::Max {
        x = x.gpu(Draw::custom(|r, n, _| grid_values(r, n)));
    }
    let c = Case::new(pool_label("Pool", &xs, &spec), vec![x], move |dt| {
        pool_graph(dt, &xs, spec, explicit)
    })
    .dtypes(&FLOATS)
    .out(&pool_out(xs, &spec))
    .oracle(move |v, _| pool_ref(&v[0], xs, &spec).0)
    .wrt(&["x"]);
    if numel(&xs) <= GRAD_BUDGET {
        c
    } else {
        c.no_grad()
    }
}

fn max_pool_backward_case(xs: [usize; 4], spec: PoolSpec, x_draw: Draw) -> Case {
    let ys = pool_out(xs, &spec);
    let ins = vec![
        Input::new("x", &xs, x_draw).gpu(Draw::custom(|r, n, _| grid_values(r, n))),
        Input::new("dy", &ys, Draw::Normal(1.0)),
    ];
    Case::new(
        pool_label("MaxPool2dBackward", &xs, &spec),
        ins,
        move |dt| max_pool_backward_graph(dt, &xs, spec),
    )
    .dtypes(&FLOATS)
    .out(&xs)
    .oracle(move |v, _| max_pool_dx_ref(&v[0], &v[1], xs, &spec))
}

pub fn pool() -> Vec<Case> {
    let mut cases = vec![];
    for kind in [PoolKind::Max, PoolKind::Avg] {
        for (i, (xs, spec)) in pool_geos(kind).into_iter().enumerate() {
            // The parity tests built theirs with `pool2d`, the CPU tests with the kind's.
            cases.push(pool_case(xs, spec, i >= 7));
        }
    }
    let mut cases = with_f64(cases);
    // `pool2d` with an explicit spec is the same op as the kind's builder.
    let (xs, spec) = pool_geos(PoolKind::Avg)[1];
    cases.push(
        pool_case(xs, spec, true)
            .dtypes(&[DType::F32])
            .no_parity()
            .no_grad(),
    );
    cases
}

pub fn max_pool_backward() -> Vec<Case> {
    let mut cases: Vec<Case> = pool_geos(PoolKind::Max)
        .into_iter()
        .map(|(xs, spec)| max_pool_backward_case(xs, spec, Draw::Normal(1.0)))
        .collect();
    cases = with_f64(cases);
    // Ties go to the first maximum in window scan order: quantised values make them common.
    let spec = pspec(PoolKind::Max, [3, 2], [2, 1], [1, 1]);
    cases.push(
        max_pool_backward_case([2, 2, 7, 6], spec, Draw::Ints(0, 2))
            .dtypes(&[DType::F64])
            .no_parity(),
    );
    cases
}

/// A plane above a million elements: parity only.
pub fn pool_big() -> Vec<Case> {
    let xs = [4, 64, 128, 129];
    let mut cases = vec![];
    for kind in [PoolKind::Max, PoolKind::Avg] {
        let spec = pspec(kind, [3, 3], [1, 1], [1, 1]);
        cases.push(pool_case(xs, spec, true).only_parity());
    }
    let spec = pspec(PoolKind::Max, [3, 3], [1, 1], [1, 1]);
    cases.push(max_pool_backward_case(xs, spec, Draw::Normal(1.0)).only_parity());
    cases
}

// ---- resize ----

pub fn resize() -> Vec<Case> {
    let all = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
    ];
    let draw = Draw::custom(|r, n, dt| match dt {
        DType::U8 => (0..n).map(|_| r.below(256) as f64).collect(),
        d if d.is_int() => (0..n).map(|_| r.below(1000) as f64 - 500.0).collect(),
        _ => r.normals(n),
    });
    let gpu = Draw::custom(|r, n, dt| match dt {
        d if d.is_int() => (0..n).map(|_| r.below(200) as f64).collect(),
        _ => r.normals(n),
    });
    let shapes: [[usize; 4]; 5] = [
        [2, 3, 5, 7],
        [1, 1, 1, 1],
        [3, 2, 4, 1],
        [2, 3, 7, 9],
        [8, 16, 64, 65],
    ];
    let mut cases = vec![];
    for xs in shapes {
        let [n, c, h, w] = xs;
        let x = Input::new("x", &xs, draw.clone()).gpu(gpu.clone());
        let case = Case::new(format!("ResizeNearest2x {xs:?}"), vec![x], move |dt| {
            graph(&[("x", &xs, dt)], |g, v| g.resize_nearest2x(v[0]).unwrap())
        })
        .dtypes(&all)
        .out(&[n, c, 2 * h, 2 * w])
        .oracle(move |v, _| resize_ref(&v[0], xs))
        .exact()
        .wrt(&["x"]);
        cases.push(if numel(&xs) <= GRAD_BUDGET {
            case
        } else {
            case.no_grad()
        });
    }
    // Through a non-linear op, so the cotangent of each copy differs.
    let xs: Dims = &[1, 2, 3, 4];
    cases.push(
        Case::new(
            "ResizeNearest2x then Sin",
            vec![Input::new("x", xs, Draw::Normal(1.0))],
            move |dt| {
                graph(&[("x", xs, dt)], |g, v| {
                    let y = g.resize_nearest2x(v[0]).unwrap();
                    g.activation(Activation::Sin, y).unwrap()
                })
            },
        )
        .wrt(&["x"])
        .only_grad(),
    );
    cases
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::parity::{check, Feed};
    use rlx_ir::Op;

    /// Every parity case builds in each of its dtypes and in f64 (parity-only ones too,
    /// which no GPU-less run would otherwise build), and feeds exactly its graph's leaves
    /// with values of their declared sizes.
    #[test]
    fn parity_cases_build_and_feed_their_leaves() {
        let dev = |name: &str, build: &dyn Fn(DType) -> Graph, feeds: &[Feed], dt, _| {
            for g in [build(dt), build(DType::F64)] {
                for n in &g.nodes {
                    if let Op::Input { name: leaf } = &n.op {
                        let f = feeds.iter().find(|f| &f.0 == leaf);
                        let (_, dims, v) = f.unwrap_or_else(|| panic!("{name}: {leaf} unfed"));
                        assert_eq!(n.shape.static_dims().unwrap(), *dims, "{name}: {leaf}");
                        assert_eq!(v.len(), numel(dims), "{name}: {leaf}");
                    }
                }
            }
        };
        for (set, cases) in [
            ("conv", conv()),
            ("conv_backward_input", conv_backward_input()),
            ("conv_backward_weight", conv_backward_weight()),
            ("conv_big", conv_big()),
            ("pool", pool()),
            ("max_pool_backward", max_pool_backward()),
            ("pool_big", pool_big()),
            ("resize", resize()),
        ] {
            check(set, &cases, &dev);
        }
    }
}
