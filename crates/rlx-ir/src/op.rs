//! The op set. Parameters live here so every crate sees one definition; each op's shape
//! rule and builder live in `ops/<group>.rs`.
use crate::{DType, Dim, MiniFloat};
use serde::{Deserialize, Serialize};

/// Unary elementwise functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Activation {
    /// Exact GELU: x·Φ(x) with erf.
    Gelu,
    /// Tanh approximation of GELU.
    GeluApprox,
    Silu,
    Relu,
    Sigmoid,
    Tanh,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Neg,
    Abs,
    Sin,
    Cos,
    Erf,
    Softplus,
    Recip,
    Square,
}

impl Activation {
    /// The activations defined on integers too (two's-complement, wrapping: `−MIN = MIN`);
    /// every other one needs a float operand.
    pub fn takes_integers(self) -> bool {
        matches!(self, Activation::Neg | Activation::Abs)
    }

    pub const ALL: [Activation; 18] = [
        Activation::Gelu,
        Activation::GeluApprox,
        Activation::Silu,
        Activation::Relu,
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Exp,
        Activation::Log,
        Activation::Sqrt,
        Activation::Rsqrt,
        Activation::Neg,
        Activation::Abs,
        Activation::Sin,
        Activation::Cos,
        Activation::Erf,
        Activation::Softplus,
        Activation::Recip,
        Activation::Square,
    ];
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Pow,
    /// ONNX Mod. `fmod = false`: the remainder takes the divisor's sign (Python's `%`,
    /// `a − floor(a/b)·b`); `fmod = true`: the dividend's (C's `fmod`, truncated division).
    /// Integers: `x mod 0 = 0`. Floats: `x mod 0 = NaN`.
    Mod {
        fmod: bool,
    },
    /// Bitwise and / or / xor of integers; on Bool they are the logical ops (ONNX And, Or,
    /// Xor; Not is Xor with true, a bitwise Not is Xor with −1, see `Graph::bit_not`).
    BitAnd,
    BitOr,
    BitXor,
    /// `a << b` in the dtype's width; a shift of ≥ 64 or < 0 gives 0.
    ShiftLeft,
    /// `a >> b`, arithmetic (logical for U8, whose values are non-negative); a shift of
    /// ≥ 64 or < 0 gives 0 (−1 for a negative signed `a`).
    ShiftRight,
}

impl BinaryOp {
    /// Ops defined on integers and Bool only (a float operand is a shape error).
    pub fn is_integer_only(self) -> bool {
        matches!(
            self,
            BinaryOp::BitAnd
                | BinaryOp::BitOr
                | BinaryOp::BitXor
                | BinaryOp::ShiftLeft
                | BinaryOp::ShiftRight
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
}

/// Which positions a query may attend to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MaskKind {
    None,
    /// Query i sits at absolute position `Lk - Lq + i` (the last Lq positions, as in
    /// KV-cache decode) and attends to keys at positions `<=` its own.
    Causal,
    /// Causal, and only the last `w` positions up to and including the query's own.
    SlidingWindow(usize),
    /// A 4th input, a keep-mask `[B, Sk]`: nonzero = attend, 0 = ignore.
    Custom,
}

/// Memory layout of attention's q/k/v (and output).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttentionLayout {
    /// `[B, S, H*D]`
    Packed,
    /// `[B, S, H, D]`
    Bshd,
    /// `[B, H, S, D]`
    Bhsd,
}

/// Parameters of `Op::Attention`. KV heads are read from k's shape; fewer KV heads than
/// query heads is grouped-query attention (query head h uses KV head h / (H / Hkv)).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AttentionSpec {
    pub num_heads: usize,
    pub head_dim: usize,
    /// Head size of v (and the output); None = head_dim.
    pub v_head_dim: Option<usize>,
    pub mask_kind: MaskKind,
    /// Multiplier of q·k; None = 1/sqrt(head_dim).
    pub score_scale: Option<f32>,
    /// Gemma-style soft cap: scores become `cap * tanh(scores / cap)` before masking.
    pub attn_logit_softcap: Option<f32>,
    pub layout: AttentionLayout,
    /// A last input `past` (I64, one element): how many positions precede these queries in
    /// k/v (a KV cache). Query i then sits at `past + i`, keys at or after `past + Lq` are
    /// ignored (the cache's unwritten tail), and the cost follows the valid length. Without
    /// it, query i sits at `Lk − Lq + i` (see `MaskKind::Causal`).
    #[serde(default)]
    pub past: bool,
}

