//! Conv forward and both gradients through im2col + GEMM (the `gemm` crate).
//!
//! For batch item n and group g, with K = (C/groups)·kh·kw and P = Ho·Wo:
//!   forward        y_g  [O/g × P] = W_g [O/g × K] · col_g [K × P]
//!   grad input     dcol [K × P]   = W_gᵀ · dy_g, scattered back by col2im
//!   grad weight    dW_g [O/g × K] += dy_g · col_gᵀ   (summed over the batch)
//! The 1-D form is first rewritten to 2-D terms by `rlx_ir::ops::vision::conv_spec_2d`
//! (its weight `[O, C/g, k, 1]` is laid out like `[O, C/g, 1, k]`).
use crate::error::op_err;
use crate::{CpuError, Float};
use rayon::prelude::*;
use rlx_ir::ops::vision::conv_spec_2d;
use rlx_ir::{ConvSpec, Dim};

/// `dst[m×n]` (row stride `dst_rs`) = (`acc` ? dst : 0) + a·b, with a `[m×k]` and b `[k×n]`
/// addressed through (row, column) strides.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_into<T: Float>(
    (m, n, k): (usize, usize, usize),
    dst: &mut [T],
    dst_rs: usize,
    a: &[T],
    (a_rs, a_cs): (usize, usize),
    b: &[T],
    (b_rs, b_cs): (usize, usize),
    acc: bool,
    parallel: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !acc {
            for r in 0..m {
                dst[r * dst_rs..r * dst_rs + n].fill(T::zero());
            }
        }
        return;
    }
    // The raw-pointer call below reads and writes exactly these extents.
    assert!((m - 1) * dst_rs + n <= dst.len(), "gemm dst out of bounds");
    assert!(
        (m - 1) * a_rs + (k - 1) * a_cs < a.len(),
        "gemm lhs out of bounds"
    );
    assert!(
        (k - 1) * b_rs + (n - 1) * b_cs < b.len(),
        "gemm rhs out of bounds"
    );
    let par = if parallel {
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the asserts above bound every index gemm touches; T is f32 or f64.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            dst_rs as isize,
            acc,
            a.as_ptr(),
            a_cs as isize,
            a_rs as isize,
            b.as_ptr(),
            b_cs as isize,
            b_rs as isize,
            T::one(),
            T::one(),
            false,
            false,
            false,
            par,
        );
    }
}

/// Concrete conv geometry in 2-D terms.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geom {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    groups: usize,
    ho: usize,
    wo: usize,
}

impl Geom {
    /// From x `[N,C,H,W]`, the out-channel count and the spec; checks what the shape rule
    /// checked, since the thunk must not index out of bounds whatever it is handed.
    pub(crate) fn new(spec: &ConvSpec, x: &[usize], o: usize) -> Result<Geom, CpuError> {
        if x.len() != 4 {
            return Err(op_err(format!("conv input must be rank 4, got {x:?}")));
        }
        let s2 = conv_spec_2d(spec, &Dim::Static(x[2]));
        let g = s2.groups;
        if g == 0 || !x[1].is_multiple_of(g) || !o.is_multiple_of(g) {
            return Err(op_err(format!(
                "channels {} / {o} are not divisible by groups {g}",
                x[1]
            )));
        }
        let len = |i: usize| {
            rlx_ir::ops::vision::conv_out_len(
                x[2 + i],
                s2.kernel_size[i],
                s2.stride[i],
                s2.padding[i],
                s2.dilation[i],
            )
            .ok_or_else(|| op_err("conv kernel is larger than the padded input"))
        };
        Ok(Geom {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o,
            k: s2.kernel_size,
            s: s2.stride,
            p: s2.padding,
            d: s2.dilation,
            groups: g,
            ho: len(0)?,
            wo: len(1)?,
        })
    }
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn og(&self) -> usize {
        self.o / self.groups
    }
    /// Rows of a group's column matrix.
    fn kk(&self) -> usize {
        self.cg() * self.k[0] * self.k[1]
    }
    fn pp(&self) -> usize {
        self.ho * self.wo
    }
    /// A 1×1, stride-1, unpadded conv: the column matrix is the input itself.
    fn pointwise(&self) -> bool {
        self.k == [1, 1] && self.s == [1, 1] && self.p == [0, 0]
    }
    pub(crate) fn x_len(&self) -> usize {
        self.n * self.c * self.h * self.w
    }
    pub(crate) fn y_len(&self) -> usize {
        self.n * self.o * self.pp()
    }
    pub(crate) fn w_len(&self) -> usize {
        self.o * self.kk()
    }
    pub(crate) fn out_hw(&self) -> [usize; 2] {
        [self.ho, self.wo]
    }

