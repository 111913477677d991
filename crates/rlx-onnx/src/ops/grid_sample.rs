//! AffineGrid, and GridSample (opset 16's 2-D and opset 20's N-D) composed from elementwise ops and one
//! GatherND per interpolation tap: each output position's coordinates are denormalised,
//! adjusted by the padding mode, split into taps (1 nearest, 2 linear, 4 cubic per spatial
//! dim) with weights, and the taps' pixels (channels last, batch shared) are summed.
use super::rounding::{floor, round};
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{BinaryOp as B, CompareOp as C, DType, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("GridSample", grid_sample);
    r.insert("AffineGrid", affine_grid);
}

/// AffineGrid: the normalised pixel-centre coordinates `(x, y[, z], 1)` of the output size
/// (a host table), times θᵀ per batch item: `[N, H·W, k+1] @ [N, k+1, k] → [N, H, W, k]`.
fn affine_grid(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let theta = c.input(n, 0)?;
    let size = c
        .const_ints(n, 1)?
        .ok_or_else(|| c.err("needs input 1 (size)"))?;
    let align = Attrs(n).i_or("align_corners", 0) != 0;
    let k = size.len().saturating_sub(2);
    let td = c.static_dims(theta)?;
    if !(k == 2 || k == 3) || td != [size[0] as usize, k, k + 1] || size.iter().any(|&v| v < 1) {
        return Err(c.err(format!("theta {td:?} and size {size:?} (2-D or 3-D)")));
    }
    let batch = size[0] as usize;
    let spatial: Vec<usize> = size[2..].iter().map(|&v| v as usize).collect();
    let cells: usize = spatial.iter().product();
    c.limit("an AffineGrid base", batch * cells * (k + 1))?;
    let coord = |i: usize, len: usize| -> f64 {
        if align {
            if len == 1 {
                0.0
            } else {
                -1.0 + 2.0 * i as f64 / (len - 1) as f64
            }
        } else {
            (2.0 * i as f64 + 1.0) / len as f64 - 1.0
        }
    };
    // Row-major over the spatial dims (D, H, W); each row is (x, y[, z], 1), x from W.
    let mut base = Vec::with_capacity(cells * (k + 1));
    for cell in 0..cells {
        let (mut rest, mut pos) = (cell, vec![0usize; k]);
        for s in (0..k).rev() {
            pos[s] = rest % spatial[s];
            rest /= spatial[s];
        }
        for s in (0..k).rev() {
            base.push(coord(pos[s], spatial[s]));
        }
        base.push(1.0);
    }
    let dt = c.dtype(theta)?;
    let mut all = Vec::with_capacity(batch * base.len());
    for _ in 0..batch {
        all.extend_from_slice(&base);
    }
    let b = c.constant(rlx_ir::HostTensor::from_f64_as(
        &[batch, cells, k + 1],
        &all,
        dt,
    ))?;
    let tt = c.add(
        Op::Transpose {
            perm: vec![0, 2, 1],
        },
        &[theta],
    )?;
    let g = c.add(Op::MatMul, &[b, tt])?;
    let mut shape = vec![batch as i64];
    shape.extend(spatial.iter().map(|&v| v as i64));
    shape.push(k as i64);
    one(c.add(Op::Reshape { shape }, &[g])?)
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// The cubic convolution constant ONNX uses (as PyTorch).
const CUBIC_A: f64 = -0.75;

struct Gs<'a> {
    c: &'a mut ImportCtx,
    dt: DType,
}

