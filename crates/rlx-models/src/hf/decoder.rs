//! `LlamaForCausalLM` and `Qwen2ForCausalLM` folders as decoders.
//!
//! The config comes from `config.json` (transformers' field names and class defaults); the
//! tensors from the safetensors, renamed to the GGUF names the decoder graph declares
//! (`model.layers.3.self_attn.q_proj.weight` → `blk.3.attn_q.weight`). HF checkpoints keep q
//! and k as trained and rotate halves of each head (`rotate_half`); llama.cpp's converter
//! permutes llama's q/k rows so that adjacent pairs rotate instead. So an HF llama runs with
//! [`RopeStyle::Half`] on the unpermuted rows, which is the same product (the tests compare
//! against transformers logit by logit).
use super::json::read_json;
use crate::llm::{Arch, LlmConfig, StoredTensor, TensorStore, WeightFormat};
use crate::ModelError;
use rlx_io::safetensors::SafeTensors;
use rlx_ir::{Activation, DType, RopeStyle};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

/// The `architectures` classes this module builds.
pub const HF_DECODER_ARCHS: &[&str] = &["LlamaForCausalLM", "Qwen2ForCausalLM"];

/// A folder's safetensors served under GGUF tensor names; float tensors are converted to
/// `compute` when one is asked for.
pub struct HfStore {
    st: SafeTensors,
    /// GGUF name → HF name.
    names: BTreeMap<String, String>,
    arch: &'static str,
    compute: Option<DType>,
}

