//! Conv forward and both gradients as implicit GEMMs: one tiled kernel (workgroup-memory
//! tiles of BM rows × 64 columns, K in slices of 16, 16×16 invocations each computing
//! RM×4 outputs) whose operand loads are generated per op, so no column matrix is ever
//! materialised. For group g, with K = (C/g)·kh·kw and P = Ho·Wo (the batch folded into the
//! columns so small images still fill the GPU):
//!   forward      y_g  [O/g × N·P]    = W_g [O/g × K] · col_g [K × N·P]       (+ bias)
//!   grad input   dx_g [C/g × N·H·W]  = gather of W_gᵀ · dy_g (each input pixel sums the
//!                taps that reach it: no scatter, no atomics)
//!   grad weight  dW_g [O/g × K]      = dy_g [O/g × N·P] · col_gᵀ, split over the N·P
//!                reduction (partials in a scratch, summed in a fixed order) when the
//!                output alone is too few tiles for the GPU.
//! The 1-D form is first rewritten to 2-D terms by `conv_spec_2d` (its weight
//! `[O, C/g, k, 1]` is laid out like `[O, C/g, 1, k]`). Accumulation is in f32.
use super::check_sizes;
use crate::lower::{LowerError, Lowered, NodeCtx};
use crate::shader::{grid_1d, Shader, WTensor};
use crate::unsupported;
use rlx_ir::ops::vision::{conv_out_len, conv_spec_2d};
use rlx_ir::{ConvSpec, DType, Dim};

/// Columns of a tile (16 invocations × 4 each).
const BN: usize = 64;
/// Depth of a K slice.
const BK: usize = 16;

/// Conv geometry in 2-D terms.
#[derive(Clone, Copy, Debug)]
struct Geom {
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    o: usize,
    g: usize,
    k: [usize; 2],
    s: [usize; 2],
    p: [usize; 2],
    d: [usize; 2],
    ho: usize,
    wo: usize,
}

impl Geom {
    fn new(spec: &ConvSpec, x: [usize; 4], o: usize) -> Result<Geom, LowerError> {
        let s2 = conv_spec_2d(spec, &Dim::Static(x[2]));
        let g = s2.groups;
        if g == 0 || !x[1].is_multiple_of(g) || !o.is_multiple_of(g) {
            unsupported!("channels {} / {o} are not divisible by groups {g}", x[1]);
        }
        let mut out = [0usize; 2];
        for (i, l) in out.iter_mut().enumerate() {
            match conv_out_len(
                x[2 + i],
                s2.kernel_size[i],
                s2.stride[i],
                s2.padding[i],
                s2.dilation[i],
            ) {
                Some(v) => *l = v,
                None => unsupported!("conv kernel is larger than the padded input"),
            }
        }
        Ok(Geom {
            n: x[0],
            c: x[1],
            h: x[2],
            w: x[3],
            o,
            g,
            k: s2.kernel_size,
            s: s2.stride,
            p: s2.padding,
            d: s2.dilation,
            ho: out[0],
            wo: out[1],
        })
    }
    fn cg(&self) -> usize {
        self.c / self.g
    }
    fn og(&self) -> usize {
        self.o / self.g
    }
    fn khw(&self) -> usize {
        self.k[0] * self.k[1]
    }
    fn pp(&self) -> usize {
        self.ho * self.wo
    }
    /// The constants the loaders use.
    fn consts(&self) -> String {
        format!(
            "const NB: u32 = {}u;\nconst C: u32 = {}u;\nconst H: i32 = {};\nconst W: i32 = {};\nconst O: u32 = {}u;\n\
             const CG: u32 = {}u;\nconst OG: u32 = {}u;\nconst KH: u32 = {}u;\nconst KW: u32 = {}u;\n\
             const SH: i32 = {};\nconst SW: i32 = {};\nconst PH: i32 = {};\nconst PW: i32 = {};\n\
             const DH: i32 = {};\nconst DW: i32 = {};\nconst HO: i32 = {};\nconst WO: i32 = {};\n",
            self.n,
            self.c,
            self.h,
            self.w,
            self.o,
            self.cg(),
            self.og(),
            self.k[0],
            self.k[1],
            self.s[0],
            self.s[1],
            self.p[0],
            self.p[1],
            self.d[0],
            self.d[1],
            self.ho,
            self.wo
        )
    }
}