impl Gs<'_> {
    fn k(&mut self, v: f64) -> Result<NodeId, OnnxError> {
        self.c.scalar(v, self.dt)
    }
    fn b(&mut self, op: B, a: NodeId, b: NodeId) -> Result<NodeId, OnnxError> {
        self.c.add(Op::Binary(op), &[a, b])
    }
    fn bk(&mut self, op: B, a: NodeId, v: f64) -> Result<NodeId, OnnxError> {
        let k = self.k(v)?;
        self.b(op, a, k)
    }
    fn clamp(&mut self, x: NodeId, lo: f64, hi: f64) -> Result<NodeId, OnnxError> {
        let x = self.bk(B::Max, x, lo)?;
        self.bk(B::Min, x, hi)
    }
    /// Mirror x into [lo, hi] (repeatedly): `lo + y` or `lo + 2r − y` for
    /// `y = (x − lo) mod 2r`, r = hi − lo.
    fn reflect(&mut self, x: NodeId, lo: f64, hi: f64) -> Result<NodeId, OnnxError> {
        let r = hi - lo;
        if r <= 0.0 {
            let z = self.bk(B::Mul, x, 0.0)?;
            return self.bk(B::Add, z, lo);
        }
        let d = self.bk(B::Sub, x, lo)?;
        let q = self.bk(B::Mul, d, 1.0 / (2.0 * r))?;
        let q = floor(self.c, q)?;
        let q = self.bk(B::Mul, q, 2.0 * r)?;
        let y = self.b(B::Sub, d, q)?;
        let rk = self.k(r)?;
        let low = self.c.add(Op::Compare(C::Le), &[y, rk])?;
        let two = self.k(2.0 * r)?;
        let flip = self.b(B::Sub, two, y)?;
        let y = self.c.add(Op::Where, &[low, y, flip])?;
        self.bk(B::Add, y, lo)
    }
    /// The cubic weights of taps at offsets −1, 0, 1, 2 from floor, for fraction t.
    fn cubic(&mut self, t: NodeId) -> Result<[NodeId; 4], OnnxError> {
        let a = CUBIC_A;
        // w(d) = ((a+2)d − (a+3))d² + 1 for |d| ≤ 1; ((a d − 5a) d + 8a) d − 4a for 1 < |d| < 2.
        let near = |g: &mut Self, d: NodeId| -> Result<NodeId, OnnxError> {
            let p = g.bk(B::Mul, d, a + 2.0)?;
            let p = g.bk(B::Sub, p, a + 3.0)?;
            let d2 = g.b(B::Mul, d, d)?;
            let p = g.b(B::Mul, p, d2)?;
            g.bk(B::Add, p, 1.0)
        };
        let far = |g: &mut Self, d: NodeId| -> Result<NodeId, OnnxError> {
            let p = g.bk(B::Mul, d, a)?;
            let p = g.bk(B::Sub, p, 5.0 * a)?;
            let p = g.b(B::Mul, p, d)?;
            let p = g.bk(B::Add, p, 8.0 * a)?;
            let p = g.b(B::Mul, p, d)?;
            g.bk(B::Sub, p, 4.0 * a)
        };
        let t1 = self.bk(B::Add, t, 1.0)?;
        let one_ = self.k(1.0)?;
        let u = self.b(B::Sub, one_, t)?;
        let u1 = self.bk(B::Add, u, 1.0)?;
        Ok([
            far(self, t1)?,
            near(self, t)?,
            near(self, u)?,
            far(self, u1)?,
        ])
    }
}

