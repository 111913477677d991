//! Data-parallel training: one [`Trainer`] over the R ranks of a [`Mesh`].
//!
//! Every rank compiles the same step graph (SPMD) for a per-rank batch of B/R and takes its
//! shard of each global batch of B: rank r gets rows `r·B/R .. (r+1)·B/R`. The step graph
//! is the 1-rank one with the gradients all-reduced (Mean) in DDP-style buckets between
//! the backward pass and the optimizer update ([`rlx_autodiff::all_reduce_grads`]), and
//! the loss all-reduced too. Why this trains exactly like one rank on the whole batch: the
//! loss is a mean over the batch, so with equal shards the mean over ranks of the
//! shard-mean gradients is the full-batch mean gradient; every rank starts from the same
//! params (one seed) and applies the same update to the same averaged gradient, so params
//! and optimizer state stay identical on every rank, and equal the 1-rank trainer's up to
//! f32 rounding (the per-sample sums are merely grouped differently).
//!
//! Hence a global batch that does not divide by R is an error
//! ([`ModelError::BatchNotDivisible`]): unequal shards would weight samples unequally.
//! `fit` checks its batch size up front and trims an epoch's last, partial batch to a
//! multiple of R (dropping at most R−1 samples of that epoch; the order is reshuffled every
//! epoch, so no sample is always left out).
//!
//! The models built here keep no state that the forward pass updates (the CNN has no
//! batch norm): the only state is the optimizer's, derived from the averaged gradients.
//! Evaluation runs on rank 0 alone (every rank holds the same params).
//!
//! Steps run on every rank at once through [`Mesh::run`]; a rank that fails aborts the
//! group so the others stop waiting at their next all-reduce, and the trainer's later
//! steps then fail at once (the group stays aborted) rather than hang.
use crate::train::Trainer;
use crate::{GraphBuilder, ModelError};
use rlx_autodiff::{
    all_reduce_grads, train_step, train_step_with, GradBucket, Optimizer, TrainStep,
    DEFAULT_BUCKET_BYTES,
};
use rlx_io::Batch;
use rlx_ir::{Graph, HostTensor};
use rlx_runtime::{Mesh, Session};

/// Where a trainer's steps run: one session, or every rank of a mesh.
pub(crate) enum Ranks {
    One(Session),
    Mesh {
        mesh: Mesh,
        /// The gradient bucket cap of the step graphs compiled from now on.
        bucket_bytes: usize,
    },
}

impl Ranks {
    pub(crate) fn count(&self) -> usize {
        match self {
            Ranks::One(_) => 1,
            Ranks::Mesh { mesh, .. } => mesh.world(),
        }
    }

    /// The global rank of this process's `r`-th rank (which shard of a batch it takes).
    pub(crate) fn global(&self, r: usize) -> usize {
        match self {
            Ranks::One(_) => 0,
            Ranks::Mesh { mesh, .. } => mesh.sessions().get(r).map_or(r, |s| s.rank().0),
        }
    }

    /// Every rank's session, in rank order.
    pub(crate) fn sessions(&self) -> &[Session] {
        match self {
            Ranks::One(s) => std::slice::from_ref(s),
            Ranks::Mesh { mesh, .. } => mesh.sessions(),
        }
    }

    /// The training-step graph for `forward` (one rank's batch) and, on a mesh, its
    /// gradient buckets.
    pub(crate) fn train_step(
        &self,
        forward: &Graph,
        params: &[&str],
        optimizer: &Optimizer,
    ) -> Result<(TrainStep, Vec<GradBucket>), ModelError> {
        match self {
            Ranks::One(_) => Ok((train_step(forward, params, optimizer)?, Vec::new())),
            Ranks::Mesh { bucket_bytes, .. } => {
                let mut buckets = Vec::new();
                let ts = train_step_with(forward, params, optimizer, |g| {
                    let (g, b) = all_reduce_grads(&g, *bucket_bytes)?;
                    buckets = b;
                    Ok(g)
                })?;
                Ok((ts, buckets))
            }
        }
    }

    /// `f(rank)` on every rank at once (a thread each on a mesh); the results in rank
    /// order, or the first rank's error.
    pub(crate) fn run<T, F>(&self, f: F) -> Result<Vec<T>, ModelError>
    where
        T: Send,
        F: Fn(usize) -> Result<T, ModelError> + Sync,
    {
        match self {
            Ranks::One(_) => Ok(vec![f(0)?]),
            Ranks::Mesh { mesh, .. } => mesh.run(|r, _| f(r)),
        }
    }
}

