//! Library shards: the two big kernel libraries compiled in parts. NVRTC takes about a minute
//! for each of `quant` and `attention` whole (most of a model's first load on a fresh
//! machine, before the disk cache holds them), yet a model launches the kernels of a few
//! weight schemes in one float type. Their instantiations sit inside `RLX_GATE_<tag>(…)`
//! (`kernels/common.cuh`); a shard's text turns on one tag's gate, so a model compiles only
//! the shards it launches from. [`Lib::shard_of`] names the shard that holds a kernel; the
//! device falls back to the whole library if a shard lacks it, and CI checks that none does.
use super::{Lib, COMMON};

/// Every gate `kernels/common.cuh` defines (a shard's text defines them all itself).
pub const GATES: [&str; 17] = [
    "base", "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k",
    "q8_0p", "q4_0p", "q4_1p", "q5_0p", "q5_1p",
];

/// Quant's shard tags: `base` (the scheme-free kernels), then the weight schemes as kernel
/// names spell them.
const QUANT_TAGS: [&str; 16] = [
    "base", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "f16", "bf16", "q8_0p",
    "q4_0p", "q4_1p", "q5_0p", "q5_1p",
];

/// Quant's kernels that carry a scheme: the scheme's name follows the prefix.
const SCHEME_PREFIXES: [&str; 5] = [
    "dq_gemv_st_",
    "dq_gemv_ts_",
    "dq_split_w_",
    "dq_dequant_",
    "dq_gemv_",
];

impl Lib {
    /// The shard tags this library is split by; empty for a library compiled whole.
    pub fn shard_tags(self) -> &'static [&'static str] {
        match self {
            Lib::Quant => &QUANT_TAGS,
            Lib::Attention => &["f32", "f16", "bf16"],
            _ => &[],
        }
    }

    /// The shard that holds kernel `func`; None for a library compiled whole.
    pub fn shard_of(self, func: &str) -> Option<&'static str> {
        match self {
            Lib::Quant => Some(quant_shard(func)),
            // Kernels end in their float type; the few without one (attn_keep_i32, …) are in
            // every shard.
            Lib::Attention => Some(match func.rsplit('_').next() {
                Some("f16") => "f16",
                Some("bf16") => "bf16",
                _ => "f32",
            }),
            _ => None,
        }
    }
}

fn quant_shard(func: &str) -> &'static str {
    for prefix in SCHEME_PREFIXES {
        let Some(rest) = func.strip_prefix(prefix) else {
            continue;
        };
        // The longest scheme that rest starts with as a whole token ("q8_0p" before "q8_0").
        let hit = QUANT_TAGS[1..]
            .iter()
            .filter(|s| {
                rest.strip_prefix(**s)
                    .is_some_and(|t| t.is_empty() || t.starts_with('_'))
            })
            .max_by_key(|s| s.len());
        if let Some(s) = hit {
            return s;
        }
    }
    "base"
}

/// The full NVRTC text of `lib`'s shard `tag`: its gates, then `common.cuh`, then the source.
pub fn shard_text(lib: Lib, tag: &str) -> String {
    let mut t = String::from("#define RLX_SHARD\n");
    for g in GATES {
        let body = if g == tag { "__VA_ARGS__" } else { "" };
        t.push_str(&format!("#define RLX_GATE_{g}(...) {body}\n"));
    }
    t.push_str(COMMON);
    t.push('\n');
    t.push_str(lib.source());
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_route_to_their_scheme_or_type() {
        let q = |f| Lib::Quant.shard_of(f).unwrap();
        assert_eq!(q("dq_gemv_st_q5_0_m1_f32"), "q5_0");
        assert_eq!(q("dq_gemv_st_q8_0p_m1d4_f32"), "q8_0p");
        assert_eq!(q("dq_gemv_ts_q4_k_c2_f32"), "q4_k");
        assert_eq!(q("dq_gemv_f16_bf16"), "f16");
        assert_eq!(q("dq_gemv_bf16_f32"), "bf16");
        assert_eq!(q("dq_dequant_q6_k_f16"), "q6_k");
        assert_eq!(q("dq_split_w_q5_1p"), "q5_1p");
        // The weight type of a cast or split is not a scheme: those are scheme-free kernels.
        assert_eq!(q("dq_split_in_f32_f16"), "base");
        assert_eq!(q("dq_cast_out_bf16_f32"), "base");
        assert_eq!(q("dq_swiglu_f32"), "base");
        let a = |f| Lib::Attention.shard_of(f).unwrap();
        assert_eq!(a("attn_fwd_r2_c2_d64_k8_f32"), "f32");
        assert_eq!(a("attn_mma_d64_w2_bf16"), "bf16");
        assert_eq!(a("attn_split_cw_f16"), "f16");
        assert_eq!(a("attn_keep_i64"), "f32");
        assert_eq!(Lib::Norm.shard_of("rms_norm_f32"), None);
        for lib in Lib::ALL {
            for t in lib.shard_tags() {
                assert!(GATES.contains(t), "{t} has no gate");
            }
        }
    }

    #[test]
    fn common_defines_every_gate() {
        let defined: Vec<&str> = COMMON
            .lines()
            .filter_map(|l| l.strip_prefix("#define RLX_GATE_"))
            .filter_map(|l| l.split('(').next())
            .collect();
        assert_eq!(
            defined, GATES,
            "kernels/common.cuh's gates and shard::GATES differ"
        );
    }
}
