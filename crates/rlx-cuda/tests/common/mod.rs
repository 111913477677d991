//! GPU parity harness: a graph built for a dtype runs on the CUDA backend, on the CPU
//! reference in the same dtype, and on the CPU in f64 (the oracle); every output is compared.
//! Without a GPU the tests skip with a message; `RLX_REQUIRE_CUDA=1` turns that into a failure.
#![allow(dead_code)]
use rlx_cuda::{CudaExecutable, CudaOptions, Precision};
use rlx_ir::{DType, Graph, HostTensor};
#[allow(unused_imports)]
pub use rlx_ir::{OpKind, OpKindSet};
use rlx_testutil::run::device::{assert_leaves_kept, check_outputs, leaves};
#[allow(unused_imports)]
pub use rlx_testutil::run::device::{compare, feed, normal, run_cpu};
pub use rlx_testutil::run::parity::Feed;
#[allow(unused_imports)]
pub use rlx_testutil::{rel_l2, Rng};

/// True when a GPU is usable; otherwise prints why and returns false (or panics under
/// `RLX_REQUIRE_CUDA=1`).
pub fn gpu() -> bool {
    rlx_cuda::gpu_or_skip(0)
}

/// Tolerance on rel-L2 for a dtype (DESIGN.md).
pub fn tol(dtype: DType, precision: Precision) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        _ if matches!(precision, Precision::F16 | Precision::Bf16) => 1e-2,
        _ if precision == Precision::Tf32 => 1e-3,
        _ => 1e-5,
    }
}

/// Compile for the GPU, returning the executable (so tests can inspect dispatch).
pub fn compile_gpu(g: &Graph, opts: CudaOptions) -> CudaExecutable {
    CudaExecutable::new(g.clone(), 0, opts).expect("cuda compile")
}

pub fn run_gpu_exe(exe: &mut CudaExecutable, g: &Graph, feeds: &[Feed]) -> Vec<HostTensor> {
    let (ins, ps) = leaves(g, feeds);
    for (n, t) in &ps {
        exe.set_param(n, t).expect("cuda set_param");
    }
    let refs: Vec<(&str, HostTensor)> = ins.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let out = exe.run(&refs).expect("cuda run");
    assert_leaves_kept(g, &[&ins], &|n| exe.input_value(n).expect("input download"));
    assert_leaves_kept(g, &[&ps], &|n| exe.param_value(n).expect("param download"));
    out
}

/// The parity check: `build(dtype)` on the GPU against the CPU in `dtype` and the CPU in
/// f64. Every compute node must be lowered natively (no CPU fallback) unless its kind is in
/// `allow_fallback`. Returns the GPU outputs.
pub fn parity_with(
    name: &str,
    build: &dyn Fn(DType) -> Graph,
    feeds: &[Feed],
    dtype: DType,
    opts: CudaOptions,
    allow_fallback: OpKindSet,
) -> Vec<HostTensor> {
    let g = build(dtype);
    let mut exe = compile_gpu(&g, opts.clone());
    let got = run_gpu_exe(&mut exe, &g, feeds);
    for (id, kind, reason) in exe.dispatch() {
        if let Some(r) = reason {
            assert!(
                allow_fallback.contains(kind),
                "{name} [{dtype}]: node {id} ({kind}) fell back to the CPU: {r}"
            );
        }
    }
    check_outputs(name, build, feeds, dtype, &got, tol(dtype, opts.precision));
    got
}

/// `parity_with` with default options and no fallback allowed.
pub fn parity(
    name: &str,
    build: &dyn Fn(DType) -> Graph,
    feeds: &[Feed],
    dtype: DType,
) -> Vec<HostTensor> {
    parity_with(
        name,
        build,
        feeds,
        dtype,
        CudaOptions::strict(),
        OpKindSet::empty(),
    )
}

/// The float dtypes every kernel family is checked in.
pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// The CUDA device of the case tables: `rlx_testutil::case_tests!(group, cuda)` runs every
/// parity case of a group through `parity_with` (strict options, each case's own allowed
/// fallbacks). Without a GPU it skips like every parity test.
pub mod cuda {
    use rlx_cuda::CudaOptions;
    use rlx_testutil::case::Case;

    pub fn check(set: &str, cases: &[Case]) {
        if !super::gpu() {
            return;
        }
        rlx_testutil::run::parity::check(set, cases, &|name, build, feeds, dt, allow| {
            super::parity_with(name, build, feeds, dt, CudaOptions::strict(), allow);
        });
    }
}