/// Rank r's rows `r·B/R .. (r+1)·B/R` of `batch`, for every rank.
pub(crate) fn shard(batch: &Batch, ranks: usize) -> Result<Vec<Batch>, ModelError> {
    let b = batch.len();
    if ranks == 0 || !b.is_multiple_of(ranks) {
        return Err(ModelError::BatchNotDivisible { batch: b, ranks });
    }
    let px = batch.rows * batch.cols;
    if batch.images.len() != b * px {
        return Err(ModelError::Config(format!(
            "the batch holds {} labels but {} image values ({} per {}x{} image expected)",
            b,
            batch.images.len(),
            px,
            batch.rows,
            batch.cols
        )));
    }
    let per = b / ranks;
    Ok((0..ranks)
        .map(|r| Batch {
            images: batch.images[r * per * px..(r + 1) * per * px].to_vec(),
            labels: batch.labels[r * per..(r + 1) * per].to_vec(),
            rows: batch.rows,
            cols: batch.cols,
        })
        .collect())
}

/// `batch` cut to a multiple of `ranks` samples (its first ones); None if fewer remain
/// than there are ranks.
pub(crate) fn trim(mut batch: Batch, ranks: usize) -> Option<Batch> {
    let keep = batch.len() - batch.len() % ranks.max(1);
    if keep == 0 {
        return None;
    }
    batch.labels.truncate(keep);
    batch.images.truncate(keep * batch.rows * batch.cols);
    Some(batch)
}

impl Trainer {
    /// A data-parallel trainer over every rank of `mesh`, params initialised from seed 0
    /// on every rank alike (see [`Trainer::with_seed`]); gradients are all-reduced in
    /// buckets of at most [`DEFAULT_BUCKET_BYTES`] (see [`Trainer::with_bucket_bytes`]).
    /// A one-rank mesh trains like [`Trainer::new`] (its all-reduces are identities).
    pub fn data_parallel(
        builder: impl GraphBuilder + 'static,
        optimizer: Optimizer,
        mesh: Mesh,
    ) -> Result<Trainer, ModelError> {
        Trainer::with_ranks(
            builder,
            optimizer,
            Ranks::Mesh {
                mesh,
                bucket_bytes: DEFAULT_BUCKET_BYTES,
            },
        )
    }

    /// Cap the bytes of gradient one all-reduce carries (a gradient over the cap gets a
    /// bucket of its own, so 0 means one all-reduce per gradient). Step graphs compiled so
    /// far are dropped (the trained values are kept) and recompiled with the new buckets.
    /// No effect on a single-device trainer, which has no all-reduce.
    pub fn with_bucket_bytes(mut self, bytes: usize) -> Result<Trainer, ModelError> {
        if let Ranks::Mesh { bucket_bytes, .. } = &mut self.ranks {
            *bucket_bytes = bytes;
            self.park()?;
        }
        Ok(self)
    }

    /// How many ranks each step runs on.
    pub fn ranks(&self) -> usize {
        self.ranks.count()
    }

    /// The gradient buckets of the step graph for a global batch of `batch`, in graph
    /// order (empty on a single device, or before that step graph is compiled).
    pub fn grad_buckets(&self, batch: usize) -> &[GradBucket] {
        self.buckets.get(&batch).map_or(&[], Vec::as_slice)
    }

    /// Rank `rank`'s current value of a param or optimizer-state tensor (every rank holds
    /// the same; this reads one rank's copy, to check that).
    pub fn rank_value(&self, rank: usize, name: &str) -> Result<HostTensor, ModelError> {
        // `rank` counts this process's ranks (all of them on a local mesh).
        let ranks = self.ranks.sessions().len();
        if rank >= ranks {
            return Err(ModelError::Config(format!(
                "rank {rank} of a trainer over {ranks} local rank(s)"
            )));
        }
        match self.active.and_then(|b| self.steps.get(&b)?.get(rank)) {
            Some(step) => Ok(step.param(name)?),
            None => self.value(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Batch {
        Batch {
            images: (0..n * 4).map(|v| v as f32).collect(),
            labels: (0..n as u8).collect(),
            rows: 2,
            cols: 2,
        }
    }

    #[test]
    fn shards_are_contiguous_rows() {
        let s = shard(&batch(6), 3).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[1].labels, vec![2, 3]);
        assert_eq!(s[1].images, (8..16).map(|v| v as f32).collect::<Vec<_>>());
        assert!(matches!(
            shard(&batch(7), 3),
            Err(ModelError::BatchNotDivisible { batch: 7, ranks: 3 })
        ));
        let mut bad = batch(4);
        bad.images.pop();
        assert!(shard(&bad, 2).is_err());
    }

    #[test]
    fn trim_keeps_a_multiple_of_the_ranks() {
        assert_eq!(trim(batch(7), 3).unwrap().len(), 6);
        assert_eq!(trim(batch(7), 3).unwrap().images.len(), 24);
        assert!(trim(batch(2), 3).is_none());
        assert_eq!(trim(batch(5), 1).unwrap().len(), 5);
    }
}
