//! wgpu parity harness: a graph built for a dtype runs on the wgpu backend, on the CPU
//! reference in the same dtype and on the CPU in f64 (the oracle); every output is compared.
//! Without an adapter the tests skip with a message; `RLX_REQUIRE_WGPU=1` (set by `.ci/run`,
//! which installs lavapipe) turns that into a failure.
#![allow(dead_code)]
use rlx_cpu::CpuExecutable;
use rlx_ir::{DType, Graph, HostTensor, Op};
pub use rlx_ir::{OpKind, OpKindSet};
pub use rlx_testutil::{rel_l2, Rng};
use rlx_wgpu::{WgpuExecutable, WgpuOptions};

pub fn gpu() -> bool {
    rlx_wgpu::gpu_or_skip()
}

pub type Feed = (String, Vec<usize>, Vec<f64>);

pub fn feed(name: &str, dims: &[usize], data: Vec<f64>) -> Feed {
    (name.to_string(), dims.to_vec(), data)
}

pub fn normal(rng: &mut Rng, name: &str, dims: &[usize]) -> Feed {
    let n = dims.iter().product();
    feed(name, dims, rng.normals(n))
}

/// Tolerance on rel-L2 for a dtype (DESIGN.md).
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        _ => 1e-5,
    }
}

type Named = Vec<(String, HostTensor)>;

fn tensors(g: &Graph, feeds: &[Feed]) -> (Named, Named) {
    let (mut ins, mut ps) = (Vec::new(), Vec::new());
    for (name, dims, data) in feeds {
        let node = (g.nodes.iter())
            .find(|n| matches!(&n.op, Op::Input { name: m } | Op::Param { name: m } if m == name))
            .unwrap_or_else(|| panic!("feed {name} is not a leaf of the graph"));
        let t = HostTensor::from_f64_as(dims, data, node.shape.dtype);
        if matches!(node.op, Op::Param { .. }) {
            ps.push((name.clone(), t));
        } else {
            ins.push((name.clone(), t));
        }
    }
    (ins, ps)
}

pub fn run_cpu(g: &Graph, feeds: &[Feed]) -> Vec<HostTensor> {
    let (ins, ps) = tensors(g, feeds);
    let mut exe = CpuExecutable::new(g.clone()).expect("cpu compile");
    for (n, t) in &ps {
        exe.set_param(n, t).expect("cpu set_param");
    }
    let refs: Vec<(&str, HostTensor)> = ins.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    exe.run(&refs).expect("cpu run")
}

pub fn run_gpu_exe(exe: &mut WgpuExecutable, g: &Graph, feeds: &[Feed]) -> Vec<HostTensor> {
    let (ins, ps) = tensors(g, feeds);
    for (n, t) in &ps {
        exe.set_param(n, t).expect("wgpu set_param");
    }
    let refs: Vec<(&str, HostTensor)> = ins.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let out = exe.run(&refs).expect("wgpu run");
    // The run read exactly what was uploaded and left it untouched (but for the leaves an
    // in-place op writes: a KV cache).
    let written: Vec<&str> = (g.nodes.iter())
        .flat_map(|n| n.op.written_inputs().iter().map(|&k| n.inputs[k]))
        .filter_map(|t| match &g.nodes[t.0].op {
            Op::Input { name } | Op::Param { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    for (n, t) in ins.iter().filter(|(n, _)| !written.contains(&n.as_str())) {
        let dev = exe.input_value(n).expect("input download");
        assert!(
            dev.data == t.data,
            "input {n}: the device copy differs from the upload"
        );
    }
    for (n, t) in ps.iter().filter(|(n, _)| !written.contains(&n.as_str())) {
        let dev = exe.param_value(n).expect("param download");
        assert!(
            dev.data == t.data,
            "param {n}: the device copy differs from the upload"
        );
    }
    out
}

/// Compare two outputs: floats by rel-L2, everything else exactly.
pub fn compare(what: &str, got: &HostTensor, want: &HostTensor, tol: f64) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    assert!(
        g.iter().all(|v| !v.is_nan()) || w.iter().any(|v| v.is_nan()),
        "{what}: GPU produced NaN"
    );
    if got.dtype.is_float() {
        let e = rel_l2(&g, &w);
        assert!(e <= tol, "{what}: rel-L2 {e:.3e} > {tol:.1e}");
    } else {
        assert_eq!(g, w, "{what}: integer outputs differ");
    }
}

/// Kinds with no wgpu lowering yet: their cases check the CPU-fallback path (the dispatch
/// report lists them). Remove a kind here when its lowering lands.
pub const PENDING: &[OpKind] = &[];

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
                allow_fallback.contains(kind)
                    || PENDING.contains(&kind)
                    || r.starts_with(rlx_wgpu::lower::PORTABLE),
                "{name} [{dtype}]: node {id} ({kind}) fell back to the CPU: {r}"
            );
        }
    }
    let cpu = run_cpu(&g, feeds);
    let t = tol(dtype);
    // As on CUDA: the CPU reference's own distance from the f64 oracle scales what
    // evaluation order alone may change in an ill-conditioned graph.
    const SLACK: f64 = 4.0;
    let oracle = (dtype != DType::F64).then(|| run_cpu(&build(DType::F64), feeds));
    for (i, (a, b)) in got.iter().zip(&cpu).enumerate() {
        let cpu_err = match &oracle {
            Some(o) if b.dtype.is_float() => rel_l2(&b.to_f64_vec(), &o[i].to_f64_vec()),
            _ => 0.0,
        };
        let allowed = t.max(SLACK * cpu_err);
        compare(
            &format!("{name} [{dtype}] output {i} vs CPU"),
            a,
            b,
            allowed,
        );
        if let Some(o) = &oracle {
            if a.dtype.is_float() {
                let e = rel_l2(&a.to_f64_vec(), &o[i].to_f64_vec());
                assert!(
                    e <= allowed,
                    "{name} [{dtype}] output {i} vs f64 oracle: rel-L2 {e:.3e} > {allowed:.1e} (CPU's own {cpu_err:.1e})"
                );
            }
        }
    }
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
