//! The host-side training loop. A training step is ONE compiled graph (forward, backward,
//! optimizer update) whose new weights and optimizer state are written back into its params
//! by the runtime after each run; the host only feeds a batch and reads the loss. The same
//! trainer runs data-parallel over the ranks of a mesh (see [`crate::train_dp`]): one
//! step graph per rank, each on its shard of the batch.
use crate::cnn::{IMAGES, LABELS};
use crate::train_dp::{self, Ranks};
use crate::{CnnConfig, ModelError};
use indicatif::{ProgressBar, ProgressStyle};
use rlx_autodiff::{GradBucket, Optimizer};
use rlx_io::{Batch, Dataset};
use rlx_ir::{DType, Graph, HostTensor, SplitMix64};
use rlx_runtime::{CompiledGraph, Device, Session};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A learnable param: name, shape and fan-in (for the init bound).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: String,
    pub dims: Vec<usize>,
    pub fan_in: usize,
}

/// What the trainer needs from a model: its params and its graph for a batch size. With
/// `with_loss` the graph takes `images` and `labels` and outputs `[loss, logits…]`;
/// without, it takes `images` and outputs `[logits]`.
pub trait GraphBuilder {
    fn params(&self) -> Vec<ParamSpec>;
    fn build(&self, batch: usize, with_loss: bool) -> Result<Graph, ModelError>;
    /// Check that samples of `rows × cols` with these labels suit the model (`set` names
    /// the data in the error). The default accepts anything.
    fn check_data(
        &self,
        set: &'static str,
        rows: usize,
        cols: usize,
        labels: &[u8],
    ) -> Result<(), ModelError> {
        let _ = (set, rows, cols, labels);
        Ok(())
    }
}

impl GraphBuilder for CnnConfig {
    fn params(&self) -> Vec<ParamSpec> {
        CnnConfig::params(self)
    }
    fn build(&self, batch: usize, with_loss: bool) -> Result<Graph, ModelError> {
        CnnConfig::build(self, batch, with_loss)
    }
    fn check_data(
        &self,
        set: &'static str,
        rows: usize,
        cols: usize,
        labels: &[u8],
    ) -> Result<(), ModelError> {
        if (rows, cols) != (self.rows, self.cols) {
            return Err(ModelError::ImageSize {
                set,
                got_rows: rows,
                got_cols: cols,
                rows: self.rows,
                cols: self.cols,
            });
        }
        match labels.iter().position(|&l| l as usize >= self.classes) {
            Some(index) => Err(ModelError::LabelOutOfRange {
                set,
                index,
                label: labels[index] as usize,
                classes: self.classes,
            }),
            None => Ok(()),
        }
    }
}

/// A learning rate the optimizer can descend with: positive and finite.
fn check_lr(lr: f64) -> Result<(), ModelError> {
    if lr > 0.0 && lr.is_finite() {
        Ok(())
    } else {
        Err(ModelError::BadLearningRate { lr })
    }
}

/// PyTorch's default init for conv and linear layers: weights by kaiming_uniform_ with
/// a = √5 and biases alike both come out as U(−1/√fan_in, 1/√fan_in).
pub fn kaiming_uniform(spec: &ParamSpec, seed: u64) -> HostTensor {
    // Mix the name in so each param gets its own stream from one seed.
    let salt = spec.name.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    });
    // SplitMix64, so an init is reproducible from its seed on every platform.
    let mut rng = SplitMix64::new(seed ^ salt);
    let bound = 1.0 / (spec.fan_in.max(1) as f64).sqrt();
    let n: usize = spec.dims.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|_| ((rng.unit_f64() * 2.0 - 1.0) * bound) as f32)
        .collect();
    HostTensor::from_f32(&spec.dims, &v)
}

/// How the learning rate changes over a `fit`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LrSchedule {
    Constant,
    /// Cosine decay from the optimizer's lr to 0 over all steps of the fit.
    Cosine,
}

/// Settings of [`Trainer::fit`].
#[derive(Clone, Debug)]
pub struct FitConfig {
    pub epochs: usize,
    pub batch_size: usize,
    /// Seeds the batch order of every epoch.
    pub seed: u64,
    pub schedule: LrSchedule,
    /// Draw an indicatif progress bar per epoch (hidden anyway when stderr is no terminal).
    pub progress: bool,
}

/// What one epoch of `fit` reached.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochReport {
    pub epoch: usize,
    /// Mean training loss over the epoch's batches.
    pub loss: f64,
    /// Accuracy on the evaluation set after the epoch.
    pub accuracy: f64,
    pub wall: Duration,
}