/// The GGUF name of an HF decoder tensor; `None` for tensors the decoder does not read
/// (`rotary_emb.inv_freq` buffers in old checkpoints).
fn gguf_name(hf: &str) -> Option<String> {
    let fixed = match hf {
        "model.embed_tokens.weight" => Some("token_embd.weight"),
        "model.norm.weight" => Some("output_norm.weight"),
        "lm_head.weight" => Some("output.weight"),
        "lm_head.bias" => Some("output.bias"),
        _ => None,
    };
    if let Some(f) = fixed {
        return Some(f.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, local) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok()?;
    let local = match local {
        "input_layernorm.weight" => "attn_norm.weight",
        "post_attention_layernorm.weight" => "ffn_norm.weight",
        "self_attn.q_proj.weight" => "attn_q.weight",
        "self_attn.k_proj.weight" => "attn_k.weight",
        "self_attn.v_proj.weight" => "attn_v.weight",
        "self_attn.q_proj.bias" => "attn_q.bias",
        "self_attn.k_proj.bias" => "attn_k.bias",
        "self_attn.v_proj.bias" => "attn_v.bias",
        "self_attn.o_proj.weight" => "attn_output.weight",
        "mlp.gate_proj.weight" => "ffn_gate.weight",
        "mlp.up_proj.weight" => "ffn_up.weight",
        "mlp.down_proj.weight" => "ffn_down.weight",
        _ => return None,
    };
    Some(format!("blk.{layer}.{local}"))
}

/// Little-endian F16/BF16/F32 bytes → `to` bytes.
fn convert(data: &[u8], from: DType, to: DType) -> Vec<u8> {
    use half::{bf16, f16};
    let vals: Vec<f32> = match from {
        DType::F16 => (data.chunks_exact(2))
            .map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        DType::BF16 => (data.chunks_exact(2))
            .map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect(),
        _ => (data.chunks_exact(4))
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    match to {
        DType::F16 => vals
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        DType::BF16 => vals
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect(),
        _ => vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

impl TensorStore for HfStore {
    fn arch(&self) -> String {
        self.arch.to_string()
    }

    fn tensor(&self, name: &str) -> Result<Option<StoredTensor<'_>>, ModelError> {
        let Some(hf) = self.names.get(name) else {
            return Ok(None);
        };
        let t = self.st.get(hf)?;
        let dt = match t.dtype {
            Some(d @ (DType::F32 | DType::F16 | DType::BF16)) => d,
            _ => {
                return Err(ModelError::UnsupportedTensorType {
                    name: hf.clone(),
                    ty: t.file_dtype.to_string(),
                })
            }
        };
        let (format, data) = match self.compute {
            Some(c) if c != dt => (WeightFormat::Plain(c), Cow::Owned(convert(t.data, dt, c))),
            _ => (WeightFormat::Plain(dt), Cow::Borrowed(t.data)),
        };
        Ok(Some(StoredTensor {
            shape: t.shape.to_vec(),
            format,
            data,
        }))
    }
}

/// The decoder config and tensor store of an HF folder. `compute`: the dtype weights are
/// converted to at load (`None`: the file's own, e.g. BF16 weights stay BF16).
pub fn hf_decoder(dir: &Path, compute: Option<DType>) -> Result<(LlmConfig, HfStore), ModelError> {
    if let Some(c) = compute.filter(|c| !matches!(c, DType::F32 | DType::F16 | DType::BF16)) {
        return Err(ModelError::Config(format!(
            "weights can be computed in f32, f16 or bf16, not {c}"
        )));
    }
    let j = read_json(&dir.join("config.json"))?;
    let class = super::architecture(dir)?;
    let (arch, arch_name) = match class.as_str() {
        "LlamaForCausalLM" => (Arch::Llama, "LlamaForCausalLM"),
        "Qwen2ForCausalLM" => (Arch::Qwen2, "Qwen2ForCausalLM"),
        _ => {
            return Err(ModelError::UnsupportedArch {
                arch: class,
                supported: HF_DECODER_ARCHS,
            })
        }
    };
    let n_layer = j.positive("num_hidden_layers")?;
    let n_embd = j.positive("hidden_size")?;
    let n_head = j.positive("num_attention_heads")?;
    let n_head_kv = j.opt_positive("num_key_value_heads")?.unwrap_or(n_head);
    if !n_head.is_multiple_of(n_head_kv) {
        return Err(j.bad("num_key_value_heads", "a divisor of num_attention_heads"));
    }
    let head_dim = match j.opt_positive("head_dim")? {
        Some(d) => d,
        None if n_embd.is_multiple_of(n_head) => n_embd / n_head,
        None => return Err(j.bad("num_attention_heads", "a divisor of hidden_size")),
    };
    if head_dim == 0 || head_dim % 2 == 1 {
        return Err(j.bad("head_dim", "a positive even number"));
    }
    let act = j.opt_str("hidden_act")?.unwrap_or("silu");
    if act != "silu" {
        return Err(j.bad(
            "hidden_act",
            "\"silu\" (the only gated activation these classes use)",
        ));
    }
    if j.opt_bool("mlp_bias")? == Some(true) {
        return Err(j.bad("mlp_bias", "false (MLP biases are not supported)"));
    }
    if j.opt_bool("use_sliding_window")? == Some(true) {
        return Err(j.bad(
            "use_sliding_window",
            "false (sliding-window Qwen2 is not supported)",
        ));
    }
    let rope_freq_scale = match j.get("rope_scaling") {
        None => 1.0,
        Some(r) => {
            let kind = (r.get("rope_type").or_else(|| r.get("type"))).and_then(|t| t.as_str());
            let factor = r.get("factor").and_then(|f| f.as_f64());
            match (kind, factor) {
                (Some("default"), _) => 1.0,
                (Some("linear"), Some(f)) if f > 0.0 => 1.0 / f as f32,
                _ => {
                    return Err(j.bad(
                        "rope_scaling",
                        "null or {\"rope_type\": \"linear\", \"factor\": f} (other RoPE \
                         scalings are not supported yet)",
                    ))
                }
            }
        }
    };
    let st = SafeTensors::open(dir)?;
    // Every layer has its own tensors; more layers than tensors is a wrong count.
    if n_layer > st.len() {
        return Err(j.bad(
            "num_hidden_layers",
            "at most the number of tensors in the folder",
        ));
    }
    let mut names = BTreeMap::new();
    let mut tensors = BTreeMap::new();
    for hf in st.names() {
        let Some(g) = gguf_name(hf) else { continue };
        let t = st.get(hf)?;
        let dt = match t.dtype {
            Some(d @ (DType::F32 | DType::F16 | DType::BF16)) => d,
            _ => {
                return Err(ModelError::UnsupportedTensorType {
                    name: hf.to_string(),
                    ty: t.file_dtype.to_string(),
                })
            }
        };
        tensors.insert(g.clone(), WeightFormat::Plain(compute.unwrap_or(dt)));
        names.insert(g, hf.to_string());
    }
    // transformers ties when the config says so (Llama's default is untied, Qwen2's
    // checkpoints say it explicitly); a tied checkpoint may still carry lm_head.weight.
    let tied = j
        .opt_bool("tie_word_embeddings")?
        .unwrap_or(arch == Arch::Qwen2)
        || !tensors.contains_key("output.weight");
    if tied {
        tensors.remove("output.weight");
        names.remove("output.weight");
    }
    let qkv_bias = match arch {
        Arch::Qwen2 => true,
        _ => j.opt_bool("attention_bias")?.unwrap_or(false),
    };
    let default_eps = 1e-6;
    // Finite and positive (the epsilon may be 0): anything else runs and gives NaN.
    let rms_eps = j.opt_f64("rms_norm_eps")?.unwrap_or(default_eps) as f32;
    if !(rms_eps.is_finite() && rms_eps >= 0.0) {
        return Err(j.bad("rms_norm_eps", "a finite number >= 0"));
    }
    let rope_base = j.opt_f64("rope_theta")?.unwrap_or(10000.0) as f32;
    if !(rope_base.is_finite() && rope_base > 0.0) {
        return Err(j.bad("rope_theta", "a finite number > 0"));
    }
    let cfg = LlmConfig {
        arch,
        n_layer,
        n_embd,
        n_head,
        n_head_kv,
        head_dim,
        head_dim_v: head_dim,
        n_ff: j.positive("intermediate_size")?,
        vocab: j.positive("vocab_size")?,
        ctx: j.positive("max_position_embeddings")?,
        rms_eps,
        rope_base,
        rope_base_swa: None,
        rope_freq_scale,
        n_rot: head_dim,
        rope_style: RopeStyle::Half,
        sliding_window: None,
        swa_layers: vec![false; n_layer],
        tied_head: tied,
        qkv_bias,
        output_bias: tensors.contains_key("output.bias"),
        embed_scale: None,
        qk_norm: false,
        post_norms: false,
        ffn_act: Activation::Silu,
        attn_scale: 1.0 / (head_dim as f32).sqrt(),
        final_softcap: None,
        tensors,
    };
    let store = HfStore {
        st,
        names,
        arch: arch_name,
        compute,
    };
    Ok((cfg, store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hf_names_map_to_gguf_names() {
        let m = |s: &str| gguf_name(s);
        assert_eq!(
            m("model.embed_tokens.weight").as_deref(),
            Some("token_embd.weight")
        );
        assert_eq!(
            m("model.layers.12.self_attn.k_proj.bias").as_deref(),
            Some("blk.12.attn_k.bias")
        );
        assert_eq!(
            m("model.layers.0.mlp.down_proj.weight").as_deref(),
            Some("blk.0.ffn_down.weight")
        );
        assert_eq!(m("model.layers.0.self_attn.rotary_emb.inv_freq"), None);
        assert_eq!(m("model.layers.x.mlp.up_proj.weight"), None);
    }

    #[test]
    fn conversions_round_through_f32() {
        let v = [1.5f32, -2.25, 3.0e-3];
        let f32b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let bf = convert(&f32b, DType::F32, DType::BF16);
        let back = convert(&bf, DType::BF16, DType::F32);
        let got: Vec<f32> = (back.chunks_exact(4))
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        for (a, b) in v.iter().zip(&got) {
            assert!((a - b).abs() <= a.abs() / 128.0, "{a} vs {b}");
        }
    }
}
