//! The executor's own guarantees: concurrent runs of one executable each get their own
//! arena and the results of a sequential run; allocations the machine cannot meet are typed
//! errors; inputs checked once by the binding table.
use super::CpuExecutable;
use crate::CpuError;
use rlx_ir::{Activation, BindError, DType, Dim, Graph, HostTensor, Shape};
use rlx_testutil::Rng;
use std::sync::Barrier;

/// `tanh(x @ w) @ w` over a 64×64 weight: enough work per run for runs to overlap.
fn mlp() -> Graph {
    let mut g = Graph::new("mlp");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 64.into()], DType::F32),
        )
        .unwrap();
    let w = g.param("w", Shape::new(&[64, 64], DType::F32)).unwrap();
    let mut h = x;
    for _ in 0..8 {
        h = g.matmul(h, w).unwrap();
        h = g.activation(Activation::Tanh, h).unwrap();
    }
    g.set_outputs(vec![h]);
    g
}

fn checked_run(exe: &CpuExecutable, x: &HostTensor) -> Vec<HostTensor> {
    let inputs = exe.io().check_inputs([("x", x)]).unwrap();
    exe.run_bound(&inputs, &[], false).unwrap()
}

#[test]
fn concurrent_runs_match_sequential_runs_and_overlap() {
    let mut rng = Rng::new("concurrent_runs_match_sequential_runs_and_overlap");
    let mut exe = CpuExecutable::new(mlp()).unwrap();
    let w = HostTensor::from_f64_as(&[64, 64], &rng.uniforms(64 * 64, -0.2, 0.2), DType::F32);
    exe.set_param("w", &w).unwrap();
    const THREADS: usize = 4;
    const RUNS: usize = 12;
    // Different batch sizes per thread share one plan only when equal: use one size, but
    // different values, so a run that read another's arena would give wrong numbers.
    let xs: Vec<HostTensor> = (0..THREADS * RUNS)
        .map(|_| {
            HostTensor::from_f64_as(&[128, 64], &rng.uniforms(128 * 64, -1.0, 1.0), DType::F32)
        })
        .collect();
    let want: Vec<Vec<HostTensor>> = xs.iter().map(|x| checked_run(&exe, x)).collect();
    assert_eq!(exe.peak_concurrent_runs(), 1);
    let barrier = Barrier::new(THREADS);
    let got: Vec<Vec<Vec<HostTensor>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (exe, xs, barrier) = (&exe, &xs, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    (0..RUNS)
                        .map(|r| checked_run(exe, &xs[t * RUNS + r]))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for t in 0..THREADS {
        for r in 0..RUNS {
            assert_eq!(got[t][r], want[t * RUNS + r], "thread {t} run {r}");
        }
    }
    // Four threads × twelve runs of a few milliseconds each, started together: with one lock
    // around the arena they could never overlap; with the pool they must have.
    assert!(
        exe.peak_concurrent_runs() > 1,
        "runs never overlapped (peak {})",
        exe.peak_concurrent_runs()
    );
}

#[test]
fn set_param_between_concurrent_runs_is_all_or_nothing() {
    let mut rng = Rng::new("set_param_between_concurrent_runs_is_all_or_nothing");
    let exe = CpuExecutable::new(mlp()).unwrap();
    let ws: Vec<HostTensor> = (0..2)
        .map(|_| HostTensor::from_f64_as(&[64, 64], &rng.uniforms(64 * 64, -0.2, 0.2), DType::F32))
        .collect();
    let x = HostTensor::from_f64_as(&[8, 64], &rng.uniforms(8 * 64, -1.0, 1.0), DType::F32);
    let want: Vec<Vec<HostTensor>> = ws
        .iter()
        .map(|w| {
            exe.set_param_checked("w", w).unwrap();
            checked_run(&exe, &x)
        })
        .collect();
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..40 {
                exe.set_param_checked("w", &ws[k % 2]).unwrap();
            }
        });
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..20 {
                    let got = checked_run(&exe, &x);
                    assert!(
                        got == want[0] || got == want[1],
                        "a run saw a half-set param"
                    );
                }
            });
        }
    });
}

