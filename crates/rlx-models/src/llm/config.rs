//! A decoder's hyperparameters read from a GGUF's `<arch>.*` metadata, with llama.cpp's
//! defaults and per-architecture switches (facts from llama.cpp's `llama-model.cpp`,
//! `llama-hparams.cpp` and `src/models/{llama,qwen2,gemma3}.cpp`).
use crate::ModelError;
use rlx_io::gguf::{GgmlType, Gguf, Metadata, Value};
use rlx_ir::{Activation, QuantScheme, RopeStyle};
use std::collections::BTreeMap;

/// The architectures the builder handles, as `general.architecture` spells them.
pub const SUPPORTED_ARCHS: &[&str] = &["llama", "qwen2", "gemma3"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Gemma3,
}

impl Arch {
    pub fn parse(name: &str) -> Result<Arch, ModelError> {
        Ok(match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "gemma3" => Arch::Gemma3,
            _ => {
                return Err(ModelError::UnsupportedArch {
                    arch: name.to_string(),
                    supported: SUPPORTED_ARCHS,
                })
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Gemma3 => "gemma3",
        }
    }
}

/// How one GGUF tensor is stored, which decides the op that consumes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// F32, F16 or BF16: an ordinary tensor of that dtype.
    Plain(rlx_ir::DType),
    /// Packed ggml blocks, kept as U8 rows for `DequantMatMul` / `Dequantize`.
    Packed(QuantScheme),
}

impl WeightFormat {
    /// The format of a ggml type; `None` for a type rlx cannot run.
    pub fn of(ty: GgmlType) -> Option<WeightFormat> {
        use rlx_ir::DType;
        match ty {
            GgmlType::F32 => Some(WeightFormat::Plain(DType::F32)),
            GgmlType::F16 => Some(WeightFormat::Plain(DType::F16)),
            GgmlType::BF16 => Some(WeightFormat::Plain(DType::BF16)),
            t => QuantScheme::try_from(t).ok().map(WeightFormat::Packed),
        }
    }
}

/// Everything the graph builder needs to know about a model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlmConfig {
    pub arch: Arch,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Size of one key head (`attention.key_length`, default n_embd / n_head).
    pub head_dim: usize,
    /// Size of one value head (`attention.value_length`, default head_dim).
    pub head_dim_v: usize,
    pub n_ff: usize,
    pub vocab: usize,
    /// Training context (`context_length`): the RoPE tables' length.
    pub ctx: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
    /// Gemma3's sliding-window layers rotate with their own base.
    pub rope_base_swa: Option<f32>,
    /// Positions are multiplied by this (`1 / rope.scaling.factor`, linear scaling).
    pub rope_freq_scale: f32,
    /// Dims of each head that rotate (`rope.dimension_count`, default head_dim).
    pub n_rot: usize,
    pub rope_style: RopeStyle,
    /// Gemma3's window (keys within the last `w` positions, the query's own included).
    pub sliding_window: Option<usize>,
    /// Per layer: true where it attends through the sliding window.
    pub swa_layers: Vec<bool>,
    /// No `output.weight`: the LM head is `token_embd`.
    pub tied_head: bool,
    /// q/k/v carry biases (qwen2, and llama files that have them).
    pub qkv_bias: bool,
    /// qwen2's optional `output.bias`.
    pub output_bias: bool,
    /// Gemma3 multiplies the embedding rows by √n_embd.
    pub embed_scale: Option<f32>,
    /// Gemma3's per-head RMS norms of q and k (before RoPE).
    pub qk_norm: bool,
    /// Gemma3's norms after attention and after the FFN, before each residual add.
    pub post_norms: bool,
    /// The gated FFN's activation on the gate: SiLU (SwiGLU) or tanh-GELU (GeGLU).
    pub ffn_act: Activation,
    /// The attention score scale (1/√head_dim except for gemma3-27B).
    pub attn_scale: f32,
    /// Gemma's `final_logit_softcapping`: logits = c·tanh(logits / c).
    pub final_softcap: Option<f32>,
    /// Every tensor's name and storage format, as the file holds them.
    pub tensors: BTreeMap<String, WeightFormat>,
}

/// An optional float key, f32 or f64 as stored.
fn opt_f32(md: &Metadata, key: &str) -> Option<f32> {
    match md.get(key)? {
        Value::F32(x) => Some(*x),
        Value::F64(x) => Some(*x as f32),
        _ => None,
    }
}

fn opt_usize(md: &Metadata, key: &str) -> Result<Option<usize>, ModelError> {
    match md.get(key) {
        None => Ok(None),
        Some(_) => Ok(Some(md.get_usize(key)?)),
    }
}

