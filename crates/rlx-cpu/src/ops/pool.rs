//! Max / average pooling, its max gradient, and nearest 2× upsampling (NCHW).
use crate::error::op_err;
use crate::{CpuError, Elem, Float};
use rayon::prelude::*;
use rlx_ir::{PoolKind, PoolSpec};

/// Concrete pooling geometry over `planes` = N·C independent H×W planes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolGeom {
    planes: usize,
    h: usize,
    w: usize,
    ho: usize,
    wo: usize,
    spec: PoolSpec,
}

impl PoolGeom {
    pub(crate) fn new(spec: &PoolSpec, x: &[usize]) -> Result<PoolGeom, CpuError> {
        if x.len() != 4 {
            return Err(op_err(format!("pool input must be rank 4, got {x:?}")));
        }
        let len = |i: usize| {
            let (k, p) = (spec.kernel_size[i], spec.padding[i]);
            if p > k / 2 {
                return Err(op_err("pool padding exceeds half the kernel"));
            }
            rlx_ir::ops::vision::conv_out_len(x[2 + i], k, spec.stride[i], p, 1)
                .ok_or_else(|| op_err("pool kernel is larger than the padded input"))
        };
        Ok(PoolGeom {
            planes: x[0] * x[1],
            h: x[2],
            w: x[3],
            ho: len(0)?,
            wo: len(1)?,
            spec: *spec,
        })
    }

    /// Input index range (inside the plane) covered by output position `o` along axis `a`.
    #[inline]
    fn window(&self, a: usize, o: usize) -> std::ops::Range<usize> {
        let len = if a == 0 { self.h } else { self.w };
        let start = (o * self.spec.stride[a]) as isize - self.spec.padding[a] as isize;
        let end = start + self.spec.kernel_size[a] as isize;
        (start.max(0) as usize)..(end.max(0) as usize).min(len)
    }

    /// Offset (inside the plane) of the first maximum of window (oy, ox); padded positions
    /// never win. A NaN wins over any number, as in PyTorch.
    fn argmax<T: Float>(&self, plane: &[T], oy: usize, ox: usize) -> Option<usize> {
        let mut best: Option<(usize, T)> = None;
        for iy in self.window(0, oy) {
            for ix in self.window(1, ox) {
                let i = iy * self.w + ix;
                let v = plane[i];
                let better = match best {
                    None => true,
                    Some((_, b)) => !b.is_nan() && (v > b || v.is_nan()),
                };
                if better {
                    best = Some((i, v));
                }
            }
        }
        best.map(|(i, _)| i)
    }

    fn check(&self, x: usize, y: usize) -> Result<(), CpuError> {
        let (xl, yl) = (
            self.planes * self.h * self.w,
            self.planes * self.ho * self.wo,
        );
        if x != xl || y != yl {
            return Err(op_err(format!(
                "pool buffers hold {x} / {y} values, the geometry needs {xl} / {yl}"
            )));
        }
        Ok(())
    }

    pub(crate) fn forward<T: Float>(&self, x: &[T], y: &mut [T]) -> Result<(), CpuError> {
        self.check(x.len(), y.len())?;
        let (hw, po) = (self.h * self.w, self.ho * self.wo);
        if po == 0 {
            return Ok(());
        }
        let area = T::from_f64((self.spec.kernel_size[0] * self.spec.kernel_size[1]) as f64);
        y.par_chunks_mut(po).enumerate().for_each(|(pi, yp)| {
            let plane = &x[pi * hw..(pi + 1) * hw];
            for oy in 0..self.ho {
                for ox in 0..self.wo {
                    yp[oy * self.wo + ox] = match self.spec.kind {
                        // Windows always hold a real element (padding ≤ kernel/2).
                        PoolKind::Max => self
                            .argmax(plane, oy, ox)
                            .map_or(T::neg_infinity(), |i| plane[i]),
                        PoolKind::Avg => {
                            let mut s = T::zero();
                            for iy in self.window(0, oy) {
                                for ix in self.window(1, ox) {
                                    s += plane[iy * self.w + ix];
                                }
                            }
                            s / area
                        }
                    };
                }
            }
        });
        Ok(())
    }

    /// dx: each window's dy added at its first max.
    pub(crate) fn max_backward<T: Float>(
        &self,
        x: &[T],
        dy: &[T],
        dx: &mut [T],
    ) -> Result<(), CpuError> {
        self.check(x.len(), dy.len())?;
        if dx.len() != x.len() {
            return Err(op_err("dx and x differ in size"));
        }
        let (hw, po) = (self.h * self.w, self.ho * self.wo);
        if hw == 0 {
            return Ok(());
        }
        dx.par_chunks_mut(hw).enumerate().for_each(|(pi, dxp)| {
            dxp.fill(T::zero());
            let plane = &x[pi * hw..(pi + 1) * hw];
            let dyp = &dy[pi * po..(pi + 1) * po];
            for oy in 0..self.ho {
                for ox in 0..self.wo {
                    if let Some(i) = self.argmax(plane, oy, ox) {
                        dxp[i] += dyp[oy * self.wo + ox];
                    }
                }
            }
        });
        Ok(())
    }
}

/// `[N, C, H, W]` → `[N, C, 2H, 2W]`, each value copied into a 2×2 block.
pub(crate) fn resize_nearest2x<T: Elem>(
    shape: &[usize],
    x: &[T],
    y: &mut [T],
) -> Result<(), CpuError> {
    if shape.len() != 4 {
        return Err(op_err(format!(
            "ResizeNearest2x input must be rank 4, got {shape:?}"
        )));
    }
    let (h, w) = (shape[2], shape[3]);
    if x.len() * 4 != y.len() {
        return Err(op_err("ResizeNearest2x output is not 4× the input"));
    }
    if h * w == 0 {
        return Ok(());
    }
    y.par_chunks_mut(4 * h * w)
        .zip(x.par_chunks(h * w))
        .for_each(|(yp, xp)| {
            for (oy, row) in yp.chunks_mut(2 * w).enumerate() {
                let src = &xp[(oy / 2) * w..(oy / 2 + 1) * w];
                for (ox, v) in row.iter_mut().enumerate() {
                    *v = src[ox / 2];
                }
            }
        });
    Ok(())
}
