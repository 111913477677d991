//! Convolutions: forward, input gradient and weight gradient (NCHW / OIHW; the 1-D form is
//! first rewritten to 2-D terms by `conv_spec_2d`, as on the CPU).
//!
//! Short reductions (few input channels × taps, depthwise-like groups) run as direct kernels:
//! one launch, no column buffer. The rest go through a column buffer and cuBLASLt, per group
//! g, over chunks of nb images (K = C/groups·kh·kw, P = Ho·Wo):
//!   forward      y_g[n] [O/g × P] = W_g [O/g × K(+1)] · col_g[n] [K(+1) × P]
//!                (the bias rides in the GEMM as an extra ones row of col and column of W)
//!   grad input   dcol_g[n] [K × P] = W_gᵀ · dy_g[n], gathered back into dx by col2im
//!   grad weight  dW_g [O/g × K] (+)= dyT_g [O/g × nb·P] · col_gᵀ, one GEMM per chunk
//!                (dyT is dy with its first two axes swapped)
//! cuBLASLt picks its algorithm assuming 256-byte aligned operands, so the GEMM route is
//! taken only when every operand pointer is; otherwise the direct kernels run (correct for
//! any geometry, just slower on large reductions).
use super::{check_sizes, MAX_ELEMS};
use crate::gemm::GemmDesc;
use crate::kernels::vision::{self as k, ColChunk, ConvG, WeightPack};
use crate::kernels::{Kernel, Sfx};
use crate::lower::{LowerError, Lowered, NodeCtx};
use crate::unsupported;
use rlx_ir::ops::vision::{conv_out_len, conv_spec_2d};
use rlx_ir::{ConvSpec, DType, Dim};

/// Elements of one column-buffer chunk; larger convs run in chunks of images.
const COL_BUDGET: usize = 64 << 20;
/// The operand alignment cuBLASLt's heuristics assume by default.
const GEMM_ALIGN: usize = 256;
/// Group blocks of a column buffer start at multiples of this many elements (>= 256 bytes).
const GROUP_PAD: usize = 128;
/// Leading dimensions of the buffers we lay out are multiples of this many elements, so rows
/// stay 16-byte aligned for cuBLASLt's vectorised (tensor-core) kernels.
const LD_PAD: usize = 8;
/// Blocks the direct weight gradient aims for (about 8 per SM on an H100/H200).
const WGRAD_BLOCKS: usize = 1024;

/// Concrete conv geometry in 2-D terms.
#[derive(Clone, Copy, Debug)]
struct Geo {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    ho: usize,
    wo: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    groups: usize,
}