/// The largest size any dimension key may give (16M: past every released model's widths,
/// vocabularies and contexts), so that products of a few sizes cannot overflow and a
/// hostile file cannot ask for an allocation by its metadata alone.
pub const MAX_DIM: usize = 1 << 24;

/// A float from the metadata that must be finite and positive (`zero_ok`: or zero): a RoPE
/// base of 0 or -1, or a negative epsilon, would run and give NaN or garbage.
fn finite(key: &str, x: f32, zero_ok: bool) -> Result<f32, ModelError> {
    if x.is_finite() && (x > 0.0 || (zero_ok && x == 0.0)) {
        return Ok(x);
    }
    let rule = if zero_ok {
        "finite and >= 0"
    } else {
        "finite and > 0"
    };
    Err(ModelError::BadMetadata {
        key: key.to_string(),
        reason: format!("{x} must be {rule}"),
    })
}

/// A size from the metadata: positive and at most [`MAX_DIM`].
fn positive(key: &str, n: usize) -> Result<usize, ModelError> {
    if n == 0 || n > MAX_DIM {
        return Err(ModelError::BadMetadata {
            key: key.to_string(),
            reason: format!("{n} must be in 1..={MAX_DIM}"),
        });
    }
    Ok(n)
}

/// llama.cpp's SWA layer pattern: a per-layer bool array, or a period `n` where layer `il`
/// slides when `il % n < n - 1` (so the last of every `n` is dense; `n = 0` makes all slide).
fn swa_layers(md: &Metadata, key: &str, n_layer: usize) -> Result<Vec<bool>, ModelError> {
    if let Ok(v) = md.get_bool_array(key) {
        if v.len() < n_layer {
            return Err(ModelError::BadMetadata {
                key: key.into(),
                reason: format!("{} entries for {n_layer} layers", v.len()),
            });
        }
        return Ok(v[..n_layer].to_vec());
    }
    let n = opt_usize(md, key)?.unwrap_or(6);
    Ok((0..n_layer).map(|il| n == 0 || il % n < n - 1).collect())
}

impl LlmConfig {
    /// Read the config from a GGUF's metadata and tensor table.
    pub fn from_gguf(gguf: &Gguf) -> Result<LlmConfig, ModelError> {
        let md = gguf.metadata();
        let arch = Arch::parse(md.get_str("general.architecture")?)?;
        let a = arch.name();
        let key = |k: &str| format!("{a}.{k}");
        let n_layer = positive(&key("block_count"), md.get_usize(&key("block_count"))?)?;
        // Every layer has its own tensors; more layers than tensors is a wrong count.
        if n_layer > gguf.tensors().len() {
            return Err(ModelError::BadMetadata {
                key: key("block_count"),
                reason: format!(
                    "{n_layer} layers, but the file holds {} tensors",
                    gguf.tensors().len()
                ),
            });
        }
        let n_embd = positive(
            &key("embedding_length"),
            md.get_usize(&key("embedding_length"))?,
        )?;
        let n_head = positive(
            &key("attention.head_count"),
            md.get_usize(&key("attention.head_count"))?,
        )?;
        let n_head_kv = opt_usize(md, &key("attention.head_count_kv"))?.unwrap_or(n_head);
        if n_head_kv == 0 || !n_head.is_multiple_of(n_head_kv) {
            return Err(ModelError::BadMetadata {
                key: key("attention.head_count_kv"),
                reason: format!("{n_head_kv} KV heads do not divide {n_head} heads"),
            });
        }
        let head_dim = opt_usize(md, &key("attention.key_length"))?.unwrap_or(n_embd / n_head);
        let head_dim = positive(&key("attention.key_length"), head_dim)?;
        let head_dim_v = opt_usize(md, &key("attention.value_length"))?.unwrap_or(head_dim);
        let head_dim_v = positive(&key("attention.value_length"), head_dim_v)?;
        let n_ff = positive(
            &key("feed_forward_length"),
            md.get_usize(&key("feed_forward_length"))?,
        )?;
        let vocab = match opt_usize(md, &key("vocab_size"))? {
            Some(v) => v,
            None => md.get_strings("tokenizer.ggml.tokens")?.len(),
        };
        let vocab = positive(&key("vocab_size"), vocab)?;
        let ctx = positive(
            &key("context_length"),
            md.get_usize(&key("context_length"))?,
        )?;
        let eps_key = key("attention.layer_norm_rms_epsilon");
        let rms_eps = finite(&eps_key, md.get_f32(&eps_key)?, true)?;
        let base_key = key("rope.freq_base");
        let rope_base = finite(&base_key, opt_f32(md, &base_key).unwrap_or(10000.0), false)?;
        let rope_freq_scale = match opt_f32(md, &key("rope.scaling.factor"))
            .or_else(|| opt_f32(md, &key("rope.scale_linear")))
        {
            Some(f) if f != 0.0 => 1.0 / finite(&key("rope.scaling.factor"), f, false)?,
            _ => 1.0,
        };
        let n_rot = opt_usize(md, &key("rope.dimension_count"))?.unwrap_or(head_dim);
        if n_rot == 0 || n_rot % 2 == 1 || n_rot > head_dim {
            return Err(ModelError::BadMetadata {
                key: key("rope.dimension_count"),
                reason: format!("{n_rot} must be even and at most the head size {head_dim}"),
            });
        }
        let mut tensors = BTreeMap::new();
        for t in gguf.tensors() {
            let ty = t.ggml_type()?;
            let f = WeightFormat::of(ty).ok_or_else(|| ModelError::UnsupportedTensorType {
                name: t.name().to_string(),
                ty: ty.name().to_string(),
            })?;
            tensors.insert(t.name().to_string(), f);
        }
        let tied_head = !tensors.contains_key("output.weight");
        let output_bias = tensors.contains_key("output.bias");
        let qkv_bias = arch == Arch::Qwen2 || tensors.contains_key("blk.0.attn_q.bias");
        let mut cfg = LlmConfig {
            arch,
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            head_dim_v,
            n_ff,
            vocab,
            ctx,
            rms_eps,
            rope_base,
            rope_base_swa: None,
            rope_freq_scale,
            n_rot,
            // llama.cpp's llama_model_rope_type: LLAMA is NORM (adjacent pairs; the HF
            // converter permuted q/k for it), QWEN2 and GEMMA3 are NEOX (halves).
            rope_style: match arch {
                Arch::Llama => RopeStyle::Interleaved,
                Arch::Qwen2 | Arch::Gemma3 => RopeStyle::Half,
            },
            sliding_window: None,
            swa_layers: vec![false; n_layer],
            tied_head,
            qkv_bias,
            output_bias,
            embed_scale: None,
            qk_norm: false,
            post_norms: false,
            ffn_act: Activation::Silu,
            attn_scale: 1.0 / (head_dim as f32).sqrt(),
            final_softcap: None,
            tensors,
        };
        if arch == Arch::Gemma3 {
            cfg.gemma3(md)?;
        }
        Ok(cfg)
    }