/// `colx(g, k, n)`: the im2col element (row k = (c, ki, kj), column n = (item, oy, ox)) of
/// group g, 0 in the padding.
const COLX: &str = r#"
fn colx(g: u32, k: u32, n: u32) -> f32 {
    let c = k / (KH * KW);
    let r = k % (KH * KW);
    let ki = i32(r / KW);
    let kj = i32(r % KW);
    let p = n % u32(HO * WO);
    let nb = n / u32(HO * WO);
    let iy = i32(p / u32(WO)) * SH + ki * DH - PH;
    let ix = i32(p % u32(WO)) * SW + kj * DW - PW;
    if (iy < 0 || iy >= H || ix < 0 || ix >= W) { return 0.0; }
    return ld_x(((nb * C + g * CG + c) * u32(H) + u32(iy)) * u32(W) + u32(ix));
}
"#;

/// A GEMM of `groups` independent problems `[m × n] = Σ_k lda(g, m, k) · ldb(g, k, n)`,
/// each split `splits` ways along k; `sto(g, s, m, n, v)` stores a result (of split s).
struct Gemm {
    m: usize,
    n: usize,
    k: usize,
    groups: usize,
    splits: usize,
}

impl Gemm {
    /// Rows per invocation: as few as the problem's M needs (a tile is 16·RM rows).
    fn rm(&self) -> usize {
        match self.m {
            0..=16 => 1,
            17..=32 => 2,
            _ => 4,
        }
    }
    fn tiles(&self) -> usize {
        self.n.div_ceil(BN) * self.m.div_ceil(16 * self.rm()) * self.groups
    }
    /// K per split, a whole number of slices.
    fn ks(&self) -> usize {
        self.k.div_ceil(self.splits).div_ceil(BK) * BK
    }

    /// Finish `sh` (which defines lda, ldb and sto) into the tiled kernel.
    fn kernel(&self, mut sh: Shader, max_dim: u32) -> Result<crate::shader::Kernel, LowerError> {
        let rm = self.rm();
        let bm = 16 * rm;
        let (gx, gy, gz) = (
            self.n.div_ceil(BN),
            self.m.div_ceil(bm),
            self.groups * self.splits,
        );
        if [gx, gy, gz].iter().any(|&v| v > max_dim as usize) {
            unsupported!("a conv GEMM grid of {gx}×{gy}×{gz} workgroups exceeds the limit");
        }
        let ks = self.ks();
        sh.text(&format!(
            "const GM: u32 = {}u;\nconst GN: u32 = {}u;\nconst GK: u32 = {}u;\nconst KS: u32 = {ks}u;\nconst SPLITS: u32 = {}u;\n\
             const RM: u32 = {rm}u;\nconst BM: u32 = {bm}u;\nconst BN: u32 = {BN}u;\nconst BK: u32 = {BK}u;\n\
             var<workgroup> ta: array<f32, {}>;\nvar<workgroup> tb: array<f32, {}>;\n",
            self.m,
            self.n,
            self.k,
            self.splits,
            BK * bm,
            BK * BN
        ));
        // Tiles: ta[kk * BM + mm], tb[kk * BN + nn]. Loads are guarded, never the barriers:
        // the k loop's bounds depend only on the workgroup.
        let main = r#"@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l3: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * BN;
    let m0 = wid.y * BM;
    let g = wid.z / SPLITS;
    let s = wid.z % SPLITS;
    let k_lo = s * KS;
    let k_hi = min(k_lo + KS, GK);
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) { acc[i] = 0.0; }
    for (var k0 = k_lo; k0 < k_hi; k0 += BK) {
        for (var r = 0u; r < RM; r++) {
            let e = lid + r * 256u;
            let mm = e / BK;
            let kk = e % BK;
            var v = 0.0;
            if (m0 + mm < GM && k0 + kk < k_hi) { v = lda(g, m0 + mm, k0 + kk); }
            ta[kk * BM + mm] = v;
        }
        for (var r = 0u; r < 4u; r++) {
            let e = lid + r * 256u;
            let kk = e / BN;
            let nn = e % BN;
            var v = 0.0;
            if (n0 + nn < GN && k0 + kk < k_hi) { v = ldb(g, k0 + kk, n0 + nn); }
            tb[kk * BN + nn] = v;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            var b: array<f32, 4>;
            for (var j = 0u; j < 4u; j++) { b[j] = tb[kk * BN + l3.x + 16u * j]; }
            for (var i = 0u; i < RM; i++) {
                let a = ta[kk * BM + l3.y + 16u * i];
                for (var j = 0u; j < 4u; j++) { acc[i * 4u + j] += a * b[j]; }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < RM; i++) {
        let m = m0 + l3.y + 16u * i;
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + l3.x + 16u * j;
            if (m < GM && n < GN) { sto(g, s, m, n, acc[i * 4u + j]); }
        }
    }
}
"#;
        Ok(sh.finish(main, [gx as u32, gy as u32, gz as u32]))
    }
}

