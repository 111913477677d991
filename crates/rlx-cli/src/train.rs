//! `rlx train digits | fashion-mnist`: train the MNIST-style CNN with one compiled graph per
//! step and report per-epoch loss / accuracy, the final test accuracy and the wall time.
//! With `--devices cpu,cpu` (or `cpu*4`) it trains data-parallel: every rank takes an equal
//! shard of each batch and the gradients are all-reduced in buckets inside the step graph,
//! so it reaches what one device reaches on the same batches.
use crate::CliError;
use clap::{Args, Subcommand, ValueEnum};
use rlx::prelude::Device;
use rlx::runtime::Mesh;
use rlx_io::datasets::{load_mnist_dir, DEBIAN_FASHION_MNIST_DIR};
use rlx_io::Dataset;
use rlx_models::{CnnConfig, FitConfig, LrSchedule, Optimizer, Trainer};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Subcommand)]
pub enum TrainCmd {
    /// scikit-learn's 8×8 handwritten digits (embedded; 80/20 stratified split).
    Digits {
        #[command(flatten)]
        opts: TrainOpts,
    },
    /// Fashion-MNIST (28×28, 60k train / 10k test) from a directory of IDX files.
    FashionMnist {
        /// Directory with train-images-idx3-ubyte.gz etc.
        #[arg(long, default_value = DEBIAN_FASHION_MNIST_DIR)]
        data: PathBuf,
        #[command(flatten)]
        opts: TrainOpts,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OptName {
    Adam,
    Adamw,
    Sgd,
}

#[derive(Args)]
pub struct TrainOpts {
    /// Passes over the training set (default: 15 for digits, 3 for fashion-mnist).
    #[arg(long, value_parser = crate::demo::size_arg(MAX_EPOCHS))]
    epochs: Option<usize>,
    /// Batch size (default: 16 for digits, 64 for fashion-mnist).
    #[arg(long, value_parser = crate::demo::size_arg(MAX_BATCH))]
    batch: Option<usize>,
    /// Peak learning rate, decayed by a cosine schedule (default: 3e-3 for adam / adamw on
    /// digits, 2e-3 on fashion-mnist; 0.05 for sgd). Must be positive.
    #[arg(long, value_parser = positive_lr, allow_negative_numbers = true)]
    lr: Option<f64>,
    #[arg(long, value_enum, default_value_t = OptName::Adam)]
    optimizer: OptName,
    /// Seeds the init, the split and the batch order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output channels of the two conv layers (default: 32 64 for digits, 16 32 for
    /// fashion-mnist).
    #[arg(long, num_args = 2, value_names = ["C1", "C2"],
          value_parser = crate::demo::size_arg(MAX_CHANNELS))]
    channels: Option<Vec<usize>>,
    /// cpu, cuda[:N] or wgpu[:N] (default: the best available)
    #[arg(long)]
    device: Option<String>,
    /// Train data-parallel over these ranks, e.g. `cpu,cpu` or `cpu*4` (CPU ranks simulated
    /// in this process); --batch is the global batch and must divide by the rank count.
    #[arg(long, conflicts_with = "device")]
    devices: Option<String>,
    /// With --devices: the most gradient one all-reduce carries, in MiB (DDP's default; 0
    /// means one all-reduce per param).
    #[arg(long, requires = "devices", default_value_t = 25.0, value_parser = bucket_mb,
          allow_negative_numbers = true)]
    bucket_mb: f64,
}

/// Caps that keep every size the CNN allocates far from overflow and from absurd memory.
const MAX_EPOCHS: usize = 1 << 20;
const MAX_BATCH: usize = 1 << 16;
const MAX_CHANNELS: usize = 4096;
/// The most memory a training run may plan to use.
const MAX_TRAIN_BYTES: u128 = 16 << 30;

/// Bytes a training step needs, roughly and from above: f32 params with their gradient
/// and two optimizer moments, and eight buffers (forward and backward) per activation of
/// the batch. In u128, so no argument overflows it.
fn planned_bytes(cfg: &CnnConfig, batch: usize) -> u128 {
    let [c1, c2] = cfg.channels.map(|c| c as u128);
    let (px, b, k) = (
        (cfg.rows * cfg.cols) as u128,
        batch as u128,
        cfg.classes as u128,
    );
    let params = 9 * c1 + c1 * c2 * 9 + c1 + c2 + (c2 * px / 16 + 1) * k;
    let acts = px * (1 + 2 * c1) + px / 4 * (c1 + 2 * c2) + px / 16 * c2 + 2 * k;
    4 * (4 * params + 8 * b * acts)
}

/// `--bucket-mb`: a finite size from 0 to 1 TiB.
fn bucket_mb(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("\"{s}\" is not a number of MiB: try 25"))?;
    if (0.0..=(1u64 << 20) as f64).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{s} MiB is not a bucket size from 0 to 1048576: try 25"
        ))
    }
}

/// `--lr`: a positive finite number (a negative one would train uphill without a word).
fn positive_lr(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("\"{s}\" is not a number: try 1e-3"))?;
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(format!(
            "{s} is not a positive finite learning rate: try 1e-3"
        ))
    }
}

