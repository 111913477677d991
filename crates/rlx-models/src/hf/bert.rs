//! `BertModel` from a Hugging Face folder: `config.json` → [`BertConfig`], one graph over
//! dynamic `batch` and `seq` dims (so every batch shape runs the same compiled graph), and
//! the weights of `model.safetensors` checked tensor by tensor.
//!
//! Inputs: `input_ids` and `token_type_ids` I64 `[batch, seq]`, `attention_mask` f32
//! `[batch, seq]` (1 = token, 0 = padding: attention's keep-mask, and pooling's), and
//! `position_ids` I64 `[seq]` (gathered from the position table, so no table slice depends
//! on `seq`). The layers are post-LN as in BERT: `LN(x + attn(x))`, then `LN(x + ffn(x))`.
//!
//! Params carry the HF tensor names without the `bert.` prefix (a checkpoint with or without
//! it loads; tensors the graph has no use for, `pooler.*` and `embeddings.position_ids`, are
//! ignored). Linear weights are stored `[out, in]` by HF and declared transposed, `[in, out]`,
//! so each linear layer is one plain matmul; the loader transposes them once. Params are in
//! the compute dtype (f32, f16 or bf16, converted at load); LayerNorm and softmax accumulate
//! in f32 in every backend, and the head (pooling, normalisation) runs on an f32 copy of the
//! last hidden state.
use super::json::JsonFile;
use super::pooling::{self, Pooling};
use crate::ModelError;
use rlx_io::SafeTensors;
use rlx_ir::{Activation, AttentionSpec, DType, Dim, Graph, HostTensor, MaskKind, NodeId, Shape};
use std::path::Path;

/// Input names and the dynamic dims' symbols.
pub const INPUT_IDS: &str = "input_ids";
pub const TOKEN_TYPE_IDS: &str = "token_type_ids";
pub const ATTENTION_MASK: &str = "attention_mask";
pub const POSITION_IDS: &str = "position_ids";
pub const BATCH: &str = "batch";
pub const SEQ: &str = "seq";

/// The fields of a `BertModel` `config.json` the graph needs.
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f32,
    /// `gelu` is exact GELU; `gelu_new` / `gelu_pytorch_tanh` the tanh approximation.
    pub hidden_act: Activation,
}

/// What the graph outputs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BertHead {
    /// The last hidden state, f32 `[batch, seq, hidden]`.
    Hidden,
    /// sentence-transformers' head: pooled (and optionally L2-normalised) f32
    /// `[batch, pooling.dim(hidden)]`.
    Embedding { pooling: Pooling, normalize: bool },
}

/// One param: its HF name (no `bert.` prefix) and the shape the file stores.
#[derive(Clone, Debug, PartialEq)]
pub struct BertParam {
    pub name: String,
    pub hf_shape: Vec<usize>,
    /// A linear weight, declared `[in, out]` (the file's `[out, in]` transposed).
    pub transpose: bool,
}

impl BertParam {
    /// The param's dims in the graph.
    pub fn graph_dims(&self) -> Vec<usize> {
        match (self.transpose, self.hf_shape.as_slice()) {
            (true, [o, i]) => vec![*i, *o],
            _ => self.hf_shape.clone(),
        }
    }
}

impl BertConfig {
    /// all-MiniLM-L6-v2's config (for benches with random weights).
    pub fn minilm_l6() -> BertConfig {
        BertConfig {
            vocab_size: 30522,
            hidden_size: 384,
            num_hidden_layers: 6,
            num_attention_heads: 12,
            intermediate_size: 1536,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            hidden_act: Activation::Gelu,
        }
    }

    pub fn from_file(path: impl AsRef<Path>) -> Result<BertConfig, ModelError> {
        BertConfig::from_json(&JsonFile::read(path)?)
    }

