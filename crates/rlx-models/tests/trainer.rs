//! Trainer mechanics: seeded init, state carried across batch sizes, evaluation sharing
//! the trained values.
use rlx_io::Dataset;
use rlx_models::train::kaiming_uniform;
use rlx_models::{CnnConfig, ModelError, Optimizer, Trainer};
use rlx_runtime::Device;

fn small() -> CnnConfig {
    CnnConfig {
        rows: 8,
        cols: 8,
        channels: [4, 6],
        classes: 10,
    }
}

#[test]
fn init_is_seeded_and_within_pytorch_bounds() {
    for spec in small().params() {
        let a = kaiming_uniform(&spec, 5).to_f32_vec();
        let b = kaiming_uniform(&spec, 5).to_f32_vec();
        let c = kaiming_uniform(&spec, 6).to_f32_vec();
        assert_eq!(a, b, "{}: same seed, same values", spec.name);
        assert_ne!(a, c, "{}: another seed, other values", spec.name);
        let bound = 1.0 / (spec.fan_in as f32).sqrt();
        assert!(a.iter().all(|v| v.abs() <= bound), "{}", spec.name);
        // Uniform on ±bound: the largest magnitude comes close to the bound.
        let max = a.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(a.len() < 8 || max > 0.5 * bound, "{}: max {max}", spec.name);
    }
}

#[test]
fn state_follows_the_params_across_batch_sizes() {
    let data = Dataset::digits()
        .unwrap()
        .subset(&(0..40).collect::<Vec<_>>())
        .unwrap();
    let mut t = Trainer::new(small(), Optimizer::adam(1e-2), Device::Cpu)
        .unwrap()
        .with_seed(3);
    let w0 = t.value("fc.weight").unwrap().to_f32_vec();
    let before = t.predict(&data).unwrap();
    let sizes = [8, 3, 8, 5];
    let mut start = 0;
    for (k, &b) in sizes.iter().enumerate() {
        let batch = data
            .subset(&(start..start + b).collect::<Vec<_>>())
            .unwrap()
            .batches(b, 0)
            .unwrap()
            .next()
            .unwrap();
        start += b;
        let loss = t.step(&batch).unwrap();
        assert!(loss.is_finite() && loss > 0.0);
        // The Adam step counter lives in whichever step graph ran last.
        let steps = t.value("opt.step").unwrap().to_f32_vec()[0];
        assert_eq!(steps, (k + 1) as f32);
    }
    let w1 = t.value("fc.weight").unwrap().to_f32_vec();
    assert_ne!(w0, w1, "the weights moved");
    // Evaluation reads the trained values, not the initial ones: 4 Adam steps at lr 1e-2
    // from a random init move some of the 40 predictions.
    let after = t.predict(&data).unwrap();
    assert_eq!(after.len(), 40);
    assert_ne!(before, after);
    let params = t.params().unwrap();
    assert_eq!(params.len(), small().params().len());
    assert_eq!(params[4].1.to_f32_vec(), w1);
}

#[test]
fn bad_settings_are_errors() {
    let bad = CnnConfig {
        rows: 3,
        cols: 8,
        channels: [4, 6],
        classes: 10,
    };
    assert!(matches!(bad.build(4, true), Err(ModelError::Config(_))));
    assert!(matches!(small().build(0, true), Err(ModelError::Config(_))));
    let mut t = Trainer::new(small(), Optimizer::sgd(0.1), Device::Cpu).unwrap();
    assert!(matches!(t.value("nope"), Err(ModelError::Config(_))));
    let empty = Dataset::new(vec![], vec![], 8, 8).unwrap();
    assert!(t.evaluate(&empty).is_err());
}

fn fit_cfg() -> rlx_models::FitConfig {
    rlx_models::FitConfig {
        epochs: 1,
        batch_size: 4,
        seed: 0,
        schedule: rlx_models::LrSchedule::Constant,
        progress: false,
    }
}