impl Geo {
    /// From x's dims `[N, C, H, W]` and the out-channel count, as the CPU's `Geom::new`.
    fn new(spec: &ConvSpec, x: &[usize], o: usize) -> Result<Geo, LowerError> {
        if x.len() != 4 {
            unsupported!("conv input must be rank 4, got {x:?}");
        }
        let s2 = conv_spec_2d(spec, &Dim::Static(x[2]));
        let g = s2.groups;
        if g == 0 || !x[1].is_multiple_of(g) || !o.is_multiple_of(g) {
            unsupported!("channels {} / {o} are not divisible by groups {g}", x[1]);
        }
        let mut out = [0usize; 2];
        for i in 0..2 {
            let (k, s, p, d) = (
                s2.kernel_size[i],
                s2.stride[i],
                s2.padding[i],
                s2.dilation[i],
            );
            out[i] = match conv_out_len(x[2 + i], k, s, p, d) {
                Some(v) => v,
                None => unsupported!("conv kernel is larger than the padded input"),
            };
        }
        Ok(Geo {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o,
            ho: out[0],
            wo: out[1],
            k: s2.kernel_size,
            s: s2.stride,
            p: s2.padding,
            d: s2.dilation,
            groups: g,
        })
    }
    fn cg(&self) -> usize {
        self.c / self.groups
    }
    fn og(&self) -> usize {
        self.o / self.groups
    }
    fn taps(&self) -> usize {
        self.k[0] * self.k[1]
    }
    /// Rows of a group's column matrix.
    fn kg(&self) -> usize {
        self.cg() * self.taps()
    }
    fn pp(&self) -> usize {
        self.ho * self.wo
    }
    fn hw(&self) -> usize {
        self.h * self.w
    }
    fn w_len(&self) -> usize {
        self.o * self.kg()
    }
    /// A 1×1, stride-1, unpadded conv: the column matrix is the input itself.
    fn pointwise(&self) -> bool {
        self.k == [1, 1] && self.s == [1, 1] && self.p == [0, 0]
    }
    /// Forward and weight gradient: a short per-output reduction (a first conv on few
    /// channels, depthwise) is cheaper as one direct kernel than a column buffer + GEMM.
    fn direct(&self) -> bool {
        self.kg() <= 16 || (self.groups > 1 && self.og() <= 4)
    }
    /// Input gradient: each dx element sums O/g·kh·kw terms.
    fn direct_input(&self) -> bool {
        self.og() * self.taps() <= 144 || (self.groups > 1 && self.og() <= 4)
    }
    fn args(&self) -> Result<ConvG, LowerError> {
        let v = [
            self.n,
            self.c,
            self.h,
            self.w,
            self.o,
            self.ho,
            self.wo,
            self.k[0],
            self.k[1],
            self.s[0],
            self.s[1],
            self.p[0],
            self.p[1],
            self.d[0],
            self.d[1],
            self.groups,
            self.cg(),
            self.og(),
        ];
        // Kernels form input coordinates like oy·sh + ki·dh − ph in 32 bits.
        if self.h + 2 * self.p[0] >= MAX_ELEMS
            || self.w + 2 * self.p[1] >= MAX_ELEMS
            || v.iter().any(|&e| e >= MAX_ELEMS)
        {
            unsupported!("conv geometry {v:?} is too large for the kernels' 32-bit index math");
        }
        let i = |k: usize| v[k] as i32;
        Ok(ConvG {
            n: i(0),
            c: i(1),
            h: i(2),
            w: i(3),
            o: i(4),
            ho: i(5),
            wo: i(6),
            kh: i(7),
            kw: i(8),
            sh: i(9),
            sw: i(10),
            ph: i(11),
            pw: i(12),
            dh: i(13),
            dw: i(14),
            groups: i(15),
            cg: i(16),
            og: i(17),
        })
    }
    /// Images per chunk: a chunk's column buffer (`col_per_image` elements an image) stays
    /// within the budget, and where the budget allows, chunk offsets into tensors of
    /// `bytes_per_image` bytes an image stay 256-byte aligned.
    fn images_per_chunk(&self, col_per_image: usize, bytes_per_image: usize) -> usize {
        let nb = (COL_BUDGET / col_per_image.max(1)).clamp(1, self.n.max(1));
        if nb >= self.n {
            return nb;
        }
        let q = GEMM_ALIGN / gcd(GEMM_ALIGN, bytes_per_image.max(1));
        if nb >= q {
            nb - nb % q
        } else {
            nb
        }
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// One step of a lowering plan.
enum Act {
    Kernel { k: Kernel, grid: [u32; 3] },
    Gemm(Box<GemmDesc>),
}

fn kernel_1d(k: Kernel, n: usize) -> Act {
    Act::Kernel {
        k,
        grid: [n.div_ceil(256).clamp(1, 65535 * 8) as u32, 1, 1],
    }
}

/// im2col: grid.y walks the `rows` column rows plus one (the weight packing), grid.x the
/// `nq` columns of a row.
fn kernel_im2col(k: Kernel, nq: usize, rows: usize) -> Act {
    Act::Kernel {
        k,
        grid: [
            nq.div_ceil(256).clamp(1, 65535 * 8) as u32,
            (rows + 1).min(65535) as u32,
            1,
        ],
    }
}

fn gemm_aligned(acts: &[Act]) -> bool {
    acts.iter().all(|a| match a {
        Act::Gemm(g) => [g.a, g.b, g.c]
            .iter()
            .all(|&p| p.is_multiple_of(GEMM_ALIGN as u64)),
        Act::Kernel { .. } => true,
    })
}

fn emit(ctx: &mut NodeCtx, acts: Vec<Act>) -> Lowered {
    for a in acts {
        match a {
            Act::Kernel { k, grid } => ctx.run(k, grid, [256, 1, 1], 0)?,
            Act::Gemm(g) => ctx.gemm(*g)?,
        }
    }
    Ok(())
}

/// Pointer arithmetic in elements of one dtype.
#[derive(Clone, Copy)]
struct Elems(usize);

impl Elems {
    fn at(self, base: u64, elems: usize) -> u64 {
        base + (elems * self.0) as u64
    }
}

#[allow(clippy::too_many_arguments)]
fn gemm(
    (m, n, k, batch): (usize, usize, usize, usize),
    (a, lda, stride_a, trans_a): (u64, usize, usize, bool),
    (b, ldb, stride_b, trans_b): (u64, usize, usize, bool),
    (c, ldc, stride_c): (u64, usize, usize),
    dtype: DType,
    accumulate: bool,
    label: &str,
) -> Act {
    Act::Gemm(Box::new(GemmDesc {
        m,
        n,
        k,
        batch,
        a,
        lda,
        stride_a,
        trans_a,
        b,
        ldb,
        stride_b,
        trans_b,
        c,
        ldc,
        stride_c,
        dtype,
        c_dtype: None,
        bias: None,
        act: None,
        accumulate,
        label: label.to_string(),
    }))
}

fn label(ctx: &NodeCtx) -> String {
    format!("{}#{}", ctx.node.op.kind(), ctx.node.id.0)
}

fn round_up(v: usize, m: usize) -> usize {
    v.div_ceil(m) * m
}

/// The image chunks `(first, count)` of a batch of `n` in chunks of `nb`.
fn chunks(n: usize, nb: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n)
        .step_by(nb.max(1))
        .map(move |n0| (n0, nb.min(n - n0)))
}

/// Column-buffer layout of a chunked im2col (see `kernels/vision.cu`): images per chunk, the
/// padded row stride and the padded group stride (elements).
struct ColLayout {
    nb: usize,
    ld: usize,
    gs: usize,
}

impl ColLayout {
    /// The kernels' view of the chunk.
    fn chunk(&self, nb: usize) -> ColChunk {
        ColChunk {
            nb: nb as i32,
            ld: self.ld as i32,
            gs: self.gs as i32,
        }
    }