    /// Input coordinate of output position `o` and kernel tap `t` along axis `a`, if inside.
    #[inline]
    fn src(&self, a: usize, o: usize, t: usize, len: usize) -> Option<usize> {
        let i = (o * self.s[a] + t * self.d[a]) as isize - self.p[a] as isize;
        (i >= 0 && (i as usize) < len).then_some(i as usize)
    }

    /// Fill `col [K × P]` from one item's group slice `xg [C/g, H, W]`.
    fn im2col<T: Float>(&self, xg: &[T], col: &mut [T]) {
        let (p, hw) = (self.pp(), self.h * self.w);
        let mut r = 0;
        for ci in 0..self.cg() {
            let plane = &xg[ci * hw..(ci + 1) * hw];
            for ki in 0..self.k[0] {
                for kj in 0..self.k[1] {
                    let row = &mut col[r * p..(r + 1) * p];
                    for oy in 0..self.ho {
                        let dst = &mut row[oy * self.wo..(oy + 1) * self.wo];
                        match self.src(0, oy, ki, self.h) {
                            None => dst.fill(T::zero()),
                            Some(iy) => {
                                let src = &plane[iy * self.w..(iy + 1) * self.w];
                                for (ox, v) in dst.iter_mut().enumerate() {
                                    *v = match self.src(1, ox, kj, self.w) {
                                        Some(ix) => src[ix],
                                        None => T::zero(),
                                    };
                                }
                            }
                        }
                    }
                    r += 1;
                }
            }
        }
    }

    /// Add `col [K × P]` back into one item's group slice `xg [C/g, H, W]`.
    fn col2im<T: Float>(&self, col: &[T], xg: &mut [T]) {
        let (p, hw) = (self.pp(), self.h * self.w);
        let mut r = 0;
        for ci in 0..self.cg() {
            let plane = &mut xg[ci * hw..(ci + 1) * hw];
            for ki in 0..self.k[0] {
                for kj in 0..self.k[1] {
                    let row = &col[r * p..(r + 1) * p];
                    for oy in 0..self.ho {
                        let Some(iy) = self.src(0, oy, ki, self.h) else {
                            continue;
                        };
                        let dst = &mut plane[iy * self.w..(iy + 1) * self.w];
                        for (ox, &v) in row[oy * self.wo..(oy + 1) * self.wo].iter().enumerate() {
                            if let Some(ix) = self.src(1, ox, kj, self.w) {
                                dst[ix] += v;
                            }
                        }
                    }
                    r += 1;
                }
            }
        }
    }
}

/// Parallelise inside GEMM only when the batch alone cannot keep the threads busy.
fn inner_parallel(n: usize) -> bool {
    n < rayon::current_num_threads()
}

/// y `[N, O, Ho, Wo]` = conv(x, w) (+ bias).
pub(crate) fn forward<T: Float>(
    g: &Geom,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
) -> Result<(), CpuError> {
    check_lens(g, x.len(), w.len(), y.len())?;
    if let Some(b) = bias {
        if b.len() != g.o {
            return Err(op_err(format!("bias has {} values, need {}", b.len(), g.o)));
        }
    }
    let (kk, p, og) = (g.kk(), g.pp(), g.og());
    let (x_item, y_item) = (g.c * g.h * g.w, g.o * p);
    if y_item == 0 {
        return Ok(());
    }
    let par = inner_parallel(g.n);
    y.par_chunks_mut(y_item).enumerate().for_each(|(n, yn)| {
        let xn = &x[n * x_item..(n + 1) * x_item];
        let mut col = if g.pointwise() {
            vec![]
        } else {
            vec![T::zero(); kk * p]
        };
        for gi in 0..g.groups {
            let xg = &xn[gi * g.cg() * g.h * g.w..(gi + 1) * g.cg() * g.h * g.w];
            let colm: &[T] = if g.pointwise() {
                xg
            } else {
                g.im2col(xg, &mut col);
                &col
            };
            let wg = &w[gi * og * kk..(gi + 1) * og * kk];
            let yg = &mut yn[gi * og * p..(gi + 1) * og * p];
            gemm_into((og, p, kk), yg, p, wg, (kk, 1), colm, (p, 1), false, par);
        }
        if let Some(b) = bias {
            for (oc, row) in yn.chunks_mut(p).enumerate() {
                row.iter_mut().for_each(|v| *v += b[oc]);
            }
        }
    });
    Ok(())
}