#[test]
fn arena_larger_than_memory_is_a_typed_error() {
    // Constant → Expand to 2^45 f32 values: a 128 TiB arena, more than any machine's memory
    // and than the x86-64 address space. The allocation must fail at once (no page touched)
    // and say how much was asked.
    let mut g = Graph::new("huge");
    let c = g.constant_f32(&[1, 1], &[1.5]).unwrap();
    let e = g.expand_to(c, &[1 << 25, 1 << 20]).unwrap();
    g.set_outputs(vec![e]);
    let mut exe = CpuExecutable::new(g).unwrap();
    let t0 = std::time::Instant::now();
    let none: [(&str, HostTensor); 0] = [];
    let err = exe.run(&none).unwrap_err();
    match &err {
        CpuError::Alloc {
            what, requested, ..
        } => {
            assert!(what.contains("f32 arena") && what.contains("huge"), "{err}");
            assert!(*requested >= 1u128 << 47, "{err}");
        }
        other => panic!("expected an allocation error, got {other}"),
    }
    assert!(err.to_string().contains("bytes"), "{err}");
    assert!(
        t0.elapsed().as_secs() < 5,
        "the failed allocation took {:?}",
        t0.elapsed()
    );
    // The executable stays usable: a failed run leaves nothing half-done.
    assert!(matches!(exe.run(&none), Err(CpuError::Alloc { .. })));
}

#[test]
fn direct_runs_check_inputs_through_the_binding_table() {
    let mut exe = CpuExecutable::new(mlp()).unwrap();
    exe.set_param("w", &HostTensor::from_f32(&[64, 64], &[0.0; 64 * 64]))
        .unwrap();
    let bad = HostTensor::from_f32(&[2, 63], &[0.0; 126]);
    let e = exe.run(&[("x", bad)]).unwrap_err();
    assert!(
        matches!(&e, CpuError::Bind(BindError::WrongShape { name, .. }) if name == "x"),
        "{e}"
    );
    let none: [(&str, HostTensor); 0] = [];
    let e = exe.run(&none).unwrap_err();
    assert!(
        matches!(&e, CpuError::Bind(BindError::MissingInput { name, .. }) if name == "x"),
        "{e}"
    );
    let e = exe
        .set_param("w", &HostTensor::from_f32(&[64], &[0.0; 64]))
        .unwrap_err();
    assert!(
        matches!(&e, CpuError::Bind(BindError::WrongShape { name, .. }) if name == "w"),
        "{e}"
    );
}

/// Batches alternating between a few sizes keep one plan each (up to `PLAN_CACHE`, least
/// recently used evicted) and give the same values as a fresh executable of each size.
#[test]
fn alternating_shapes_keep_their_plans() {
    let mut rng = Rng::new("alternating_shapes_keep_their_plans");
    let mut exe = CpuExecutable::new(mlp()).unwrap();
    let w = HostTensor::from_f64_as(&[64, 64], &rng.uniforms(64 * 64, -0.2, 0.2), DType::F32);
    exe.set_param("w", &w).unwrap();
    let sizes = [3usize, 17, 3, 5, 17, 5, 3];
    for &b in &sizes {
        let x = HostTensor::from_f64_as(&[b, 64], &rng.uniforms(b * 64, -1.0, 1.0), DType::F32);
        let got = checked_run(&exe, &x);
        let mut fresh = CpuExecutable::new(mlp()).unwrap();
        fresh.set_param("w", &w).unwrap();
        assert_eq!(got, checked_run(&fresh, &x), "batch {b}");
    }
    assert_eq!(exe.cached_plans(), 3);
    for b in 1..=super::PLAN_CACHE + 2 {
        let x = HostTensor::from_f64_as(&[b, 64], &rng.uniforms(b * 64, -1.0, 1.0), DType::F32);
        checked_run(&exe, &x);
    }
    assert_eq!(exe.cached_plans(), super::PLAN_CACHE);
}
