//! `rlx train digits | fashion-mnist`: train the MNIST-style CNN with one compiled graph per
//! step and report per-epoch loss / accuracy, the final test accuracy and the wall time.
use crate::CliError;
use clap::{Args, Subcommand, ValueEnum};
use rlx::prelude::Device;
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
    #[arg(long)]
    epochs: Option<usize>,
    /// Batch size (default: 16 for digits, 64 for fashion-mnist).
    #[arg(long)]
    batch: Option<usize>,
    /// Peak learning rate, decayed by a cosine schedule (default: 3e-3 for adam / adamw on
    /// digits, 2e-3 on fashion-mnist; 0.05 for sgd).
    #[arg(long)]
    lr: Option<f64>,
    #[arg(long, value_enum, default_value_t = OptName::Adam)]
    optimizer: OptName,
    /// Seeds the init, the split and the batch order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output channels of the two conv layers (default: 32 64 for digits, 16 32 for
    /// fashion-mnist).
    #[arg(long, num_args = 2, value_names = ["C1", "C2"])]
    channels: Option<Vec<usize>>,
    /// cpu, cuda or cuda:N (default: the best available)
    #[arg(long)]
    device: Option<String>,
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
    let device = crate::parse_device(opts.device.as_deref())?;
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
    println!(
        "rlx train {name}: {} train / {} test images of {}x{}, CNN conv{}-pool-conv{}-pool-linear{}, \
         {} lr {} (cosine), batch {batch}, {epochs} epochs, seed {}, on {}",
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
        device_name(device),
    );
    let n_params: usize = cfg
        .params()
        .iter()
        .map(|p| p.dims.iter().product::<usize>())
        .sum();
    println!("{n_params} params; each step is one compiled graph (forward, backward, update)");
    let mut trainer = Trainer::new(cfg, optimizer, device)?.with_seed(opts.seed);
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