impl AttentionSpec {
    /// `[B, S, H*D]` layout, no mask, default scale.
    pub fn new(num_heads: usize, head_dim: usize) -> AttentionSpec {
        AttentionSpec {
            num_heads,
            head_dim,
            v_head_dim: None,
            mask_kind: MaskKind::None,
            score_scale: None,
            attn_logit_softcap: None,
            layout: AttentionLayout::Packed,
            past: false,
        }
    }
    /// Take the `past` input (see the field).
    pub fn with_past(mut self) -> Self {
        self.past = true;
        self
    }
    pub fn causal(mut self) -> Self {
        self.mask_kind = MaskKind::Causal;
        self
    }
    pub fn mask(mut self, kind: MaskKind) -> Self {
        self.mask_kind = kind;
        self
    }
    pub fn layout(mut self, layout: AttentionLayout) -> Self {
        self.layout = layout;
        self
    }
    pub fn v_head_dim(mut self, d: usize) -> Self {
        self.v_head_dim = Some(d);
        self
    }
    pub fn scale(mut self, s: f32) -> Self {
        self.score_scale = Some(s);
        self
    }
    pub fn softcap(mut self, cap: f32) -> Self {
        self.attn_logit_softcap = Some(cap);
        self
    }
    pub fn v_dim(&self) -> usize {
        self.v_head_dim.unwrap_or(self.head_dim)
    }
    pub fn effective_scale(&self) -> f32 {
        self.score_scale
            .unwrap_or(1.0 / (self.head_dim as f32).sqrt())
    }
}

/// The rotation of `Op::CachedAttention`'s q and k (its head size is the spec's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CachedRope {
    pub n_rot: usize,
    pub style: RopeStyle,
}

/// Pairing of rotated dims in RoPE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RopeStyle {
    /// Dim i pairs with i + n_rot/2 (GPT-NeoX / Hugging Face `rotate_half`).
    Half,
    /// Dim 2i pairs with 2i+1 (GPT-J / original llama).
    Interleaved,
}

/// Conv / conv-gradient geometry (2-D; a 1-D conv is `[N,C,1,L]` with kernel `[k,1]`, its
/// length parameters at index 0 — see DESIGN.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConvSpec {
    pub kernel_size: [usize; 2],
    pub stride: [usize; 2],
    /// Symmetric zero padding per spatial dim.
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
    pub groups: usize,
}

