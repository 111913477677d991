//! Tensor parallelism (Megatron-style) for the decoders: each of R ranks holds 1/R of every
//! attention and FFN block and the ranks sum their partial outputs with one all-reduce per
//! block.
//!
//! - Column-parallel (each rank computes some *outputs*): `attn_q/k/v` (and their qwen2
//!   biases), `ffn_gate`, `ffn_up`: rank r keeps rows `r·N/R..(r+1)·N/R`. For q/k/v those rows
//!   are whole heads (`h·head_dim..`), so attention runs on the rank's own heads with its own
//!   KV cache (`n_head_kv / R` heads) and never needs another rank's values.
//! - Row-parallel (each rank consumes its slice of the *inputs*): `attn_output`, `ffn_down`:
//!   rank r keeps columns `r·K/R..`, exactly the slice of the activations the column-parallel
//!   layer before it produced, so its product is a partial sum of the full one; one
//!   `all_reduce(Sum)` makes it whole before the residual add (and before gemma3's post
//!   norms, which need the whole vector).
//! - Everything else (embeddings, norms, qk-norm gammas, the LM head) is replicated: the
//!   residual stream is the same on every rank, so every rank ends with the same logits.
//!
//! The graph of a rank is the same program on every rank (SPMD); only the weights differ,
//! and [`ShardedStore`] hands each rank its slices. Packed quantized tensors split by rows
//! freely (a row is whole blocks); by columns only at whole-block boundaries, which is
//! checked up front ([`shard_config`]) so a bad split fails before any weight is read.
use super::config::{LlmConfig, WeightFormat};
use super::weights::{StoredTensor, TensorStore};
use crate::ModelError;
use rlx_ir::{CollectiveReduce, Graph, NodeId};
use std::borrow::Cow;
use std::ops::Range;

/// Which of `ranks` tensor-parallel ranks a graph (or a store) is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorParallel {
    pub rank: usize,
    pub ranks: usize,
}

impl Default for TensorParallel {
    /// One rank: the unsharded model.
    fn default() -> Self {
        TensorParallel { rank: 0, ranks: 1 }
    }
}

impl TensorParallel {
    /// Rank `rank` of `ranks`, checked.
    pub fn new(rank: usize, ranks: usize) -> Result<TensorParallel, ModelError> {
        let tp = TensorParallel { rank, ranks };
        tp.check()?;
        Ok(tp)
    }

    /// More than one rank: the graph gets all-reduces and the weights are sliced.
    pub fn is_sharded(&self) -> bool {
        self.ranks > 1
    }

    fn check(&self) -> Result<(), ModelError> {
        if self.ranks == 0 || self.rank >= self.ranks {
            return Err(ModelError::Config(format!(
                "tensor parallelism: rank {} of {} ranks (ranks are 0..{})",
                self.rank, self.ranks, self.ranks
            )));
        }
        Ok(())
    }

    /// This rank's part of `0..n` (n divisible by the rank count).
    fn part(&self, n: usize) -> Range<usize> {
        let k = n / self.ranks;
        self.rank * k..(self.rank + 1) * k
    }
}

/// How a tensor is split over the ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Every rank holds all of it.
    Replicated,
    /// Column-parallel: rank r holds rows `r·N/R..` (outputs; for a bias, its entries).
    Rows,
    /// Row-parallel: rank r holds columns `r·K/R..` of every row (inputs).
    Columns,
}

/// The split of GGUF tensor `name` (`blk.{l}.*` names; everything else is replicated).
pub fn split_of(name: &str) -> Split {
    let Some(rest) = name.strip_prefix("blk.") else {
        return Split::Replicated;
    };
    let Some((_, tail)) = rest.split_once('.') else {
        return Split::Replicated;
    };
    match tail {
        "attn_q.weight" | "attn_k.weight" | "attn_v.weight" | "attn_q.bias" | "attn_k.bias"
        | "attn_v.bias" | "ffn_gate.weight" | "ffn_up.weight" => Split::Rows,
        "attn_output.weight" | "ffn_down.weight" => Split::Columns,
        _ => Split::Replicated,
    }
}

