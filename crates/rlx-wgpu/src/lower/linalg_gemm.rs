//! The tiled GEMM that MatMul, FusedMatMulBiasAct and the quantized products share.
//!
//! 256 invocations a workgroup as a 16×16 grid; each holds `R`×`R` outputs in registers
//! (named accumulators, fully unrolled in the generated source, so no driver has to keep an
//! array of them in local memory). The workgroup's output tile is `64·R/4` on a side; K goes
//! in slices of [`TK`] staged in workgroup memory as vec4s, both operands k-major, so one
//! step of the inner loop reads `R/4` vec4s of A and of B and does `R²` FMAs. An
//! invocation's rows (and columns) are `ty·4 + i + 64·h`: the vec4 reads of one subgroup
//! fall on consecutive addresses (B) or on a single broadcast one (A). A's rows are padded
//! by one vec4 so that the transposing stores of its tile do not all hit one bank.
//!
//! Two sizes: 8×8 registers (128-wide tiles) where the product has enough tiles to fill a
//! large GPU, else 4×4 (64-wide tiles). A product with few tiles and a long K (an encoder
//! at batch 1, a CNN's dense layer) also splits K ([`splits`]): each split writes its
//! partial tile to an f32 scratch and [`split_sum`] adds them in split order (so the
//! result does not depend on scheduling) and applies the epilogue.
use crate::shader::{grid_1d, Kernel, Shader};

/// K slice staged per step.
pub const TK: usize = 16;

/// Register block edge of one invocation: 4 (64-wide tiles) or 8 (128-wide tiles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub reg: usize,
}

impl Tile {
    pub const SMALL: Tile = Tile { reg: 4 };
    pub const LARGE: Tile = Tile { reg: 8 };

    /// Output tile edge (rows = columns).
    pub fn edge(self) -> usize {
        16 * self.reg
    }

    /// The large tile once the product has at least this many of them (two waves of a
    /// 132-SM GPU's worth, roughly); below that the small one.
    pub fn pick(m: usize, n: usize, nb: usize) -> Tile {
        let big = Tile::LARGE.edge();
        if m.div_ceil(big) * n.div_ceil(big) * nb >= 256 {
            Tile::LARGE
        } else {
            Tile::SMALL
        }
    }

    /// The number of workgroups along (n, m).
    pub fn groups(self, m: usize, n: usize) -> (usize, usize) {
        (n.div_ceil(self.edge()), m.div_ceil(self.edge()))
    }
}

/// How many ways to split K: enough that ~256 workgroups run, each split at least 64 deep
/// (a whole number of [`TK`] slices); 1 when the tiles alone fill the GPU.
pub fn splits(t: Tile, (m, n, k): (usize, usize, usize), nb: usize) -> usize {
    let (gx, gy) = t.groups(m, n);
    let tiles = gx * gy * nb;
    if tiles >= 256 {
        return 1;
    }
    let want = 256usize.div_ceil(tiles).min(k / 64).max(1);
    k.div_ceil(split_depth(k, want))
}

/// K per split for `s` splits, rounded up to whole slices.
fn split_depth(k: usize, s: usize) -> usize {
    k.div_ceil(s).div_ceil(TK) * TK
}

/// The dense B tile: rows `k0..k0+TK` of a row-major `[k, n]` operand (read through
/// `ld_b(boff + ..)`), 4 consecutive columns an invocation, zero outside.
pub fn load_b_dense(t: Tile, (n, k): (usize, usize)) -> String {
    let q = t.edge() / 4;
    let mut s = String::new();
    for j in 0..(TK * q) / 256 {
        s += &format!(
            "    {{
        let e = lid + {o}u;
        let kk = e / {q}u;
        let c = n0 + (e % {q}u) * 4u;
        let gk = k0 + kk;
        var v = vec4<f32>(0.0);
        if (gk < {k}u) {{
            let r = boff + gk * {n}u;
            if (c < {n}u) {{ v.x = ld_b(r + c); }}
            if (c + 1u < {n}u) {{ v.y = ld_b(r + c + 1u); }}
            if (c + 2u < {n}u) {{ v.z = ld_b(r + c + 2u); }}
            if (c + 3u < {n}u) {{ v.w = ld_b(r + c + 3u); }}
        }}
        Bs[kk * {q}u + e % {q}u] = v;
    }}\n",
            o = 256 * j
        );
    }
    s
}

