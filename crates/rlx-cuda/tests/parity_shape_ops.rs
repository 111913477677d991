//! GPU parity of the shape ops, TransformRegion and Rope. Data movement must be bit-exact, so
//! besides the harness's rel-L2 check every mover is compared byte for byte with the CPU in
//! its dtype. The shape group's per-op cases come from rlx-testutil's case table, through
//! this file's `cuda` device (parity plus bytes); below them the big-shape launches,
//! infinite padding, TransformRegion and Rope.
mod common;

use common::{Feed, Rng, FLOATS};
use rlx_cuda::CudaOptions;
use rlx_ir::{DType, Dim, Graph, NodeId, RopeStyle, Shape, TransformStep};
use rlx_testutil::cases::shape::MOVERS;

rlx_testutil::case_tests!(shape, cuda);

/// The shape group's CUDA device: the harness's parity check of every case (with its own
/// allowed fallbacks) and then `exact`, the byte-for-byte comparison with the CPU that every
/// mover gets. Without a GPU it skips like every parity test.
mod cuda {
    use rlx_cuda::CudaOptions;
    use rlx_testutil::case::Case;

    pub fn check(set: &str, cases: &[Case]) {
        if !super::common::gpu() {
            return;
        }
        rlx_testutil::run::parity::check(set, cases, &|name, build, feeds, dt, allow| {
            super::common::parity_with(name, build, feeds, dt, CudaOptions::strict(), allow);
            super::exact(name, build, feeds, dt);
        });
    }
}

/// Random values suited to `dtype`: normals for floats, spread integers otherwise.
fn values(rng: &mut Rng, n: usize, dtype: DType) -> Vec<f64> {
    match dtype {
        DType::U8 => rng
            .uniforms(n, 0.0, 255.0)
            .into_iter()
            .map(f64::round)
            .collect(),
        d if d.is_float() => rng.normals(n),
        _ => rng
            .uniforms(n, -100000.0, 100000.0)
            .into_iter()
            .map(f64::round)
            .collect(),
    }
}

/// Feeds for `x0, x1, ..` of the given dims (values for `dtype`).
fn feeds(rng: &mut Rng, dims: &[&[usize]], dtype: DType) -> Vec<Feed> {
    dims.iter()
        .enumerate()
        .map(|(i, d)| {
            let n = d.iter().product();
            common::feed(&format!("x{i}"), d, values(rng, n, dtype))
        })
        .collect()
}

fn input(g: &mut Graph, i: usize, dims: &[usize], dtype: DType) -> NodeId {
    g.input(format!("x{i}"), Shape::new(dims, dtype)).unwrap()
}

/// GPU (no fallback) against the CPU in the same dtype, byte for byte.
fn exact(name: &str, build: &dyn Fn(DType) -> Graph, feeds: &[Feed], dtype: DType) {
    let g = build(dtype);
    let mut exe = common::compile_gpu(&g, CudaOptions::strict());
    let got = common::run_gpu_exe(&mut exe, &g, feeds);
    for (id, kind, reason) in exe.dispatch() {
        assert!(
            reason.is_none(),
            "{name} [{dtype}]: node {id} ({kind}) fell back: {reason:?}"
        );
    }
    let want = common::run_cpu(&g, feeds);
    assert_eq!(got.len(), want.len(), "{name} [{dtype}]: output count");
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(a.shape, b.shape, "{name} [{dtype}] output {i}: shape");
        assert_eq!(a.dtype, b.dtype, "{name} [{dtype}] output {i}: dtype");
        if a.data != b.data {
            let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
            let k = (0..x.len())
                .find(|&k| x[k].to_bits() != y[k].to_bits())
                .unwrap_or(0);
            panic!(
                "{name} [{dtype}] output {i}: element {k} is {} on the GPU, {} on the CPU",
                x[k], y[k]
            );
        }
    }
}

/// The harness's parity (CPU in dtype and f64 oracle) plus the exact byte comparison.
fn check(name: &str, build: &dyn Fn(DType) -> Graph, feeds: &[Feed], dtype: DType) {
    common::parity(name, build, feeds, dtype);
    exact(name, build, feeds, dtype);
}