impl ConvSpec {
    pub fn new(kernel_size: [usize; 2]) -> ConvSpec {
        ConvSpec {
            kernel_size,
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }
    pub fn stride(mut self, s: [usize; 2]) -> Self {
        self.stride = s;
        self
    }
    pub fn padding(mut self, p: [usize; 2]) -> Self {
        self.padding = p;
        self
    }
    pub fn dilation(mut self, d: [usize; 2]) -> Self {
        self.dilation = d;
        self
    }
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PoolKind {
    Max,
    /// Average over the window; padded positions count (PyTorch's `count_include_pad=True`).
    Avg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PoolSpec {
    pub kind: PoolKind,
    pub kernel_size: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

/// NumPy's FFT normalisation modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FftNorm {
    /// Forward unscaled, inverse scaled by 1/n.
    Backward,
    /// Both scaled by 1/sqrt(n).
    Ortho,
    /// Forward scaled by 1/n, inverse unscaled.
    Forward,
}

/// Packed weight storage schemes: GGUF's block layouts (ggml's `block_*` structs,
/// little-endian). The 32-value blocks are "type-0" (x = d·q) or "type-1" (x = d·q + m);
/// the K-quants pack 256 values a super-block with sub-block scales quantised again.
// ggml's own spellings (`Q4_K`), so the names grep across projects and match GGUF's.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum QuantScheme {
    /// f16 scale d + 32 × i8: x = d·q. 34 bytes a block.
    Q8_0,
    /// f16 scale d + 16 bytes of nibbles: x = d·(q − 8). 18 bytes a block.
    Q4_0,
    /// f16 scale d, f16 min m + 16 bytes of nibbles: x = d·q + m. 20 bytes a block.
    Q4_1,
    /// f16 d, 4 bytes of fifth bits, 16 nibble bytes: x = d·(q − 16). 22 bytes a block.
    Q5_0,
    /// f16 d, f16 m, 4 bytes of fifth bits, 16 nibble bytes: x = d·q + m. 24 bytes a block.
    Q5_1,
    /// 256 values: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins for 8 sub-blocks of
    /// 32, 128 nibble bytes: x = d·sc·q − dmin·m. 144 bytes a super-block.
    Q4_K,
    /// Q4_K's layout plus 32 bytes of fifth bits: x = d·sc·q − dmin·m, q < 32. 176 bytes.
    Q5_K,
    /// 256 values: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 × i8 scales of
    /// sub-blocks of 16, f16 d last: x = d·sc·(q − 32). 210 bytes a super-block.
    Q6_K,
    /// Plain f16 values (GGUF F16) as packed rows: "blocks" of 32 little-endian halves,
    /// 64 bytes, no scale. A half-precision weight in this form runs through the same decode
    /// GEMV and fusions as the quantized ones, with x kept in f32.
    F16,
    /// Plain bf16 values as packed rows, as `F16`.
    BF16,
}

impl QuantScheme {
    /// Every scheme, in declaration order.
    pub const ALL: [QuantScheme; 10] = [
        QuantScheme::Q8_0,
        QuantScheme::Q4_0,
        QuantScheme::Q4_1,
        QuantScheme::Q5_0,
        QuantScheme::Q5_1,
        QuantScheme::Q4_K,
        QuantScheme::Q5_K,
        QuantScheme::Q6_K,
        QuantScheme::F16,
        QuantScheme::BF16,
    ];

    /// Values in one block (a packed row's length must be a multiple of it).
    pub fn block_len(self) -> usize {
        match self {
            QuantScheme::Q4_K | QuantScheme::Q5_K | QuantScheme::Q6_K => 256,
            _ => 32,
        }
    }

    /// Bytes of one block.
    pub fn block_bytes(self) -> usize {
        match self {
            QuantScheme::Q8_0 => 34,
            QuantScheme::Q4_0 => 18,
            QuantScheme::Q4_1 => 20,
            QuantScheme::Q5_0 => 22,
            QuantScheme::Q5_1 => 24,
            QuantScheme::Q4_K => 144,
            QuantScheme::Q5_K => 176,
            QuantScheme::Q6_K => 210,
            QuantScheme::F16 | QuantScheme::BF16 => 64,
        }
    }

    /// Plain half values (F16, BF16), not a quantized block format.
    pub fn is_half(self) -> bool {
        matches!(self, QuantScheme::F16 | QuantScheme::BF16)
    }
}

/// How ScatterElements / ScatterND combine an update with the value it lands on (ONNX's
/// `reduction`). With `None` a duplicate index keeps the last update in index order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScatterReduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

/// An operand of a region step: a region input or an earlier step's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChainOperand {
    Input(usize),
    Step(usize),
}

/// One elementwise step of a fused region.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChainStep {
    Activation(Activation, ChainOperand),
    Binary(BinaryOp, ChainOperand, ChainOperand),
    Cast(DType, ChainOperand),
    Compare(CompareOp, ChainOperand, ChainOperand),
    /// cond, then, else
    Where(ChainOperand, ChainOperand, ChainOperand),
}

