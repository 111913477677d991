//! Family functions of `kernels/attention.cu`: the SIMT flash forward (`attn_fwd_*`), the
//! tensor-core forwards (`attn_mma_*`; `attn_x3_*` for f32, `attention_x3.cu`), the decode split over keys (`attn_split_*`, which
//! merges its chunks itself, or + `attn_combine_*`) and the keep-mask conversion. `lower/transformer_attention.rs` picks
//! the path and the variant; these own the names and argument order.
use super::{Kernel, Lib, Sfx};
use crate::lower::KArgs;

#[cfg(test)]
#[path = "attention_hosttest.rs"]
mod hosttest;
#[cfg(test)]
#[path = "attention_x3_hosttest.rs"]
mod x3_hosttest;

/// Mirrors `AttnArgs` in `attention.cu` (same field order; 160 bytes, no padding).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AttnArgs {
    pub q: [i64; 3],
    pub k: [i64; 3],
    pub v: [i64; 3],
    pub o: [i64; 3],
    pub heads: i32,
    pub group: i32,
    pub sq: i32,
    pub sk: i32,
    pub d: i32,
    pub dv: i32,
    pub mask: i32,
    pub window: i32,
    pub scale: f32,
    pub cap: f32,
    pub vec: i32,
    pub chunk: i32,
    pub nsplit: i32,
    pub pad: i32,
    /// Device address of the i64 `past` input (`AttentionSpec::past`), or 0.
    pub past: u64,
}

/// What every attention kernel reads and writes (device pointers; `keep` is the u8 keep
/// mask or 0).
#[derive(Clone, Copy, Debug)]
pub struct AttnIo {
    pub q: u64,
    pub k: u64,
    pub v: u64,
    pub keep: u64,
    pub out: u64,
}

impl AttnIo {
    /// The kernels' leading arguments: q, k, v, keep, out.
    fn ptrs(self) -> KArgs {
        KArgs::new()
            .ptr(self.q)
            .ptr(self.k)
            .ptr(self.v)
            .ptr(self.keep)
            .ptr(self.out)
    }
}

/// One instance of the SIMT forward template: `rows` query tiles of 16 (1, 2, 4), `cv`
/// output chunks of 4 columns a lane, `dq` the specialised head dim (0 = any), `kj` key
/// tiles of 8 · kj.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashVariant {
    pub rows: usize,
    pub cv: usize,
    pub dq: usize,
    pub kj: usize,
}

/// `attn_fwd_r<rows>_c<cv>_d<dq>_k<kj>_<sfx>(q, k, v, keep, out, a)`.
pub fn attn_fwd(v: FlashVariant, sfx: Sfx, io: AttnIo, a: AttnArgs) -> Kernel {
    let name = format!(
        "attn_fwd_r{}_c{}_d{}_k{}_{}",
        v.rows,
        v.cv,
        v.dq,
        v.kj,
        sfx.name()
    );
    Kernel::new(Lib::Attention, name, io.ptrs().pod(a))
}

/// `attn_mma_d<d>_w<warps>_<sfx>(q, k, v, keep, out, a)`: f16/bf16, d in {32, 64, 128},
/// 1, 2 or 4 warps.
pub fn attn_mma(d: usize, warps: usize, sfx: Sfx, io: AttnIo, a: AttnArgs) -> Kernel {
    let name = format!("attn_mma_d{d}_w{warps}_{}", sfx.name());
    Kernel::new(Lib::Attention, name, io.ptrs().pod(a))
}

/// `attn_x3_d<d>_w<warps>_k<bk>_f32(q, k, v, keep, out, a)`: f32, d in {32, 64, 128}, 1, 2
/// or 4 warps, key tiles of 32 or 64; both products on tensor cores as three TF32 products
/// each (as accurate as f32). `split` (`attn_x3s_*`, 2 or 4 warps): the warps share one
/// 16-row query tile and split each key tile between them.
pub fn attn_x3(d: usize, warps: usize, bk: usize, split: bool, io: AttnIo, a: AttnArgs) -> Kernel {
    let kind = if split { "attn_x3s" } else { "attn_x3" };
    let name = format!("{kind}_d{d}_w{warps}_k{bk}_f32");
    Kernel::new(Lib::Attention, name, io.ptrs().pod(a))
}

/// `attn_split_<sfx>(q, k, v, keep, out, part, ticket, a)`: `part` holds the f32 chunk
/// partials when `a.nsplit > 1` (else 0); `ticket` is one u32 a query row, zero at the
/// first launch (the kernel leaves it zero): the row's last block merges its partials. With
/// `ticket` 0 the partials are left for [`attn_combine`].
pub fn attn_split(sfx: Sfx, io: AttnIo, part: u64, ticket: u64, a: AttnArgs) -> Kernel {
    let args = io.ptrs().ptr(part).ptr(ticket).pod(a);
    Kernel::new(Lib::Attention, format!("attn_split_{}", sfx.name()), args)
}

/// Mirrors `AttnCw` in `attention.cu`: what the fused decode kernel (`attn_split_cw_*`,
/// `Op::CachedAttention`) reads besides the caches — this call's k/v rows (element strides
/// batch, head, seq), the f32 cos/sin rows of its queries (`[sq, n_rot / 2]`, 0 without a
/// rotation), where its staged rows start in shared memory (floats), and the weights it
/// requests into L2 for the products after it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AttnCw {
    pub kn: u64,
    pub vn: u64,
    pub cos: u64,
    pub sin: u64,
    pub kn_st: [i64; 3],
    pub vn_st: [i64; 3],
    pub n_rot: i32,
    pub style: i32,
    pub stage: i32,
    /// How many of `pf` / `pf_bytes` hold weight ranges the kernel requests into L2.
    pub pf_n: i32,
    /// Up to four weight ranges (16-byte aligned starts, sizes multiples of 16) of the
    /// products that follow the attention (`exec::l2_prefetch`).
    pub pf: [u64; 4],
    pub pf_bytes: [u64; 4],
}

/// `attn_split_cw_<sfx>(q, k, v, keep, out, part, ticket, a, cw)`: [`attn_split`] that
/// first rotates q and this call's keys (`cw.n_rot > 0`), writes the new k/v rows into the
/// caches `k`/`v` at `*a.past`, and takes the new keys from its own staged copy.
pub fn attn_split_cw(
    sfx: Sfx,
    io: AttnIo,
    part: u64,
    ticket: u64,
    a: AttnArgs,
    cw: AttnCw,
) -> Kernel {
    let args = io.ptrs().ptr(part).ptr(ticket).pod(a).pod(cw);
    Kernel::new(
        Lib::Attention,
        format!("attn_split_cw_{}", sfx.name()),
        args,
    )
}

/// `attn_combine_<sfx>(part, out, a)`.
pub fn attn_combine(sfx: Sfx, part: u64, out: u64, a: AttnArgs) -> Kernel {
    let args = KArgs::new().ptr(part).ptr(out).pod(a);
    Kernel::new(Lib::Attention, format!("attn_combine_{}", sfx.name()), args)
}

/// `attn_keep_<sfx>(m, keep, n)`: a mask of any dtype but u8 / bool to a u8 keep mask.
pub fn attn_keep(sfx: Sfx, m: u64, keep: u64, n: i64) -> Kernel {
    let args = KArgs::new().ptr(m).ptr(keep).i64(n);
    Kernel::new(Lib::Attention, format!("attn_keep_{}", sfx.name()), args)
}
