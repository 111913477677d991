//! A BERT-style encoder (the architecture of all-MiniLM-L6-v2 and BERT): word + position +
//! token-type embeddings, LayerNorm, post-LN transformer layers with exact-GELU FFNs, and the
//! tanh pooler on the first token. Written with primitive ops, as an importer would produce
//! it; the compiler fuses it.
use crate::{ModelError, ParamSpec, VarBuilder};
use rlx_ir::{Activation, AttentionSpec, DType, Graph, HostTensor, NodeId, Shape, SplitMix64};

/// A linear layer's weight `[in, out]` and bias `[out]` nodes.
struct Linear {
    w: NodeId,
    b: NodeId,
}

/// A LayerNorm's gamma and beta nodes.
struct Norm {
    gamma: NodeId,
    beta: NodeId,
}

/// One transformer layer's params.
struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    ffn1: Linear,
    ffn2: Linear,
    ln1: Norm,
    ln2: Norm,
}

/// The encoder's param nodes, as `EncoderConfig::declare` made them.
struct EncoderParams {
    word: NodeId,
    pos: NodeId,
    typ: NodeId,
    emb_ln: Norm,
    layers: Vec<Layer>,
    pool: Linear,
}

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
        let vb = VarBuilder::new(Graph::new("encoder_params"), self.dtype);
        // Declaring into a fresh graph only fails for a name declared twice, which
        // `declare` never does.
        match self.declare(&vb) {
            Ok(_) => vb.finish().1,
            Err(_) => Vec::new(),
        }
    }

    /// Declare every param (the one place their names and shapes are written).
    fn declare(&self, vb: &VarBuilder) -> Result<EncoderParams, ModelError> {
        let (h, f) = (self.hidden, self.ffn);
        let linear = |vb: VarBuilder, i: usize, o: usize| -> Result<Linear, ModelError> {
            Ok(Linear {
                w: vb.param("w", &[i, o], i)?,
                b: vb.param("b", &[o], i)?,
            })
        };
        let norm = |vb: VarBuilder| -> Result<Norm, ModelError> {
            Ok(Norm {
                gamma: vb.param("gamma", &[h], h)?,
                beta: vb.param("beta", &[h], h)?,
            })
        };
        let emb = vb.pp("emb");
        let word = emb.param("word", &[self.vocab, h], h)?;
        let pos = emb.param("pos", &[self.max_positions, h], h)?;
        let typ = emb.param("type", &[self.type_vocab, h], h)?;
        let emb_ln = norm(emb.pp("ln"))?;
        let mut layers = Vec::with_capacity(self.layers);
        for l in 0..self.layers {
            let vb = vb.pp(format!("l{l}"));
            layers.push(Layer {
                q: linear(vb.pp("q"), h, h)?,
                k: linear(vb.pp("k"), h, h)?,
                v: linear(vb.pp("v"), h, h)?,
                o: linear(vb.pp("o"), h, h)?,
                ffn1: linear(vb.pp("ffn1"), h, f)?,
                ffn2: linear(vb.pp("ffn2"), f, h)?,
                ln1: norm(vb.pp("ln1"))?,
                ln2: norm(vb.pp("ln2"))?,
            });
        }
        let pool = linear(vb.pp("pool"), h, h)?;
        Ok(EncoderParams {
            word,
            pos,
            typ,
            emb_ln,
            layers,
            pool,
        })
    }

    /// The forward graph for `[batch, seq]` ids; outputs `[last hidden [B,S,H], pooled [B,H]]`.
    pub fn build(&self, batch: usize, seq: usize) -> Result<Graph, ModelError> {
        self.check(batch, seq)?;
        let (h, dt) = (self.hidden, self.dtype);
        let mut g = Graph::new("encoder");
        let ids = g.input(IDS, Shape::new(&[batch, seq], DType::I64))?;
        let vb = VarBuilder::new(g, dt);
        let p = self.declare(&vb)?;
        let (mut g, _) = vb.finish();
        let word = g.gather(p.word, ids, 0)?;
        let pos = g.narrow(p.pos, 0, 0, seq)?;
        let typ = g.narrow(p.typ, 0, 0, 1)?;
        let e = g.add(word, pos)?;
        let e = g.add(e, typ)?;
        let ln =
            |g: &mut Graph, x: NodeId, n: &Norm| g.layer_norm(x, n.gamma, n.beta, -1, self.eps);
        let mut x = ln(&mut g, e, &p.emb_ln)?;
        let linear = |g: &mut Graph, x: NodeId, l: &Linear| -> Result<NodeId, ModelError> {
            let y = g.matmul(x, l.w)?;
            Ok(g.add(y, l.b)?)
        };
        let spec = AttentionSpec::new(self.heads, h / self.heads);
        for l in &p.layers {
            let q = linear(&mut g, x, &l.q)?;
            let k = linear(&mut g, x, &l.k)?;
            let v = linear(&mut g, x, &l.v)?;
            let a = g.attention(q, k, v, None, spec.clone())?;
            let o = linear(&mut g, a, &l.o)?;
            let r = g.add(x, o)?;
            x = ln(&mut g, r, &l.ln1)?;
            let f = linear(&mut g, x, &l.ffn1)?;
            let f = g.activation(Activation::Gelu, f)?;
            let f = linear(&mut g, f, &l.ffn2)?;
            let r = g.add(x, f)?;
            x = ln(&mut g, r, &l.ln2)?;
        }
        let cls = g.narrow(x, 1, 0, 1)?;
        let cls = g.reshape(cls, &[batch as i64, h as i64])?;
        let pooled = linear(&mut g, cls, &p.pool)?;
        let pooled = g.activation(Activation::Tanh, pooled)?;
        g.set_name(x, "last_hidden_state")?;
        g.set_name(pooled, "pooler_output")?;
        g.set_outputs(vec![x, pooled]);
        Ok(g)
    }

    /// Random weights (BERT's init: normal with std 0.02, LayerNorm gamma 1 and beta 0 plus a
    /// little noise so no test runs on constants), deterministic in `seed`.
    pub fn random_params(&self, seed: u64) -> Vec<(String, HostTensor)> {
        let mut rng = SplitMix64::new(seed ^ rlx_ir::rng::GOLDEN_GAMMA);
        self.params()
            .into_iter()
            .map(|s| {
                let n: usize = s.dims.iter().product();
                let gamma = s.name.ends_with(".gamma");
                let data: Vec<f64> = (0..n)
                    .map(|_| {
                        let z = rng.normal();
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
