//! One decoder graph for llama / qwen2 / gemma3 over a dynamic sequence dim `seq`.
//!
//! Inputs: `tokens` I64 `[1, seq]`, `positions` I64 `[seq]` (absolute, for RoPE), `last`
//! I64 `[1]` unless all logits are wanted (the row whose logits come out), `pos` I64 `[1]`
//! with a KV cache (positions already cached). Output: f32 logits `[1, seq | 1, vocab]`.
//!
//! Weights are params named as their GGUF tensors. Packed ones stay packed and feed
//! `DequantMatMul`, and so do f16/bf16 matrices, as packed rows of the `F16` / `BF16`
//! schemes (the same decode GEMV and fusions, x kept in f32; prefill casts x to the weight's
//! dtype for cuBLASLt); plain f32 `[N, K]` ones are declared transposed, `[K, N]`, so each
//! linear layer is one plain `MatMul` (the loader transposes them once). Activations are
//! f32; a half matrix whose rows are not whole 32-value blocks stays plain and multiplies x
//! cast to its dtype, the product cast back. A packed `token_embd` is gathered as packed rows and decoded by `Dequantize`;
//! tied to the head it is the `DequantMatMul` weight as it is. A plain tied head is a
//! transposed copy `output.weight` (`[n_embd, vocab]`) of the table.
//!
//! Other params: RoPE tables `rope.{base}.{scale}.{cos,sin}` `[ctx, n_rot/2]` (gathered by
//! `positions`), and with a cache `cache.k.{l}` / `cache.v.{l}` `[1, ctx, n_head_kv·head_dim]`
//! in `cache_dtype`: `CacheWrite` puts this call's rows at `pos` in place and attention reads
//! the cache with `past = pos`, so query i sits at `pos + i`.
use super::config::{LlmConfig, WeightFormat};
use super::shard::{self, TensorParallel};
use super::weights::{ParamDecl, ParamSource};
use crate::ModelError;
use rlx_ir::{AttentionSpec, DType, Dim, Graph, MaskKind, NodeId, QuantScheme, Shape};

/// Input names.
pub const TOKENS: &str = "tokens";
pub const POSITIONS: &str = "positions";
pub const LAST: &str = "last";
pub const POS: &str = "pos";
/// The dynamic sequence dim's symbol.
pub const SEQ: &str = "seq";

/// What graph to build.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildOptions {
    /// Logits for every position (`[1, seq, vocab]`), else only row `last` (`[1, 1, vocab]`).
    pub all_logits: bool,
    /// Read and write a KV cache (`cache.k.{l}` / `cache.v.{l}` params).
    pub cache: bool,
    /// Positions the graph handles: the RoPE tables' length and the cache's.
    pub ctx: usize,
    /// The cache's dtype.
    pub cache_dtype: DType,
    /// Tensor parallelism: with more than one rank the graph is one rank's 1/R of every
    /// attention and FFN block (`n_head / R` heads, `n_head_kv / R` cached, `n_ff / R`), with
    /// an all-reduce after each block's output projection; load its weights through
    /// [`super::ShardedStore`]. Pass the file's config to [`build`]: it shards it itself.
    pub tensor_parallel: TensorParallel,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            all_logits: false,
            cache: false,
            ctx: 512,
            cache_dtype: DType::F32,
            tensor_parallel: TensorParallel::default(),
        }
    }
}

/// A linear layer's weight as declared.
#[derive(Clone, Copy)]
enum Weight {
    Packed(NodeId, QuantScheme),
    /// `[K, N]`, in its own dtype.
    Plain(NodeId, DType),
}

/// Declares params while the graph grows; remembers packed params already declared so a
/// tied head reuses the embedding's node.
struct Builder<'a> {
    cfg: &'a LlmConfig,
    g: Graph,
    decls: Vec<ParamDecl>,
}