/// Applied to a region's input 0 before the chain runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RegionPrologue {
    None,
    /// Input 0 is `[N,C,H,W]`; the chain sees it resized to `[N,C,2H,2W]`.
    ResizeNearest2x,
}

/// One data-movement step of a `TransformRegion` (applied in order).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TransformStep {
    Reshape(Vec<i64>),
    Transpose(Vec<usize>),
    Narrow { axis: i64, start: usize, len: usize },
    Expand(Vec<Dim>),
}

/// Every op of the IR. See DESIGN.md's op table, and `op_kind.rs` for the checklist of
/// adding one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(OpKind),
    doc = "The kind of an [`Op`], without its parameters. Generated from `Op`'s variants.",
    derive(
        Hash,
        PartialOrd,
        Ord,
        strum::VariantArray,
        strum::EnumCount,
        strum::IntoStaticStr
    )
)]
pub enum Op {
    // ---- leaves
    Input {
        name: String,
    },
    Param {
        name: String,
    },
    /// Little-endian bytes in the node's dtype.
    Constant {
        data: Vec<u8>,
    },

    // ---- elementwise
    Activation(Activation),
    /// `a op b` with NumPy broadcasting. Floats follow IEEE (Max / Min propagate NaN).
    /// Integers (I64, I32, U8) compute as two's-complement in their own width:
    /// - Add, Sub, Mul wrap (`i32::MAX + 1 = i32::MIN`, U8 `3 − 5 = 254`).
    /// - Div truncates toward zero; `x / 0 = 0`; `MIN / −1 = MIN` (the quotient wraps).
    /// - Pow with exponent ≥ 0 is repeated wrapping multiplication (`0^0 = 1`); with a
    ///   negative exponent it is `1 / a^|b|` truncated toward zero: 1 for base 1, ±1 for
    ///   base −1 (by parity), 0 for every other base (0 included).
    Binary(BinaryOp),
    Compare(CompareOp),
    /// cond, a, b (broadcast)
    Where,
    /// Convert to `to`:
    /// - float → float rounds to nearest even, once (overflow gives ±inf).
    /// - float → integer (I64, I32, U8) truncates toward zero and saturates to the target's
    ///   range; NaN gives 0 (`+inf → i32::MAX`, `3e9 → i32::MAX`, U8 `300 → 255`,
    ///   `−1 → 0`). This is Rust's `as` and CUDA's `cvt.rzi.sat`.
    /// - integer → narrower integer keeps the low bits (two's-complement wrap, as C's
    ///   `(int)` / `(unsigned char)` of an int64, NumPy's `astype` and ONNX Cast): I64
    ///   `2^32 + 5 → I32 5`, `300 → U8 44`, `−1 → U8 255`; widening keeps the value
    ///   (U8 is unsigned).
    /// - integer → float rounds to nearest even, once (no intermediate f32 for f16/bf16).
    /// - → Bool is `x != 0` (NaN is true, `256 → true`); Bool → any type is 0 or 1.
    Cast {
        to: DType,
    },
    /// A float tensor rounded onto the grid of a low-precision float format, as that
    /// format's f32 carrier (the output is always F32; see [`MiniFloat`] for the rounding,
    /// overflow, NaN and −0 rules). Rounding is done from the input's exact value, once.
    FloatRound {
        format: MiniFloat,
        saturate: bool,
    },
    StopGradient,