fn grid_sample(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, grid) = (c.input(n, 0)?, c.input(n, 1)?);
    let a = Attrs(n);
    let mode = match a.s("mode").as_deref() {
        None => Mode::Linear,
        Some("bilinear" | "linear") => Mode::Linear,
        Some("nearest") => Mode::Nearest,
        Some("bicubic" | "cubic") => Mode::Cubic,
        Some(o) => return Err(c.unsupported(format!("mode \"{o}\""))),
    };
    let padding = match a.s("padding_mode").as_deref() {
        None | Some("zeros") => Padding::Zeros,
        Some("border") => Padding::Border,
        Some("reflection") => Padding::Reflection,
        Some(o) => return Err(c.unsupported(format!("padding_mode \"{o}\""))),
    };
    let align = a.i_or("align_corners", 0) != 0;
    let xd = c.static_dims(x)?;
    let gd = c.static_dims(grid)?;
    let k = xd.len().saturating_sub(2);
    if k == 0 || gd.len() != k + 2 || gd[k + 1] != k || gd[0] != xd[0] {
        return Err(c.err(format!(
            "needs X [N, C, D..] and grid [N, out.., {k}], got {xd:?} and {gd:?}"
        )));
    }
    let (dt, xdt) = (c.dtype(grid)?, c.dtype(x)?);
    if !dt.is_float() || !xdt.is_float() {
        return Err(c.err("needs float X and grid"));
    }
    let out: Vec<usize> = gd[1..=k].to_vec();
    let numel = xd[0] * xd[1] * out.iter().product::<usize>();
    c.limit("a GridSample tap", numel)?;
    let mut g = Gs { c, dt };
    // Per spatial dim s: a list of (index as float, weight, valid) taps.
    let mut taps: Vec<Vec<(NodeId, NodeId, Option<NodeId>)>> = vec![];
    let mut co_dims: Vec<i64> = vec![xd[0] as i64];
    co_dims.extend(out.iter().map(|&d| d as i64));
    for s in 0..k {
        let size = xd[2 + s] as f64;
        // Grid component 0 is the last spatial dim (x ↔ width).
        let comp = k - 1 - s;
        let op = Op::Narrow {
            axis: -1,
            start: comp,
            len: 1,
        };
        let gs = g.c.add(op, &[grid])?;
        let gs = g.c.add(
            Op::Reshape {
                shape: co_dims.clone(),
            },
            &[gs],
        )?;
        // Denormalise: corners at pixel centres (align) or at the image's edges.
        let p1 = g.bk(B::Add, gs, 1.0)?;
        let mut p = if align {
            g.bk(B::Mul, p1, (size - 1.0) / 2.0)?
        } else {
            let t = g.bk(B::Mul, p1, size)?;
            let t = g.bk(B::Sub, t, 1.0)?;
            g.bk(B::Mul, t, 0.5)?
        };
        let (lo, hi) = if align {
            (0.0, size - 1.0)
        } else {
            (-0.5, size - 0.5)
        };
        if mode == Mode::Nearest {
            p = round(g.c, p)?;
        }
        match padding {
            Padding::Zeros => {}
            Padding::Border => {
                let below = g.k(lo)?;
                let above = g.k(hi)?;
                let l = g.c.add(Op::Compare(C::Lt), &[p, below])?;
                let h = g.c.add(Op::Compare(C::Gt), &[p, above])?;
                let out_ = g.b(B::BitOr, l, h)?;
                let cl = g.clamp(p, 0.0, size - 1.0)?;
                p = g.c.add(Op::Where, &[out_, cl, p])?;
            }
            Padding::Reflection => p = g.reflect(p, lo, hi)?,
        }
        let raw: Vec<(NodeId, NodeId)> = match mode {
            Mode::Nearest => vec![(p, g.k(1.0)?)],
            Mode::Linear | Mode::Cubic => {
                let f = floor(g.c, p)?;
                let t = g.b(B::Sub, p, f)?;
                if mode == Mode::Linear {
                    let one_ = g.k(1.0)?;
                    let w0 = g.b(B::Sub, one_, t)?;
                    let f1 = g.bk(B::Add, f, 1.0)?;
                    vec![(f, w0), (f1, t)]
                } else {
                    let w = g.cubic(t)?;
                    let mut v = vec![];
                    for (j, wj) in w.into_iter().enumerate() {
                        v.push((g.bk(B::Add, f, j as f64 - 1.0)?, wj));
                    }
                    v
                }
            }
        };
        // Fetch: zeros reads 0 outside (a validity weight), border clamps the index,
        // reflection mirrors it back inside.
        let mut dim_taps = vec![];
        for (i, w) in raw {
            let (idx, valid) = match padding {
                Padding::Zeros => {
                    let lo0 = g.k(0.0)?;
                    let hi0 = g.k(size - 1.0)?;
                    let ge = g.c.add(Op::Compare(C::Ge), &[i, lo0])?;
                    let le = g.c.add(Op::Compare(C::Le), &[i, hi0])?;
                    let v = g.b(B::BitAnd, ge, le)?;
                    (g.clamp(i, 0.0, size - 1.0)?, Some(v))
                }
                Padding::Border => (g.clamp(i, 0.0, size - 1.0)?, None),
                Padding::Reflection => {
                    let r = g.reflect(i, lo, hi)?;
                    (g.clamp(r, 0.0, size - 1.0)?, None)
                }
            };
            dim_taps.push((idx, w, valid));
        }
        taps.push(dim_taps);
    }
    // Channels last so one GatherND (batch shared) reads a [C] vector per position.
    let mut perm = vec![0];
    perm.extend(2..k + 2);
    perm.push(1);
    let xt = g.c.add(Op::Transpose { perm }, &[x])?;
    let mut idx_dims = co_dims.clone();
    idx_dims.push(1);
    let combos: usize = taps.iter().map(Vec::len).product();
    let mut acc: Option<NodeId> = None;
    for combo in 0..combos {
        let (mut rest, mut cols, mut w, mut valid) = (combo, vec![], None, None);
        for dim in &taps {
            let (i, wi, vi) = dim[rest % dim.len()];
            rest /= dim.len();
            let ii = g.c.add(Op::Cast { to: DType::I64 }, &[i])?;
            let shape = idx_dims.clone();
            cols.push(g.c.add(Op::Reshape { shape }, &[ii])?);
            w = Some(match w {
                None => wi,
                Some(w) => g.b(B::Mul, w, wi)?,
            });
            if let Some(vi) = vi {
                valid = Some(match valid {
                    None => vi,
                    Some(v) => g.b(B::BitAnd, v, vi)?,
                });
            }
        }
        let idx = g.c.add(Op::Concat { axis: -1 }, &cols)?;
        let px = g.c.add(Op::GatherND { batch_dims: 1 }, &[xt, idx])?;
        let mut w = w.ok_or_else(|| g.c.err("no spatial dims"))?;
        if let Some(v) = valid {
            let z = g.k(0.0)?;
            w = g.c.add(Op::Where, &[v, w, z])?;
        }
        if xdt != dt {
            w = g.c.add(Op::Cast { to: xdt }, &[w])?;
        }
        let shape = idx_dims.clone();
        let w = g.c.add(Op::Reshape { shape }, &[w])?;
        let term = g.b(B::Mul, px, w)?;
        acc = Some(match acc {
            None => term,
            Some(a) => g.b(B::Add, a, term)?,
        });
    }
    let y = acc.ok_or_else(|| g.c.err("no taps"))?;
    // [N, out.., C] → [N, C, out..]
    let mut perm = vec![0, k + 1];
    perm.extend(1..=k);
    one(g.c.add(Op::Transpose { perm }, &[y])?)
}