impl Builder<'_> {
    fn param(
        &mut self,
        name: &str,
        shape: Shape,
        source: ParamSource,
    ) -> Result<NodeId, ModelError> {
        let id = self.g.param(name, shape.clone())?;
        self.decls.push(ParamDecl {
            name: name.to_string(),
            shape,
            source,
        });
        Ok(id)
    }

    /// A 1-D tensor of `n` values (norm weight, bias), as f32.
    fn vector(&mut self, name: &str, n: usize) -> Result<NodeId, ModelError> {
        let dt = match self.cfg.format(name)? {
            WeightFormat::Plain(dt) => dt,
            WeightFormat::Packed(s) => {
                return Err(ModelError::UnsupportedTensorType {
                    name: name.into(),
                    ty: format!("{s:?} (a vector must be F32/F16/BF16)"),
                })
            }
        };
        let id = self.param(
            name,
            Shape::new(&[n], dt),
            ParamSource::tensor(name, &[n], false),
        )?;
        Ok(if dt == DType::F32 {
            id
        } else {
            self.g.cast(id, DType::F32)?
        })
    }

    /// How matrix `name` is held in the graph: its file format, except that f16/bf16
    /// matrices become packed rows of the `F16` / `BF16` schemes, so they run through the
    /// same decode GEMV (and its norm / SwiGLU / residual fusions) as quantized ones, with x
    /// kept in f32 (rows of `n_in` values, when that is whole 32-value blocks).
    fn matrix_format(&self, name: &str, n_in: usize) -> Result<WeightFormat, ModelError> {
        let whole = n_in.is_multiple_of(32);
        Ok(match self.cfg.format(name)? {
            WeightFormat::Plain(DType::F16) if whole => WeightFormat::Packed(QuantScheme::F16),
            WeightFormat::Plain(DType::BF16) if whole => WeightFormat::Packed(QuantScheme::BF16),
            f => f,
        })
    }

    /// The `[n_out, n_in]` matrix `name` (GGUF ne = [n_in, n_out]).
    fn weight(&mut self, tensor: &str, n_out: usize, n_in: usize) -> Result<Weight, ModelError> {
        let format = self.matrix_format(tensor, n_in)?;
        self.matrix(tensor, format, n_out, n_in, |transpose| {
            ParamSource::tensor(tensor, &[n_out, n_in], transpose)
        })
    }

    /// Declare param `name`, an `[n_out, n_in]` matrix stored as `format`: packed rows as
    /// they are, a plain matrix transposed to `[n_in, n_out]` (`source(transpose)` says
    /// where the values come from).
    fn matrix(
        &mut self,
        name: &str,
        format: WeightFormat,
        n_out: usize,
        n_in: usize,
        source: impl Fn(bool) -> ParamSource,
    ) -> Result<Weight, ModelError> {
        Ok(match format {
            WeightFormat::Packed(s) => {
                let row_bytes = packed_row_bytes(name, s, n_in)?;
                let id = self.param(
                    name,
                    Shape::new(&[n_out, row_bytes], DType::U8),
                    source(false),
                )?;
                Weight::Packed(id, s)
            }
            WeightFormat::Plain(dt) => {
                let id = self.param(name, Shape::new(&[n_in, n_out], dt), source(true))?;
                Weight::Plain(id, dt)
            }
        })
    }

    /// Several linear layers over the same input as one product when their weights share a
    /// storage format (one GEMV per token instead of several); the outputs split off with
    /// narrows (views in decode). `parts`: (tensor, rows); `n_in` the shared K; `bias`: the
    /// bias tensors' names when the layers have biases.
    fn linears(
        &mut self,
        x: NodeId,
        fused: &str,
        parts: &[(String, usize)],
        n_in: usize,
        bias: Option<&[String]>,
    ) -> Result<Vec<NodeId>, ModelError> {
        let formats: Vec<WeightFormat> = (parts.iter())
            .map(|(t, _)| self.matrix_format(t, n_in))
            .collect::<Result<_, _>>()?;
        let target = common_format(&formats);
        if target.is_none() {
            let mut out = Vec::with_capacity(parts.len());
            for (i, (t, rows)) in parts.iter().enumerate() {
                let w = self.weight(t, *rows, n_in)?;
                let b = match bias {
                    Some(b) => Some(self.vector(&b[i], *rows)?),
                    None => None,
                };
                out.push(self.linear(x, w, b)?);
            }
            return Ok(out);
        }
        let total: usize = parts.iter().map(|p| p.1).sum();
        let specs: Vec<(String, Vec<usize>)> = (parts.iter())
            .map(|(t, r)| (t.clone(), vec![*r, n_in]))
            .collect();
        let format = target.unwrap_or(formats[0]);
        let to = match format {
            WeightFormat::Packed(s) if formats.iter().any(|f| *f != format) => Some(s),
            _ => None,
        };
        let w = self.matrix(fused, format, total, n_in, |transpose| ParamSource::Rows {
            parts: specs.clone(),
            transpose,
            to,
        })?;
        let b = match bias {
            Some(names) => Some(self.stacked_bias(&format!("{fused}.bias"), names, parts)?),
            None => None,
        };
        let y = self.linear(x, w, b)?;
        let mut out = Vec::with_capacity(parts.len());
        let mut start = 0;
        for (_, rows) in parts {
            out.push(self.g.narrow(y, -1, start, *rows)?);
            start += rows;
        }
        Ok(out)
    }

    /// The biases of fused linear layers as one f32 vector, stored in their file dtype
    /// (f32 in GGUF files; f16/bf16 in half-precision safetensors).
    fn stacked_bias(
        &mut self,
        name: &str,
        names: &[String],
        parts: &[(String, usize)],
    ) -> Result<NodeId, ModelError> {
        let mut dt = None;
        for n in names {
            let d = match self.cfg.format(n)? {
                WeightFormat::Plain(d) => d,
                WeightFormat::Packed(s) => {
                    return Err(ModelError::UnsupportedTensorType {
                        name: n.clone(),
                        ty: format!("{s:?} (a bias must be F32/F16/BF16)"),
                    })
                }
            };
            if dt.is_some_and(|p| p != d) {
                return Err(ModelError::UnsupportedTensorType {
                    name: n.clone(),
                    ty: format!("{d} beside {} biases of the same layer", dt.unwrap_or(d)),
                });
            }
            dt = Some(d);
        }
        let dt = dt.unwrap_or(DType::F32);
        let total: usize = parts.iter().map(|p| p.1).sum();
        let bparts = (names.iter().zip(parts))
            .map(|(n, (_, r))| (n.clone(), vec![*r]))
            .collect();
        let id = self.param(
            name,
            Shape::new(&[total], dt),
            ParamSource::Rows {
                parts: bparts,
                transpose: false,
                to: None,
            },
        )?;
        Ok(if dt == DType::F32 {
            id
        } else {
            self.g.cast(id, DType::F32)?
        })
    }

    fn linear(&mut self, x: NodeId, w: Weight, bias: Option<NodeId>) -> Result<NodeId, ModelError> {
        let g = &mut self.g;
        let y = match w {
            Weight::Packed(w, s) => g.dequant_matmul(x, w, s)?,
            Weight::Plain(w, DType::F32) => g.matmul(x, w)?,
            Weight::Plain(w, dt) => {
                let xc = g.cast(x, dt)?;
                let y = g.matmul(xc, w)?;
                g.cast(y, DType::F32)?
            }
        };
        Ok(match bias {
            Some(b) => g.add(y, b)?,
            None => y,
        })
    }

    fn norm(&mut self, x: NodeId, gamma: NodeId) -> Result<NodeId, ModelError> {
        Ok(self.g.rms_norm(x, gamma, None, -1, self.cfg.rms_eps)?)
    }

    /// RMS norm of each `head`-sized slice of packed `[1, seq, H*head]`.
    fn head_norm(
        &mut self,
        x: NodeId,
        gamma: NodeId,
        heads: usize,
        head: usize,
    ) -> Result<NodeId, ModelError> {
        let split = self.g.reshape(x, &[0, 0, heads as i64, head as i64])?;
        let n = self.norm(split, gamma)?;
        Ok(self.g.reshape(n, &[0, 0, (heads * head) as i64])?)
    }

    /// The token rows, f32 `[1, seq, n_embd]`, and the table (`[vocab, n_embd]`, packed or
    /// plain).
    fn embed(&mut self, tokens: NodeId) -> Result<(NodeId, Weight), ModelError> {
        let (v, e) = (self.cfg.vocab, self.cfg.n_embd);
        let name = "token_embd.weight";
        match self.matrix_format(name, e)? {
            WeightFormat::Packed(s) => {
                let row_bytes = packed_row_bytes(name, s, e)?;
                let id = self.param(
                    name,
                    Shape::new(&[v, row_bytes], DType::U8),
                    ParamSource::tensor(name, &[v, e], false),
                )?;
                let rows = self.g.gather(id, tokens, 0)?;
                let x = self.g.dequantize(rows, s)?;
                Ok((x, Weight::Packed(id, s)))
            }
            WeightFormat::Plain(dt) => {
                let id = self.param(
                    name,
                    Shape::new(&[v, e], dt),
                    ParamSource::tensor(name, &[v, e], false),
                )?;
                let rows = self.g.gather(id, tokens, 0)?;
                let x = if dt == DType::F32 {
                    rows
                } else {
                    self.g.cast(rows, DType::F32)?
                };
                Ok((x, Weight::Plain(id, dt)))
            }
        }
    }

    /// `cos`/`sin` rows of `positions`, `[seq, 1, n_rot/2]` (broadcast over heads).
    fn rope_tables(
        &mut self,
        positions: NodeId,
        ctx: usize,
        base: f32,
        scale: f32,
    ) -> Result<(NodeId, NodeId), ModelError> {
        let half = self.cfg.n_rot / 2;
        let tag = format!("rope.{base}.{scale}");
        let mut out = [NodeId(0); 2];
        for (i, sin) in [false, true].into_iter().enumerate() {
            let name = format!("{tag}.{}", if sin { "sin" } else { "cos" });
            let t = self.param(
                &name,
                Shape::new(&[ctx, half], DType::F32),
                ParamSource::Rope {
                    base,
                    freq_scale: scale,
                    n_rot: self.cfg.n_rot,
                    sin,
                },
            )?;
            let rows = self.g.gather(t, positions, 0)?;
            out[i] = self.g.reshape(rows, &[0, 1, half as i64])?;
        }
        Ok((out[0], out[1]))
    }
}