    // ---- matmul
    MatMul,
    /// a, w, bias: act(a @ w + bias)
    FusedMatMulBiasAct {
        activation: Option<Activation>,
    },
    /// x `[.., K]`, packed U8 weight `[N, K/32 * block_bytes]` → `[.., N]` (x @ Wᵀ)
    DequantMatMul {
        scheme: QuantScheme,
    },
    /// x, packed weight, [gamma `[K]`], [residual `[.., N]`]:
    /// `rms_norm(x)·gamma @ Wᵀ + residual`, the norm over the last dim with `norm_eps` when
    /// present (made by fusion: a decode step's norm, GEMV and residual add in one kernel).
    /// With `glu = Some(gate_first)` (and no norm) x is `[.., 2K]` and the product takes
    /// `silu(gate)·up` of its halves, `FusedSwiGLU { gate_first }`'s value (the down
    /// projection of a SwiGLU MLP reading the gate/up product directly).
    FusedDequantMatMul {
        scheme: QuantScheme,
        norm_eps: Option<f32>,
        residual: bool,
        glu: Option<bool>,
    },
    /// Packed U8 rows `[.., K/block_len * block_bytes]` → f32 `[.., K]`: the blocks of
    /// `scheme` decoded (a quantized embedding table's gathered rows).
    Dequantize {
        scheme: QuantScheme,
    },

    // ---- norms (inputs x, gamma, [beta]); normalise over dims axis..rank
    LayerNorm {
        axis: i64,
        eps: f32,
    },
    RmsNorm {
        axis: i64,
        eps: f32,
    },
    /// x, residual, [bias], gamma, [beta]: layer-norm of x + residual (+ bias) over the last dim
    FusedResidualLN {
        has_bias: bool,
        eps: f32,
    },
    FusedResidualRmsNorm {
        has_bias: bool,
        eps: f32,
    },

    // ---- reductions
    Reduce {
        op: ReduceOp,
        axes: Vec<i64>,
        keep_dim: bool,
    },
    Softmax {
        axis: i64,
    },
    /// Index of the max (first on ties), I64.
    ArgMax {
        axis: i64,
        keep_dim: bool,
    },
    /// logits `[N,C]`, dense targets `[N,C]` → `[N]`
    SoftmaxCrossEntropy,
    /// logits `[N,C]`, integer labels `[N]` → `[N]`
    SoftmaxCrossEntropyWithLogits,
    /// logits, labels (integer `[N]` or dense `[N,C]`), d_loss `[N]` → dlogits `[N,C]`
    SoftmaxCrossEntropyBackward,

    // ---- shape
    /// ONNX rules: -1 infers one dim, 0 copies the input dim; an expanding reshape of a
    /// 1-element tensor broadcasts.
    Reshape {
        shape: Vec<i64>,
    },
    Expand {
        shape: Vec<Dim>,
    },
    Transpose {
        perm: Vec<usize>,
    },
    Narrow {
        axis: i64,
        start: usize,
        len: usize,
    },
    Concat {
        axis: i64,
    },
    /// data, indices (float or int); output = indices.shape spliced into data.shape at axis
    Gather {
        axis: i64,
    },
    /// Constant padding, `pads[i] = [before, after]` per axis. The fill `value` is
    /// converted to the dtype as `Cast` converts a float: into an integer dtype truncated
    /// toward zero and saturated (−1.5 → 0 in U8, NaN → 0), into Bool `value != 0`.
    Pad {
        pads: Vec<[usize; 2]>,
        /// May be infinite (max-pool style padding); JSON writes that as a string.
        #[serde(with = "crate::serialize::json_float")]
        value: f64,
    },
    /// ONNX Slice: per listed axis, start/end (negative from the end, clamped) and step (≠ 0).
    Slice {
        axes: Vec<i64>,
        starts: Vec<i64>,
        ends: Vec<i64>,
        steps: Vec<i64>,
    },

