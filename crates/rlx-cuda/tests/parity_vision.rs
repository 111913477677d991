//! GPU parity of the vision ops: Conv (direct and im2col + GEMM routes, groups, depthwise,
//! 1×1, 1-D form, chunked), its input and weight gradients, Max / Avg pooling, the max-pool
//! gradient and nearest 2× upsampling, against the CPU in the same dtype and in f64.
mod common;
use common::*;
use rlx_ir::{ConvSpec, DType, Graph, PoolKind, PoolSpec, Shape};

/// One conv geometry: x dims, out channels, spec, bias.
struct ConvCase {
    name: &'static str,
    x: [usize; 4],
    o: usize,
    spec: ConvSpec,
    bias: bool,
}

fn case(name: &'static str, x: [usize; 4], o: usize, spec: ConvSpec, bias: bool) -> ConvCase {
    ConvCase {
        name,
        x,
        o,
        spec,
        bias,
    }
}

impl ConvCase {
    fn w(&self) -> [usize; 4] {
        let k = self.spec.kernel_size;
        [self.o, self.x[1] / self.spec.groups, k[0], k[1]]
    }
    /// The conv output dims, from the IR's shape rule.
    fn y(&self) -> Vec<usize> {
        let g = self.forward(DType::F32);
        g.shape(g.outputs[0]).unwrap().static_dims().unwrap()
    }
    fn forward(&self, dtype: DType) -> Graph {
        let mut g = Graph::new(self.name);
        let x = g.input("x", Shape::new(&self.x, dtype)).unwrap();
        let w = g.param("w", Shape::new(&self.w(), dtype)).unwrap();
        let y = if self.bias {
            let b = g.param("b", Shape::new(&[self.o], dtype)).unwrap();
            g.conv2d_bias(x, w, b, self.spec).unwrap()
        } else {
            g.conv2d(x, w, self.spec).unwrap()
        };
        g.set_outputs(vec![y]);
        g
    }
    fn backward_input(&self, dtype: DType) -> Graph {
        let mut g = Graph::new(self.name);
        let dy = g.input("dy", Shape::new(&self.y(), dtype)).unwrap();
        let w = g.param("w", Shape::new(&self.w(), dtype)).unwrap();
        let hw = [self.x[2], self.x[3]];
        let dx = g.conv2d_backward_input(dy, w, self.spec, hw).unwrap();
        g.set_outputs(vec![dx]);
        g
    }
    fn backward_weight(&self, dtype: DType) -> Graph {
        let mut g = Graph::new(self.name);
        let x = g.input("x", Shape::new(&self.x, dtype)).unwrap();
        let dy = g.input("dy", Shape::new(&self.y(), dtype)).unwrap();
        let dw = g.conv2d_backward_weight(x, dy, self.spec).unwrap();
        g.set_outputs(vec![dw]);
        g
    }

    /// Forward, input gradient and weight gradient in every float dtype.
    fn check(&self, rng: &mut Rng) {
        let mut fwd = vec![normal(rng, "x", &self.x), normal(rng, "w", &self.w())];
        if self.bias {
            fwd.push(normal(rng, "b", &[self.o]));
        }
        let dy = normal(rng, "dy", &self.y());
        let bwi = vec![dy.clone(), normal(rng, "w", &self.w())];
        let bww = vec![normal(rng, "x", &self.x), dy];
        for dtype in FLOATS {
            parity(
                &format!("{} conv", self.name),
                &|d| self.forward(d),
                &fwd,
                dtype,
            );
            parity(
                &format!("{} conv backward input", self.name),
                &|d| self.backward_input(d),
                &bwi,
                dtype,
            );
            parity(
                &format!("{} conv backward weight", self.name),
                &|d| self.backward_weight(d),
                &bww,
                dtype,
            );
        }
    }
}

fn spec3() -> ConvSpec {
    ConvSpec::new([3, 3])
}

