//! Family functions of `kernels/attention.cu`. Only the keep-mask conversion is here so far;
//! the flash / mma / split kernels are still named and packed in
//! `lower/transformer_attention.rs` (their `AttnArgs` mirror lives there).
use super::{Kernel, Lib, Sfx};
use crate::lower::KArgs;

/// `attn_keep_<sfx>(m, keep, n)`: a mask of any dtype but u8 / bool to a u8 keep mask.
pub fn attn_keep(sfx: Sfx, m: u64, keep: u64, n: i64) -> Kernel {
    let args = KArgs::new().ptr(m).ptr(keep).i64(n);
    Kernel::new(Lib::Attention, format!("attn_keep_{}", sfx.name()), args)
}
