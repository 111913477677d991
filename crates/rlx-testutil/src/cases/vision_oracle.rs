//! The f64 oracles of the vision group, plain loops independent of rlx's kernels: the conv
//! geometry and its forward / input-gradient / weight-gradient sums (2-D, and the 1-D form
//! `[N, C, 1, L]` with kernel `[k, 1]` as its own 1-D loop, not a reading of the 2-D one),
//! pooling with its first-max rule, the max-pool gradient and nearest 2× upsampling. The
//! tests below check each gradient oracle against central differences of its forward
//! oracle, so a kernel that matches the gradient oracle matches the derivative too.
use super::numel;
use rlx_ir::{ConvSpec, PoolKind, PoolSpec};

/// One conv geometry: x `[n, c, h, w]`, `o` output channels, the spec, whether a bias is
/// added, and which reading the oracle takes (`one_d`: the 1-D form, whose kernel, stride,
/// padding and dilation at index 0 run along the length, x's last axis).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geo {
    pub x: [usize; 4],
    pub o: usize,
    pub spec: ConvSpec,
    pub bias: bool,
    pub one_d: bool,
}

impl Geo {
    pub fn w(&self) -> [usize; 4] {
        let k = self.spec.kernel_size;
        [self.o, self.x[1] / self.spec.groups, k[0], k[1]]
    }

    /// Output dims by the oracle's own size rule.
    pub fn y(&self) -> [usize; 4] {
        let s = &self.spec;
        let f = |i: usize, len: usize| {
            (len + 2 * s.padding[i] - s.dilation[i] * (s.kernel_size[i] - 1) - 1) / s.stride[i] + 1
        };
        let [n, _, h, w] = self.x;
        if self.one_d {
            [n, self.o, 1, f(0, w)]
        } else {
            [n, self.o, f(0, h), f(1, w)]
        }
    }

    /// Visit every (y, x, w) index triple of a product term whose input tap lies inside x.
    fn for_each_tap(&self, f: impl FnMut(usize, usize, usize)) {
        if self.one_d {
            self.taps_1d(f)
        } else {
            self.taps_2d(f)
        }
    }