#[test]
fn conv_plain_and_strided() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("conv_plain_and_strided");
    for c in [
        case(
            "3x3 pad 1 bias",
            [2, 3, 7, 9],
            5,
            spec3().padding([1, 1]),
            true,
        ),
        case("3x3 no pad", [3, 6, 13, 13], 7, spec3(), false),
        case(
            "stride 2 pad 2",
            [2, 4, 13, 13],
            6,
            spec3().stride([2, 2]).padding([2, 2]),
            false,
        ),
        case(
            "stride 2 pad 1 bias",
            [2, 5, 29, 31],
            20,
            spec3().stride([2, 2]).padding([1, 1]),
            true,
        ),
        case(
            "dilation 2",
            [2, 3, 29, 31],
            17,
            spec3().dilation([2, 2]).padding([2, 2]),
            true,
        ),
        case(
            "5x5 pad 2",
            [2, 3, 29, 31],
            7,
            ConvSpec::new([5, 5]).padding([2, 2]),
            true,
        ),
        case(
            "asymmetric",
            [2, 4, 11, 13],
            10,
            ConvSpec::new([3, 5])
                .stride([2, 1])
                .padding([1, 2])
                .dilation([1, 2]),
            false,
        ),
        case(
            "single image",
            [1, 8, 9, 9],
            24,
            spec3().padding([1, 1]),
            false,
        ),
        case("1x1 output", [2, 6, 5, 5], 3, ConvSpec::new([5, 5]), true),
    ] {
        c.check(&mut rng);
    }
}

#[test]
fn conv_short_reductions_run_direct() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("conv_short_reductions_run_direct");
    for c in [
        case(
            "one channel",
            [3, 1, 13, 13],
            8,
            spec3().padding([1, 1]),
            true,
        ),
        case(
            "one channel stride 2",
            [2, 1, 7, 9],
            5,
            spec3().stride([2, 2]).padding([1, 1]),
            false,
        ),
        case(
            "two channels 2x2",
            [2, 2, 9, 7],
            4,
            ConvSpec::new([2, 2]),
            true,
        ),
    ] {
        c.check(&mut rng);
    }
}

#[test]
fn conv_groups_and_depthwise() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("conv_groups_and_depthwise");
    for c in [
        // Group slices 256-byte aligned: the grouped GEMM route.
        case(
            "groups 2 aligned",
            [2, 8, 8, 8],
            16,
            spec3().padding([1, 1]).groups(2),
            true,
        ),
        case(
            "groups 2 aligned wide",
            [2, 8, 8, 8],
            64,
            spec3().padding([1, 1]).groups(2),
            false,
        ),
        case(
            "groups 2 aligned no bias",
            [3, 8, 8, 8],
            16,
            spec3().padding([1, 1]).groups(2),
            false,
        ),
        // Unaligned group slices fall to the direct kernels.
        case(
            "groups 2",
            [2, 8, 9, 7],
            10,
            spec3().padding([1, 1]).groups(2),
            true,
        ),
        case(
            "groups 4 stride 2",
            [2, 8, 13, 13],
            12,
            spec3().stride([2, 2]).groups(4),
            false,
        ),
        case(
            "depthwise",
            [2, 6, 13, 13],
            6,
            spec3().padding([1, 1]).groups(6),
            true,
        ),
        case(
            "depthwise multiplier 2",
            [2, 4, 9, 11],
            8,
            ConvSpec::new([5, 5]).padding([2, 2]).groups(4),
            false,
        ),
        case(
            "depthwise dilated strided",
            [2, 5, 29, 31],
            5,
            spec3()
                .stride([2, 2])
                .padding([2, 2])
                .dilation([2, 2])
                .groups(5),
            true,
        ),
    ] {
        c.check(&mut rng);
    }
}

#[test]
fn conv_pointwise() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("conv_pointwise");
    let k1 = ConvSpec::new([1, 1]);
    for c in [
        case("1x1", [2, 32, 7, 9], 12, k1, false),
        case("1x1 bias", [2, 32, 7, 9], 12, k1, true),
        case("1x1 few channels", [2, 5, 7, 9], 3, k1, true),
        case("1x1 stride 2", [2, 32, 9, 9], 16, k1.stride([2, 2]), false),
        case("1x1 wide", [2, 32, 7, 9], 160, k1, false),
        case("1x1 groups 2", [2, 64, 8, 8], 320, k1.groups(2), false),
    ] {
        c.check(&mut rng);
    }
}