fn float_ins(ctx: &NodeCtx, what: &str) -> Lowered {
    if let Some(t) = ctx
        .ins
        .iter()
        .chain([&ctx.out])
        .find(|t| !t.dtype.is_float())
    {
        unsupported!("{what} of {} values", t.dtype);
    }
    Ok(())
}

fn rank4(t: &WTensor, what: &str) -> Result<[usize; 4], LowerError> {
    match t.dims[..] {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => unsupported!("{what} must be rank 4, got {:?}", t.dims),
    }
}

/// x, w, [bias] → y.
pub fn conv(ctx: &mut NodeCtx, spec: &ConvSpec) -> Lowered {
    float_ins(ctx, "Conv")?;
    let (x, w) = (ctx.ins[0].clone(), ctx.ins[1].clone());
    let bias = ctx.ins.get(2).cloned();
    let geo = Geom::new(spec, rank4(&x, "conv input")?, w.dims[0])?;
    if w.numel() != geo.o * geo.cg() * geo.khw() || ctx.out.numel() != geo.n * geo.o * geo.pp() {
        unsupported!(
            "conv weight {:?} / output {:?} disagree with the geometry",
            w.dims,
            ctx.out.dims
        );
    }
    check_sizes(&[&x, &w, &ctx.out])?;
    let y = ctx.word_out();
    let mut sh = Shader::new(format!("conv {spec:?} x{:?} w{:?}", x.dims, w.dims));
    sh.input("x", &x)?;
    sh.input("w", &w)?;
    let add_bias = match &bias {
        Some(b) => {
            sh.input("b", b)?;
            " + ld_b(oc)"
        }
        None => "",
    };
    sh.output("y", &y)?;
    sh.text(&geo.consts());
    sh.text(COLX);
    let kk = geo.cg() * geo.khw();
    sh.text(&format!(
        "fn lda(g: u32, m: u32, k: u32) -> f32 {{ return ld_w((g * OG + m) * {kk}u + k); }}\n\
         fn ldb(g: u32, k: u32, n: u32) -> f32 {{ return colx(g, k, n); }}\n\
         fn sto(g: u32, s: u32, m: u32, n: u32, v: f32) {{\n    let oc = g * OG + m;\n    let p = n % u32(HO * WO);\n    st_y(((n / u32(HO * WO)) * O + oc) * u32(HO * WO) + p, v{add_bias});\n}}"
    ));
    let gemm = Gemm {
        m: geo.og(),
        n: geo.n * geo.pp(),
        k: kk,
        groups: geo.g,
        splits: 1,
    };
    let k = gemm.kernel(sh, ctx.caps.max_groups_per_dim)?;
    ctx.push(k);
    ctx.finish_out(&y)
}

/// dy, w → dx (`input_hw` is x's spatial size).
pub fn conv2d_backward_input(ctx: &mut NodeCtx, spec: &ConvSpec, input_hw: [usize; 2]) -> Lowered {
    float_ins(ctx, "Conv2dBackwardInput")?;
    let (dy, w) = (ctx.ins[0].clone(), ctx.ins[1].clone());
    let o = rank4(&ctx.out, "dx")?;
    let geo = Geom::new(spec, [o[0], o[1], input_hw[0], input_hw[1]], w.dims[0])?;
    if dy.dims[..] != [geo.n, geo.o, geo.ho, geo.wo] || w.numel() != geo.o * geo.cg() * geo.khw() {
        unsupported!(
            "dy {:?} / w {:?} disagree with the conv geometry",
            dy.dims,
            w.dims
        );
    }
    check_sizes(&[&dy, &w, &ctx.out])?;
    let y = ctx.word_out();
    let mut sh = Shader::new(format!("conv dx {spec:?} dy{:?} w{:?}", dy.dims, w.dims));
    sh.input("dy", &dy)?;
    sh.input("w", &w)?;
    sh.output("y", &y)?;
    sh.text(&geo.consts());
    // Row m = input channel c of the group; k = (o, ki, kj); column n = (item, iy, ix):
    // tap (ki, kj) of output (oy, ox) reads iy when oy*SH + ki*DH - PH = iy.
    sh.text(
        r#"fn lda(g: u32, m: u32, k: u32) -> f32 {
    let oc = g * OG + k / (KH * KW);
    return ld_w((oc * CG + m) * KH * KW + k % (KH * KW));
}
fn ldb(g: u32, k: u32, n: u32) -> f32 {
    let oc = g * OG + k / (KH * KW);
    let r = k % (KH * KW);
    let ty = i32((n / u32(W)) % u32(H)) + PH - i32(r / KW) * DH;
    let tx = i32(n % u32(W)) + PW - i32(r % KW) * DW;
    if (ty < 0 || tx < 0 || ty % SH != 0 || tx % SW != 0) { return 0.0; }
    let oy = ty / SH;
    let ox = tx / SW;
    if (oy >= HO || ox >= WO) { return 0.0; }
    let nb = n / u32(H * W);
    return ld_dy(((nb * O + oc) * u32(HO) + u32(oy)) * u32(WO) + u32(ox));
}
fn sto(g: u32, s: u32, m: u32, n: u32, v: f32) {
    let pix = n % u32(H * W);
    st_y(((n / u32(H * W)) * C + g * CG + m) * u32(H * W) + pix, v);
}"#,
    );
    let gemm = Gemm {
        m: geo.cg(),
        n: geo.n * geo.h * geo.w,
        k: geo.og() * geo.khw(),
        groups: geo.g,
        splits: 1,
    };
    let k = gemm.kernel(sh, ctx.caps.max_groups_per_dim)?;
    ctx.push(k);
    ctx.finish_out(&y)
}