/// Trains a model built by a [`GraphBuilder`] with one [`Optimizer`] on one device, or
/// data-parallel on every rank of a mesh ([`Trainer::data_parallel`]).
pub struct Trainer {
    builder: Box<dyn GraphBuilder>,
    optimizer: Optimizer,
    pub(crate) ranks: Ranks,
    specs: Vec<ParamSpec>,
    /// Compiled train steps by (global) batch size, one per rank; `active` holds the
    /// current values.
    pub(crate) steps: HashMap<usize, Vec<CompiledGraph>>,
    /// The gradient buckets of each step graph (empty on one device).
    pub(crate) buckets: HashMap<usize, Vec<GradBucket>>,
    pub(crate) active: Option<usize>,
    /// Param and state values while no step graph holds them (before the first step).
    host: HashMap<String, HostTensor>,
    evals: HashMap<usize, CompiledGraph>,
    eval_batch: usize,
    steps_done: u64,
}

impl Trainer {
    /// A trainer with params initialised from seed 0 (see [`Trainer::with_seed`]).
    pub fn new(
        builder: impl GraphBuilder + 'static,
        optimizer: Optimizer,
        device: Device,
    ) -> Result<Trainer, ModelError> {
        Trainer::with_ranks(builder, optimizer, Ranks::One(Session::new(device)))
    }

    pub(crate) fn with_ranks(
        builder: impl GraphBuilder + 'static,
        optimizer: Optimizer,
        ranks: Ranks,
    ) -> Result<Trainer, ModelError> {
        check_lr(optimizer.lr())?;
        let specs = builder.params();
        if specs.is_empty() {
            return Err(ModelError::Config("the model has no params".into()));
        }
        let mut t = Trainer {
            builder: Box::new(builder),
            optimizer,
            ranks,
            specs,
            steps: HashMap::new(),
            buckets: HashMap::new(),
            active: None,
            host: HashMap::new(),
            evals: HashMap::new(),
            eval_batch: 256,
            steps_done: 0,
        };
        t.init(0);
        Ok(t)
    }

    /// Re-initialise every param (Kaiming-uniform from `seed`) and reset the optimizer.
    pub fn with_seed(mut self, seed: u64) -> Trainer {
        self.init(seed);
        self
    }

    fn init(&mut self, seed: u64) {
        self.host = self
            .specs
            .iter()
            .map(|s| (s.name.clone(), kaiming_uniform(s, seed)))
            .collect();
        self.steps.clear();
        self.buckets.clear();
        self.active = None;
        self.steps_done = 0;
    }

    /// Move the current values (params and optimizer state) to the host and drop every
    /// compiled step graph, so the next step recompiles.
    pub(crate) fn park(&mut self) -> Result<(), ModelError> {
        if let Some(b) = self.active {
            let names: Vec<String> = (self.steps[&b][0].graph().params())
                .map(|(n, _)| n.to_string())
                .collect();
            for n in names {
                let v = self.value(&n)?;
                self.host.insert(n, v);
            }
        }
        self.steps.clear();
        self.buckets.clear();
        self.active = None;
        Ok(())
    }

    pub fn optimizer(&self) -> &Optimizer {
        &self.optimizer
    }

    /// Change the learning rate for the following steps (a graph input: no recompile).
    /// It must be positive and finite.
    pub fn set_lr(&mut self, lr: f64) -> Result<(), ModelError> {
        check_lr(lr)?;
        self.optimizer = self.optimizer.with_lr(lr);
        Ok(())
    }

    pub fn steps_done(&self) -> u64 {
        self.steps_done
    }

    /// The current value of a param or optimizer-state tensor.
    pub fn value(&self, name: &str) -> Result<HostTensor, ModelError> {
        if let Some(b) = self.active {
            return Ok(self.steps[&b][0].param(name)?);
        }
        self.host
            .get(name)
            .cloned()
            .ok_or_else(|| ModelError::Config(format!("no param or state named \"{name}\"")))
    }

    /// The current trained params, in the model's order.
    pub fn params(&self) -> Result<Vec<(String, HostTensor)>, ModelError> {
        self.specs
            .iter()
            .map(|s| Ok((s.name.clone(), self.value(&s.name)?)))
            .collect()
    }