fn divides(what: &str, n: usize, ranks: usize) -> Result<usize, ModelError> {
    if !n.is_multiple_of(ranks) {
        return Err(ModelError::ShardIndivisible {
            what: what.to_string(),
            n,
            ranks,
        });
    }
    Ok(n / ranks)
}

/// A packed matrix of `total` columns cut into per-rank slices of `total / ranks`: only at
/// whole-block boundaries (a block's values share one scale).
fn check_blocks(
    name: &str,
    format: WeightFormat,
    total: usize,
    ranks: usize,
) -> Result<(), ModelError> {
    if let WeightFormat::Packed(s) = format {
        let cols = total / ranks;
        if !cols.is_multiple_of(s.block_len()) {
            return Err(ModelError::ShardBlocks {
                name: name.to_string(),
                scheme: format!("{s:?}"),
                block: s.block_len(),
                cols,
                total,
                ranks,
            });
        }
    }
    Ok(())
}

/// The config one rank builds its graph from: `n_head / R`, `n_head_kv / R`, `n_ff / R`
/// (everything else as in `cfg`, which is the file's). Fails with a typed error naming
/// what does not divide, or the packed row-parallel tensor whose column slice would cut a
/// block.
pub fn shard_config(cfg: &LlmConfig, tp: TensorParallel) -> Result<LlmConfig, ModelError> {
    tp.check()?;
    if !tp.is_sharded() {
        return Ok(cfg.clone());
    }
    let r = tp.ranks;
    let mut out = cfg.clone();
    out.n_head = divides("n_head (attention.head_count)", cfg.n_head, r)?;
    out.n_head_kv = divides("n_head_kv (attention.head_count_kv)", cfg.n_head_kv, r)?;
    out.n_ff = divides("n_ff (feed_forward_length)", cfg.n_ff, r)?;
    for il in 0..cfg.n_layer {
        for (t, total) in [
            ("attn_output.weight", cfg.n_head * cfg.head_dim_v),
            ("ffn_down.weight", cfg.n_ff),
        ] {
            let name = format!("blk.{il}.{t}");
            // A missing tensor is the builder's error to report (it names the arch).
            if let Some(&f) = cfg.tensors.get(&name) {
                check_blocks(&name, f, total, r)?;
            }
        }
    }
    Ok(out)
}

/// `x`, a row-parallel layer's partial product, summed over the ranks (unchanged with one
/// rank, so the unsharded graph stays as it was).
pub(super) fn reduce_partial(
    g: &mut Graph,
    x: NodeId,
    tp: TensorParallel,
) -> Result<NodeId, ModelError> {
    Ok(if tp.is_sharded() {
        g.all_reduce(x, CollectiveReduce::Sum)?
    } else {
        x
    })
}

/// A [`TensorStore`] that presents each tensor as rank `tp.rank` holds it: sliced per
/// [`split_of`], replicated ones as they are. Row slices borrow the inner store's bytes.
pub struct ShardedStore<'a, S: ?Sized> {
    inner: &'a S,
    tp: TensorParallel,
}

impl<'a, S: TensorStore + ?Sized> ShardedStore<'a, S> {
    pub fn new(inner: &'a S, tp: TensorParallel) -> Result<ShardedStore<'a, S>, ModelError> {
        tp.check()?;
        Ok(ShardedStore { inner, tp })
    }
}

impl<S: TensorStore + ?Sized> TensorStore for ShardedStore<'_, S> {
    fn arch(&self) -> String {
        self.inner.arch()
    }