#[test]
fn conv_one_d() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("conv_one_d");
    for c in [
        case(
            "1-D stride 2",
            [2, 5, 1, 37],
            6,
            ConvSpec::new([3, 1]).stride([2, 1]).padding([1, 0]),
            true,
        ),
        case(
            "1-D dilated",
            [2, 8, 1, 41],
            32,
            ConvSpec::new([5, 1]).dilation([2, 1]).padding([2, 0]),
            false,
        ),
        case(
            "1-D grouped",
            [3, 12, 1, 50],
            18,
            ConvSpec::new([3, 1]).padding([1, 0]).groups(3),
            true,
        ),
    ] {
        c.check(&mut rng);
    }
}

#[test]
fn conv_mnist_cnn_shapes() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("conv_mnist_cnn_shapes");
    let s = spec3().padding([1, 1]);
    for c in [
        case("mnist conv1", [128, 1, 28, 28], 16, s, true),
        case("mnist conv2", [128, 16, 14, 14], 32, s, true),
        case("digits conv1", [128, 1, 28, 28], 32, s, true),
        case("digits conv2", [128, 32, 14, 14], 64, s, true),
    ] {
        c.check(&mut rng);
    }
}

/// Column buffers above the per-chunk budget run in several image chunks.
#[test]
fn conv_large_chunked() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("conv_large_chunked");
    let c = case(
        "chunked 5x5",
        [6, 32, 128, 128],
        8,
        ConvSpec::new([5, 5]).padding([2, 2]),
        true,
    );
    c.check(&mut rng);
}

/// Values on a coarse grid, exact in every float dtype: ties are real and identical in
/// f16 / bf16 and the f64 oracle, so the first-max rule is checked, not rounding luck.
fn grid_values(rng: &mut Rng, name: &str, dims: &[usize]) -> Feed {
    let n = dims.iter().product();
    let v = (0..n)
        .map(|_| (rng.below(64) as f64 - 32.0) / 8.0)
        .collect();
    feed(name, dims, v)
}

fn pool_spec(kind: PoolKind, k: [usize; 2], s: [usize; 2], p: [usize; 2]) -> PoolSpec {
    PoolSpec {
        kind,
        kernel_size: k,
        stride: s,
        padding: p,
    }
}

fn pool_graph(dtype: DType, x: &[usize], spec: PoolSpec) -> Graph {
    let mut g = Graph::new("pool");
    let xi = g.input("x", Shape::new(x, dtype)).unwrap();
    let y = g.pool2d(xi, spec).unwrap();
    g.set_outputs(vec![y]);
    g
}

fn pool_backward_graph(dtype: DType, x: &[usize], spec: PoolSpec) -> Graph {
    let y = pool_graph(DType::F32, x, spec);
    let yd = y.shape(y.outputs[0]).unwrap().static_dims().unwrap();
    let mut g = Graph::new("maxpool backward");
    let xi = g.input("x", Shape::new(x, dtype)).unwrap();
    let dy = g.input("dy", Shape::new(&yd, dtype)).unwrap();
    let dx = g.max_pool2d_backward(xi, dy, spec).unwrap();
    g.set_outputs(vec![dx]);
    g
}

/// (x dims, kernel, stride, padding) for the pooling tests.
type PoolCase = ([usize; 4], [usize; 2], [usize; 2], [usize; 2]);

const POOLS: [PoolCase; 9] = [
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

#[test]
fn max_pool() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("max_pool");
    for (x, k, s, p) in POOLS {
        let spec = pool_spec(PoolKind::Max, k, s, p);
        let feeds = vec![grid_values(&mut rng, "x", &x)];
        for dtype in FLOATS {
            let name = format!("max pool {x:?} k{k:?} s{s:?} p{p:?}");
            parity(&name, &|d| pool_graph(d, &x, spec), &feeds, dtype);
        }
    }
}

#[test]
fn avg_pool() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("avg_pool");
    for (x, k, s, p) in POOLS {
        let spec = pool_spec(PoolKind::Avg, k, s, p);
        let feeds = vec![normal(&mut rng, "x", &x)];
        for dtype in FLOATS {
            let name = format!("avg pool {x:?} k{k:?} s{s:?} p{p:?}");
            parity(&name, &|d| pool_graph(d, &x, spec), &feeds, dtype);
        }
    }
}