    /// Make the step graphs for a global `batch` the holders of the current values,
    /// compiling them on first use (one per rank, for `batch / ranks` samples each) and
    /// carrying weights and optimizer state over from the previous holders.
    fn activate(&mut self, batch: usize) -> Result<(), ModelError> {
        if self.active == Some(batch) {
            return Ok(());
        }
        if !self.steps.contains_key(&batch) {
            let fwd = self.builder.build(batch / self.ranks.count(), true)?;
            let names: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
            let (ts, buckets) = self.ranks.train_step(&fwd, &names, &self.optimizer)?;
            let mut compiled = Vec::with_capacity(self.ranks.count());
            for session in self.ranks.sessions() {
                let c = session.compile(ts.graph.clone())?;
                for (k, name) in ts.updates() {
                    c.bind_update(k, &name)?;
                }
                compiled.push(c);
            }
            // Optimizer state starts at zero the first time it is seen.
            for (name, shape) in &ts.state {
                if !self.host.contains_key(name) && self.active.is_none() {
                    let dims = shape.static_dims().unwrap_or_default();
                    let n = dims.iter().product();
                    self.host.insert(
                        name.clone(),
                        HostTensor::from_f64_as(&dims, &vec![0.0; n], shape.dtype),
                    );
                }
            }
            self.steps.insert(batch, compiled);
            self.buckets.insert(batch, buckets);
        }
        let names: Vec<String> = self.steps[&batch][0]
            .graph()
            .params()
            .map(|(n, _)| n.to_string())
            .collect();
        let mut values = Vec::with_capacity(names.len());
        for n in &names {
            values.push(self.value(n)?);
        }
        for target in &self.steps[&batch] {
            for (n, v) in names.iter().zip(&values) {
                target.set_param_typed(n, v.clone())?;
            }
        }
        self.active = Some(batch);
        Ok(())
    }

    /// One training step on a batch; returns the batch's loss (before the update). Over
    /// R ranks, rank r trains on rows `r·B/R .. (r+1)·B/R` and the loss is the mean over
    /// the ranks (the whole batch's); a batch that does not divide by R is an error.
    pub fn step(&mut self, batch: &Batch) -> Result<f32, ModelError> {
        if batch.is_empty() {
            return Err(ModelError::EmptyDataset { set: "batch" });
        }
        self.builder
            .check_data("batch", batch.rows, batch.cols, &batch.labels)?;
        let ranks = self.ranks.count();
        let shards = match ranks {
            1 => None,
            _ => Some(train_dp::shard(batch, ranks)?),
        };
        let parts = shards.as_deref().unwrap_or(std::slice::from_ref(batch));
        self.activate(batch.len())?;
        let hyper: Vec<(&str, HostTensor)> = (self.optimizer.hyper_values().into_iter())
            .map(|(name, v)| (name, HostTensor::from_f64_as(&[], &[v], DType::F32)))
            .collect();
        let steps = &self.steps[&batch.len()];
        let losses = self.ranks.run(|r| {
            // This process's r-th rank takes its global rank's shard.
            let part = parts
                .get(self.ranks.global(r))
                .ok_or_else(|| ModelError::Config(format!("no shard for local rank {r}")))?;
            let mut inputs: Vec<(&str, HostTensor)> = vec![
                (IMAGES, part.images_tensor(DType::F32)),
                (LABELS, part.labels_tensor()),
            ];
            inputs.extend(hyper.iter().cloned());
            let out = steps[r].run_step(&inputs)?;
            out.first()
                .map(|t| t.to_f32_vec())
                .and_then(|v| v.first().copied())
                .ok_or_else(|| ModelError::Config("the step graph returned no loss".into()))
        })?;
        self.steps_done += 1;
        // Every rank reports the all-reduced loss.
        losses
            .first()
            .copied()
            .ok_or_else(|| ModelError::Config("no rank ran the step".into()))
    }

    /// Class predictions (argmax of the logits) for every sample of `data`, through a
    /// forward-only graph given the current trained values.
    pub fn predict(&mut self, data: &Dataset) -> Result<Vec<usize>, ModelError> {
        if data.n == 0 {
            return Ok(vec![]);
        }
        let b = self.eval_batch.min(data.n);
        if !self.evals.contains_key(&b) {
            let g = self.builder.build(b, false)?;
            // Rank 0 evaluates: every rank holds the same params.
            let session = (self.ranks.sessions().first())
                .ok_or_else(|| ModelError::Config("the trainer has no ranks".into()))?;
            self.evals.insert(b, session.compile(g)?);
        }
        let params = self.params()?;
        let eval = &self.evals[&b];
        for (n, v) in params {
            eval.set_param_typed(&n, v)?;
        }
        let px = data.rows * data.cols;
        let mut preds = Vec::with_capacity(data.n);
        for start in (0..data.n).step_by(b) {
            let take = b.min(data.n - start);
            // Pad the last chunk with blank images; their predictions are dropped.
            let mut img = data.images[start * px..(start + take) * px].to_vec();
            img.resize(b * px, 0.0);
            let x = HostTensor::from_f32(&[b, 1, data.rows, data.cols], &img);
            let logits = eval.run_typed(&[(IMAGES, x)])?;
            let l = logits
                .first()
                .ok_or_else(|| ModelError::Config("the eval graph returned nothing".into()))?
                .to_f32_vec();
            let classes = l.len() / b;
            for row in l.chunks(classes).take(take) {
                let mut best = 0;
                for (c, &v) in row.iter().enumerate() {
                    if v > row[best] {
                        best = c;
                    }
                }
                preds.push(best);
            }
        }
        Ok(preds)
    }