/// A learning rate that is not positive and finite would train uphill (or nowhere): it is
/// refused when the trainer is made and when it is changed.
#[test]
fn learning_rates_must_be_positive_and_finite() {
    for lr in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
        let r = Trainer::new(small(), Optimizer::sgd(lr), Device::Cpu);
        assert!(
            matches!(r, Err(ModelError::BadLearningRate { .. })),
            "lr {lr} accepted"
        );
    }
    let mut t = Trainer::new(small(), Optimizer::adam(1e-3), Device::Cpu).unwrap();
    assert!(matches!(
        t.set_lr(-1.0),
        Err(ModelError::BadLearningRate { lr }) if lr == -1.0
    ));
    assert_eq!(t.optimizer().lr(), 1e-3, "a refused lr leaves the old one");
    t.set_lr(2e-3).unwrap();
    assert_eq!(t.optimizer().lr(), 2e-3);
}

/// An empty training set used to report loss 0.0000 and succeed.
#[test]
fn an_empty_training_set_is_an_error() {
    let data = Dataset::digits().unwrap();
    let empty = Dataset::new(vec![], vec![], 8, 8).unwrap();
    let mut t = Trainer::new(small(), Optimizer::sgd(0.1), Device::Cpu).unwrap();
    let r = t.fit(&empty, &data, &fit_cfg(), |_| {});
    assert!(
        matches!(r, Err(ModelError::EmptyDataset { set: "training" })),
        "{r:?}"
    );
    let r = t.fit(&data, &empty, &fit_cfg(), |_| {});
    assert!(
        matches!(r, Err(ModelError::EmptyDataset { set: "evaluation" })),
        "{r:?}"
    );
    assert_eq!(t.steps_done(), 0, "nothing trained before the checks");
}

/// Labels past the model's classes used to give "0.00 % accuracy" and succeed.
#[test]
fn out_of_range_labels_are_errors() {
    let data = Dataset::digits()
        .unwrap()
        .subset(&(0..8).collect::<Vec<_>>())
        .unwrap();
    let mut bad = data.clone();
    bad.labels[5] = 10;
    let mut t = Trainer::new(small(), Optimizer::sgd(0.1), Device::Cpu).unwrap();
    let r = t.fit(&data, &bad, &fit_cfg(), |_| {});
    assert!(
        matches!(
            r,
            Err(ModelError::LabelOutOfRange {
                set: "evaluation",
                index: 5,
                label: 10,
                classes: 10
            })
        ),
        "{r:?}"
    );
    let r = t.fit(&bad, &data, &fit_cfg(), |_| {});
    assert!(
        matches!(
            r,
            Err(ModelError::LabelOutOfRange {
                set: "training",
                ..
            })
        ),
        "{r:?}"
    );
    assert!(matches!(
        t.evaluate(&bad),
        Err(ModelError::LabelOutOfRange { .. })
    ));
    let batch = bad.batches(8, 0).unwrap().next().unwrap();
    assert!(matches!(
        t.step(&batch),
        Err(ModelError::LabelOutOfRange { set: "batch", .. })
    ));
    assert_eq!(t.steps_done(), 0);
    // Images of another size than the model's are named as such.
    let big = Dataset::new(vec![0.0; 2 * 28 * 28], vec![0, 1], 28, 28).unwrap();
    assert!(matches!(
        t.evaluate(&big),
        Err(ModelError::ImageSize {
            got_rows: 28,
            rows: 8,
            ..
        })
    ));
}

/// The VarBuilder-declared params keep the names the CLI and tests set by.
#[test]
fn param_names_are_stable() {
    let names: Vec<String> = small().params().into_iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "conv1.weight",
            "conv1.bias",
            "conv2.weight",
            "conv2.bias",
            "fc.weight",
            "fc.bias"
        ]
    );
    let dims: Vec<Vec<usize>> = small().params().into_iter().map(|p| p.dims).collect();
    assert_eq!(
        dims,
        [
            vec![4, 1, 3, 3],
            vec![4],
            vec![6, 4, 3, 3],
            vec![6],
            vec![24, 10],
            vec![10]
        ]
    );
    let fans: Vec<usize> = small().params().into_iter().map(|p| p.fan_in).collect();
    assert_eq!(fans, [9, 9, 36, 36, 24, 24]);
    let g = small().build(2, true).unwrap();
    let in_graph: Vec<&str> = g.params().map(|(n, _)| n).collect();
    assert_eq!(in_graph, names);
}