    // ---- transformer
    /// q, k, v, [mask]
    Attention(AttentionSpec),
    /// x, cos, sin. x is viewed as `[.., head_dim]` (a packed last dim `H*head_dim` is split);
    /// cos/sin broadcast against that view with last dim n_rot/2; only the first n_rot dims
    /// of each head rotate.
    Rope {
        head_dim: usize,
        n_rot: usize,
        style: RopeStyle,
    },
    /// `[.., 2n]` → `[.., n]`: up * silu(gate); `[up ‖ gate]`, or `[gate ‖ up]` when gate_first.
    FusedSwiGLU {
        cast_to: Option<DType>,
        gate_first: bool,
    },
    /// cache, new, pos: writes `new` into `cache` at `pos` (an I64 value with one element)
    /// along `axis` (`cache` and `new` agree on every other dim) and returns the cache. The
    /// cache must be a `Param` or `Input` used by nothing else: the write happens **in
    /// place** in its storage (a param keeps the rows for later runs: it is the KV cache),
    /// never as a copy of the whole buffer. A write past the end (`pos < 0` or
    /// `pos + new.len > cache.len` on `axis`) is a run-time error, never a wild write.
    CacheWrite {
        axis: usize,
    },
    /// cache, new, pos, cos, sin: `CacheWrite(cache, Rope(new, cos, sin), pos)` as one op,
    /// made by fusion (`rlx_opt::FuseRopeCacheWrite`): a decode step rotates each key row
    /// and writes it to the cache in one pass instead of two launches and a round trip.
    /// In place like `CacheWrite`; the rotated rows round to the cache's dtype exactly
    /// where the unfused Rope's output would.
    RopeCacheWrite {
        axis: usize,
        head_dim: usize,
        n_rot: usize,
        style: RopeStyle,
    },
    /// q, k, v, k_cache, v_cache, pos[, cos, sin]: one attention block over a KV cache as
    /// one op, made by fusion (`rlx_opt::FuseCachedAttention`). It means
    /// `Attention(rope(q), CacheWrite(k_cache, rope(k), pos), CacheWrite(v_cache, v, pos),
    /// past = pos)` (the rotations only with `rope`, on cos/sin as `Op::Rope` takes them):
    /// the caches (`[B, ctx, Hkv*D]`, written along axis 1 like `CacheWrite`) are written
    /// **in place** (`Op::written_inputs`), and the output is the attention's. A decode step
    /// then runs its rotations, both cache writes and the attention in one kernel (each
    /// block takes this step's keys from k/v themselves, so no block waits for a write).
    CachedAttention {
        spec: AttentionSpec,
        rope: Option<CachedRope>,
    },

    // ---- vision (NCHW / OIHW)
    /// x, w, [bias]
    Conv(ConvSpec),
    Pool(PoolSpec),
    ResizeNearest2x,
    /// dy, w → dx; `input_hw` is x's spatial size.
    Conv2dBackwardInput {
        spec: ConvSpec,
        input_hw: [usize; 2],
    },
    /// x, dy → dw
    Conv2dBackwardWeight(ConvSpec),
    /// x, dy → dx
    MaxPool2dBackward(PoolSpec),

    // ---- regions (made by fusion)
    /// Inputs broadcast to the output shape; the last step is the result.
    ElementwiseRegion {
        chain: Vec<ChainStep>,
        prologue: RegionPrologue,
    },
    /// Inputs 0..num_batch_inputs are `[1, ..]` samples; the chain runs on each with
    /// `Input(0)` = that sample and `Input(i)` (i ≥ 1) = shared input `num_batch_inputs + i - 1`;
    /// the results are concatenated on axis 0.
    BatchElementwiseRegion {
        chain: Vec<ChainStep>,
        num_batch_inputs: usize,
        prologue: RegionPrologue,
    },
    TransformRegion {
        steps: Vec<TransformStep>,
    },

    // ---- audio
    /// Complex FFT over the second-to-last axis of `[.., n, 2]` (re, im).
    Fft {
        inverse: bool,
        norm: FftNorm,
    },
    /// power spectrum `[.., frames, n_freq]`, filterbank `[n_freq, n_mels]` → Whisper log-mel;
    /// the (max − 8) clamp takes the max over each leading-batch item's last two axes.
    LogMel,
    /// spec, filterbank, dy → dspec
    LogMelBackward,

    // Ops added after format version 1 sit last, so that every file written before them
    // keeps its variant indices (the binary body is postcard, which encodes the index).

