//! Oracle tests: Conv (2-D and the 1-D `[N,C,1,L]` form), Pool, ResizeNearest2x and the
//! vision gradients, against direct f64 loops and central finite differences.
mod common;
use common::*;
use rlx_ir::{ConvSpec, DType, Dim, Graph, HostTensor, PoolKind, PoolSpec, Shape};

/// One 2-D conv configuration (x `[n,c,h,w]`, w `[o, c/g, k0, k1]`).
#[derive(Clone, Copy, Debug)]
struct Cfg {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    g: usize,
}

impl Cfg {
    fn spec(&self) -> ConvSpec {
        ConvSpec::new(self.k)
            .stride(self.s)
            .padding(self.p)
            .dilation(self.d)
            .groups(self.g)
    }
    fn x_shape(&self) -> [usize; 4] {
        [self.n, self.c, self.h, self.w]
    }
    fn w_shape(&self) -> [usize; 4] {
        [self.o, self.c / self.g, self.k[0], self.k[1]]
    }
    fn out_hw(&self) -> [usize; 2] {
        let f = |i: usize, len: usize| {
            (len + 2 * self.p[i] - self.d[i] * (self.k[i] - 1) - 1) / self.s[i] + 1
        };
        [f(0, self.h), f(1, self.w)]
    }
    fn y_shape(&self) -> [usize; 4] {
        let [ho, wo] = self.out_hw();
        [self.n, self.o, ho, wo]
    }
}

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// Visit every (n, o, oy, ox, ci, ki, kj) term of a conv whose input tap lies inside x,
/// passing (y index, x index, w index): the seven loops every oracle below shares.
fn for_each_tap(cfg: &Cfg, mut f: impl FnMut(usize, usize, usize)) {
    let [ho, wo] = cfg.out_hw();
    let (cg, og) = (cfg.c / cfg.g, cfg.o / cfg.g);
    for n in 0..cfg.n {
        for o in 0..cfg.o {
            let grp = o / og;
            for oy in 0..ho {
                for ox in 0..wo {
                    for ci in 0..cg {
                        for ki in 0..cfg.k[0] {
                            for kj in 0..cfg.k[1] {
                                let iy =
                                    (oy * cfg.s[0] + ki * cfg.d[0]) as isize - cfg.p[0] as isize;
                                let ix =
                                    (ox * cfg.s[1] + kj * cfg.d[1]) as isize - cfg.p[1] as isize;
                                if iy < 0 || ix < 0 || iy >= cfg.h as isize || ix >= cfg.w as isize
                                {
                                    continue;
                                }
                                let c = grp * cg + ci;
                                let xi =
                                    ((n * cfg.c + c) * cfg.h + iy as usize) * cfg.w + ix as usize;
                                let yi = ((n * cfg.o + o) * ho + oy) * wo + ox;
                                let wi = ((o * cg + ci) * cfg.k[0] + ki) * cfg.k[1] + kj;
                                f(yi, xi, wi);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn conv_ref(cfg: &Cfg, x: &[f64], w: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    let y_shape = cfg.y_shape();
    let mut y = vec![0.0; numel(&y_shape)];
    for_each_tap(cfg, |yi, xi, wi| y[yi] += x[xi] * w[wi]);
    if let Some(b) = bias {
        let plane = y_shape[2] * y_shape[3];
        for (i, v) in y.iter_mut().enumerate() {
            *v += b[(i / plane) % cfg.o];
        }
    }
    y
}

fn conv_dx_ref(cfg: &Cfg, dy: &[f64], w: &[f64]) -> Vec<f64> {
    let mut dx = vec![0.0; numel(&cfg.x_shape())];
    for_each_tap(cfg, |yi, xi, wi| dx[xi] += dy[yi] * w[wi]);
    dx
}

fn conv_dw_ref(cfg: &Cfg, x: &[f64], dy: &[f64]) -> Vec<f64> {
    let mut dw = vec![0.0; numel(&cfg.w_shape())];
    for_each_tap(cfg, |yi, xi, wi| dw[wi] += dy[yi] * x[xi]);
    dw
}

/// A plain 1-D conv: x `[n, c, l]`, w `[o, c/g, k]` → `[n, o, lo]`.
#[allow(clippy::too_many_arguments)]
fn conv1d_ref(
    (n, c, l, o): (usize, usize, usize, usize),
    (k, s, p, d, g): (usize, usize, usize, usize, usize),
    x: &[f64],
    w: &[f64],
    bias: &[f64],
) -> (Vec<f64>, usize) {
    let lo = (l + 2 * p - d * (k - 1) - 1) / s + 1;
    let (cg, og) = (c / g, o / g);
    let mut y = vec![0.0; n * o * lo];
    for b in 0..n {
        for oc in 0..o {
            for t in 0..lo {
                let mut acc = bias[oc];
                for ci in 0..cg {
                    for j in 0..k {
                        let i = (t * s + j * d) as isize - p as isize;
                        if i >= 0 && (i as usize) < l {
                            let xc = (oc / og) * cg + ci;
                            acc += x[(b * c + xc) * l + i as usize] * w[(oc * cg + ci) * k + j];
                        }
                    }
                }
                y[(b * o + oc) * lo + t] = acc;
            }
        }
    }
    (y, lo)
}

fn tensor(shape: &[usize], v: &[f64], dtype: DType) -> HostTensor {
    HostTensor::from_f64_as(shape, v, dtype)
}

/// Build and run conv(x, w [, bias]) with the builders.
fn run_conv(
    spec: ConvSpec,
    (xs, x): (&[usize], &[f64]),
    (ws, w): (&[usize], &[f64]),
    bias: Option<&[f64]>,
    dtype: DType,
) -> HostTensor {
    let mut g = Graph::new("conv");
    let xi = g.input("x", Shape::new(xs, dtype)).unwrap();
    let wi = g.input("w", Shape::new(ws, dtype)).unwrap();
    let mut feeds = vec![("x", tensor(xs, x, dtype)), ("w", tensor(ws, w, dtype))];
    let y = match bias {
        Some(b) => {
            let bi = g.input("b", Shape::new(&[b.len()], dtype)).unwrap();
            feeds.push(("b", tensor(&[b.len()], b, dtype)));
            g.conv2d_bias(xi, wi, bi, spec).unwrap()
        }
        None => g.conv2d(xi, wi, spec).unwrap(),
    };
    g.set_outputs(vec![y]);
    run(&g, &feeds, &[]).remove(0)
}

#[allow(clippy::too_many_arguments)]
fn cfg(
    n: usize,
    c: usize,
    hw: [usize; 2],
    o: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    g: usize,
) -> Cfg {
    Cfg {
        n,
        c,
        h: hw[0],
        w: hw[1],
        o,
        k,
        s,
        p,
        d,
        g,
    }
}

/// Stride, padding, dilation, groups (depthwise and channel-multiplier), 1×1, odd sizes.
fn conv_cases() -> Vec<Cfg> {
    vec![
        cfg(2, 3, [7, 9], 5, [3, 3], [1, 1], [0, 0], [1, 1], 1),
        cfg(1, 4, [11, 10], 6, [3, 5], [2, 3], [1, 2], [1, 1], 1),
        cfg(3, 5, [9, 13], 7, [3, 3], [1, 2], [2, 1], [2, 3], 1),
        cfg(2, 6, [8, 7], 4, [3, 2], [2, 1], [1, 1], [1, 2], 2),
        cfg(2, 6, [9, 9], 6, [3, 3], [1, 1], [1, 1], [1, 1], 6),
        cfg(1, 4, [10, 5], 8, [5, 3], [3, 1], [2, 1], [1, 1], 4),
        cfg(3, 9, [6, 5], 10, [1, 1], [1, 1], [0, 0], [1, 1], 1),
        cfg(2, 6, [7, 8], 9, [1, 1], [2, 2], [0, 1], [1, 1], 3),
        cfg(1, 3, [4, 4], 2, [4, 4], [1, 1], [0, 0], [1, 1], 1),
        cfg(2, 2, [3, 3], 3, [5, 5], [1, 1], [2, 2], [1, 1], 1),
    ]
}

#[test]
fn conv2d_matches_direct_oracle_f32() {
    let mut rng = Rng::new("conv2d_matches_direct_oracle_f32");
    for (i, c) in conv_cases().iter().enumerate() {
        let (xs, ws) = (c.x_shape(), c.w_shape());
        let x = through(DType::F32, &rng.normals(numel(&xs)));
        let w = through(DType::F32, &rng.normals(numel(&ws)));
        let b = through(DType::F32, &rng.normals(c.o));
        let bias = (i % 2 == 1).then_some(&b[..]);
        let got = run_conv(c.spec(), (&xs, &x), (&ws, &w), bias, DType::F32);
        assert_eq!(got.shape, c.y_shape(), "case {i}: {c:?}");
        assert_close(
            &format!("conv case {i} {c:?}"),
            &got,
            &conv_ref(c, &x, &w, bias),
            DType::F32,
        );
    }
}

#[test]
fn conv2d_half_and_f64_storage() {
    let mut rng = Rng::new("conv2d_half_and_f64_storage");
    for dtype in [DType::F16, DType::BF16, DType::F64] {
        for c in [conv_cases()[1], conv_cases()[3], conv_cases()[4]] {
            let (xs, ws) = (c.x_shape(), c.w_shape());
            let x = through(dtype, &rng.normals(numel(&xs)));
            let w = through(dtype, &rng.normals(numel(&ws)));
            let b = through(dtype, &rng.normals(c.o));
            let got = run_conv(c.spec(), (&xs, &x), (&ws, &w), Some(&b), dtype);
            assert_eq!(got.dtype, dtype);
            assert_close(
                &format!("conv {dtype} {c:?}"),
                &got,
                &conv_ref(&c, &x, &w, Some(&b)),
                dtype,
            );
        }
    }
}

#[test]
fn conv2d_dynamic_dims_run_with_concrete_shapes() {
    let mut rng = Rng::new("conv2d_dynamic_batch");
    let c = conv_cases()[1];
    let mut g = Graph::new("conv_dyn");
    let x_dims = vec![Dim::dynamic("B"), c.c.into(), "H".into(), "W".into()];
    let xi = g.input("x", Shape::with_dims(x_dims, DType::F32)).unwrap();
    let wi = g.input("w", Shape::new(&c.w_shape(), DType::F32)).unwrap();
    let y = g.conv2d(xi, wi, c.spec()).unwrap();
    let dims = &g.shape(y).unwrap().dims;
    assert_eq!(dims[0], Dim::dynamic("B"));
    assert!(matches!(
        (&dims[2], &dims[3]),
        (Dim::Dynamic(_), Dim::Dynamic(_))
    ));
    // A size-preserving conv keeps the symbol.
    let same = ConvSpec::new(c.k).padding([c.k[0] / 2, c.k[1] / 2]);
    let y2 = g.conv2d(xi, wi, same).unwrap();
    assert_eq!(g.shape(y2).unwrap().dims[2], Dim::dynamic("H"));
    g.set_outputs(vec![y]);
    let (xs, ws) = (c.x_shape(), c.w_shape());
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
    assert_eq!(got[0].shape, c.y_shape());
    assert_close(
        "dynamic conv",
        &got[0],
        &conv_ref(&c, &x, &w, None),
        DType::F32,
    );
}

/// The 1-D form `[N, C, 1, L]` with kernel `[k, 1]`: length parameters at index 0.
#[test]
fn conv1d_form_matches_plain_1d_oracle() {
    let mut rng = Rng::new("conv1d_form_matches_plain_1d_oracle");
    // (n, c, l, o), (k, s, p, d, groups)
    let cases = [
        ((2, 3, 17, 4), (3, 1, 1, 1, 1)),
        ((1, 4, 23, 6), (5, 2, 2, 1, 2)),
        ((3, 6, 19, 6), (3, 3, 0, 2, 6)),
        ((2, 2, 9, 5), (1, 2, 0, 1, 1)),
        ((1, 8, 31, 4), (7, 4, 3, 3, 4)),
    ];
    for dtype in [DType::F32, DType::F64] {
        for &((n, c, l, o), (k, s, p, d, gr)) in &cases {
            let xs = [n, c, 1, l];
            let ws = [o, c / gr, k, 1];
            let x = through(dtype, &rng.normals(numel(&xs)));
            let w = through(dtype, &rng.normals(numel(&ws)));
            let b = through(dtype, &rng.normals(o));
            let spec = ConvSpec::new([k, 1])
                .stride([s, 1])
                .padding([p, 0])
                .dilation([d, 1])
                .groups(gr);
            let got = run_conv(spec, (&xs, &x), (&ws, &w), Some(&b), dtype);
            let (want, lo) = conv1d_ref((n, c, l, o), (k, s, p, d, gr), &x, &w, &b);
            assert_eq!(got.shape, [n, o, 1, lo]);
            assert_close(&format!("conv1d {dtype} l={l} k={k}"), &got, &want, dtype);
        }
    }
}

/// On an H = 1 input, index-1 parameters that are not neutral keep the 2-D reading.
#[test]
fn conv_on_height_one_with_width_params_stays_2d() {
    let mut rng = Rng::new("conv_on_height_one_with_width_params_stays_2d");
    for c in [
        cfg(2, 4, [1, 9], 3, [1, 1], [2, 2], [0, 1], [1, 1], 1),
        cfg(1, 3, [1, 11], 5, [3, 1], [1, 2], [1, 0], [1, 1], 1),
    ] {
        let (xs, ws) = (c.x_shape(), c.w_shape());
        let x = through(DType::F64, &rng.normals(numel(&xs)));
        let w = through(DType::F64, &rng.normals(numel(&ws)));
        let got = run_conv(c.spec(), (&xs, &x), (&ws, &w), None, DType::F64);
        assert_eq!(got.shape, c.y_shape());
        assert_close(
            "2-D conv on H=1",
            &got,
            &conv_ref(&c, &x, &w, None),
            DType::F64,
        );
    }
}

fn run_backward(c: &Cfg, dtype: DType, a: &[f64], b: &[f64], wrt_input: bool) -> HostTensor {
    let mut g = Graph::new("conv_bwd");
    let ys = c.y_shape();
    let (out, feeds) = if wrt_input {
        let dy = g.input("dy", Shape::new(&ys, dtype)).unwrap();
        let w = g.input("w", Shape::new(&c.w_shape(), dtype)).unwrap();
        let out = g
            .conv2d_backward_input(dy, w, c.spec(), [c.h, c.w])
            .unwrap();
        let feeds = vec![
            ("dy", tensor(&ys, a, dtype)),
            ("w", tensor(&c.w_shape(), b, dtype)),
        ];
        (out, feeds)
    } else {
        let x = g.input("x", Shape::new(&c.x_shape(), dtype)).unwrap();
        let dy = g.input("dy", Shape::new(&ys, dtype)).unwrap();
        let out = g.conv2d_backward_weight(x, dy, c.spec()).unwrap();
        let feeds = vec![
            ("x", tensor(&c.x_shape(), a, dtype)),
            ("dy", tensor(&ys, b, dtype)),
        ];
        (out, feeds)
    };
    g.set_outputs(vec![out]);
    run(&g, &feeds, &[]).remove(0)
}

/// Central differences of `f` at every coordinate of `at`.
fn central_diff(at: &[f64], eps: f64, f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut v = at.to_vec();
    (0..at.len())
        .map(|i| {
            v[i] = at[i] + eps;
            let up = f(&v);
            v[i] = at[i] - eps;
            let dn = f(&v);
            v[i] = at[i];
            (up - dn) / (2.0 * eps)
        })
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn conv_backward_input_matches_definition_and_finite_differences() {
    let mut rng = Rng::new("conv_backward_input");
    for c in conv_cases() {
        let (xs, ws, ys) = (c.x_shape(), c.w_shape(), c.y_shape());
        let x = rng.normals(numel(&xs));
        let w = rng.normals(numel(&ws));
        let dy = rng.normals(numel(&ys));
        let got = run_backward(&c, DType::F64, &dy, &w, true);
        assert_eq!(got.shape, xs);
        let def = conv_dx_ref(&c, &dy, &w);
        assert_close(&format!("dx {c:?}"), &got, &def, DType::F64);
        let fd = central_diff(&x, 1e-3, |xv| dot(&dy, &conv_ref(&c, xv, &w, None)));
        let e = rel_l2(&got.to_f64_vec(), &fd);
        assert!(e < 1e-8, "dx vs finite differences {c:?}: rel-L2 {e:.3e}");
        // f32 through the same kernel.
        let dy32 = through(DType::F32, &dy);
        let w32 = through(DType::F32, &w);
        let got32 = run_backward(&c, DType::F32, &dy32, &w32, true);
        assert_close("dx f32", &got32, &conv_dx_ref(&c, &dy32, &w32), DType::F32);
    }
}

#[test]
fn conv_backward_weight_matches_definition_and_finite_differences() {
    let mut rng = Rng::new("conv_backward_weight");
    for c in conv_cases() {
        let (xs, ws, ys) = (c.x_shape(), c.w_shape(), c.y_shape());
        let x = rng.normals(numel(&xs));
        let w = rng.normals(numel(&ws));
        let dy = rng.normals(numel(&ys));
        let got = run_backward(&c, DType::F64, &x, &dy, false);
        assert_eq!(got.shape, ws);
        assert_close(
            &format!("dw {c:?}"),
            &got,
            &conv_dw_ref(&c, &x, &dy),
            DType::F64,
        );
        let fd = central_diff(&w, 1e-3, |wv| dot(&dy, &conv_ref(&c, &x, wv, None)));
        let e = rel_l2(&got.to_f64_vec(), &fd);
        assert!(e < 1e-8, "dw vs finite differences {c:?}: rel-L2 {e:.3e}");
        let x32 = through(DType::F32, &x);
        let dy32 = through(DType::F32, &dy);
        let got32 = run_backward(&c, DType::F32, &x32, &dy32, false);
        assert_close("dw f32", &got32, &conv_dw_ref(&c, &x32, &dy32), DType::F32);
    }
}

/// The gradients of the 1-D form, checked against finite differences of the plain 1-D
/// conv oracle (independent of the 2-D rewrite).
#[test]
fn conv1d_form_gradients_match_1d_finite_differences() {
    let mut rng = Rng::new("conv1d_form_gradients");
    let ((n, c, l, o), (k, s, p, d, gr)) = ((2, 4, 13, 6), (3, 2, 2, 2, 2));
    let x = rng.normals(n * c * l);
    let w = rng.normals(o * (c / gr) * k);
    let zero_bias = vec![0.0; o];
    let (y0, lo) = conv1d_ref((n, c, l, o), (k, s, p, d, gr), &x, &w, &zero_bias);
    let dy = rng.normals(y0.len());
    let spec = ConvSpec::new([k, 1])
        .stride([s, 1])
        .padding([p, 0])
        .dilation([d, 1])
        .groups(gr);
    let mut g = Graph::new("conv1d_bwd");
    let xi = g.input("x", Shape::new(&[n, c, 1, l], DType::F64)).unwrap();
    let wi = g
        .input("w", Shape::new(&[o, c / gr, k, 1], DType::F64))
        .unwrap();
    let dyi = g
        .input("dy", Shape::new(&[n, o, 1, lo], DType::F64))
        .unwrap();
    let dx = g.conv2d_backward_input(dyi, wi, spec, [1, l]).unwrap();
    let dw = g.conv2d_backward_weight(xi, dyi, spec).unwrap();
    g.set_outputs(vec![dx, dw]);
    let got = run(
        &g,
        &[
            ("x", tensor(&[n, c, 1, l], &x, DType::F64)),
            ("w", tensor(&[o, c / gr, k, 1], &w, DType::F64)),
            ("dy", tensor(&[n, o, 1, lo], &dy, DType::F64)),
        ],
        &[],
    );
    assert_eq!(got[0].shape, [n, c, 1, l]);
    assert_eq!(got[1].shape, [o, c / gr, k, 1]);
    let geo = ((n, c, l, o), (k, s, p, d, gr));
    let fdx = central_diff(&x, 1e-3, |xv| {
        dot(&dy, &conv1d_ref(geo.0, geo.1, xv, &w, &zero_bias).0)
    });
    let fdw = central_diff(&w, 1e-3, |wv| {
        dot(&dy, &conv1d_ref(geo.0, geo.1, &x, wv, &zero_bias).0)
    });
    let (ex, ew) = (
        rel_l2(&got[0].to_f64_vec(), &fdx),
        rel_l2(&got[1].to_f64_vec(), &fdw),
    );
    assert!(ex < 1e-8 && ew < 1e-8, "1-D dx {ex:.3e}, dw {ew:.3e}");
}

fn pool_ref(x: &[f64], xs: [usize; 4], spec: &PoolSpec) -> (Vec<f64>, Vec<usize>, [usize; 2]) {
    let [n, c, h, w] = xs;
    let f = |i: usize, len: usize| {
        (len + 2 * spec.padding[i] - spec.kernel_size[i]) / spec.stride[i] + 1
    };
    let (ho, wo) = (f(0, h), f(1, w));
    let mut y = vec![];
    let mut arg = vec![];
    for plane in 0..n * c {
        for oy in 0..ho {
            for ox in 0..wo {
                let (mut sum, mut best, mut bi) = (0.0, f64::NEG_INFINITY, usize::MAX);
                for ki in 0..spec.kernel_size[0] {
                    for kj in 0..spec.kernel_size[1] {
                        let iy = (oy * spec.stride[0] + ki) as isize - spec.padding[0] as isize;
                        let ix = (ox * spec.stride[1] + kj) as isize - spec.padding[1] as isize;
                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            continue;
                        }
                        let i = (plane * h + iy as usize) * w + ix as usize;
                        sum += x[i];
                        if x[i] > best {
                            best = x[i];
                            bi = i;
                        }
                    }
                }
                let area = (spec.kernel_size[0] * spec.kernel_size[1]) as f64;
                y.push(match spec.kind {
                    PoolKind::Max => best,
                    PoolKind::Avg => sum / area,
                });
                arg.push(bi);
            }
        }
    }
    (y, arg, [ho, wo])
}

fn pool_cases(kind: PoolKind) -> Vec<([usize; 4], PoolSpec)> {
    let sp = |k: [usize; 2], s: [usize; 2], p: [usize; 2]| PoolSpec {
        kind,
        kernel_size: k,
        stride: s,
        padding: p,
    };
    vec![
        ([2, 3, 8, 8], sp([2, 2], [2, 2], [0, 0])),
        ([1, 4, 9, 11], sp([3, 3], [2, 2], [1, 1])),
        ([2, 2, 13, 7], sp([3, 2], [1, 3], [1, 0])),
        ([3, 1, 7, 10], sp([5, 4], [2, 3], [2, 2])),
        ([1, 5, 6, 5], sp([3, 3], [1, 1], [1, 1])),
    ]
}

fn run_pool(xs: [usize; 4], spec: PoolSpec, x: &[f64], dtype: DType) -> HostTensor {
    let mut g = Graph::new("pool");
    let xi = g.input("x", Shape::new(&xs, dtype)).unwrap();
    let (k, s, p) = (spec.kernel_size, spec.stride, spec.padding);
    let y = match spec.kind {
        PoolKind::Max => g.max_pool2d(xi, k, s, p).unwrap(),
        PoolKind::Avg => g.avg_pool2d(xi, k, s, p).unwrap(),
    };
    g.set_outputs(vec![y]);
    run(&g, &[("x", tensor(&xs, x, dtype))], &[]).remove(0)
}

#[test]
fn pool_max_and_avg_match_direct_oracle() {
    let mut rng = Rng::new("pool_max_and_avg_match_direct_oracle");
    for kind in [PoolKind::Max, PoolKind::Avg] {
        for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            for (xs, spec) in pool_cases(kind) {
                let x = through(dtype, &rng.normals(numel(&xs)));
                let got = run_pool(xs, spec, &x, dtype);
                let (want, _, [ho, wo]) = pool_ref(&x, xs, &spec);
                assert_eq!(got.shape, [xs[0], xs[1], ho, wo]);
                assert_close(&format!("{kind:?} {dtype} {spec:?}"), &got, &want, dtype);
            }
        }
    }
    // pool2d with an explicit spec is the same op.
    let (xs, spec) = pool_cases(PoolKind::Avg)[1];
    let x = through(DType::F32, &rng.normals(numel(&xs)));
    let mut g = Graph::new("pool2d");
    let xi = g.input("x", Shape::new(&xs, DType::F32)).unwrap();
    let y = g.pool2d(xi, spec).unwrap();
    g.set_outputs(vec![y]);
    let got = run(&g, &[("x", tensor(&xs, &x, DType::F32))], &[]);
    assert_close("pool2d", &got[0], &pool_ref(&x, xs, &spec).0, DType::F32);
}

#[test]
fn max_pool_backward_matches_definition_and_finite_differences() {
    let mut rng = Rng::new("max_pool_backward");
    for dtype in [DType::F64, DType::F32] {
        for (xs, spec) in pool_cases(PoolKind::Max) {
            let x = through(dtype, &rng.normals(numel(&xs)));
            let (y, arg, [ho, wo]) = pool_ref(&x, xs, &spec);
            let dy = through(dtype, &rng.normals(y.len()));
            let mut want = vec![0.0; x.len()];
            for (j, &i) in arg.iter().enumerate() {
                want[i] += dy[j];
            }
            let mut g = Graph::new("maxpool_bwd");
            let xi = g.input("x", Shape::new(&xs, dtype)).unwrap();
            let ys = [xs[0], xs[1], ho, wo];
            let dyi = g.input("dy", Shape::new(&ys, dtype)).unwrap();
            let dx = g.max_pool2d_backward(xi, dyi, spec).unwrap();
            g.set_outputs(vec![dx]);
            let got = run(
                &g,
                &[
                    ("x", tensor(&xs, &x, dtype)),
                    ("dy", tensor(&ys, &dy, dtype)),
                ],
                &[],
            );
            assert_eq!(got[0].shape, xs);
            assert_close(
                &format!("maxpool dx {dtype} {spec:?}"),
                &got[0],
                &want,
                dtype,
            );
            if dtype == DType::F64 {
                let fd = central_diff(&x, 1e-7, |xv| dot(&dy, &pool_ref(xv, xs, &spec).0));
                let e = rel_l2(&got[0].to_f64_vec(), &fd);
                assert!(e < 1e-6, "maxpool dx vs finite differences: rel-L2 {e:.3e}");
            }
        }
    }
}

/// Ties go to the first maximum in window scan order.
#[test]
fn max_pool_backward_sends_ties_to_first_max() {
    let mut rng = Rng::new("max_pool_backward_ties");
    // Quantised values make ties common.
    let xs = [2, 2, 7, 6];
    let x: Vec<f64> = (0..numel(&xs)).map(|_| rng.below(3) as f64).collect();
    let spec = PoolSpec {
        kind: PoolKind::Max,
        kernel_size: [3, 2],
        stride: [2, 1],
        padding: [1, 1],
    };
    let (y, arg, [ho, wo]) = pool_ref(&x, xs, &spec);
    let dy = rng.normals(y.len());
    let mut want = vec![0.0; x.len()];
    for (j, &i) in arg.iter().enumerate() {
        want[i] += dy[j];
    }
    let mut g = Graph::new("ties");
    let xi = g.input("x", Shape::new(&xs, DType::F64)).unwrap();
    let ys = [xs[0], xs[1], ho, wo];
    let dyi = g.input("dy", Shape::new(&ys, DType::F64)).unwrap();
    let dx = g.max_pool2d_backward(xi, dyi, spec).unwrap();
    g.set_outputs(vec![dx]);
    let got = run(
        &g,
        &[
            ("x", tensor(&xs, &x, DType::F64)),
            ("dy", tensor(&ys, &dy, DType::F64)),
        ],
        &[],
    );
    assert_close("maxpool ties", &got[0], &want, DType::F64);
}

#[test]
fn resize_nearest2x_matches_oracle() {
    let mut rng = Rng::new("resize_nearest2x_matches_oracle");
    for dtype in [DType::F32, DType::BF16, DType::F64, DType::I32] {
        for xs in [[2usize, 3, 5, 7], [1, 1, 1, 1], [3, 2, 4, 1]] {
            let x = if dtype == DType::I32 {
                (0..numel(&xs))
                    .map(|_| rng.below(1000) as f64 - 500.0)
                    .collect()
            } else {
                through(dtype, &rng.normals(numel(&xs)))
            };
            let [n, c, h, w] = xs;
            let mut want = vec![];
            for p in 0..n * c {
                for oy in 0..2 * h {
                    for ox in 0..2 * w {
                        want.push(x[(p * h + oy / 2) * w + ox / 2]);
                    }
                }
            }
            let mut g = Graph::new("resize");
            let xi = g.input("x", Shape::new(&xs, dtype)).unwrap();
            let y = g.resize_nearest2x(xi).unwrap();
            g.set_outputs(vec![y]);
            let got = run(&g, &[("x", tensor(&xs, &x, dtype))], &[]);
            assert_eq!(got[0].shape, [n, c, 2 * h, 2 * w]);
            assert_eq!(got[0].to_f64_vec(), want, "resize {dtype} {xs:?}");
        }
    }
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