    /// Fraction of `data` classified correctly.
    pub fn evaluate(&mut self, data: &Dataset) -> Result<f64, ModelError> {
        self.check_set("evaluation", data)?;
        let preds = self.predict(data)?;
        let right = preds
            .iter()
            .zip(&data.labels)
            .filter(|(p, &l)| **p == l as usize)
            .count();
        Ok(right as f64 / data.n as f64)
    }

    /// Train for `cfg.epochs` over `train`, evaluating on `eval` after each epoch; the
    /// callback sees each epoch's report as it completes.
    pub fn fit(
        &mut self,
        train: &Dataset,
        eval: &Dataset,
        cfg: &FitConfig,
        mut on_epoch: impl FnMut(&EpochReport),
    ) -> Result<Vec<EpochReport>, ModelError> {
        if cfg.epochs == 0 || cfg.batch_size == 0 {
            return Err(ModelError::Config(
                "epochs and batch_size must be positive".into(),
            ));
        }
        let ranks = self.ranks.count();
        if !cfg.batch_size.is_multiple_of(ranks) {
            return Err(ModelError::BatchNotDivisible {
                batch: cfg.batch_size,
                ranks,
            });
        }
        // Every check before the first step: a bad test set must not cost a training run.
        self.check_set("training", train)?;
        self.check_set("evaluation", eval)?;
        let per_epoch = train.n.div_ceil(cfg.batch_size);
        let total = (per_epoch * cfg.epochs).max(1) as f64;
        let base_lr = self.optimizer.lr();
        let mut reports = Vec::with_capacity(cfg.epochs);
        let mut k = 0usize;
        for epoch in 0..cfg.epochs {
            let t0 = Instant::now();
            let bar = if cfg.progress {
                ProgressBar::new(per_epoch as u64)
            } else {
                ProgressBar::hidden()
            };
            bar.set_style(
                ProgressStyle::with_template(
                    "epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
                )
                .map_err(|e| ModelError::Config(e.to_string()))?
                .progress_chars("=> "),
            );
            bar.set_prefix(format!("{}/{}", epoch + 1, cfg.epochs));
            let (mut sum, mut count) = (0.0f64, 0usize);
            let seed = cfg.seed.wrapping_add(epoch as u64);
            for batch in train.batches(cfg.batch_size, seed)? {
                // Over R ranks, the epoch's last batch is cut to a multiple of R.
                let Some(batch) = train_dp::trim(batch, ranks) else {
                    k += 1;
                    bar.inc(1);
                    continue;
                };
                if cfg.schedule == LrSchedule::Cosine {
                    let f = 0.5 * (1.0 + (std::f64::consts::PI * k as f64 / total).cos());
                    // Cosine decay stays positive: k < total, so f > 0.
                    self.optimizer = self.optimizer.with_lr(base_lr * f);
                }
                let loss = self.step(&batch)? as f64;
                if !loss.is_finite() {
                    bar.abandon();
                    return Err(ModelError::Config(format!(
                        "the loss became {loss} at epoch {} step {count}: lower the learning rate",
                        epoch + 1
                    )));
                }
                sum += loss * batch.len() as f64;
                count += batch.len();
                k += 1;
                bar.inc(1);
                bar.set_message(format!("loss {:.4}", sum / count as f64));
            }
            let accuracy = self.evaluate(eval)?;
            let report = EpochReport {
                epoch: epoch + 1,
                loss: sum / count.max(1) as f64,
                accuracy,
                wall: t0.elapsed(),
            };
            bar.finish_with_message(format!(
                "loss {:.4} accuracy {:.2}%",
                report.loss,
                100.0 * accuracy
            ));
            on_epoch(&report);
            reports.push(report);
        }
        self.optimizer = self.optimizer.with_lr(base_lr);
        Ok(reports)
    }

    /// `data` is non-empty, consistent, and of the model's image size and classes.
    fn check_set(&self, set: &'static str, data: &Dataset) -> Result<(), ModelError> {
        data.validate()?;
        if data.n == 0 {
            return Err(ModelError::EmptyDataset { set });
        }
        self.builder
            .check_data(set, data.rows, data.cols, &data.labels)
    }
}
