//! A BERT-style encoder (the architecture of all-MiniLM-L6-v2 and BERT): word + position +
//! token-type embeddings, LayerNorm, post-LN transformer layers with exact-GELU FFNs, and the
//! tanh pooler on the first token. Written with primitive ops, as an importer would produce
//! it; the compiler fuses it.
use crate::{ModelError, ParamSpec};
use rlx_ir::{Activation, AttentionSpec, DType, Graph, HostTensor, NodeId, Shape};

/// Input name: token ids `[batch, seq]`, I64.
pub const IDS: &str = "input_ids";

#[derive(Clone, Debug, PartialEq)]
pub struct EncoderConfig {
    pub vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub max_positions: usize,
    pub type_vocab: usize,
    pub eps: f32,
    /// Storage dtype of params and activations (f32, f16 or bf16).
    pub dtype: DType,
}

impl EncoderConfig {
    /// all-MiniLM-L6-v2's shapes: 6 layers, width 384, 12 heads, FFN 1536.
    pub fn minilm_l6() -> EncoderConfig {
        EncoderConfig {
            vocab: 30522,
            hidden: 384,
            layers: 6,
            heads: 12,
            ffn: 1536,
            max_positions: 512,
            type_vocab: 2,
            eps: 1e-12,
            dtype: DType::F32,
        }
    }

    pub fn with_dtype(mut self, dtype: DType) -> EncoderConfig {
        self.dtype = dtype;
        self
    }

    fn check(&self, batch: usize, seq: usize) -> Result<(), ModelError> {
        if self.heads == 0 || !self.hidden.is_multiple_of(self.heads) {
            return Err(ModelError::Config(format!(
                "{} heads must divide width {}",
                self.heads, self.hidden
            )));
        }
        if batch == 0 || seq == 0 || seq > self.max_positions {
            return Err(ModelError::Config(format!(
                "batch {batch} and seq {seq} must be positive, seq at most {}",
                self.max_positions
            )));
        }
        if !self.dtype.is_float() {
            return Err(ModelError::Config(format!(
                "dtype {} is not a float type",
                self.dtype
            )));
        }
        Ok(())
    }

    /// Every param with its shape, in graph order.
    pub fn params(&self) -> Vec<ParamSpec> {
        let (h, f) = (self.hidden, self.ffn);
        let p = |name: String, dims: Vec<usize>, fan_in: usize| ParamSpec { name, dims, fan_in };
        let mut v = vec![
            p("emb.word".into(), vec![self.vocab, h], h),
            p("emb.pos".into(), vec![self.max_positions, h], h),
            p("emb.type".into(), vec![self.type_vocab, h], h),
            p("emb.ln.gamma".into(), vec![h], h),
            p("emb.ln.beta".into(), vec![h], h),
        ];
        for l in 0..self.layers {
            for (name, i, o) in [
                ("q", h, h),
                ("k", h, h),
                ("v", h, h),
                ("o", h, h),
                ("ffn1", h, f),
                ("ffn2", f, h),
            ] {
                v.push(p(format!("l{l}.{name}.w"), vec![i, o], i));
                v.push(p(format!("l{l}.{name}.b"), vec![o], i));
            }
            for ln in ["ln1", "ln2"] {
                v.push(p(format!("l{l}.{ln}.gamma"), vec![h], h));
                v.push(p(format!("l{l}.{ln}.beta"), vec![h], h));
            }
        }
        v.push(p("pool.w".into(), vec![h, h], h));
        v.push(p("pool.b".into(), vec![h], h));
        v
    }

    /// The forward graph for `[batch, seq]` ids; outputs `[last hidden [B,S,H], pooled [B,H]]`.
    pub fn build(&self, batch: usize, seq: usize) -> Result<Graph, ModelError> {
        self.check(batch, seq)?;
        let (h, dt) = (self.hidden, self.dtype);
        let mut g = Graph::new("encoder");
        let ids = g.input(IDS, Shape::new(&[batch, seq], DType::I64))?;
        let mut ps = std::collections::HashMap::new();
        for s in self.params() {
            let id = g.param(s.name.clone(), Shape::new(&s.dims, dt))?;
            ps.insert(s.name, id);
        }
        let p = |n: &str| ps[n];
        let word = g.gather(p("emb.word"), ids, 0)?;
        let pos = g.narrow(p("emb.pos"), 0, 0, seq)?;
        let typ = g.narrow(p("emb.type"), 0, 0, 1)?;
        let e = g.add(word, pos)?;
        let e = g.add(e, typ)?;
        let mut x = g.layer_norm(e, p("emb.ln.gamma"), p("emb.ln.beta"), -1, self.eps)?;
        let linear = |g: &mut Graph, x: NodeId, name: &str| -> Result<NodeId, ModelError> {
            let y = g.matmul(x, ps[&format!("{name}.w")])?;
            Ok(g.add(y, ps[&format!("{name}.b")])?)
        };
        let spec = AttentionSpec::new(self.heads, h / self.heads);
        for l in 0..self.layers {
            let q = linear(&mut g, x, &format!("l{l}.q"))?;
            let k = linear(&mut g, x, &format!("l{l}.k"))?;
            let v = linear(&mut g, x, &format!("l{l}.v"))?;
            let a = g.attention(q, k, v, None, spec.clone())?;
            let o = linear(&mut g, a, &format!("l{l}.o"))?;
            let r = g.add(x, o)?;
            x = g.layer_norm(
                r,
                p(&format!("l{l}.ln1.gamma")),
                p(&format!("l{l}.ln1.beta")),
                -1,
                self.eps,
            )?;
            let f = linear(&mut g, x, &format!("l{l}.ffn1"))?;
            let f = g.activation(Activation::Gelu, f)?;
            let f = linear(&mut g, f, &format!("l{l}.ffn2"))?;
            let r = g.add(x, f)?;
            x = g.layer_norm(
                r,
                p(&format!("l{l}.ln2.gamma")),
                p(&format!("l{l}.ln2.beta")),
                -1,
                self.eps,
            )?;
        }
        let cls = g.narrow(x, 1, 0, 1)?;
        let cls = g.reshape(cls, &[batch as i64, h as i64])?;
        let pooled = linear(&mut g, cls, "pool")?;
        let pooled = g.activation(Activation::Tanh, pooled)?;
        g.set_name(x, "last_hidden_state")?;
        g.set_name(pooled, "pooler_output")?;
        g.set_outputs(vec![x, pooled]);
        Ok(g)
    }

    /// Random weights (BERT's init: normal with std 0.02, LayerNorm gamma 1 and beta 0 plus a
    /// little noise so no test runs on constants), deterministic in `seed`.
    pub fn random_params(&self, seed: u64) -> Vec<(String, HostTensor)> {
        let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z >> 11) as f64 / (1u64 << 53) as f64
        };
        self.params()
            .into_iter()
            .map(|s| {
                let n: usize = s.dims.iter().product();
                let gamma = s.name.ends_with(".gamma");
                let data: Vec<f64> = (0..n)
                    .map(|_| {
                        // Box-Muller from two uniforms.
                        let (u1, u2) = (next().max(1e-300), next());
                        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                        if gamma {
                            1.0 + 0.02 * z
                        } else {
                            0.02 * z
                        }
                    })
                    .collect();
                (s.name, HostTensor::from_f64_as(&s.dims, &data, self.dtype))
            })
            .collect()
    }
}