    fn gemma3(&mut self, md: &Metadata) -> Result<(), ModelError> {
        let key = |k: &str| format!("gemma3.{k}");
        if let Some(w) = opt_usize(md, &key("attention.sliding_window"))?.filter(|&w| w > 0) {
            self.sliding_window = Some(w);
            self.swa_layers =
                swa_layers(md, &key("attention.sliding_window_pattern"), self.n_layer)?;
            // llama.cpp's default for the SWA base when the key is absent.
            let base_key = key("rope.freq_base_swa");
            let base = opt_f32(md, &base_key).unwrap_or(10000.0);
            self.rope_base_swa = Some(finite(&base_key, base, false)?);
        }
        self.embed_scale = Some((self.n_embd as f32).sqrt());
        self.qk_norm = true;
        self.post_norms = true;
        // llama.cpp's LLM_FFN_GELU is ggml_gelu, the tanh approximation.
        self.ffn_act = Activation::GeluApprox;
        // gemma_pytorch: 27B (62 layers) scales by 1/√(n_embd / n_head), the rest by
        // 1/√head_dim.
        self.attn_scale = if self.n_layer == 62 {
            1.0 / ((self.n_embd / self.n_head) as f32).sqrt()
        } else {
            1.0 / (self.head_dim as f32).sqrt()
        };
        let cap_key = key("final_logit_softcapping");
        self.final_softcap = match opt_f32(md, &cap_key).filter(|&c| c != 0.0) {
            Some(c) => Some(finite(&cap_key, c, false)?),
            None => None,
        };
        Ok(())
    }

    /// The RoPE base and position scale of layer `il`.
    pub fn rope_for_layer(&self, il: usize) -> (f32, f32) {
        match (self.swa_layers.get(il), self.rope_base_swa) {
            // llama.cpp's rope_freq_scale_train_swa is 1: local layers are never scaled.
            (Some(true), Some(b)) => (b, 1.0),
            _ => (self.rope_base, self.rope_freq_scale),
        }
    }

    /// The storage format of tensor `name`, or a typed error naming it.
    pub fn format(&self, name: &str) -> Result<WeightFormat, ModelError> {
        self.tensors
            .get(name)
            .copied()
            .ok_or_else(|| ModelError::MissingTensor {
                name: name.to_string(),
                arch: self.arch.name().to_string(),
            })
    }
}
