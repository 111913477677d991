//! Family functions of `kernels/vision.cu` (convolution, pooling, resize): each owns one
//! kernel's name and argument order; `lower/vision*.rs` plans the launches.
use super::{Kernel, Lib, Sfx, Unit};
use crate::lower::KArgs;

/// A 2-D pooling geometry as the kernels take it: `planes, h, w, ho, wo, kh, kw, sh, sw,
/// ph, pw` (all `int`).
#[derive(Clone, Copy, Debug)]
pub struct PoolGeom {
    pub planes: i32,
    pub h: i32,
    pub w: i32,
    pub ho: i32,
    pub wo: i32,
    pub k: [i32; 2],
    pub s: [i32; 2],
    pub p: [i32; 2],
}

impl PoolGeom {
    fn push(self, a: KArgs) -> KArgs {
        a.i32(self.planes)
            .i32(self.h)
            .i32(self.w)
            .i32(self.ho)
            .i32(self.wo)
            .i32(self.k[0])
            .i32(self.k[1])
            .i32(self.s[0])
            .i32(self.s[1])
            .i32(self.p[0])
            .i32(self.p[1])
    }
}

fn name(stem: &str, sfx: Sfx) -> String {
    format!("{stem}_{}", sfx.name())
}

/// `pool2d_<sfx>(x, y, <geom>, is_max)`.
pub fn pool2d(sfx: Sfx, x: u64, y: u64, g: PoolGeom, is_max: i32) -> Kernel {
    let args = g.push(KArgs::new().ptr(x).ptr(y)).i32(is_max);
    Kernel::new(Lib::Vision, name("pool2d", sfx), args)
}

/// `maxpool2d_bwd_tiled_<sfx>(x, dy, dx, planes, h, w, ho, wo, kh, kw)` (stride = kernel,
/// no padding, so only the first seven geometry values).
pub fn maxpool2d_bwd_tiled(sfx: Sfx, x: u64, dy: u64, dx: u64, g: PoolGeom) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(dy)
        .ptr(dx)
        .i32(g.planes)
        .i32(g.h)
        .i32(g.w)
        .i32(g.ho)
        .i32(g.wo)
        .i32(g.k[0])
        .i32(g.k[1]);
    Kernel::new(Lib::Vision, name("maxpool2d_bwd_tiled", sfx), args)
}

/// `maxpool2d_bwd_<sfx>(x, dy, dx, <geom>)`.
pub fn maxpool2d_bwd(sfx: Sfx, x: u64, dy: u64, dx: u64, g: PoolGeom) -> Kernel {
    let args = g.push(KArgs::new().ptr(x).ptr(dy).ptr(dx));
    Kernel::new(Lib::Vision, name("maxpool2d_bwd", sfx), args)
}

/// `pool_argmax_<sfx>(x, idx, <geom>)`.
pub fn pool_argmax(sfx: Sfx, x: u64, idx: u64, g: PoolGeom) -> Kernel {
    let args = g.push(KArgs::new().ptr(x).ptr(idx));
    Kernel::new(Lib::Vision, name("pool_argmax", sfx), args)
}

/// `maxpool2d_bwd_idx_<sfx>(idx, dy, dx, <geom>)`.
pub fn maxpool2d_bwd_idx(sfx: Sfx, idx: u64, dy: u64, dx: u64, g: PoolGeom) -> Kernel {
    let args = g.push(KArgs::new().ptr(idx).ptr(dy).ptr(dx));
    Kernel::new(Lib::Vision, name("maxpool2d_bwd_idx", sfx), args)
}

/// `resize_nearest2x_<unit>(x, y, planes, h, w)`; units B1..B8.
pub fn resize_nearest2x(unit: Unit, x: u64, y: u64, planes: i32, h: i32, w: i32) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(y).i32(planes).i32(h).i32(w);
    let name = format!("resize_nearest2x_{}", unit.name());
    Kernel::new(Lib::Vision, name, args)
}

/// Mirrors `ConvG` in `kernels/vision.cu` (2-D conv geometry, all `int`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ConvG {
    pub n: i32,
    pub c: i32,
    pub h: i32,
    pub w: i32,
    pub o: i32,
    pub ho: i32,
    pub wo: i32,
    pub kh: i32,
    pub kw: i32,
    pub sh: i32,
    pub sw: i32,
    pub ph: i32,
    pub pw: i32,
    pub dh: i32,
    pub dw: i32,
    pub groups: i32,
    pub cg: i32,
    pub og: i32,
}