/// dx `[N, C, H, W]` from dy `[N, O, Ho, Wo]` and w.
pub(crate) fn backward_input<T: Float>(
    g: &Geom,
    dy: &[T],
    w: &[T],
    dx: &mut [T],
) -> Result<(), CpuError> {
    check_lens(g, dx.len(), w.len(), dy.len())?;
    let (kk, p, og, cg) = (g.kk(), g.pp(), g.og(), g.cg());
    let (x_item, y_item, xg_len) = (g.c * g.h * g.w, g.o * p, cg * g.h * g.w);
    if x_item == 0 {
        return Ok(());
    }
    let par = inner_parallel(g.n);
    dx.par_chunks_mut(x_item).enumerate().for_each(|(n, dxn)| {
        let dyn_ = &dy[n * y_item..(n + 1) * y_item];
        let mut dcol = if g.pointwise() {
            vec![]
        } else {
            vec![T::zero(); kk * p]
        };
        if !g.pointwise() {
            dxn.fill(T::zero());
        }
        for gi in 0..g.groups {
            let wg = &w[gi * og * kk..(gi + 1) * og * kk];
            let dyg = &dyn_[gi * og * p..(gi + 1) * og * p];
            let dxg = &mut dxn[gi * xg_len..(gi + 1) * xg_len];
            if g.pointwise() {
                // Each input position is hit by exactly one column: write it directly.
                gemm_into((kk, p, og), dxg, p, wg, (1, kk), dyg, (p, 1), false, par);
            } else {
                gemm_into(
                    (kk, p, og),
                    &mut dcol,
                    p,
                    wg,
                    (1, kk),
                    dyg,
                    (p, 1),
                    false,
                    par,
                );
                g.col2im(&dcol, dxg);
            }
        }
    });
    Ok(())
}

/// dw `[O, C/g, kh, kw]` from x and dy, summed over the batch.
pub(crate) fn backward_weight<T: Float>(
    g: &Geom,
    x: &[T],
    dy: &[T],
    dw: &mut [T],
) -> Result<(), CpuError> {
    check_lens(g, x.len(), dw.len(), dy.len())?;
    let (kk, p, og, cg) = (g.kk(), g.pp(), g.og(), g.cg());
    let (x_item, y_item, xg_len) = (g.c * g.h * g.w, g.o * p, cg * g.h * g.w);
    // Each chunk of the batch sums into its own partial dW; the partials are added after.
    let chunks = g.n.clamp(1, rayon::current_num_threads());
    let per = g.n.div_ceil(chunks).max(1);
    let par = inner_parallel(g.n);
    let partials: Vec<Vec<T>> = (0..chunks)
        .into_par_iter()
        .map(|ci| {
            let mut acc = vec![T::zero(); dw.len()];
            let mut col = vec![T::zero(); if g.pointwise() { 0 } else { kk * p }];
            for n in ci * per..((ci + 1) * per).min(g.n) {
                let xn = &x[n * x_item..(n + 1) * x_item];
                let dyn_ = &dy[n * y_item..(n + 1) * y_item];
                for gi in 0..g.groups {
                    let xg = &xn[gi * xg_len..(gi + 1) * xg_len];
                    let colm: &[T] = if g.pointwise() {
                        xg
                    } else {
                        g.im2col(xg, &mut col);
                        &col
                    };
                    let dyg = &dyn_[gi * og * p..(gi + 1) * og * p];
                    let dwg = &mut acc[gi * og * kk..(gi + 1) * og * kk];
                    gemm_into((og, kk, p), dwg, kk, dyg, (p, 1), colm, (1, p), true, par);
                }
            }
            acc
        })
        .collect();
    dw.fill(T::zero());
    for part in partials {
        dw.iter_mut().zip(part).for_each(|(d, v)| *d += v);
    }
    Ok(())
}

fn check_lens(g: &Geom, x: usize, w: usize, y: usize) -> Result<(), CpuError> {
    if x != g.x_len() || w != g.w_len() || y != g.y_len() {
        return Err(op_err(format!(
            "conv buffers hold {x} / {w} / {y} values, the geometry needs {} / {} / {}",
            g.x_len(),
            g.w_len(),
            g.y_len()
        )));
    }
    Ok(())
}