    fn tensor(&self, name: &str) -> Result<Option<StoredTensor<'_>>, ModelError> {
        let Some(t) = self.inner.tensor(name)? else {
            return Ok(None);
        };
        if !self.tp.is_sharded() {
            return Ok(Some(t));
        }
        Ok(Some(match split_of(name) {
            Split::Replicated => t,
            Split::Rows => self.rows(name, t)?,
            Split::Columns => self.columns(name, t)?,
        }))
    }
}

/// Bytes of a tensor that disagree with its shape and format (a store's bug, or a
/// malformed file the store did not check).
fn size_error(name: &str, t: &StoredTensor<'_>, want: &str) -> ModelError {
    ModelError::Config(format!(
        "tensor {name}: {} bytes for shape {:?} as {:?} ({want})",
        t.data.len(),
        t.shape,
        t.format
    ))
}

impl<S: TensorStore + ?Sized> ShardedStore<'_, S> {
    /// Rows `r·N/R..` of `[N, ...]` (a vector's entries): one contiguous byte range.
    fn rows<'t>(&self, name: &str, t: StoredTensor<'t>) -> Result<StoredTensor<'t>, ModelError> {
        let n = t.shape.first().copied().unwrap_or(1);
        divides(&format!("tensor {name}'s rows"), n, self.tp.ranks)?;
        if n == 0 || !t.data.len().is_multiple_of(n) {
            return Err(size_error(name, &t, "not a whole number of bytes per row"));
        }
        let row = t.data.len() / n;
        let part = self.tp.part(n);
        let bytes = part.start * row..part.end * row;
        let mut shape = t.shape.clone();
        if let Some(first) = shape.first_mut() {
            *first = part.len();
        }
        let data = match t.data {
            Cow::Borrowed(b) => Cow::Borrowed(&b[bytes]),
            Cow::Owned(v) => Cow::Owned(v[bytes].to_vec()),
        };
        Ok(StoredTensor {
            shape,
            format: t.format,
            data,
        })
    }

    /// Columns `r·K/R..` of every row of `[N, K]`; packed rows only at whole blocks.
    fn columns<'t>(&self, name: &str, t: StoredTensor<'t>) -> Result<StoredTensor<'t>, ModelError> {
        let [n, k] = t.shape[..] else {
            return Err(ModelError::Config(format!(
                "tensor {name}: a row-parallel weight must be a matrix, got shape {:?}",
                t.shape
            )));
        };
        let ranks = self.tp.ranks;
        let cols = divides(&format!("tensor {name}'s columns"), k, ranks)?;
        check_blocks(name, t.format, k, ranks)?;
        // Bytes of `c` columns of one row.
        let bytes_of = |c: usize| match t.format {
            WeightFormat::Plain(dt) => c * dt.size_bytes(),
            WeightFormat::Packed(s) => c / s.block_len() * s.block_bytes(),
        };
        let (row, part) = (bytes_of(k), bytes_of(cols));
        if t.data.len() != n * row {
            return Err(size_error(name, &t, &format!("expected {}", n * row)));
        }
        let start = self.tp.rank * part;
        let mut data = Vec::with_capacity(n * part);
        for r in t.data.chunks_exact(row.max(1)) {
            data.extend_from_slice(&r[start..start + part]);
        }
        Ok(StoredTensor {
            shape: vec![n, cols],
            format: t.format,
            data: Cow::Owned(data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{DType, QuantScheme};

    /// A store of one tensor.
    struct One(String, StoredTensor<'static>);

    impl TensorStore for One {
        fn arch(&self) -> String {
            "llama".into()
        }
        fn tensor(&self, name: &str) -> Result<Option<StoredTensor<'_>>, ModelError> {
            Ok((name == self.0).then(|| StoredTensor {
                shape: self.1.shape.clone(),
                format: self.1.format,
                data: Cow::Borrowed(&self.1.data[..]),
            }))
        }
    }

    fn one(name: &str, shape: &[usize], format: WeightFormat, bytes: usize) -> One {
        let data = (0..bytes).map(|i| (i % 251) as u8).collect();
        One(
            name.into(),
            StoredTensor {
                shape: shape.to_vec(),
                format,
                data: Cow::Owned(data),
            },
        )
    }

    #[test]
    fn names_split_as_megatron_does() {
        assert_eq!(split_of("blk.3.attn_q.weight"), Split::Rows);
        assert_eq!(split_of("blk.0.attn_v.bias"), Split::Rows);
        assert_eq!(split_of("blk.11.ffn_up.weight"), Split::Rows);
        assert_eq!(split_of("blk.1.attn_output.weight"), Split::Columns);
        assert_eq!(split_of("blk.1.ffn_down.weight"), Split::Columns);
        for r in [
            "token_embd.weight",
            "output.weight",
            "output_norm.weight",
            "blk.0.attn_norm.weight",
            "blk.0.attn_q_norm.weight",
            "blk.0.post_ffw_norm.weight",
        ] {
            assert_eq!(split_of(r), Split::Replicated, "{r}");
        }
    }

    #[test]
    fn plain_columns_and_rows_slice_elements() {
        // [2, 4] f32 of values 0..8 (as bytes 0..32): rank 1 of 2 holds columns 2..4.
        let s = one(
            "blk.0.ffn_down.weight",
            &[2, 4],
            WeightFormat::Plain(DType::F32),
            32,
        );
        let tp = TensorParallel::new(1, 2).unwrap();
        let st = ShardedStore::new(&s, tp).unwrap();
        let t = st.tensor("blk.0.ffn_down.weight").unwrap().unwrap();
        assert_eq!(t.shape, [2, 2]);
        let want: Vec<u8> = (8..16).chain(24..32).collect();
        assert_eq!(&t.data[..], &want[..]);
        let s = one(
            "blk.0.attn_k.weight",
            &[4, 2],
            WeightFormat::Plain(DType::F32),
            32,
        );
        let st = ShardedStore::new(&s, tp).unwrap();
        let t = st.tensor("blk.0.attn_k.weight").unwrap().unwrap();
        assert_eq!(t.shape, [2, 2]);
        assert_eq!(&t.data[..], &(16..32).collect::<Vec<u8>>()[..]);
    }

    #[test]
    fn packed_columns_split_only_at_blocks() {
        // Q4_K rows of 1024 values: 4 blocks of 256 (144 bytes each).
        let q = WeightFormat::Packed(QuantScheme::Q4_K);
        let s = one("blk.2.ffn_down.weight", &[3, 1024], q, 3 * 4 * 144);
        let st = ShardedStore::new(&s, TensorParallel::new(1, 2).unwrap()).unwrap();
        let t = st.tensor("blk.2.ffn_down.weight").unwrap().unwrap();
        assert_eq!(t.shape, [3, 512]);
        assert_eq!(t.data.len(), 3 * 2 * 144);
        assert_eq!(&t.data[..288], &s.1.data[288..576]);
        // Over 8 ranks a rank would hold half a block.
        let st = ShardedStore::new(&s, TensorParallel::new(0, 8).unwrap()).unwrap();
        match st.tensor("blk.2.ffn_down.weight") {
            Err(ModelError::ShardBlocks {
                name, block, cols, ..
            }) => {
                assert_eq!(
                    (name.as_str(), block, cols),
                    ("blk.2.ffn_down.weight", 256, 128)
                )
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a half-block split must fail"),
        }
    }

    #[test]
    fn bad_ranks_are_errors() {
        assert!(TensorParallel::new(2, 2).is_err());
        assert!(TensorParallel::new(0, 0).is_err());
        let s = one(
            "blk.0.attn_q.weight",
            &[6, 2],
            WeightFormat::Plain(DType::F32),
            48,
        );
        let st = ShardedStore::new(&s, TensorParallel::new(0, 4).unwrap()).unwrap();
        assert!(matches!(
            st.tensor("blk.0.attn_q.weight"),
            Err(ModelError::ShardIndivisible { n: 6, ranks: 4, .. })
        ));
    }
}