pub fn run(cmd: TrainCmd) -> Result<(), CliError> {
    let t0 = Instant::now();
    let (name, train, test, mut cfg, opts, defaults) = match cmd {
        TrainCmd::Digits { opts } => {
            let all = Dataset::digits()?;
            let (train, test) = all.split(0.2, opts.seed)?;
            (
                "digits",
                train,
                test,
                CnnConfig::digits(),
                opts,
                (15, 16, 3e-3),
            )
        }
        TrainCmd::FashionMnist { data, opts } => {
            check_dir(&data)?;
            println!("loading Fashion-MNIST from {}", data.display());
            let train = load_mnist_dir(&data, true)?;
            let test = load_mnist_dir(&data, false)?;
            (
                "fashion-mnist",
                train,
                test,
                CnnConfig::mnist(),
                opts,
                (3, 64, 2e-3),
            )
        }
    };
    let mesh = opts.devices.as_deref().map(Mesh::parse).transpose()?;
    let ranks = mesh.as_ref().map_or(1, Mesh::ranks);
    let device = match &mesh {
        Some(_) => Device::Cpu,
        None => crate::parse_device(opts.device.as_deref())?,
    };
    if let Some([c1, c2]) = opts.channels.as_deref().map(|c| [c[0], c[1]]) {
        cfg.channels = [c1, c2];
    }
    let epochs = opts.epochs.unwrap_or(defaults.0);
    let batch = opts.batch.unwrap_or(defaults.1);
    let optimizer = match opts.optimizer {
        OptName::Adam => Optimizer::adam(opts.lr.unwrap_or(defaults.2)),
        OptName::Adamw => Optimizer::adamw(opts.lr.unwrap_or(defaults.2)),
        OptName::Sgd => Optimizer::sgd(opts.lr.unwrap_or(0.05)),
    };
    if !batch.is_multiple_of(ranks) {
        return Err(CliError::Usage(format!(
            "--batch {batch} does not split evenly over the {ranks} ranks of --devices {}: \
             use a multiple of {ranks}",
            opts.devices.as_deref().unwrap_or_default()
        )));
    }
    let on = match &opts.devices {
        Some(list) => format!(
            "{list} (data-parallel: {ranks} ranks of {} images per step)",
            batch / ranks
        ),
        None => device_name(device),
    };
    println!(
        "rlx train {name}: {} train / {} test images of {}x{}, CNN conv{}-pool-conv{}-pool-linear{}, \
         {} lr {} (cosine), batch {batch}, {epochs} epochs, seed {}, on {on}",
        train.n,
        test.n,
        train.rows,
        train.cols,
        cfg.channels[0],
        cfg.channels[1],
        cfg.classes,
        optimizer.name(),
        optimizer.lr(),
        opts.seed,
    );
    // Every rank plans its own step for its shard, all in this process.
    let want = planned_bytes(&cfg, batch / ranks) * ranks as u128;
    if want > MAX_TRAIN_BYTES {
        return Err(CliError::Usage(format!(
            "--batch {batch} with --channels {} {} would need about {:.1} GiB, over the \
             trainer's {} GiB cap: lower --batch or --channels",
            cfg.channels[0],
            cfg.channels[1],
            want as f64 / (1u64 << 30) as f64,
            MAX_TRAIN_BYTES >> 30
        )));
    }
    let n_params: usize = cfg
        .params()
        .iter()
        .map(|p| p.dims.iter().product::<usize>())
        .sum();
    println!("{n_params} params; each step is one compiled graph (forward, backward, update)");
    let mut trainer = match mesh {
        Some(mesh) => Trainer::data_parallel(cfg, optimizer, mesh)?
            .with_seed(opts.seed)
            .with_bucket_bytes((opts.bucket_mb * (1u64 << 20) as f64) as usize)?,
        None => Trainer::new(cfg, optimizer, device)?.with_seed(opts.seed),
    };
    let fit = FitConfig {
        epochs,
        batch_size: batch,
        seed: opts.seed,
        schedule: LrSchedule::Cosine,
        progress: true,
    };
    let reports = trainer.fit(&train, &test, &fit, |r| {
        println!(
            "epoch {:>3}/{epochs}: loss {:.4}  test accuracy {:6.2}%  ({:.2?})",
            r.epoch,
            r.loss,
            100.0 * r.accuracy,
            r.wall
        )
    })?;
    let acc = reports.last().map_or(0.0, |r| r.accuracy);
    let buckets = trainer.grad_buckets(batch);
    if !buckets.is_empty() {
        let bytes: usize = buckets.iter().map(|b| b.bytes).sum();
        println!(
            "each step all-reduced {:.1} KiB of gradients (and the loss) over {ranks} ranks in \
             {} bucket(s) of at most {} MiB",
            bytes as f64 / 1024.0,
            buckets.len(),
            opts.bucket_mb
        );
    }
    println!(
        "final test accuracy {:.2}% on {} images; {} steps; wall time {:.2?}",
        100.0 * acc,
        test.n,
        trainer.steps_done(),
        t0.elapsed()
    );
    Ok(())
}

fn device_name(d: Device) -> String {
    d.to_string()
}

fn check_dir(dir: &Path) -> Result<(), CliError> {
    if dir.is_dir() {
        return Ok(());
    }
    let hint = if dir == Path::new(DEBIAN_FASHION_MNIST_DIR) {
        "install it with `apt-get install dataset-fashion-mnist` (Debian / Ubuntu)".to_string()
    } else {
        format!(
            "pass --data DIR with the four IDX files, or install the Debian package with \
             `apt-get install dataset-fashion-mnist` (it fills {DEBIAN_FASHION_MNIST_DIR})"
        )
    };
    Err(CliError::Usage(format!(
        "no Fashion-MNIST data at {}: {hint}",
        dir.display()
    )))
}