    // ---- shape
    /// x repeated `repeats[i]` times along each axis i (ONNX Tile; one entry per axis).
    Tile {
        repeats: Vec<usize>,
    },
    // ---- reduce
    /// Running sum along `axis` (ONNX CumSum): `exclusive` leaves the element itself out,
    /// `reverse` sums from the end.
    CumSum {
        axis: i64,
        exclusive: bool,
        reverse: bool,
    },
    /// x → I64 indices `[.., k, ..]` of the `k` largest (or smallest) entries along `axis`,
    /// best first; equal values keep the lower index first; NaN counts as the largest. The
    /// values are `GatherElements(x, indices)` (see `Graph::top_k`): one op, one output,
    /// and the values' gradient is the gather's. `sorted = false` may return any order;
    /// this IR always sorts.
    TopK {
        k: usize,
        axis: i64,
        largest: bool,
        sorted: bool,
    },
    // ---- index (ONNX's gather / scatter family and the index generators). Indices are
    // integers of any width; a negative index counts from the end of its axis; one out of
    // range is a run-time error naming the node.
    /// data, indices (rank of data): `out[i] = data[i with i[axis] = indices[i]]`; the
    /// output has the indices' dims and data's dtype.
    GatherElements {
        axis: i64,
    },
    /// data `[b.., d..]`, indices `[b.., q.., k]` → `[b.., q.., d[k..]]` (ONNX GatherND: the
    /// first `batch_dims` dims are shared, each index row of length k picks a slice).
    GatherND {
        batch_dims: usize,
    },
    /// data, indices, updates (indices' dims): a copy of data with `updates[i]` combined
    /// into position `i with i[axis] = indices[i]` (in row-major order of the updates).
    ScatterElements {
        axis: i64,
        reduction: ScatterReduction,
    },
    /// data `[d..]`, indices `[q.., k]`, updates `[q.., d[k..]]`: a copy of data with each
    /// update slice combined into the slice its index row names.
    ScatterND {
        reduction: ScatterReduction,
    },
    /// indices, values `[off, on]` → the indices' dims with `depth` inserted at `axis`
    /// (`−rank−1..=rank`), values' dtype: `on` where the index (negative counts from the
    /// end) equals the position, else `off`; an index out of `−depth..depth` is all `off`.
    OneHot {
        axis: i64,
        depth: usize,
    },
    /// start, limit, delta (one-element tensors of one dtype) → `[len]`:
    /// `start + i·delta`. The length must be known when the graph is built (an importer
    /// folds it from constant inputs); a run whose values give another length,
    /// `max(ceil((limit − start) / delta), 0)`, is an error.
    Range {
        len: usize,
    },

    // ---- collective (the graph is one rank's program, SPMD: every rank of a group runs
    // the same graph on its own data, and each collective meets its twins on the other
    // ranks in graph order). A backend runs them over the communicator it was given; with
    // none, the group is one rank and each collective is the identity.
    /// x → x combined over the ranks (every rank gets the same result; `Mean` divides the
    /// sum by the group's size). NCCL's `ncclAllReduce`.
    AllReduce {
        reduce: CollectiveReduce,
    },
    /// x → the ranks' x concatenated along `axis` in rank order (`ranks` of them; the axis
    /// grows `ranks` times). NCCL's `ncclAllGather` when `axis` is the outermost.
    AllGather {
        axis: usize,
        ranks: usize,
    },
    /// x → the ranks' x combined, then cut along `axis` into `ranks` equal parts: rank r
    /// keeps part r (the axis must divide). NCCL's `ncclReduceScatter`.
    ReduceScatter {
        reduce: CollectiveReduce,
        axis: usize,
        ranks: usize,
    },
}

/// How a collective combines the ranks' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CollectiveReduce {
    Sum,
    /// The sum divided by the number of ranks (NCCL's `ncclAvg`).
    Mean,
    Max,
}

impl CollectiveReduce {
    pub const ALL: [CollectiveReduce; 3] = [
        CollectiveReduce::Sum,
        CollectiveReduce::Mean,
        CollectiveReduce::Max,
    ];
}
