//! Family functions of the pooling and resize kernels of `kernels/vision.cu`: each owns one
//! kernel's name and argument order. (The convolution kernels are still launched from
//! `lower/vision_conv.rs`.)
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
