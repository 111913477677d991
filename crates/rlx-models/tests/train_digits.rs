//! Training on real data: the digits CNN on the CPU must reach ≥ 97 % on its held-out
//! split; Fashion-MNIST ≥ 88 % when the Debian data set is installed.
use rlx_io::datasets::{load_mnist_dir, DEBIAN_FASHION_MNIST_DIR};
use rlx_io::Dataset;
use rlx_ir::env::Switch;
use rlx_models::{CnnConfig, FitConfig, LrSchedule, Optimizer, Trainer};
use rlx_runtime::Device;
use std::time::Instant;

#[test]
fn digits_cnn_reaches_97_percent() {
    digits_on(Device::Cpu);
}

/// The same training run as one captured CUDA graph per step; skips without a GPU (fails
/// under `RLX_REQUIRE_CUDA=1`).
#[test]
fn digits_cnn_reaches_97_percent_on_cuda() {
    if !rlx_cuda::gpu_or_skip(0) {
        return;
    }
    digits_on(Device::Cuda(0));
}

/// The same training run on wgpu (lavapipe in CI): every node of the step, the backward ops
/// and the Adam update included, on the GPU.
#[test]
fn digits_cnn_reaches_97_percent_on_wgpu() {
    if !rlx_wgpu::gpu_or_skip() {
        return;
    }
    digits_on(Device::Wgpu(0));
}

fn digits_on(device: Device) {
    let t0 = Instant::now();
    let data = Dataset::digits().unwrap();
    let (train, test) = data.split(0.2, 1).unwrap();
    let mut trainer = Trainer::new(CnnConfig::digits(), Optimizer::adam(3e-3), device)
        .unwrap()
        .with_seed(1);
    let before = trainer.evaluate(&test).unwrap();
    let cfg = FitConfig {
        epochs: 15,
        batch_size: 16,
        seed: 3,
        schedule: LrSchedule::Cosine,
        progress: false,
    };
    let reports = trainer
        .fit(&train, &test, &cfg, |r| {
            println!(
                "epoch {:2}: loss {:.4} test accuracy {:.2}% ({:.1?})",
                r.epoch,
                r.loss,
                100.0 * r.accuracy,
                r.wall
            )
        })
        .unwrap();
    let last = reports.last().unwrap();
    println!(
        "digits on {device}: {} train / {} test, accuracy {:.2}% -> {:.2}%, {} steps, {:.1?}",
        train.n,
        test.n,
        100.0 * before,
        100.0 * last.accuracy,
        trainer.steps_done(),
        t0.elapsed()
    );
    assert!(reports[0].loss > last.loss, "the loss did not fall");
    assert!(last.accuracy >= 0.97, "test accuracy {:.4}", last.accuracy);
}

#[test]
fn fashion_mnist_cnn_reaches_88_percent() {
    fashion_on(Device::Cpu);
}

#[test]
fn fashion_mnist_cnn_reaches_88_percent_on_cuda() {
    if !rlx_cuda::gpu_or_skip(0) {
        return;
    }
    fashion_on(Device::Cuda(0));
}

fn fashion_on(device: Device) {
    let dir =
        rlx_ir::env::text(Switch::FashionMnist).unwrap_or_else(|| DEBIAN_FASHION_MNIST_DIR.into());
    if !std::path::Path::new(&dir).is_dir() {
        println!("skipped: no Fashion-MNIST at {dir} (apt-get install dataset-fashion-mnist)");
        return;
    }
    let t0 = Instant::now();
    let train = load_mnist_dir(&dir, true).unwrap();
    let test = load_mnist_dir(&dir, false).unwrap();
    let mut trainer = Trainer::new(CnnConfig::mnist(), Optimizer::adam(2e-3), device)
        .unwrap()
        .with_seed(1);
    let cfg = FitConfig {
        epochs: 3,
        batch_size: 64,
        seed: 3,
        schedule: LrSchedule::Cosine,
        progress: false,
    };
    let reports = trainer
        .fit(&train, &test, &cfg, |r| {
            println!(
                "epoch {}: loss {:.4} test accuracy {:.2}% ({:.1?})",
                r.epoch,
                r.loss,
                100.0 * r.accuracy,
                r.wall
            )
        })
        .unwrap();
    let acc = reports.last().unwrap().accuracy;
    println!(
        "fashion-mnist on {device}: {:.2}% in {:.1?}",
        100.0 * acc,
        t0.elapsed()
    );
    assert!(acc >= 0.88, "test accuracy {acc:.4}");
}