impl Builder<'_> {
    /// Write this call's k/v rows into layer `il`'s caches at `pos`, then attend over the
    /// caches (keys past `pos + seq` ignored). A non-f32 cache gets q/k/v cast to its dtype
    /// and the output cast back, so the cache is never copied whole.
    fn cached_attention(
        &mut self,
        il: usize,
        opts: &BuildOptions,
        [q, k, v]: [NodeId; 3],
        pos: NodeId,
        spec: AttentionSpec,
    ) -> Result<NodeId, ModelError> {
        let dt = opts.cache_dtype;
        let mut cached = [NodeId(0); 2];
        for (i, (which, x, width)) in [
            ("k", k, self.cfg.n_head_kv * self.cfg.head_dim),
            ("v", v, self.cfg.n_head_kv * self.cfg.head_dim_v),
        ]
        .into_iter()
        .enumerate()
        {
            let cache = self.param(
                &format!("cache.{which}.{il}"),
                Shape::new(&[1, opts.ctx, width], dt),
                ParamSource::Zeros,
            )?;
            let x = if dt == DType::F32 {
                x
            } else {
                self.g.cast(x, dt)?
            };
            cached[i] = self.g.cache_write(cache, x, pos, 1)?;
        }
        let g = &mut self.g;
        let q = if dt == DType::F32 { q } else { g.cast(q, dt)? };
        let a = g.attention_cached(q, cached[0], cached[1], pos, spec)?;
        Ok(if dt == DType::F32 {
            a
        } else {
            g.cast(a, DType::F32)?
        })
    }
}