    /// Parse a config; a field no BERT graph here can honour is an error naming it.
    pub fn from_json(j: &JsonFile) -> Result<BertConfig, ModelError> {
        let model_type = j.str_or("model_type", "bert")?;
        if model_type != "bert" {
            return Err(j.error(
                "model_type",
                format!("{model_type:?} is not a BertModel (model_type \"bert\")"),
            ));
        }
        let positions = j.str_or("position_embedding_type", "absolute")?;
        if positions != "absolute" {
            return Err(j.error(
                "position_embedding_type",
                format!("{positions:?}: only \"absolute\" positions are supported"),
            ));
        }
        let hidden_act = match j.str_or("hidden_act", "gelu")? {
            "gelu" => Activation::Gelu,
            "gelu_new" | "gelu_pytorch_tanh" => Activation::GeluApprox,
            other => {
                return Err(j.error(
                    "hidden_act",
                    format!("{other:?} (supported: gelu, gelu_new, gelu_pytorch_tanh)"),
                ))
            }
        };
        let eps = j.f64_or("layer_norm_eps", 1e-12)?;
        if !(eps.is_finite() && eps > 0.0) {
            return Err(j.error("layer_norm_eps", format!("{eps} must be positive")));
        }
        let positive = |key: &str| -> Result<usize, ModelError> {
            match j.usize(key)? {
                0 => Err(j.error(key, "must be positive")),
                n => Ok(n),
            }
        };
        let c = BertConfig {
            vocab_size: positive("vocab_size")?,
            hidden_size: positive("hidden_size")?,
            num_hidden_layers: positive("num_hidden_layers")?,
            num_attention_heads: positive("num_attention_heads")?,
            intermediate_size: positive("intermediate_size")?,
            max_position_embeddings: positive("max_position_embeddings")?,
            type_vocab_size: match j.usize_or("type_vocab_size", 2)? {
                0 => return Err(j.error("type_vocab_size", "must be positive")),
                n => n,
            },
            layer_norm_eps: eps as f32,
            hidden_act,
        };
        if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(j.error(
                "num_attention_heads",
                format!(
                    "{} heads do not divide hidden_size {}",
                    c.num_attention_heads, c.hidden_size
                ),
            ));
        }
        Ok(c)
    }

    /// Every param the graph declares, in graph order.
    pub fn params(&self) -> Vec<BertParam> {
        let (h, f) = (self.hidden_size, self.intermediate_size);
        let mut v = Vec::new();
        let mut push = |name: String, shape: &[usize], transpose: bool| {
            v.push(BertParam {
                name,
                hf_shape: shape.to_vec(),
                transpose,
            })
        };
        push(
            "embeddings.word_embeddings.weight".into(),
            &[self.vocab_size, h],
            false,
        );
        push(
            "embeddings.position_embeddings.weight".into(),
            &[self.max_position_embeddings, h],
            false,
        );
        push(
            "embeddings.token_type_embeddings.weight".into(),
            &[self.type_vocab_size, h],
            false,
        );
        push("embeddings.LayerNorm.weight".into(), &[h], false);
        push("embeddings.LayerNorm.bias".into(), &[h], false);
        for l in 0..self.num_hidden_layers {
            let p = format!("encoder.layer.{l}.");
            for (name, o, i) in [
                ("attention.self.query", h, h),
                ("attention.self.key", h, h),
                ("attention.self.value", h, h),
                ("attention.output.dense", h, h),
                ("intermediate.dense", f, h),
                ("output.dense", h, f),
            ] {
                push(format!("{p}{name}.weight"), &[o, i], true);
                push(format!("{p}{name}.bias"), &[o], false);
            }
            for ln in ["attention.output.LayerNorm", "output.LayerNorm"] {
                push(format!("{p}{ln}.weight"), &[h], false);
                push(format!("{p}{ln}.bias"), &[h], false);
            }
        }
        v
    }

    /// The forward graph in compute dtype `dtype` (F32, F16 or BF16).
    pub fn build(&self, dtype: DType, head: BertHead) -> Result<Graph, ModelError> {
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(ModelError::Config(format!(
                "compute dtype {dtype} is not f32, f16 or bf16"
            )));
        }
        let h = self.hidden_size;
        let mut g = Graph::new("bert");
        let (b, s) = (Dim::dynamic(BATCH), Dim::dynamic(SEQ));
        let bs = |dt| Shape::with_dims(vec![b.clone(), s.clone()], dt);
        let ids = g.input(INPUT_IDS, bs(DType::I64))?;
        let types = g.input(TOKEN_TYPE_IDS, bs(DType::I64))?;
        let mask = g.input(ATTENTION_MASK, bs(DType::F32))?;
        let pos = g.input(POSITION_IDS, Shape::with_dims(vec![s.clone()], DType::I64))?;
        let mut p = std::collections::HashMap::new();
        for prm in self.params() {
            let id = g.param(prm.name.as_str(), Shape::new(&prm.graph_dims(), dtype))?;
            p.insert(prm.name, id);
        }
        // Every name looked up below was declared by `params` just above.
        let w = |name: &str| -> Result<NodeId, ModelError> {
            p.get(name)
                .copied()
                .ok_or_else(|| ModelError::Config(format!("param {name} was not declared")))
        };
        let word = g.gather(w("embeddings.word_embeddings.weight")?, ids, 0)?;
        let posv = g.gather(w("embeddings.position_embeddings.weight")?, pos, 0)?;
        let typ = g.gather(w("embeddings.token_type_embeddings.weight")?, types, 0)?;
        let e = g.add(word, posv)?;
        let e = g.add(e, typ)?;
        let eps = self.layer_norm_eps;
        let ln = |g: &mut Graph, x: NodeId, pre: &str| -> Result<NodeId, ModelError> {
            let gamma = w(&format!("{pre}.weight"))?;
            let beta = w(&format!("{pre}.bias"))?;
            Ok(g.layer_norm(x, gamma, beta, -1, eps)?)
        };
        let linear = |g: &mut Graph, x: NodeId, pre: &str| -> Result<NodeId, ModelError> {
            let y = g.matmul(x, w(&format!("{pre}.weight"))?)?;
            Ok(g.add(y, w(&format!("{pre}.bias"))?)?)
        };
        let mut x = ln(&mut g, e, "embeddings.LayerNorm")?;
        let spec = AttentionSpec::new(self.num_attention_heads, h / self.num_attention_heads)
            .mask(MaskKind::Custom);
        for l in 0..self.num_hidden_layers {
            let pre = format!("encoder.layer.{l}");
            let q = linear(&mut g, x, &format!("{pre}.attention.self.query"))?;
            let k = linear(&mut g, x, &format!("{pre}.attention.self.key"))?;
            let v = linear(&mut g, x, &format!("{pre}.attention.self.value"))?;
            let a = g.attention(q, k, v, mask, spec.clone())?;
            let o = linear(&mut g, a, &format!("{pre}.attention.output.dense"))?;
            let r = g.add(x, o)?;
            x = ln(&mut g, r, &format!("{pre}.attention.output.LayerNorm"))?;
            let f = linear(&mut g, x, &format!("{pre}.intermediate.dense"))?;
            let f = g.activation(self.hidden_act, f)?;
            let f = linear(&mut g, f, &format!("{pre}.output.dense"))?;
            let r = g.add(x, f)?;
            x = ln(&mut g, r, &format!("{pre}.output.LayerNorm"))?;
        }
        let hidden = if dtype == DType::F32 {
            x
        } else {
            g.cast(x, DType::F32)?
        };
        let out = match head {
            BertHead::Hidden => hidden,
            BertHead::Embedding { pooling, normalize } => {
                let pooled = pooling.build(&mut g, hidden, mask)?;
                if normalize {
                    pooling::normalize(&mut g, pooled)?
                } else {
                    pooled
                }
            }
        };
        g.set_name(out, "output")?;
        g.set_outputs(vec![out]);
        Ok(g)
    }

    /// The weights of `st` for every param, checked for shape and float dtype (errors name
    /// the tensor and file), converted to `dtype`, linear weights transposed.
    pub fn load_weights(
        &self,
        st: &SafeTensors,
        dtype: DType,
    ) -> Result<Vec<(String, HostTensor)>, ModelError> {
        let prefix = if st.contains("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        };
        let mut out = Vec::new();
        for prm in self.params() {
            let t = st.float(&format!("{prefix}{}", prm.name), &prm.hf_shape)?;
            let host = t.to_host()?;
            let data = if prm.transpose {
                transpose(&host.to_f32_vec(), prm.hf_shape[0], prm.hf_shape[1])
            } else {
                host.to_f32_vec()
            };
            let dims = prm.graph_dims();
            out.push((prm.name, HostTensor::from_f32_as(&dims, &data, dtype)));
        }
        Ok(out)
    }

    /// Random weights in BERT's init (normal, std 0.02; LayerNorm weights near 1), in
    /// graph layout, deterministic in `seed`.
    pub fn random_weights(&self, dtype: DType, seed: u64) -> Vec<(String, HostTensor)> {
        let mut rng = rlx_ir::SplitMix64::new(seed ^ rlx_ir::rng::GOLDEN_GAMMA);
        self.params()
            .into_iter()
            .map(|prm| {
                let dims = prm.graph_dims();
                let n: usize = dims.iter().product();
                let gamma = prm.name.ends_with("LayerNorm.weight");
                let data: Vec<f64> = (0..n)
                    .map(|_| 0.02 * rng.normal() + if gamma { 1.0 } else { 0.0 })
                    .collect();
                (prm.name, HostTensor::from_f64_as(&dims, &data, dtype))
            })
            .collect()
    }
}

/// Row-major `[rows, cols]` → `[cols, rows]`.
fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = x[r * cols + c];
        }
    }
    out
}