/// One chunk of a column buffer: images in it, the padded row stride and group stride
/// (elements).
#[derive(Clone, Copy, Debug)]
pub struct ColChunk {
    pub nb: i32,
    pub ld: i32,
    pub gs: i32,
}

/// How `im2col` repacks the weight beside the columns: the bias ones-row (0 or 1), the
/// padded row stride and group stride of the packed weight (elements).
#[derive(Clone, Copy, Debug)]
pub struct WeightPack {
    pub ones: i32,
    pub ldw: i32,
    pub wgs: i32,
}

/// `conv_direct_<sfx>(x, w, bias, y, g)`; `bias` may be 0.
pub fn conv_direct(sfx: Sfx, x: u64, w: u64, bias: u64, y: u64, g: ConvG) -> Kernel {
    let args = KArgs::new().ptr(x).ptr(w).ptr(bias).ptr(y).pod(g);
    Kernel::new(Lib::Vision, name("conv_direct", sfx), args)
}

/// `im2col_<sfx>(x, col, w, bias, waug, g, nb, ld, gs, ones, ldw, wgs)`: `waug` 0 skips the
/// weight packing.
#[allow(clippy::too_many_arguments)]
pub fn im2col(
    sfx: Sfx,
    (x, col): (u64, u64),
    (w, bias, waug): (u64, u64, u64),
    g: ConvG,
    c: ColChunk,
    p: WeightPack,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(col)
        .ptr(w)
        .ptr(bias)
        .ptr(waug)
        .pod(g)
        .i32(c.nb)
        .i32(c.ld)
        .i32(c.gs)
        .i32(p.ones)
        .i32(p.ldw)
        .i32(p.wgs);
    Kernel::new(Lib::Vision, name("im2col", sfx), args)
}

/// `col2im_<sfx>(dcol, dx, g, nb, ld, gs)`.
pub fn col2im(sfx: Sfx, dcol: u64, dx: u64, g: ConvG, c: ColChunk) -> Kernel {
    let args = KArgs::new()
        .ptr(dcol)
        .ptr(dx)
        .pod(g)
        .i32(c.nb)
        .i32(c.ld)
        .i32(c.gs);
    Kernel::new(Lib::Vision, name("col2im", sfx), args)
}

/// `conv_bwd_input_direct_<sfx>(dy, w, dx, g)`.
pub fn conv_bwd_input_direct(sfx: Sfx, dy: u64, w: u64, dx: u64, g: ConvG) -> Kernel {
    let args = KArgs::new().ptr(dy).ptr(w).ptr(dx).pod(g);
    Kernel::new(Lib::Vision, name("conv_bwd_input_direct", sfx), args)
}

/// `conv_bwd_weight_direct_<sfx>(x, dy, dw, part, g, splits)`: `part` holds f32 partials
/// when `splits > 1` (else 0).
pub fn conv_bwd_weight_direct(
    sfx: Sfx,
    (x, dy, dw, part): (u64, u64, u64, u64),
    g: ConvG,
    splits: i32,
) -> Kernel {
    let args = KArgs::new()
        .ptr(x)
        .ptr(dy)
        .ptr(dw)
        .ptr(part)
        .pod(g)
        .i32(splits);
    Kernel::new(Lib::Vision, name("conv_bwd_weight_direct", sfx), args)
}

/// `conv_bwd_weight_reduce_<sfx>(part, dw, nw, splits)`.
pub fn conv_bwd_weight_reduce(sfx: Sfx, part: u64, dw: u64, nw: i32, splits: i32) -> Kernel {
    let args = KArgs::new().ptr(part).ptr(dw).i32(nw).i32(splits);
    Kernel::new(Lib::Vision, name("conv_bwd_weight_reduce", sfx), args)
}

/// `swap01_<sfx>(src, dst, a, b, P, ld)`: `[a, b, P]` to `[b, a·P]` rows of stride `ld`.
pub fn swap01(sfx: Sfx, src: u64, dst: u64, (a, b, p): (i32, i32, i32), ld: i32) -> Kernel {
    let args = KArgs::new().ptr(src).ptr(dst).i32(a).i32(b).i32(p).i32(ld);
    Kernel::new(Lib::Vision, name("swap01", sfx), args)
}
