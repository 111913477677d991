//! The shape group: Reshape, Expand, Transpose, Narrow, Slice, Tile, Pad, Concat, Gather and
//! TransformRegion. Every one is pure data movement, lowered through one generator
//! ([`mover`]): the kernel's `elem(i)` gives the raw bits of output element `i` (a strided
//! read of an input, a fill constant, or an indexed pick), with every size baked into the
//! text. Invocations write whole 32-bit words (one f32/i32 element, both words of an i64,
//! two halves, four bytes), so moves are bit-exact in every dtype and no two invocations
//! share a word. Views (Expand, Transpose, Narrow, Slice, Tile, TransformRegion) are
//! [`View`]s — dims, element strides, offset — composed on the host and coalesced first.
use super::{LowerError, Lowered, NodeCtx};
use crate::device::Caps;
use crate::shader::{grid_1d, Kernel, Shader, WTensor};
use crate::unsupported;
use rlx_ir::ops::shape_ops::{slice_params, slice_range, transform_step_dims};
use rlx_ir::{DType, Dim, TransformStep};
use std::fmt::Write;

/// The i64 and index helpers of this group's kernels.
pub const SHAPE_WGSL: &str = include_str!("../wgsl/shape.wgsl");

/// Dims, element strides (0 or negative allowed) and element offset into an input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    pub dims: Vec<usize>,
    pub strides: Vec<i64>,
    pub offset: i64,
}

impl View {
    pub fn contiguous(dims: &[usize]) -> View {
        View {
            dims: dims.to_vec(),
            strides: rlx_ir::strides(dims).iter().map(|&s| s as i64).collect(),
            offset: 0,
        }
    }

    /// Broadcast (NumPy, right-aligned) to `out`: new and size-1 axes get stride 0.
    pub fn expand(&self, out: &[usize]) -> Result<View, LowerError> {
        let r = self.dims.len();
        if r > out.len() {
            unsupported!("cannot expand {:?} to {out:?}", self.dims);
        }
        let lead = out.len() - r;
        let mut strides = vec![0i64; out.len()];
        for k in 0..r {
            let (i, o) = (self.dims[k], out[lead + k]);
            if i == o && i != 1 {
                strides[lead + k] = self.strides[k];
            } else if i != 1 {
                unsupported!("cannot expand {:?} to {out:?}", self.dims);
            }
        }
        Ok(View {
            dims: out.to_vec(),
            strides,
            offset: self.offset,
        })
    }