/// The GEMM `y[bi] = epi(A[bi] · B[bi])`, A `[m, k]` through `ld_a(aoff + ..)`; the shader
/// declares `ld_a`, `st_y`, `epi(v, gm, gn)` and whatever `load_b` reads. `load_b` fills
/// `Bs[kk * E/4 + nn/4][nn % 4]` (B's rows k0.., columns n0.., zero outside; E the tile
/// edge) from `lid`, `k0`, `n0`, `boff`. `k` must be a multiple of [`TK`] where `load_b`
/// reads whole slices only. With `splits > 1` the shader declares `st_p` instead of `st_y`
/// and `epi`: split s of item bi stores its raw sums at `(s * nb + bi) * m * n + ..`, for
/// [`split_sum`] to finish.
pub fn tiled(
    mut sh: Shader,
    t: Tile,
    (m, n, k): (usize, usize, usize),
    nb: usize,
    (aoff, boff): (&str, &str),
    load_b: &str,
    splits: usize,
) -> Kernel {
    let ks = split_depth(k, splits);
    let (e, r, h) = (t.edge(), t.reg, t.reg / 4);
    let (qa, qb) = (e / 4 + 1, e / 4);
    sh.text(&format!(
        "var<workgroup> As: array<vec4<f32>, {}>;\nvar<workgroup> Bs: array<vec4<f32>, {}>;",
        TK * qa,
        TK * qb
    ));
    let mut load_a = String::new();
    for j in 0..(TK * (e / 4)) / 256 {
        load_a += &format!(
            "        {{
            let e = lid + {o}u;
            let kk = e % {TK}u;
            let q = e / {TK}u;
            let gk = k0 + kk;
            let r = m0 + q * 4u;
            var v = vec4<f32>(0.0);
            if (gk < K) {{
                let p = aoff + r * K + gk;
                if (r < M) {{ v.x = ld_a(p); }}
                if (r + 1u < M) {{ v.y = ld_a(p + K); }}
                if (r + 2u < M) {{ v.z = ld_a(p + 2u * K); }}
                if (r + 3u < M) {{ v.w = ld_a(p + 3u * K); }}
            }}
            As[kk * {qa}u + q] = v;
        }}\n",
            o = 256 * j
        );
    }
    let lanes = ["x", "y", "z", "w"];
    let (mut decl, mut step, mut store) = (String::new(), String::new(), String::new());
    for i in 0..h {
        step += &format!(
            "            let a{i} = As[kk * {qa}u + {}u + ty];\n            let b{i} = Bs[kk * {qb}u + {}u + tx];\n",
            16 * i,
            16 * i
        );
    }
    for row in 0..r {
        let (ih, il) = (row / 4, row % 4);
        for jh in 0..h {
            decl += &format!("    var c{row}_{jh} = vec4<f32>(0.0);\n");
            step += &format!("            c{row}_{jh} += a{ih}.{} * b{jh};\n", lanes[il]);
            for (jl, lane) in lanes.iter().enumerate() {
                let v = format!("c{row}_{jh}.{lane}");
                let put = if splits > 1 {
                    format!("st_p((s * {nb}u + bi) * MN + gm * N + gn, {v})")
                } else {
                    format!("st_y(bi * MN + gm * N + gn, epi({v}, gm, gn))")
                };
                store += &format!(
                    "    {{ let gm = m0 + {}u + ty * 4u; let gn = n0 + {}u + tx * 4u; if (gm < M && gn < N) {{ {put}; }} }}\n",
                    64 * ih + il,
                    64 * jh + jl
                );
            }
        }
    }
    let main = format!(
        "const M: u32 = {m}u;
const N: u32 = {n}u;
const K: u32 = {k}u;
const MN: u32 = {mn}u;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let n0 = wid.x * {e}u;
    let m0 = wid.y * {e}u;
    let bi = wid.z / {splits}u;
    let s = wid.z % {splits}u;
    let aoff = {aoff};
    let boff = {boff};
    let tx = lid % 16u;
    let ty = lid / 16u;
    let k_hi = min(s * {ks}u + {ks}u, K);
{decl}    for (var k0 = s * {ks}u; k0 < k_hi; k0 += {TK}u) {{
{load_a}{load_b}        workgroupBarrier();
        for (var kk = 0u; kk < {TK}u; kk++) {{
{step}        }}
        workgroupBarrier();
    }}
{store}}}
",
        mn = m * n
    );
    let (gx, gy) = t.groups(m, n);
    sh.finish(&main, [gx as u32, gy as u32, (nb * splits) as u32])
}

/// `y[i] = epi(Σ_s p[s * total + i])` over the `total = nb·m·n` outputs, the splits added
/// in order; the shader declares `ld_p`, `st_y` and `epi(v, gm, gn)`.
pub fn split_sum(
    sh: Shader,
    (m, n): (usize, usize),
    total: usize,
    splits: usize,
    max_per_dim: u32,
) -> Kernel {
    let (groups, head) = grid_1d(total as u64, max_per_dim);
    let body = format!(
        "    var v = 0.0;
    for (var s = 0u; s < {splits}u; s++) {{ v += ld_p(s * {total}u + gi); }}
    st_y(gi, epi(v, (gi / {n}u) % {m}u, gi % {n}u));
}}
"
    );
    sh.finish(&format!("{head}{body}"), groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_counts() {
        // Enough tiles: no split.
        assert_eq!(splits(Tile::SMALL, (4096, 384, 384), 1), 1);
        // An encoder's batch-1 products: 12 tiles, K 384 and 1536.
        assert_eq!(splits(Tile::SMALL, (128, 384, 384), 1), 6);
        let s = splits(Tile::SMALL, (128, 384, 1536), 1);
        assert!((16..=24).contains(&s), "{s}");
        // Every split is non-empty and whole slices deep.
        for k in [64, 100, 1000, 3136] {
            let s = splits(Tile::SMALL, (33, 45, k), 1);
            let d = split_depth(k, s);
            assert_eq!(d % TK, 0);
            assert!((s - 1) * d < k && s * d >= k, "k {k}: {s} × {d}");
        }
        // Short K is never split below 64 deep.
        assert_eq!(splits(Tile::SMALL, (33, 45, 100), 1), 1);
    }
}
