//! wgpu parity harness: a graph built for a dtype runs on the wgpu backend, on the CPU
//! reference in the same dtype and on the CPU in f64 (the oracle); every output is compared.
//! Without an adapter the tests skip with a message; `RLX_REQUIRE_WGPU=1` (set by `.ci/run`,
//! which installs lavapipe) turns that into a failure.
#![allow(dead_code)]
use rlx_ir::{DType, Graph, HostTensor};
#[allow(unused_imports)]
pub use rlx_ir::{OpKind, OpKindSet};
#[allow(unused_imports)]
pub use rlx_testutil::{rel_l2, Rng};
use rlx_wgpu::{WgpuExecutable, WgpuOptions};

use rlx_testutil::run::device::{assert_leaves_kept, check_outputs, leaves};
#[allow(unused_imports)]
pub use rlx_testutil::run::device::{compare, feed, normal, run_cpu};
pub use rlx_testutil::run::parity::Feed;

pub fn gpu() -> bool {
    rlx_wgpu::gpu_or_skip()
}

/// Tolerance on rel-L2 for a dtype (DESIGN.md).
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        _ => 1e-5,
    }
}

pub fn run_gpu_exe(exe: &mut WgpuExecutable, g: &Graph, feeds: &[Feed]) -> Vec<HostTensor> {
    let (ins, ps) = leaves(g, feeds);
    for (n, t) in &ps {
        exe.set_param(n, t).expect("wgpu set_param");
    }
    let refs: Vec<(&str, HostTensor)> = ins.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let out = exe.run(&refs).expect("wgpu run");
    assert_leaves_kept(g, &[&ins], &|n| exe.input_value(n).expect("input download"));
    assert_leaves_kept(g, &[&ps], &|n| exe.param_value(n).expect("param download"));
    out
}

/// The parity check: `build(dtype)` on wgpu against the CPU in `dtype` and in f64. Every
/// compute node must run on the GPU unless its kind is in `allow_fallback` or its reason is
/// a limit of portable WGSL (f64, 64-bit integers). Returns the GPU outputs.
pub fn parity_with(
    name: &str,
    build: &dyn Fn(DType) -> Graph,
    feeds: &[Feed],
    dtype: DType,
    allow_fallback: OpKindSet,
) -> Vec<HostTensor> {
    parity_with_opts(
        name,
        build,
        feeds,
        dtype,
        allow_fallback,
        WgpuOptions::default(),
    )
}

/// [`parity_with`] under compile options of its own (e.g. `portable`).
pub fn parity_with_opts(
    name: &str,
    build: &dyn Fn(DType) -> Graph,
    feeds: &[Feed],
    dtype: DType,
    allow_fallback: OpKindSet,
    opts: WgpuOptions,
) -> Vec<HostTensor> {
    let g = build(dtype);
    let mut exe = WgpuExecutable::new(g.clone(), 0, opts).expect("wgpu compile");
    let got = run_gpu_exe(&mut exe, &g, feeds);
    for (id, kind, reason) in exe.dispatch() {
        if let Some(r) = reason {
            assert!(
                allow_fallback.contains(kind) || r.starts_with(rlx_wgpu::lower::PORTABLE),
                "{name} [{dtype}]: node {id} ({kind}) fell back to the CPU: {r}"
            );
        }
    }
    check_outputs(name, build, feeds, dtype, &got, tol(dtype));
    got
}

pub fn parity(
    name: &str,
    build: &dyn Fn(DType) -> Graph,
    feeds: &[Feed],
    dtype: DType,
) -> Vec<HostTensor> {
    parity_with(name, build, feeds, dtype, OpKindSet::empty())
}

pub const FLOATS: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// The wgpu device of the case tables: `rlx_testutil::case_tests!(group, wgpu)`.
pub mod wgpu {
    use rlx_testutil::case::Case;

    pub fn check(set: &str, cases: &[Case]) {
        if !super::gpu() {
            return;
        }
        rlx_testutil::run::parity::check(set, cases, &|name, build, feeds, dt, allow| {
            super::parity_with(name, build, feeds, dt, allow);
        });
    }
}

/// The case tables on the portable path (`WgpuOptions::portable`: no subgroups, no f16
/// arithmetic), which an adapter with those features never takes otherwise:
/// `rlx_testutil::case_tests!(group, portable)`.
pub mod portable {
    use rlx_testutil::case::Case;

    pub fn check(set: &str, cases: &[Case]) {
        if !super::gpu() {
            return;
        }
        let opts = rlx_wgpu::WgpuOptions {
            portable: true,
            ..Default::default()
        };
        rlx_testutil::run::parity::check(set, cases, &|name, build, feeds, dt, allow| {
            super::parity_with_opts(name, build, feeds, dt, allow, opts.clone());
        });
    }
}