#[test]
fn pool_large() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("pool_large");
    let x = [4, 64, 128, 129];
    for kind in [PoolKind::Max, PoolKind::Avg] {
        let spec = pool_spec(kind, [3, 3], [1, 1], [1, 1]);
        let feeds = vec![grid_values(&mut rng, "x", &x)];
        for dtype in FLOATS {
            parity(
                &format!("{kind:?} pool large"),
                &|d| pool_graph(d, &x, spec),
                &feeds,
                dtype,
            );
        }
    }
}

#[test]
fn max_pool_backward() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("max_pool_backward");
    let mut cases = POOLS.to_vec();
    cases.push(([4, 64, 128, 129], [3, 3], [1, 1], [1, 1]));
    for (x, k, s, p) in cases {
        let spec = pool_spec(PoolKind::Max, k, s, p);
        let yd = {
            let g = pool_graph(DType::F32, &x, spec);
            g.shape(g.outputs[0]).unwrap().static_dims().unwrap()
        };
        let feeds = vec![grid_values(&mut rng, "x", &x), normal(&mut rng, "dy", &yd)];
        for dtype in FLOATS {
            let name = format!("max pool backward {x:?} k{k:?} s{s:?} p{p:?}");
            parity(&name, &|d| pool_backward_graph(d, &x, spec), &feeds, dtype);
        }
    }
}

/// A NaN wins its window (forward) and takes the window's gradient (backward).
#[test]
fn max_pool_nan() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("max_pool_nan");
    let x = [1, 2, 6, 6];
    let (_, _, mut v) = grid_values(&mut rng, "x", &x);
    v[7] = f64::NAN;
    v[50] = f64::NAN;
    let xs = feed("x", &x, v);
    // Overlapping windows (gather) and windows that tile the plane (one thread per window).
    for (spec, yd) in [
        (
            pool_spec(PoolKind::Max, [3, 3], [1, 1], [1, 1]),
            [1, 2, 6, 6],
        ),
        (
            pool_spec(PoolKind::Max, [2, 2], [2, 2], [0, 0]),
            [1, 2, 3, 3],
        ),
    ] {
        let dy = normal(&mut rng, "dy", &yd);
        for dtype in FLOATS {
            let g = pool_graph(dtype, &x, spec);
            let mut exe = compile_gpu(&g, rlx_cuda::CudaOptions::strict());
            let got = run_gpu_exe(&mut exe, &g, std::slice::from_ref(&xs));
            let want = run_cpu(&g, std::slice::from_ref(&xs));
            for (a, b) in got.iter().zip(&want) {
                let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
                for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                    assert!(
                        (p.is_nan() && q.is_nan()) || p == q,
                        "max pool NaN [{dtype}] element {i}: {p} vs {q}"
                    );
                }
            }
            parity(
                "max pool backward NaN",
                &|d| pool_backward_graph(d, &x, spec),
                &[xs.clone(), dy.clone()],
                dtype,
            );
        }
    }
}

fn resize_graph(dtype: DType, x: &[usize]) -> Graph {
    let mut g = Graph::new("resize");
    let xi = g.input("x", Shape::new(x, dtype)).unwrap();
    let y = g.resize_nearest2x(xi).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn resize_nearest2x() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("resize_nearest2x");
    for x in [[2, 3, 7, 9], [1, 1, 1, 1], [8, 16, 64, 65]] {
        let floats = vec![normal(&mut rng, "x", &x)];
        let n = x.iter().product();
        let ints = vec![feed(
            "x",
            &x,
            (0..n).map(|_| rng.below(200) as f64).collect(),
        )];
        for dtype in FLOATS.into_iter().chain([DType::F64]) {
            parity(
                "resize nearest 2x",
                &|d| resize_graph(d, &x),
                &floats,
                dtype,
            );
        }
        for dtype in [DType::I32, DType::I64, DType::U8] {
            parity("resize nearest 2x", &|d| resize_graph(d, &x), &ints, dtype);
        }
    }
}