/// x, dy → dw, summed over the batch.
pub fn conv2d_backward_weight(ctx: &mut NodeCtx, spec: &ConvSpec) -> Lowered {
    float_ins(ctx, "Conv2dBackwardWeight")?;
    let (x, dy) = (ctx.ins[0].clone(), ctx.ins[1].clone());
    if dy.dims.len() != 4 {
        unsupported!("dy must be rank 4, got {:?}", dy.dims);
    }
    let geo = Geom::new(spec, rank4(&x, "conv input")?, dy.dims[1])?;
    let kk = geo.cg() * geo.khw();
    if dy.dims[..] != [geo.n, geo.o, geo.ho, geo.wo] || ctx.out.numel() != geo.o * kk {
        unsupported!(
            "dy {:?} / dw {:?} disagree with the conv geometry",
            dy.dims,
            ctx.out.dims
        );
    }
    check_sizes(&[&x, &dy, &ctx.out])?;
    let mut gemm = Gemm {
        m: geo.og(),
        n: kk,
        k: geo.n * geo.pp(),
        groups: geo.g,
        splits: 1,
    };
    // Few output tiles and a long reduction: split it so ~256 workgroups run, each at
    // least 256 deep.
    let tiles = gemm.tiles();
    if tiles < 256 {
        gemm.splits = (256 / tiles).min(gemm.k.div_ceil(256)).max(1);
        gemm.splits = gemm.k.div_ceil(gemm.ks());
    }
    let splits = gemm.splits;
    let y = if splits > 1 {
        ctx.scratch(&[splits * geo.o * kk], DType::F32)
    } else {
        ctx.word_out()
    };
    let mut sh = Shader::new(format!("conv dw {spec:?} x{:?} dy{:?}", x.dims, dy.dims));
    sh.input("x", &x)?;
    sh.input("dy", &dy)?;
    sh.output("y", &y)?;
    sh.text(&geo.consts());
    sh.text(COLX);
    // Row m = output channel of the group; k = (item, output pixel); column n = (c, ki, kj).
    sh.text(&format!(
        "fn lda(g: u32, m: u32, k: u32) -> f32 {{\n    let p = k % u32(HO * WO);\n    return ld_dy(((k / u32(HO * WO)) * O + g * OG + m) * u32(HO * WO) + p);\n}}\n\
         fn ldb(g: u32, k: u32, n: u32) -> f32 {{ return colx(g, n, k); }}\n\
         fn sto(g: u32, s: u32, m: u32, n: u32, v: f32) {{ st_y((s * O + g * OG + m) * {kk}u + n, v); }}"
    ));
    let k = gemm.kernel(sh, ctx.caps.max_groups_per_dim)?;
    ctx.push(k);
    if splits == 1 {
        return ctx.finish_out(&y);
    }
    // The partials summed in split order (deterministic).
    let out = ctx.word_out();
    let n = out.numel();
    let mut sh = Shader::new(format!("conv dw sum of {splits} splits"));
    sh.input("p", &y)?;
    sh.output("y", &out)?;
    let (groups, head) = grid_1d(n as u64, ctx.caps.max_groups_per_dim);
    let body = format!(
        "    var s = 0.0;\n    for (var i = 0u; i < {splits}u; i++) {{ s += ld_p(i * {n}u + gi); }}\n    st_y(gi, s);\n}}\n"
    );
    ctx.push(sh.finish(&format!("{head}{body}"), groups));
    ctx.finish_out(&out)
}