    fn new(g: &Geo, rows: usize, bytes_per_image: usize) -> Result<ColLayout, LowerError> {
        let nb = g.images_per_chunk(g.groups * rows * g.pp(), bytes_per_image);
        let ld = round_up(nb * g.pp(), LD_PAD);
        let gs = round_up(rows * ld, GROUP_PAD);
        if g.groups * gs + g.groups * round_up(g.og() * round_up(rows, LD_PAD), GROUP_PAD)
            >= MAX_ELEMS
        {
            unsupported!(
                "one image's column buffer ({} elements) is too large for the conv kernels",
                g.groups * rows * g.pp()
            );
        }
        Ok(ColLayout { nb, ld, gs })
    }
    fn elems(&self, g: &Geo) -> usize {
        g.groups * self.gs
    }
}

pub(super) fn forward(ctx: &mut NodeCtx, spec: &ConvSpec) -> Lowered {
    let x = ctx.input(0)?.clone();
    let w = ctx.input(1)?.clone();
    let bias = ctx.ins.get(2).cloned();
    let y = ctx.out.clone();
    let dtype = x.dtype;
    let sfx = Sfx::float(dtype)?;
    if w.rank() != 4 || w.dtype != dtype || y.dtype != dtype {
        unsupported!("conv weight {:?} / dtypes do not match the input", w.dims);
    }
    let g = Geo::new(spec, &x.dims, w.dims[0])?;
    if w.numel() != g.w_len() || y.dims != [g.n, g.o, g.ho, g.wo] {
        unsupported!(
            "conv weight {:?} / output {:?} do not match the geometry",
            w.dims,
            y.dims
        );
    }
    if let Some(b) = &bias {
        if b.numel() != g.o || b.dtype != dtype {
            unsupported!("conv bias {:?} does not match {} out channels", b.dims, g.o);
        }
    }
    check_sizes(&[&x, &w, &y])?;
    let ca = g.args()?;
    if y.numel() == 0 {
        return Ok(());
    }
    if g.kg() == 0 {
        unsupported!("conv over zero input channels");
    }
    let es = Elems(dtype.size_bytes());
    let label = label(ctx);
    let bias_ptr = bias.as_ref().map(|b| b.ptr);
    if !g.direct() {
        let ones = bias.is_some() as usize;
        let kr = g.kg() + ones;
        // A pointwise conv without bias multiplies x itself; otherwise a column buffer.
        let on_x = g.pointwise() && ones == 0;
        let lay = if on_x {
            ColLayout {
                nb: g.n,
                ld: 0,
                gs: 0,
            }
        } else {
            ColLayout::new(&g, kr, g.o * g.pp() * es.0)?
        };
        // With the columns the weight is repacked: bias column appended, rows padded, group
        // slices aligned.
        let ldw = round_up(kr, LD_PAD);
        let wgs = round_up(g.og() * ldw, GROUP_PAD);
        let plan = |col: u64, waug: u64| {
            let p = g.pp();
            let (og, cg) = (g.og(), g.cg());
            let mut acts = Vec::new();
            for (n0, nbc) in chunks(g.n, lay.nb) {
                if !on_x {
                    let packs = n0 == 0;
                    let pack = WeightPack {
                        ones: ones as i32,
                        ldw: ldw as i32,
                        wgs: wgs as i32,
                    };
                    let kern = k::im2col(
                        sfx,
                        (es.at(x.ptr, n0 * g.c * g.hw()), col),
                        (w.ptr, bias_ptr.unwrap_or(0), if packs { waug } else { 0 }),
                        ca,
                        lay.chunk(nbc),
                        pack,
                    );
                    acts.push(kernel_im2col(kern, nbc * p, g.groups * kr));
                }
                let (wa, lda, wstride) = if on_x {
                    (w.ptr, kr, og * kr)
                } else {
                    (waug, ldw, wgs)
                };
                for grp in 0..g.groups {
                    let b = if on_x {
                        (es.at(x.ptr, (n0 * g.c + grp * cg) * p), p, g.c * p, false)
                    } else {
                        (es.at(col, grp * lay.gs), lay.ld, p, false)
                    };
                    acts.push(gemm(
                        (og, p, kr, nbc),
                        (es.at(wa, grp * wstride), lda, 0, false),
                        b,
                        (es.at(y.ptr, (n0 * g.o + grp * og) * p), p, g.o * p),
                        dtype,
                        false,
                        &label,
                    ));
                }
            }
            acts
        };
        if gemm_aligned(&plan(0, 0)) {
            let (col, waug) = if on_x {
                (0, 0)
            } else {
                (
                    ctx.scratch(lay.elems(&g) * es.0)?,
                    ctx.scratch(g.groups * wgs * es.0)?,
                )
            };
            return emit(ctx, plan(col, waug));
        }
    }
    let kern = k::conv_direct(sfx, x.ptr, w.ptr, bias_ptr.unwrap_or(0), y.ptr, ca);
    ctx.run_1d(kern, y.numel())
}

pub(super) fn backward_input(ctx: &mut NodeCtx, spec: &ConvSpec, input_hw: [usize; 2]) -> Lowered {
    let dy = ctx.input(0)?.clone();
    let w = ctx.input(1)?.clone();
    let dx = ctx.out.clone();
    let dtype = dy.dtype;
    let sfx = Sfx::float(dtype)?;
    if w.rank() != 4 || dx.rank() != 4 || w.dtype != dtype || dx.dtype != dtype {
        unsupported!(
            "conv weight {:?} / dx {:?} do not match dy",
            w.dims,
            dx.dims
        );
    }
    let xd = [dx.dims[0], dx.dims[1], input_hw[0], input_hw[1]];
    let g = Geo::new(spec, &xd, w.dims[0])?;
    if dx.dims != xd || w.numel() != g.w_len() || dy.dims != [g.n, g.o, g.ho, g.wo] {
        unsupported!(
            "dy {:?} / weight {:?} / dx {:?} do not match the conv geometry",
            dy.dims,
            w.dims,
            dx.dims
        );
    }
    check_sizes(&[&dy, &w, &dx])?;
    let ca = g.args()?;
    if dx.numel() == 0 {
        return Ok(());
    }
    if dy.numel() == 0 {
        return ctx.zero(dx.ptr, dx.bytes());
    }
    let es = Elems(dtype.size_bytes());
    let label = label(ctx);
    if !g.direct_input() {
        let (p, og, cg, kg) = (g.pp(), g.og(), g.cg(), g.kg());
        let lay = if g.pointwise() {
            ColLayout {
                nb: g.n,
                ld: 0,
                gs: 0,
            }
        } else {
            ColLayout::new(&g, kg, g.o * p * es.0)?
        };
        let plan = |dcol: u64| {
            let mut acts = Vec::new();
            if g.pointwise() {
                // Every input position is read by exactly one column: write dx directly.
                for grp in 0..g.groups {
                    acts.push(gemm(
                        (cg, p, og, g.n),
                        (es.at(w.ptr, grp * og * cg), cg, 0, true),
                        (es.at(dy.ptr, grp * og * p), p, g.o * p, false),
                        (es.at(dx.ptr, grp * cg * p), p, g.c * p),
                        dtype,
                        false,
                        &label,
                    ));
                }
                return acts;
            }
            for (n0, nbc) in chunks(g.n, lay.nb) {
                for grp in 0..g.groups {
                    acts.push(gemm(
                        (kg, p, og, nbc),
                        (es.at(w.ptr, grp * og * kg), kg, 0, true),
                        (es.at(dy.ptr, (n0 * g.o + grp * og) * p), p, g.o * p, false),
                        (es.at(dcol, grp * lay.gs), lay.ld, p),
                        dtype,
                        false,
                        &label,
                    ));
                }
                let dxc = es.at(dx.ptr, n0 * g.c * g.hw());
                let kern = k::col2im(sfx, dcol, dxc, ca, lay.chunk(nbc));
                acts.push(kernel_1d(kern, nbc * g.c * g.hw()));
            }
            acts
        };
        if gemm_aligned(&plan(0)) {
            let dcol = if g.pointwise() {
                0
            } else {
                ctx.scratch(lay.elems(&g) * es.0)?
            };
            return emit(ctx, plan(dcol));
        }
    }
    let kern = k::conv_bwd_input_direct(sfx, dy.ptr, w.ptr, dx.ptr, ca);
    ctx.run_1d(kern, dx.numel())
}

pub(super) fn backward_weight(ctx: &mut NodeCtx, spec: &ConvSpec) -> Lowered {
    let x = ctx.input(0)?.clone();
    let dy = ctx.input(1)?.clone();
    let dw = ctx.out.clone();
    let dtype = x.dtype;
    let sfx = Sfx::float(dtype)?;
    if dy.rank() != 4 || dy.dtype != dtype || dw.dtype != dtype {
        unsupported!("dy {:?} / dw dtypes do not match x", dy.dims);
    }
    let g = Geo::new(spec, &x.dims, dy.dims[1])?;
    if dw.numel() != g.w_len() || dy.dims != [g.n, g.o, g.ho, g.wo] {
        unsupported!(
            "dy {:?} / dw {:?} do not match the conv geometry",
            dy.dims,
            dw.dims
        );
    }
    check_sizes(&[&x, &dy, &dw])?;
    let ca = g.args()?;
    if dw.numel() == 0 {
        return Ok(());
    }
    if dy.numel() == 0 {
        return ctx.zero(dw.ptr, dw.bytes());
    }
    let es = Elems(dtype.size_bytes());
    let label = label(ctx);
    if !g.direct() {
        let (p, og, kg) = (g.pp(), g.og(), g.kg());
        // Chunk offsets only feed kernels here, so they need no alignment.
        let lay = ColLayout::new(&g, kg, GEMM_ALIGN)?;
        let plan = |col: u64, dyt: u64| {
            let mut acts = Vec::new();
            for (n0, nbc) in chunks(g.n, lay.nb) {
                // One image's dy already is dyT.
                let (a, lda) = if g.n == 1 {
                    (dy.ptr, p)
                } else {
                    let dims = (nbc as i32, g.o as i32, p as i32);
                    let src = es.at(dy.ptr, n0 * g.o * p);
                    let kern = k::swap01(sfx, src, dyt, dims, lay.ld as i32);
                    acts.push(kernel_1d(kern, nbc * g.o * p));
                    (dyt, lay.ld)
                };
                let no_pack = WeightPack {
                    ones: 0,
                    ldw: 0,
                    wgs: 0,
                };
                let xc = es.at(x.ptr, n0 * g.c * g.hw());
                let kern = k::im2col(sfx, (xc, col), (0, 0, 0), ca, lay.chunk(nbc), no_pack);
                acts.push(kernel_im2col(kern, nbc * p, g.groups * kg));
                let k = nbc * p;
                acts.push(gemm(
                    (og, kg, k, g.groups),
                    (a, lda, og * lda, false),
                    (col, lay.ld, lay.gs, true),
                    (dw.ptr, kg, og * kg),
                    dtype,
                    n0 > 0,
                    &label,
                ));
            }
            acts
        };
        if gemm_aligned(&plan(0, 0)) {
            let col = ctx.scratch(lay.elems(&g) * es.0)?;
            let dyt = if g.n == 1 {
                0
            } else {
                ctx.scratch(g.o * lay.ld * es.0)?
            };
            return emit(ctx, plan(col, dyt));
        }
    }
    // Direct: one block per (out channel, input channel, slice of the N·P positions); several
    // slices leave f32 partials that a second kernel adds in a fixed order.
    let nw = g.w_len();
    let rows = g.o * g.cg();
    let q = g.n * g.pp();
    let splits = WGRAD_BLOCKS
        .div_ceil(rows)
        .min(q.div_ceil(2048))
        .clamp(1, 65535);
    let part = if splits > 1 {
        ctx.scratch(nw * splits * 4)?
    } else {
        0
    };
    let kern = k::conv_bwd_weight_direct(sfx, (x.ptr, dy.ptr, dw.ptr, part), ca, splits as i32);
    ctx.run(kern, [rows as u32, splits as u32, 1], [256, 1, 1], 0)?;
    if splits > 1 {
        let kern = k::conv_bwd_weight_reduce(sfx, part, dw.ptr, nw as i32, splits as i32);
        ctx.run_1d(kern, nw)?;
    }
    Ok(())
}