/// Bytes of one packed row of `k` values.
/// The one type several linear layers' weights can be stored as together: theirs when they
/// agree; Q8_0 when they are all Q4_0 / Q5_0 / Q8_0 (widened without changing a value,
/// `weights::widen_to_q8_0`); else none (the layers stay separate products).
fn common_format(formats: &[WeightFormat]) -> Option<WeightFormat> {
    use QuantScheme as Q;
    let first = *formats.first()?;
    if formats.iter().all(|f| *f == first) {
        return Some(first);
    }
    let widens = |f: &WeightFormat| matches!(f, WeightFormat::Packed(Q::Q4_0 | Q::Q5_0 | Q::Q8_0));
    formats
        .iter()
        .all(widens)
        .then_some(WeightFormat::Packed(Q::Q8_0))
}

fn packed_row_bytes(name: &str, s: QuantScheme, k: usize) -> Result<usize, ModelError> {
    if !k.is_multiple_of(s.block_len()) {
        return Err(ModelError::UnsupportedTensorType {
            name: name.into(),
            ty: format!(
                "{s:?} with rows of {k} values (not whole blocks of {})",
                s.block_len()
            ),
        });
    }
    Ok(k / s.block_len() * s.block_bytes())
}

/// Build the decoder graph and the list of its params (what [`super::weights::load`] fills).
pub fn build(cfg: &LlmConfig, opts: &BuildOptions) -> Result<(Graph, Vec<ParamDecl>), ModelError> {
    if opts.ctx == 0 {
        return Err(ModelError::Config(
            "BuildOptions.ctx must be positive".into(),
        ));
    }
    if opts.cache && !opts.cache_dtype.is_float() {
        return Err(ModelError::Config(format!(
            "BuildOptions.cache_dtype must be a float type, got {}",
            opts.cache_dtype
        )));
    }
    let tp = opts.tensor_parallel;
    let sharded = shard::shard_config(cfg, tp)?;
    let cfg = &sharded;
    let mut b = Builder {
        cfg,
        g: Graph::new(format!("{}_decoder", cfg.arch.name())),
        decls: Vec::new(),
    };
    let seq = Dim::dynamic(SEQ);
    let tokens = b.g.input(
        TOKENS,
        Shape::with_dims(vec![Dim::Static(1), seq.clone()], DType::I64),
    )?;
    let positions =
        b.g.input(POSITIONS, Shape::with_dims(vec![seq], DType::I64))?;
    let last = if opts.all_logits {
        None
    } else {
        Some(b.g.input(LAST, Shape::new(&[1], DType::I64))?)
    };
    let pos = if opts.cache {
        Some(b.g.input(POS, Shape::new(&[1], DType::I64))?)
    } else {
        None
    };

    let (e, h, hkv, d, dv, f) = (
        cfg.n_embd,
        cfg.n_head,
        cfg.n_head_kv,
        cfg.head_dim,
        cfg.head_dim_v,
        cfg.n_ff,
    );
    let (mut x, embd) = b.embed(tokens)?;
    if let Some(s) = cfg.embed_scale {
        let c = b.g.scalar(s as f64, DType::F32)?;
        x = b.g.mul(x, c)?;
    }

    // One pair of tables per distinct (base, scale): gemma3's local layers have their own.
    let mut tables: Vec<((u32, u32), (NodeId, NodeId))> = Vec::new();
    for il in 0..cfg.n_layer {
        let p = |n: &str| format!("blk.{il}.{n}");
        let (base, scale) = cfg.rope_for_layer(il);
        let key = (base.to_bits(), scale.to_bits());
        let (cos, sin) = match tables.iter().find(|(k, _)| *k == key) {
            Some(&(_, t)) => t,
            None => {
                let t = b.rope_tables(positions, opts.ctx, base, scale)?;
                tables.push((key, t));
                t
            }
        };

        let attn_norm = b.vector(&p("attn_norm.weight"), e)?;
        let hn = b.norm(x, attn_norm)?;
        let parts: Vec<(String, usize)> = [("q", h * d), ("k", hkv * d), ("v", hkv * dv)]
            .iter()
            .map(|(n, r)| (p(&format!("attn_{n}.weight")), *r))
            .collect();
        let biases: Vec<String> = ["q", "k", "v"]
            .iter()
            .map(|n| p(&format!("attn_{n}.bias")))
            .collect();
        let bias = cfg.qkv_bias.then_some(biases.as_slice());
        let qkv = b.linears(hn, &p("attn_qkv"), &parts, e, bias)?;
        let (mut q, mut k, v) = (qkv[0], qkv[1], qkv[2]);
        if cfg.qk_norm {
            let qn = b.vector(&p("attn_q_norm.weight"), d)?;
            let kn = b.vector(&p("attn_k_norm.weight"), d)?;
            q = b.head_norm(q, qn, h, d)?;
            k = b.head_norm(k, kn, hkv, d)?;
        }
        q = b.g.rope(q, cos, sin, d, cfg.n_rot, cfg.rope_style)?;
        k = b.g.rope(k, cos, sin, d, cfg.n_rot, cfg.rope_style)?;
        let mask = match (cfg.swa_layers[il], cfg.sliding_window) {
            (true, Some(w)) => MaskKind::SlidingWindow(w),
            _ => MaskKind::Causal,
        };
        let spec = AttentionSpec::new(h, d)
            .v_head_dim(dv)
            .mask(mask)
            .scale(cfg.attn_scale);
        let a = match pos {
            None => b.g.attention(q, k, v, None, spec)?,
            Some(pos) => b.cached_attention(il, opts, [q, k, v], pos, spec)?,
        };
        let wo = b.weight(&p("attn_output.weight"), e, h * dv)?;
        let mut o = b.linear(a, wo, None)?;
        o = shard::reduce_partial(&mut b.g, o, tp)?;
        if cfg.post_norms {
            let pn = b.vector(&p("post_attention_norm.weight"), e)?;
            o = b.norm(o, pn)?;
        }
        x = b.g.add(x, o)?;

        let ffn_norm = b.vector(&p("ffn_norm.weight"), e)?;
        let hn = b.norm(x, ffn_norm)?;
        let parts = [(p("ffn_gate.weight"), f), (p("ffn_up.weight"), f)];
        let gu = b.linears(hn, &p("ffn_gate_up"), &parts, e, None)?;
        let (gate, up) = (gu[0], gu[1]);
        let wd = b.weight(&p("ffn_down.weight"), e, f)?;
        let act = b.g.activation(cfg.ffn_act, gate)?;
        let m = b.g.mul(act, up)?;
        let mut down = b.linear(m, wd, None)?;
        down = shard::reduce_partial(&mut b.g, down, tp)?;
        if cfg.post_norms {
            let pn = b.vector(&p("post_ffw_norm.weight"), e)?;
            down = b.norm(down, pn)?;
        }
        x = b.g.add(x, down)?;
    }

    // Only the wanted row goes through the final norm and the LM head.
    if let Some(last) = last {
        x = b.g.gather(x, last, 1)?;
    }
    let out_norm = b.vector("output_norm.weight", e)?;
    x = b.norm(x, out_norm)?;
    let head = match (cfg.tied_head, embd) {
        (false, _) => b.weight("output.weight", cfg.vocab, e)?,
        // The packed table serves as the head as it is (DequantMatMul takes [N, K] rows).
        (true, w @ Weight::Packed(..)) => w,
        (true, Weight::Plain(_, dt)) => {
            // A plain tied head needs the table as [n_embd, vocab]: a transposed copy.
            let id = b.param(
                "output.weight",
                Shape::new(&[e, cfg.vocab], dt),
                ParamSource::tensor("token_embd.weight", &[cfg.vocab, e], true),
            )?;
            Weight::Plain(id, dt)
        }
    };
    let bias = if cfg.output_bias {
        Some(b.vector("output.bias", cfg.vocab)?)
    } else {
        None
    };
    let mut logits = b.linear(x, head, bias)?;
    if let Some(c) = cfg.final_softcap {
        let inv = b.g.scalar(1.0 / c as f64, DType::F32)?;
        let cap = b.g.scalar(c as f64, DType::F32)?;
        logits = b.g.mul(logits, inv)?;
        logits = b.g.activation(rlx_ir::Activation::Tanh, logits)?;
        logits = b.g.mul(logits, cap)?;
    }
    b.g.set_name(logits, "logits")?;
    b.g.set_outputs(vec![logits]);
    Ok((b.g, b.decls))
}