/// One-input graph `x0` of `dims` through `f`.
fn unary(dims: &[usize], f: impl Fn(&mut Graph, NodeId) -> NodeId) -> impl Fn(DType) -> Graph {
    let dims = dims.to_vec();
    move |dt| {
        let mut g = Graph::new("t");
        let x = input(&mut g, 0, &dims, dt);
        let y = f(&mut g, x);
        g.set_outputs(vec![y]);
        g
    }
}

#[test]
fn transpose_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("transpose_big");
    // Swap of the last two axes (tiled kernel) and [B,S,H,D] -> [B,H,S,D] (row copies).
    let b = unary(&[4, 1031, 1029], |g, x| g.transpose(x, &[0, 2, 1]).unwrap());
    check(
        "transpose big 021",
        &b,
        &feeds(&mut rng, &[&[4, 1031, 1029]], DType::F32),
        DType::F32,
    );
    let b = unary(&[2, 2048, 16, 64], |g, x| {
        g.transpose(x, &[0, 2, 1, 3]).unwrap()
    });
    let f = feeds(&mut rng, &[&[2, 2048, 16, 64]], DType::BF16);
    check("transpose big bshd", &b, &f, DType::BF16);
    let b = unary(&[2, 16, 2048, 64], |g, x| {
        g.transpose(x, &[0, 2, 3, 1]).unwrap()
    });
    let f = feeds(&mut rng, &[&[2, 16, 2048, 64]], DType::F16);
    check("transpose big 0231", &b, &f, DType::F16);
}

#[test]
fn expand_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("expand_big");
    let b = unary(&[1, 4097], |g, x| g.expand_to(x, &[1025, 4097]).unwrap());
    check(
        "expand big",
        &b,
        &feeds(&mut rng, &[&[1, 4097]], DType::F16),
        DType::F16,
    );
}

#[test]
fn narrow_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("narrow_big");
    let b = unary(&[2049, 4100], |g, x| g.narrow(x, 1, 3, 4093).unwrap());
    check(
        "narrow big",
        &b,
        &feeds(&mut rng, &[&[2049, 4100]], DType::F32),
        DType::F32,
    );
}

#[test]
fn slice_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("slice_big");
    let b = unary(&[3000, 1500], |g, x| {
        g.slice(x, &[0, 1], &[-1, 0], &[-4000, 1500], &[-1, 3])
            .unwrap()
    });
    check(
        "slice big",
        &b,
        &feeds(&mut rng, &[&[3000, 1500]], DType::BF16),
        DType::BF16,
    );
}

/// Concat of inputs `x0..` with the given dims on `axis`.
fn concat_graph(dims: Vec<Vec<usize>>, axis: i64) -> impl Fn(DType) -> Graph {
    move |dt| {
        let mut g = Graph::new("t");
        let xs: Vec<NodeId> = dims
            .iter()
            .enumerate()
            .map(|(i, d)| input(&mut g, i, d, dt))
            .collect();
        let y = g.concat(&xs, axis).unwrap();
        g.set_outputs(vec![y]);
        g
    }
}

#[test]
fn concat_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("concat_big");
    let dims = vec![vec![2, 1000, 1024], vec![2, 1, 1024], vec![2, 1047, 1024]];
    let refs: Vec<&[usize]> = dims.iter().map(|d| d.as_slice()).collect();
    let f = feeds(&mut rng, &refs, DType::F16);
    check("concat big", &concat_graph(dims.clone(), 1), &f, DType::F16);
}

/// Gather `x0` (dims, dtype from the build) by `idx` (fixed dtype) on `axis`.
fn gather_graph(data: &[usize], idx: &[usize], itype: DType, axis: i64) -> impl Fn(DType) -> Graph {
    let (data, idx) = (data.to_vec(), idx.to_vec());
    move |dt| {
        let mut g = Graph::new("t");
        let x = input(&mut g, 0, &data, dt);
        let i = g.input("idx", Shape::new(&idx, itype)).unwrap();
        let y = g.gather(x, i, axis).unwrap();
        g.set_outputs(vec![y]);
        g
    }
}

/// Indices into an axis of `n`, some negative when `neg`.
fn indices(rng: &mut Rng, count: usize, n: usize, neg: bool) -> Vec<f64> {
    (0..count)
        .map(|_| {
            let i = rng.below(n) as f64;
            if neg && rng.chance(0.4) {
                i - n as f64
            } else {
                i
            }
        })
        .collect()
}

