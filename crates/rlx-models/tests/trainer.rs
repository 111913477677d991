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
