//! sentence-transformers' `Pooling` and `Normalize` modules as graph nodes: mask-aware CLS,
//! max, mean and mean-sqrt-len pooling of the last hidden state, concatenated in the order
//! sentence-transformers concatenates them (cls, max, mean, mean_sqrt_len), and L2
//! normalisation as `torch.nn.functional.normalize` does it (norm clamped at 1e-12).
//!
//! Everything here is f32: the encoder casts its last hidden state up first, so the sums
//! over a 256-token sequence do not accumulate in half precision.
use super::json::JsonFile;
use crate::ModelError;
use rlx_ir::{DType, Graph, NodeId};
use std::path::Path;

/// Which poolings a `1_Pooling/config.json` turns on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pooling {
    pub cls: bool,
    pub max: bool,
    pub mean: bool,
    pub mean_sqrt_len: bool,
}

/// sentence-transformers' modes this pooling does not implement; a config that turns one
/// on is refused rather than silently pooled another way.
const UNSUPPORTED: [&str; 2] = ["pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"];

impl Pooling {
    /// Mean pooling alone (all-MiniLM-L6-v2's).
    pub fn mean() -> Pooling {
        Pooling {
            mean: true,
            ..Pooling::default()
        }
    }

    /// Read a pooling config; `hidden` is the encoder's width, which
    /// `word_embedding_dimension` must equal when present.
    pub fn from_file(path: impl AsRef<Path>, hidden: usize) -> Result<Pooling, ModelError> {
        Pooling::from_json(&JsonFile::read(path)?, hidden)
    }

    pub fn from_json(j: &JsonFile, hidden: usize) -> Result<Pooling, ModelError> {
        let width = j.usize_or("word_embedding_dimension", hidden)?;
        if width != hidden {
            return Err(j.error(
                "word_embedding_dimension",
                format!("{width}, but the encoder's hidden_size is {hidden}"),
            ));
        }
        for key in UNSUPPORTED {
            if j.bool_or(key, false)? {
                return Err(j.error(key, "this pooling mode is not supported"));
            }
        }
        let p = Pooling {
            cls: j.bool_or("pooling_mode_cls_token", false)?,
            max: j.bool_or("pooling_mode_max_tokens", false)?,
            mean: j.bool_or("pooling_mode_mean_tokens", false)?,
            mean_sqrt_len: j.bool_or("pooling_mode_mean_sqrt_len_tokens", false)?,
        };
        if p.modes() == 0 {
            return Err(j.error("pooling_mode_*", "no pooling mode is turned on"));
        }
        Ok(p)
    }

    /// How many vectors are concatenated.
    pub fn modes(&self) -> usize {
        [self.cls, self.max, self.mean, self.mean_sqrt_len]
            .iter()
            .filter(|&&m| m)
            .count()
    }

    /// The pooled width for an encoder of width `hidden`.
    pub fn dim(&self, hidden: usize) -> usize {
        self.modes() * hidden
    }

    /// Pool `hidden` (f32 `[B, S, H]`) under `mask` (f32 `[B, S]`, 1 = token, 0 = padding)
    /// into f32 `[B, modes·H]`.
    pub fn build(&self, g: &mut Graph, hidden: NodeId, mask: NodeId) -> Result<NodeId, ModelError> {
        let h = (g.shape(hidden)?.dims.last())
            .and_then(|d| d.as_static())
            .ok_or_else(|| ModelError::Config("pooling needs a static hidden width".into()))?;
        // [B, S, 1]: broadcasts over the width.
        let m = g.reshape(mask, &[0i64, 0, 1])?;
        let mut parts = Vec::with_capacity(self.modes());
        if self.cls {
            let first = g.narrow(hidden, 1, 0, 1)?;
            parts.push(g.reshape(first, &[0i64, h as i64])?);
        }
        if self.max {
            // Padding positions become -1e9 (as sentence-transformers sets them), exactly:
            // a kept position adds 0, a padded one is 0·x − 1e9.
            let one = g.scalar(1.0, DType::F32)?;
            let big = g.scalar(1e9, DType::F32)?;
            let kept = g.mul(hidden, m)?;
            let off = g.sub(m, one)?;
            let off = g.mul(off, big)?;
            let x = g.add(kept, off)?;
            parts.push(g.reduce_max(x, &[1i64], false)?);
        }
        if self.mean || self.mean_sqrt_len {
            let kept = g.mul(hidden, m)?;
            let sum = g.sum(kept, &[1i64], false)?;
            let count = g.sum(m, &[1i64], false)?;
            let floor = g.scalar(1e-9, DType::F32)?;
            let count = g.maximum(count, floor)?;
            if self.mean {
                parts.push(g.div(sum, count)?);
            }
            if self.mean_sqrt_len {
                let root = g.activation(rlx_ir::Activation::Sqrt, count)?;
                parts.push(g.div(sum, root)?);
            }
        }
        Ok(match parts.as_slice() {
            [one] => *one,
            _ => g.concat(&parts, -1)?,
        })
    }
}

/// `x / max(‖x‖₂, 1e-12)` along the last axis of f32 `[B, D]`.
pub fn normalize(g: &mut Graph, x: NodeId) -> Result<NodeId, ModelError> {
    let sq = g.mul(x, x)?;
    let ss = g.sum(sq, &[-1i64], true)?;
    let norm = g.activation(rlx_ir::Activation::Sqrt, ss)?;
    let eps = g.scalar(1e-12, DType::F32)?;
    let norm = g.maximum(norm, eps)?;
    Ok(g.div(x, norm)?)
}