#[test]
fn gather_embedding_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("gather_embedding_big");
    // Embedding lookup: [V, D] by [B, S] token ids.
    for (dt, itype) in [
        (DType::F16, DType::I64),
        (DType::F32, DType::I32),
        (DType::BF16, DType::I64),
    ] {
        let (v, d, b, s) = (32003, 1024, 4, 1025);
        let build = gather_graph(&[v, d], &[b, s], itype, 0);
        let mut f = feeds(&mut rng, &[&[v, d]], dt);
        f.push(common::feed(
            "idx",
            &[b, s],
            indices(&mut rng, b * s, v, false),
        ));
        check(&format!("embedding {itype}"), &build, &f, dt);
    }
    // An odd row width (no vector units).
    let build = gather_graph(&[5001, 837], &[4099], DType::I64, 0);
    let mut f = feeds(&mut rng, &[&[5001, 837]], DType::F16);
    f.push(common::feed(
        "idx",
        &[4099],
        indices(&mut rng, 4099, 5001, true),
    ));
    check("embedding odd width", &build, &f, DType::F16);
}

#[test]
fn pad_infinite_and_big() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("pad_infinite_and_big");
    for dt in MOVERS {
        // Infinite padding (max-pool style): rel-L2 cannot compare infinities, bytes can.
        for value in [f64::NEG_INFINITY, f64::INFINITY] {
            let pads = [[0, 1], [2, 1]];
            let b = unary(&[33, 65], |g, x| g.pad(x, pads.to_vec(), value).unwrap());
            exact(
                &format!("pad with {value}"),
                &b,
                &feeds(&mut rng, &[&[33, 65]], dt),
                dt,
            );
        }
    }
    let pads = [[0, 0], [0, 0], [1, 2], [2, 1]];
    let b = unary(&[64, 3, 255, 255], |g, x| {
        g.pad(x, pads.to_vec(), 0.5).unwrap()
    });
    let f = feeds(&mut rng, &[&[64, 3, 255, 255]], DType::F32);
    check("pad big", &b, &f, DType::F32);
}

fn region_graph(dims: &[usize], steps: Vec<TransformStep>) -> impl Fn(DType) -> Graph {
    let dims = dims.to_vec();
    move |dt| {
        let mut g = Graph::new("t");
        let x = input(&mut g, 0, &dims, dt);
        let y = g.transform_region(x, steps.clone()).unwrap();
        g.set_outputs(vec![y]);
        g
    }
}

#[test]
fn transform_regions() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("transform_regions");
    let st = |d: &[usize]| d.iter().map(|&v| Dim::Static(v)).collect::<Vec<_>>();
    let cases: Vec<(Vec<usize>, Vec<TransformStep>)> = vec![
        // [B,S,H*D] -> [B,S,H,D] -> [B,H,S,D]
        (
            vec![2, 7, 12],
            vec![
                TransformStep::Reshape(vec![0, 0, 3, 4]),
                TransformStep::Transpose(vec![0, 2, 1, 3]),
            ],
        ),
        (
            vec![4, 6, 5],
            vec![
                TransformStep::Transpose(vec![1, 0, 2]),
                TransformStep::Reshape(vec![6, -1]),
                TransformStep::Narrow {
                    axis: 1,
                    start: 2,
                    len: 15,
                },
            ],
        ),
        // Narrow, then an expand of a new leading axis, then a transpose.
        (
            vec![9, 1, 5],
            vec![
                TransformStep::Narrow {
                    axis: -1,
                    start: 1,
                    len: 3,
                },
                TransformStep::Expand(st(&[2, 9, 4, 3])),
                TransformStep::Transpose(vec![3, 1, 0, 2]),
            ],
        ),
        // A transpose followed by a merging reshape (not expressible as one view).
        (
            vec![5, 7, 3],
            vec![
                TransformStep::Transpose(vec![2, 1, 0]),
                TransformStep::Reshape(vec![21, 5]),
                TransformStep::Transpose(vec![1, 0]),
            ],
        ),
    ];
    for dt in MOVERS {
        for (dims, steps) in &cases {
            let b = region_graph(dims, steps.clone());
            let name = format!("region {dims:?} {steps:?}");
            check(&name, &b, &feeds(&mut rng, &[dims], dt), dt);
        }
    }
    let steps = vec![
        TransformStep::Reshape(vec![0, 0, 16, 64]),
        TransformStep::Transpose(vec![0, 2, 1, 3]),
        TransformStep::Narrow {
            axis: 2,
            start: 1,
            len: 2047,
        },
    ];
    let b = region_graph(&[2, 2048, 1024], steps);
    let f = feeds(&mut rng, &[&[2, 2048, 1024]], DType::BF16);
    check("region big", &b, &f, DType::BF16);
}