    pub fn permute(&self, perm: &[usize]) -> Result<View, LowerError> {
        let r = self.dims.len();
        let mut seen = vec![false; r];
        let ok = perm.len() == r
            && (perm.iter()).all(|&p| p < r && !std::mem::replace(&mut seen[p], true));
        if !ok {
            unsupported!("perm {perm:?} is not a permutation of rank {r}");
        }
        Ok(View {
            dims: perm.iter().map(|&p| self.dims[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        })
    }

    pub fn narrow(mut self, axis: usize, start: usize, len: usize) -> Result<View, LowerError> {
        if axis >= self.dims.len() || start + len > self.dims[axis] {
            unsupported!("narrow [{start}, +{len}) on axis {axis} of {:?}", self.dims);
        }
        self.offset += start as i64 * self.strides[axis];
        self.dims[axis] = len;
        Ok(self)
    }

    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// Size-1 axes dropped, neighbours that step as one axis merged.
    fn coalesced(&self) -> View {
        let (mut dims, mut strides) = (Vec::<usize>::new(), Vec::<i64>::new());
        for (&d, &s) in self.dims.iter().zip(&self.strides) {
            if d == 1 {
                continue;
            }
            if let (Some(ld), Some(ls)) = (dims.last_mut(), strides.last_mut()) {
                if *ls == s * d as i64 {
                    *ld *= d;
                    *ls = s;
                    continue;
                }
            }
            dims.push(d);
            strides.push(s);
        }
        View {
            dims,
            strides,
            offset: self.offset,
        }
    }
}

/// Whether an offset range fits the shaders' i32 index arithmetic.
fn fits(v: i64) -> bool {
    v.unsigned_abs() < (1u64 << 31)
}

/// `let c<k> = …;` lines decomposing the u32 `i` row-major over `dims` (names `p{k}`).
pub fn coords(dims: &[usize], var: &str, prefix: &str) -> String {
    let mut s = String::new();
    let mut below = 1usize;
    let total: usize = dims.iter().product();
    for k in (0..dims.len()).rev() {
        let d = dims[k];
        let q = if below == 1 {
            var.to_string()
        } else {
            format!("({var} / {below}u)")
        };
        let e = if below * d == total {
            q
        } else {
            format!("{q} % {d}u")
        };
        let _ = writeln!(s, "    let {prefix}{k} = {e};");
        below *= d;
    }
    s
}

/// The WGSL expression of `view`'s element offset at output element `i` (an i32).
fn view_offset(view: &View) -> Result<String, LowerError> {
    let v = view.coalesced();
    let mut span = v.offset;
    let mut terms = vec![format!("{}", v.offset)];
    let mut below = 1usize;
    let n = v.numel();
    for k in (0..v.dims.len()).rev() {
        let (d, s) = (v.dims[k], v.strides[k]);
        span += s.abs() * d as i64;
        if s != 0 {
            let q = if below == 1 {
                "i".to_string()
            } else {
                format!("(i / {below}u)")
            };
            let c = if below * d == n {
                q
            } else {
                format!("({q} % {d}u)")
            };
            terms.push(format!("i32({c}) * {s}"));
        }
        below *= d;
    }
    if !fits(span) {
        unsupported!("a view spanning {span} elements exceeds 32-bit indexing");
    }
    Ok(terms.join(" + "))
}

/// Raw element access to `t`: `fn rx_<name>(e: u32) -> vec2<u32>`, the bits of element
/// `e` right-aligned in `.x` (an i64's high word in `.y`). `t` may start anywhere in a word
/// (a view of a byte tensor): the word access is rebased and the element shift baked.
pub fn reader(sh: &mut Shader, name: &str, t: &WTensor) -> Result<(), LowerError> {
    let es = t.dtype.size_bytes() as u64;
    let shift = (t.off % 4) / es;
    let aligned = WTensor {
        off: t.off - t.off % 4,
        ..t.clone()
    };
    sh.words(&format!("w{name}"), &aligned)?;
    let body = match es {
        8 => format!("let w = 2u * e;\n    return vec2<u32>(rd_w{name}(w), rd_w{name}(w + 1u));"),
        4 => format!("return vec2<u32>(rd_w{name}(e), 0u);"),
        2 => format!(
            "let q = e + {shift}u;\n    return vec2<u32>((rd_w{name}(q >> 1u) >> ((q & 1u) * 16u)) & 0xffffu, 0u);"
        ),
        1 => format!(
            "let q = e + {shift}u;\n    return vec2<u32>((rd_w{name}(q >> 2u) >> ((q & 3u) * 8u)) & 0xffu, 0u);"
        ),
        _ => unsupported!("no raw access to {}", t.dtype),
    };
    sh.text(&format!(
        "fn rx_{name}(e: u32) -> vec2<u32> {{\n    {body}\n}}"
    ));
    Ok(())
}

/// `fn ix_<name>(j: u32) -> i32`: index `j` of an index tensor (any dtype), or i32's
/// minimum where the value has no i32 (so it is out of range on every axis).
pub fn index_reader(sh: &mut Shader, name: &str, t: &WTensor) -> Result<(), LowerError> {
    let body = match t.dtype {
        DType::I64 => {
            reader(sh, name, t)?;
            format!("return idx_of_i64(rx_{name}(j));")
        }
        DType::F32 | DType::F16 | DType::BF16 => {
            sh.input(&format!("v{name}"), t)?;
            format!("return idx_of_f32(ld_v{name}(j));")
        }
        DType::I32 | DType::U8 | DType::Bool => {
            sh.input(&format!("v{name}"), t)?;
            format!("return ld_v{name}(j);")
        }
        d => unsupported!("indices of dtype {d}"),
    };
    sh.text(&format!("fn ix_{name}(j: u32) -> i32 {{\n    {body}\n}}"));
    Ok(())
}

/// The bits of a fill `value` in `dtype` (converted as the CPU converts it: integers
/// truncate and saturate as `Cast` does).
pub fn fill_bits(value: f64, dtype: DType) -> Result<(u32, u32), LowerError> {
    let int = rlx_cpu::ops::scalar::float_to_int(value, dtype);
    Ok(match dtype {
        DType::F32 => ((value as f32).to_bits(), 0),
        DType::F16 => (half::f16::from_f64(value).to_bits() as u32, 0),
        DType::BF16 => (half::bf16::from_f64(value).to_bits() as u32, 0),
        DType::I64 => (int as u64 as u32, ((int as u64) >> 32) as u32),
        DType::I32 => (int as i32 as u32, 0),
        DType::U8 | DType::Bool => (int as u8 as u32, 0),
        DType::F64 => unsupported!("f64 has no portable WGSL type"),
    })
}

/// The kernel writing `out` from `fn elem(i: u32) -> vec2<u32>` (already in `sh`'s text,
/// with the readers it uses): one word per invocation. The last word of a sub-word output
/// keeps the bytes past its end (they may be another tensor's).
pub fn mover(mut sh: Shader, out: &WTensor, caps: &Caps) -> Result<Kernel, LowerError> {
    let es = out.dtype.size_bytes();
    if !out.off.is_multiple_of(4) {
        unsupported!(
            "a {} output at byte {} is not word-aligned",
            out.dtype,
            out.off
        );
    }
    sh.words("y", out)?;
    let n = out.numel() as u64;
    let k = (4 / es.min(4)) as u64;
    let words = n.div_ceil(k);
    let (groups, head) = grid_1d(words, caps.max_groups_per_dim);
    let body = match es {
        8 => "    let v = elem(gi);\n    wr_y(2u * gi, v.x);\n    wr_y(2u * gi + 1u, v.y);\n"
            .to_string(),
        4 => "    wr_y(gi, elem(gi).x);\n".to_string(),
        _ => {
            let bits = 8 * es as u64;
            let mask = (1u64 << bits) - 1;
            let mut b = String::from("    var w = 0u;\n");
            for j in 0..k {
                let sh = j * bits;
                let _ = writeln!(
                    b,
                    "    if (gi * {k}u + {j}u < {n}u) {{ w |= (elem(gi * {k}u + {j}u).x & {mask}u) << {sh}u; }} else {{ w |= rd_y(gi) & ({mask}u << {sh}u); }}"
                );
            }
            b.push_str("    wr_y(gi, w);\n");
            b
        }
    };
    Ok(sh.finish(&format!("{head}{body}}}\n"), groups))
}

/// A shader builder with this group's helpers.
pub fn shader(label: impl Into<String>) -> Shader {
    let mut sh = Shader::new(label);
    sh.text(SHAPE_WGSL);
    sh
}

/// Materialise `view` of `x` into `dst` (contiguous, dims = the view's).
pub fn copy_view(ctx: &mut NodeCtx, x: &WTensor, view: &View, dst: &WTensor) -> Lowered {
    if view.numel() != dst.numel() {
        unsupported!("view {:?} does not fill {:?}", view.dims, dst.dims);
    }
    if dst.numel() == 0 {
        return Ok(());
    }
    let v = view.coalesced();
    // A contiguous view is a buffer copy where the bytes allow.
    if v.dims.len() <= 1 && v.strides.first().is_none_or(|&s| s == 1) {
        let es = x.dtype.size_bytes() as u64;
        let src = WTensor {
            off: x.off + v.offset as u64 * es,
            dims: dst.dims.clone(),
            ..x.clone()
        };
        if src.slab != dst.slab
            && src.off.is_multiple_of(4)
            && dst.off.is_multiple_of(4)
            && src.bytes().is_multiple_of(4)
        {
            return ctx.copy(&src, dst);
        }
    }
    let mut sh = shader(format!("view {:?} {:?} {}", v.dims, v.strides, x.dtype));
    reader(&mut sh, "x", x)?;
    let off = view_offset(view)?;
    sh.text(&format!(
        "fn elem(i: u32) -> vec2<u32> {{\n    return rx_x(u32({off}));\n}}"
    ));
    let k = mover(sh, dst, ctx.caps)?;
    ctx.push(k);
    Ok(())
}

/// Data movement keeps the element width.
fn same_width(ctx: &NodeCtx) -> Result<WTensor, LowerError> {
    let x = ctx.ins[0].clone();
    if x.dtype.size_bytes() != ctx.out.dtype.size_bytes() {
        unsupported!(
            "output {} differs from input {} in width",
            ctx.out.dtype,
            x.dtype
        );
    }
    Ok(x)
}

/// Materialise a view of input 0 into the output.
fn view_out(ctx: &mut NodeCtx, view: View) -> Lowered {
    let x = same_width(ctx)?;
    let out = ctx.out.clone();
    if view.dims != out.dims {
        unsupported!(
            "view {:?} does not give the output {:?}",
            view.dims,
            out.dims
        );
    }
    copy_view(ctx, &x, &view, &out)
}

/// A copy, or a broadcast of a 1-element tensor.
pub fn reshape(ctx: &mut NodeCtx) -> Lowered {
    let x = same_width(ctx)?;
    let out = ctx.out.clone();
    if x.numel() == out.numel() {
        if x.slab == out.slab && x.off == out.off {
            return Ok(());
        }
        return copy_view(ctx, &x, &View::contiguous(&out.dims), &out);
    }
    if x.numel() != 1 {
        unsupported!("cannot reshape {:?} into {:?}", x.dims, out.dims);
    }
    let v = View {
        strides: vec![0; out.dims.len()],
        dims: out.dims.clone(),
        offset: 0,
    };
    copy_view(ctx, &x, &v, &out)
}

pub fn expand(ctx: &mut NodeCtx) -> Lowered {
    let v = View::contiguous(&ctx.ins[0].dims).expand(&ctx.out.dims)?;
    view_out(ctx, v)
}

pub fn transpose(ctx: &mut NodeCtx, perm: &[usize]) -> Lowered {
    let v = View::contiguous(&ctx.ins[0].dims).permute(perm)?;
    view_out(ctx, v)
}

fn axis(axis: i64, rank: usize) -> Result<usize, LowerError> {
    rlx_ir::normalize_axis(axis, rank).map_err(LowerError::Unsupported)
}

pub fn narrow(ctx: &mut NodeCtx, ax: i64, start: usize, len: usize) -> Lowered {
    let dims = ctx.ins[0].dims.clone();
    let a = axis(ax, dims.len())?;
    let v = View::contiguous(&dims).narrow(a, start, len)?;
    view_out(ctx, v)
}

pub fn slice(
    ctx: &mut NodeCtx,
    axes: &[i64],
    starts: &[i64],
    ends: &[i64],
    steps: &[i64],
) -> Lowered {
    let dims = ctx.ins[0].dims.clone();
    let mut v = View::contiguous(&dims);
    let params =
        slice_params(dims.len(), axes, starts, ends, steps).map_err(LowerError::Unsupported)?;
    for (a, s, e, step) in params {
        let (first, len) = slice_range(dims[a], s, e, step);
        v.offset += first as i64 * v.strides[a];
        // With one element the step is never taken (and a huge step must not overflow).
        v.strides[a] = if len > 1 { v.strides[a] * step } else { 0 };
        v.dims[a] = len;
    }
    view_out(ctx, v)
}

/// The output viewed as `[r0, d0, r1, d1, ..]` reads the input with stride 0 on every
/// repeat axis.
pub fn tile(ctx: &mut NodeCtx, repeats: &[usize]) -> Lowered {
    let x = same_width(ctx)?;
    if repeats.len() != x.dims.len() {
        unsupported!("{} repeats for rank {}", repeats.len(), x.dims.len());
    }
    let c = View::contiguous(&x.dims);
    let (mut dims, mut strides) = (vec![], vec![]);
    for ((&r, &d), &s) in repeats.iter().zip(&x.dims).zip(&c.strides) {
        dims.extend([r, d]);
        strides.extend([0, s]);
    }
    let v = View {
        dims,
        strides,
        offset: 0,
    };
    let out = ctx.out.clone();
    copy_view(ctx, &x, &v, &out)
}

/// Constant padding: outside the input's box an element is the fill's bits.
pub fn pad(ctx: &mut NodeCtx, pads: &[[usize; 2]], value: f64) -> Lowered {
    let x = same_width(ctx)?;
    let out = ctx.out.clone();
    let r = x.dims.len();
    if pads.len() != r {
        unsupported!("pad lists {} pairs for rank {r}", pads.len());
    }
    let want: Vec<usize> = (x.dims.iter().zip(pads))
        .map(|(d, p)| d + p[0] + p[1])
        .collect();
    if want != out.dims {
        unsupported!(
            "pad of {:?} gives {want:?}, the output is {:?}",
            x.dims,
            out.dims
        );
    }
    let (lo, hi) = fill_bits(value, out.dtype)?;
    let mut sh = shader(format!("pad {:?} {pads:?} {}", x.dims, x.dtype));
    reader(&mut sh, "x", &x)?;
    let xs = rlx_ir::strides(&x.dims);
    let mut f = coords(&out.dims, "i", "c");
    let mut off = vec!["0".to_string()];
    for k in 0..r {
        let _ = writeln!(f, "    let q{k} = i32(c{k}) - {};", pads[k][0]);
        let _ = writeln!(
            f,
            "    if (u32(q{k}) >= {}u) {{ return vec2<u32>({lo}u, {hi}u); }}",
            x.dims[k]
        );
        off.push(format!("q{k} * {}", xs[k]));
    }
    let _ = writeln!(f, "    return rx_x(u32({}));", off.join(" + "));
    sh.text(&format!("fn elem(i: u32) -> vec2<u32> {{\n{f}}}"));
    let k = mover(sh, &out, ctx.caps)?;
    ctx.push(k);
    Ok(())
}

/// One kernel over the output: the column along `axis` picks the input it falls in.
pub fn concat(ctx: &mut NodeCtx, ax: i64) -> Lowered {
    let out = ctx.out.clone();
    let a = axis(ax, out.dims.len())?;
    let outer: usize = out.dims[..a].iter().product();
    let inner: usize = out.dims[a + 1..].iter().product();
    let total = out.dims[a];
    let mut slabs: Vec<usize> = vec![out.slab];
    let mut sh = shader(format!("concat {:?} axis {a} {}", out.dims, out.dtype));
    let mut f = format!(
        "    let r = i % {inner}u;\n    let c = (i / {inner}u) % {total}u;\n    let o = i / {};\n",
        inner * total
    );
    let _ = outer;
    let mut start = 0usize;
    for (k, x) in ctx.ins.iter().enumerate() {
        if x.dims.len() != out.dims.len() || x.dtype.size_bytes() != out.dtype.size_bytes() {
            unsupported!(
                "concat input {:?} {} does not match the output {:?}",
                x.dims,
                x.dtype,
                out.dims
            );
        }
        if !slabs.contains(&x.slab) {
            slabs.push(x.slab);
        }
        let w = x.dims[a];
        if w == 0 {
            continue;
        }
        reader(&mut sh, &format!("x{k}"), x)?;
        let _ = writeln!(
            f,
            "    if (c < {}u) {{ return rx_x{k}((o * {w}u + c - {start}u) * {inner}u + r); }}",
            start + w
        );
        start += w;
    }
    if start != total {
        unsupported!("concat inputs fill {start} of {total} columns");
    }
    if slabs.len() as u32 > ctx.caps.max_storage_buffers {
        unsupported!(
            "concat over {} buffers exceeds the adapter's {} storage bindings",
            slabs.len(),
            ctx.caps.max_storage_buffers
        );
    }
    f.push_str("    return vec2<u32>(0u, 0u);\n");
    sh.text(&format!("fn elem(i: u32) -> vec2<u32> {{\n{f}}}"));
    let k = mover(sh, &out, ctx.caps)?;
    ctx.push(k);
    Ok(())
}

/// Output = indices' dims spliced into data's at `axis`: element (o, j, c) copies data
/// (o, idx[j], c). An index out of range (after a negative one counts from the end) gives
/// zeros, as on CUDA (the CPU reports it as an error).
pub fn gather(ctx: &mut NodeCtx, ax: i64) -> Lowered {
    let (data, idx, out) = (ctx.ins[0].clone(), ctx.ins[1].clone(), ctx.out.clone());
    if data.dtype.size_bytes() != out.dtype.size_bytes() {
        unsupported!(
            "output {} differs from data {} in width",
            out.dtype,
            data.dtype
        );
    }
    let a = axis(ax, data.dims.len())?;
    let n = data.dims[a];
    let inner: usize = data.dims[a + 1..].iter().product();
    let k = idx.numel();
    let mut want = data.dims[..a].to_vec();
    want.extend(&idx.dims);
    want.extend(&data.dims[a + 1..]);
    if want != out.dims {
        unsupported!("gather gives {want:?}, the output is {:?}", out.dims);
    }
    let mut sh = shader(format!(
        "gather {:?} axis {a} by {} {}",
        data.dims, idx.dtype, data.dtype
    ));
    reader(&mut sh, "x", &data)?;
    index_reader(&mut sh, "i", &idx)?;
    sh.text(&format!(
        "fn elem(i: u32) -> vec2<u32> {{\n    let c = i % {inner}u;\n    let j = (i / {inner}u) % {k}u;\n    let o = i / {};\n    var p = ix_i(j);\n    if (p < 0) {{ p += {n}; }}\n    if (p < 0 || p >= {n}) {{ return vec2<u32>(0u, 0u); }}\n    return rx_x((o * {n}u + u32(p)) * {inner}u + c);\n}}",
        inner * k
    ));
    let kn = mover(sh, &out, ctx.caps)?;
    ctx.push(kn);
    Ok(())
}

/// The steps composed into one view of the input; a Reshape no view expresses (merging
/// axes that are not contiguous) materialises the view so far into scratch first.
pub fn transform_region(ctx: &mut NodeCtx, steps: &[TransformStep]) -> Lowered {
    let x = same_width(ctx)?;
    let out = ctx.out.clone();
    let mut base = x.clone();
    let mut v = View::contiguous(&x.dims);
    for (i, step) in steps.iter().enumerate() {
        let cur: Vec<Dim> = v.dims.iter().map(|&d| Dim::Static(d)).collect();
        let next = transform_step_dims(&cur, step)
            .map_err(|e| LowerError::Unsupported(format!("step {i}: {e}")))?;
        let next: Vec<usize> = match next.iter().map(Dim::as_static).collect::<Option<_>>() {
            Some(d) => d,
            // A symbolic Expand target: only the last step's is known (the output dims).
            None if i + 1 == steps.len() && next.len() == out.dims.len() => out.dims.clone(),
            None => unsupported!("step {i} ({step:?}) has a symbolic size"),
        };
        v = match step {
            TransformStep::Transpose(p) => v.permute(p)?,
            TransformStep::Narrow {
                axis: ax, start, ..
            } => {
                let a = axis(*ax, v.dims.len())?;
                v.narrow(a, *start, next[a])?
            }
            TransformStep::Expand(_) => v.expand(&next)?,
            TransformStep::Reshape(_) => {
                let n: usize = next.iter().product();
                if v.numel() == 1 && n != 1 {
                    View {
                        strides: vec![0; next.len()],
                        dims: next,
                        offset: v.offset,
                    }
                } else if v.numel() != n {
                    unsupported!("step {i}: cannot reshape {:?} into {next:?}", v.dims);
                } else if let Some(strides) = reshape_strides(&v.dims, &v.strides, &next) {
                    View {
                        dims: next,
                        strides,
                        offset: v.offset,
                    }
                } else {
                    let tmp = ctx.scratch(&v.dims, x.dtype);
                    copy_view(ctx, &base, &v, &tmp)?;
                    base = WTensor {
                        dims: next.clone(),
                        ..tmp
                    };
                    View::contiguous(&next)
                }
            }
        };
    }
    if v.dims != out.dims {
        unsupported!("steps give {:?}, the output is {:?}", v.dims, out.dims);
    }
    copy_view(ctx, &base, &v, &out)
}

/// Strides that read `old` (dims, strides) reshaped row-major to `new` without a copy, or
/// None when the reshape merges axes that are not contiguous (PyTorch's `computeStride`).
pub fn reshape_strides(old_d: &[usize], old_s: &[i64], new_d: &[usize]) -> Option<Vec<i64>> {
    let numel: usize = old_d.iter().product();
    if numel == 0 || old_d.is_empty() {
        return Some(vec![0; new_d.len()]);
    }
    let mut new_s = vec![0i64; new_d.len()];
    let mut view_d = new_d.len() as isize - 1;
    let mut chunk = old_s[old_d.len() - 1];
    let (mut tensor_n, mut view_n) = (1usize, 1usize);
    for td in (0..old_d.len()).rev() {
        tensor_n *= old_d[td];
        let breaks = td == 0 || (old_d[td - 1] != 1 && old_s[td - 1] != tensor_n as i64 * chunk);
        if breaks {
            while view_d >= 0 && (view_n < tensor_n || new_d[view_d as usize] == 1) {
                new_s[view_d as usize] = view_n as i64 * chunk;
                view_n *= new_d[view_d as usize];
                view_d -= 1;
            }
            if view_n != tensor_n {
                return None;
            }
            if td > 0 {
                chunk = old_s[td - 1];
                tensor_n = 1;
                view_n = 1;
            }
        }
    }
    (view_d == -1).then_some(new_s)
}