    fn taps_2d(&self, mut f: impl FnMut(usize, usize, usize)) {
        let [n_, c_, h, w] = self.x;
        let [_, _, ho, wo] = self.y();
        let s = &self.spec;
        let (k, st, p, d) = (s.kernel_size, s.stride, s.padding, s.dilation);
        let (cg, og) = (c_ / s.groups, self.o / s.groups);
        for n in 0..n_ {
            for o in 0..self.o {
                for oy in 0..ho {
                    for ox in 0..wo {
                        for ci in 0..cg {
                            for ki in 0..k[0] {
                                for kj in 0..k[1] {
                                    let iy = (oy * st[0] + ki * d[0]) as isize - p[0] as isize;
                                    let ix = (ox * st[1] + kj * d[1]) as isize - p[1] as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                        continue;
                                    }
                                    let c = (o / og) * cg + ci;
                                    let xi = ((n * c_ + c) * h + iy as usize) * w + ix as usize;
                                    let yi = ((n * self.o + o) * ho + oy) * wo + ox;
                                    let wi = ((o * cg + ci) * k[0] + ki) * k[1] + kj;
                                    f(yi, xi, wi);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The plain 1-D conv: x `[n, c, l]`, w `[o, c/g, k]` → `[n, o, lo]`.
    fn taps_1d(&self, mut f: impl FnMut(usize, usize, usize)) {
        let [n_, c_, _, l] = self.x;
        let lo = self.y()[3];
        let s = &self.spec;
        let (k, st, p, d) = (s.kernel_size[0], s.stride[0], s.padding[0], s.dilation[0]);
        let (cg, og) = (c_ / s.groups, self.o / s.groups);
        for b in 0..n_ {
            for oc in 0..self.o {
                for t in 0..lo {
                    for ci in 0..cg {
                        for j in 0..k {
                            let i = (t * st + j * d) as isize - p as isize;
                            if i >= 0 && (i as usize) < l {
                                let xc = (oc / og) * cg + ci;
                                let xi = (b * c_ + xc) * l + i as usize;
                                f((b * self.o + oc) * lo + t, xi, (oc * cg + ci) * k + j);
                            }
                        }
                    }
                }
            }
        }
    }
}

/// conv(x, w) [+ bias per output channel].
pub fn conv_ref(geo: &Geo, x: &[f64], w: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    let ys = geo.y();
    let mut y = vec![0.0; numel(&ys)];
    geo.for_each_tap(|yi, xi, wi| y[yi] += x[xi] * w[wi]);
    if let Some(b) = bias {
        let plane = ys[2] * ys[3];
        for (i, v) in y.iter_mut().enumerate() {
            *v += b[(i / plane) % geo.o];
        }
    }
    y
}

/// The input gradient by its definition: each dy term scattered back through its tap.
pub fn conv_dx_ref(geo: &Geo, dy: &[f64], w: &[f64]) -> Vec<f64> {
    let mut dx = vec![0.0; numel(&geo.x)];
    geo.for_each_tap(|yi, xi, wi| dx[xi] += dy[yi] * w[wi]);
    dx
}

/// The weight gradient by its definition.
pub fn conv_dw_ref(geo: &Geo, x: &[f64], dy: &[f64]) -> Vec<f64> {
    let mut dw = vec![0.0; numel(&geo.w())];
    geo.for_each_tap(|yi, xi, wi| dw[wi] += dy[yi] * x[xi]);
    dw
}

/// Pool output dims `[n, c, ho, wo]`.
pub fn pool_out(xs: [usize; 4], spec: &PoolSpec) -> [usize; 4] {
    let f = |i: usize, len: usize| {
        (len + 2 * spec.padding[i] - spec.kernel_size[i]) / spec.stride[i] + 1
    };
    [xs[0], xs[1], f(0, xs[2]), f(1, xs[3])]
}

/// Pooled values and, per output, the flat index of its window's first maximum (scan
/// order); padding takes no part in a max and counts in an average's area.
pub fn pool_ref(x: &[f64], xs: [usize; 4], spec: &PoolSpec) -> (Vec<f64>, Vec<usize>) {
    let [n, c, h, w] = xs;
    let [_, _, ho, wo] = pool_out(xs, spec);
    let (k, s, p) = (spec.kernel_size, spec.stride, spec.padding);
    let (mut y, mut arg) = (vec![], vec![]);
    for plane in 0..n * c {
        for oy in 0..ho {
            for ox in 0..wo {
                let (mut sum, mut best, mut bi) = (0.0, f64::NEG_INFINITY, usize::MAX);
                for ki in 0..k[0] {
                    for kj in 0..k[1] {
                        let iy = (oy * s[0] + ki) as isize - p[0] as isize;
                        let ix = (ox * s[1] + kj) as isize - p[1] as isize;
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
                y.push(match spec.kind {
                    PoolKind::Max => best,
                    PoolKind::Avg => sum / (k[0] * k[1]) as f64,
                });
                arg.push(bi);
            }
        }
    }
    (y, arg)
}

/// The max-pool gradient: each dy goes to its window's first maximum.
pub fn max_pool_dx_ref(x: &[f64], dy: &[f64], xs: [usize; 4], spec: &PoolSpec) -> Vec<f64> {
    let (_, arg) = pool_ref(x, xs, spec);
    let mut dx = vec![0.0; x.len()];
    for (j, &i) in arg.iter().enumerate() {
        dx[i] += dy[j];
    }
    dx
}

/// Nearest 2× upsampling of `[n, c, h, w]`.
pub fn resize_ref(x: &[f64], xs: [usize; 4]) -> Vec<f64> {
    let [n, c, h, w] = xs;
    let mut y = Vec::with_capacity(4 * x.len());
    for p in 0..n * c {
        for oy in 0..2 * h {
            for ox in 0..2 * w {
                y.push(x[(p * h + oy / 2) * w + ox / 2]);
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::vision::{cpu_geos, grad_geos, pool_geos};
    use crate::{rel_l2, Rng};

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

    /// The conv gradient oracles are the derivatives of the forward oracle (2-D and 1-D):
    /// what the CPU's backward kernels were checked against by finite differences before
    /// the case table, now checked on the oracles the kernels must match, on the CPU
    /// tests' geometries (each difference reruns the whole forward oracle).
    #[test]
    fn conv_gradient_oracles_are_derivatives() {
        let mut rng = Rng::new("conv_gradient_oracles_are_derivatives");
        let mut ran = 0;
        for geo in cpu_geos().into_iter().chain(grad_geos()) {
            let x = rng.normals(numel(&geo.x));
            let w = rng.normals(numel(&geo.w()));
            let dy = rng.normals(numel(&geo.y()));
            let fdx = central_diff(&x, 1e-3, |xv| dot(&dy, &conv_ref(&geo, xv, &w, None)));
            let fdw = central_diff(&w, 1e-3, |wv| dot(&dy, &conv_ref(&geo, &x, wv, None)));
            let ex = rel_l2(&conv_dx_ref(&geo, &dy, &w), &fdx);
            let ew = rel_l2(&conv_dw_ref(&geo, &x, &dy), &fdw);
            assert!(ex < 1e-8 && ew < 1e-8, "{geo:?}: dx {ex:.3e}, dw {ew:.3e}");
            ran += 1;
        }
        assert!(ran >= 10, "{ran} geometries checked");
    }

    /// The 1-D reading is a 1-D conv along the length, not the 2-D conv of the same spec.
    #[test]
    fn one_d_reading_runs_along_the_length() {
        let spec = ConvSpec::new([3, 1]).padding([1, 0]);
        let geo = Geo {
            x: [1, 1, 1, 4],
            o: 1,
            spec,
            bias: false,
            one_d: true,
        };
        let y = conv_ref(&geo, &[1.0, 2.0, 3.0, 4.0], &[1.0, 10.0, 100.0], None);
        assert_eq!(geo.y(), [1, 1, 1, 4]);
        assert_eq!(y, vec![210.0, 321.0, 432.0, 43.0]);
    }

    #[test]
    fn max_pool_gradient_oracle_is_the_derivative() {
        let mut rng = Rng::new("max_pool_gradient_oracle_is_the_derivative");
        let small = pool_geos(PoolKind::Max)
            .into_iter()
            .filter(|(xs, _)| numel(xs) <= 4096);
        for (xs, spec) in small {
            let x = rng.normals(numel(&xs));
            let dy = rng.normals(numel(&pool_out(xs, &spec)));
            let fd = central_diff(&x, 1e-7, |xv| dot(&dy, &pool_ref(xv, xs, &spec).0));
            let e = rel_l2(&max_pool_dx_ref(&x, &dy, xs, &spec), &fd);
            assert!(e < 1e-6, "{xs:?} {spec:?}: rel-L2 {e:.3e}");
        }
    }
}