/// Rope of x (dtype from the build) with cos/sin of `cdims` in `ctype` (None: x's dtype).
fn rope_graph(
    xdims: &[usize],
    cdims: &[usize],
    ctype: Option<DType>,
    head_dim: usize,
    n_rot: usize,
    style: RopeStyle,
) -> impl Fn(DType) -> Graph {
    let (xdims, cdims) = (xdims.to_vec(), cdims.to_vec());
    move |dt| {
        let mut g = Graph::new("t");
        let x = input(&mut g, 0, &xdims, dt);
        let ct = ctype.unwrap_or(dt);
        let c = g.input("cos", Shape::new(&cdims, ct)).unwrap();
        let s = g.input("sin", Shape::new(&cdims, ct)).unwrap();
        let y = g.rope(x, c, s, head_dim, n_rot, style).unwrap();
        g.set_outputs(vec![y]);
        g
    }
}

/// Feeds for rope: x normal, cos/sin of real angles.
fn rope_feeds(rng: &mut Rng, xdims: &[usize], cdims: &[usize]) -> Vec<Feed> {
    let n: usize = cdims.iter().product();
    let ang = rng.uniforms(n, -3.2, 3.2);
    vec![
        common::normal(rng, "x0", xdims),
        common::feed("cos", cdims, ang.iter().map(|a| a.cos()).collect()),
        common::feed("sin", cdims, ang.iter().map(|a| a.sin()).collect()),
    ]
}

/// Rope's table set `rope_styles` leaves its parity to this test, which also demands the
/// GPU's bytes equal the CPU's (the shared harness compares within a tolerance).
#[test]
fn rope_styles() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("rope_styles");
    type Case<'a> = (&'a [usize], &'a [usize], usize, usize);
    let cases: &[Case] = &[
        // [B,S,H,D] with cos [S,1,D/2]
        (&[2, 7, 3, 64], &[7, 1, 32], 64, 64),
        // packed [B,S,H*D], partial rotation
        (&[2, 7, 48], &[7, 1, 4], 16, 8),
        // [B,H,S,D] with cos [S,D/2]
        (&[2, 3, 9, 32], &[9, 16], 32, 32),
        // per-batch positions [B,S,1,half], odd head count and partial rotation
        (&[3, 5, 7, 24], &[3, 5, 1, 6], 24, 12),
        // single head packed [S, D] with cos [S, half]
        (&[33, 10], &[33, 5], 10, 10),
    ];
    for style in [RopeStyle::Half, RopeStyle::Interleaved] {
        for &(x, c, hd, nr) in cases {
            for dt in FLOATS {
                let b = rope_graph(x, c, None, hd, nr, style);
                let name = format!("rope {style:?} x {x:?} cos {c:?} n_rot {nr}");
                check(&name, &b, &rope_feeds(&mut rng, x, c), dt);
            }
        }
        // Half-precision x with f32 tables.
        let b = rope_graph(&[2, 7, 3, 64], &[7, 1, 24], Some(DType::F32), 64, 48, style);
        let f = rope_feeds(&mut rng, &[2, 7, 3, 64], &[7, 1, 24]);
        check(&format!("rope {style:?} f32 tables"), &b, &f, DType::BF16);
        // Big: [B,S,H*D] with 8 heads of 128, 96 rotated.
        let (x, c) = ([4usize, 1024, 1024], [1024usize, 1, 48]);
        let b = rope_graph(&x, &c, None, 128, 96, style);
        check(
            &format!("rope {style:?} big"),
            &b,
            &rope_feeds(&mut rng, &x, &c),
            DType::F16,
        );
    }
}
