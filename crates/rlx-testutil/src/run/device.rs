//! What every device's parity harness shares (rlx-cuda's and rlx-wgpu's `tests/common`):
//! feeds as typed leaves, the CPU run, the comparison rules, and the three-way check of a
//! device's outputs against the CPU in the same dtype and the CPU in f64. A device harness
//! only compiles, runs and reports its fallbacks.
use super::parity::Feed;
use crate::rel_l2;
use rlx_cpu::CpuExecutable;
use rlx_ir::{DType, Graph, HostTensor, Op};

/// `(name, value)` pairs.
pub type Named = Vec<(String, HostTensor)>;

pub fn feed(name: &str, dims: &[usize], data: Vec<f64>) -> Feed {
    (name.to_string(), dims.to_vec(), data)
}

/// A random normal feed.
pub fn normal(rng: &mut crate::Rng, name: &str, dims: &[usize]) -> Feed {
    let n = dims.iter().product();
    feed(name, dims, rng.normals(n))
}

/// The feeds as tensors of their leaf's declared dtype: (inputs, params).
pub fn leaves(g: &Graph, feeds: &[Feed]) -> (Named, Named) {
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

/// `g` on the CPU reference.
pub fn run_cpu(g: &Graph, feeds: &[Feed]) -> Vec<HostTensor> {
    let (ins, ps) = leaves(g, feeds);
    let mut exe = CpuExecutable::new(g.clone()).expect("cpu compile");
    for (n, t) in &ps {
        exe.set_param(n, t).expect("cpu set_param");
    }
    let refs: Vec<(&str, HostTensor)> = ins.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    exe.run(&refs).expect("cpu run")
}

/// The leaves an in-place op of `g` writes (a KV cache): a run may change those.
pub fn written_leaves(g: &Graph) -> Vec<&str> {
    (g.nodes.iter())
        .flat_map(|n| n.op.written_inputs().iter().map(|&k| n.inputs[k]))
        .filter_map(|t| match &g.nodes[t.0].op {
            Op::Input { name } | Op::Param { name } => Some(name.as_str()),
            _ => None,
        })
        .collect()
}

/// A run read exactly what was uploaded and left it untouched: `device(name)` is the
/// device's copy of leaf `name` after the run.
pub fn assert_leaves_kept(g: &Graph, uploaded: &[&Named], device: &dyn Fn(&str) -> HostTensor) {
    let written = written_leaves(g);
    for (n, t) in uploaded.iter().flat_map(|v| v.iter()) {
        if written.contains(&n.as_str()) {
            continue;
        }
        assert!(
            device(n).data == t.data,
            "leaf {n}: the device copy differs from the upload"
        );
    }
}

/// Compare two outputs: floats by rel-L2, everything else exactly.
pub fn compare(what: &str, got: &HostTensor, want: &HostTensor, tol: f64) {
    assert_eq!(got.shape, want.shape, "{what}: shape");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    assert!(
        g.iter().all(|v| !v.is_nan()) || w.iter().any(|v| v.is_nan()),
        "{what}: the device produced NaN"
    );
    if got.dtype.is_float() {
        if tol.is_infinite() {
            // The reference itself left the dtype's range (an infinite distance from the f64
            // oracle): only the NaN check above means anything, and inf − inf would read as
            // a NaN distance.
            return;
        }
        let e = rel_l2(&g, &w);
        assert!(e <= tol, "{what}: rel-L2 {e:.3e} > {tol:.1e}");
    } else {
        assert_eq!(g, w, "{what}: integer outputs differ");
    }
}

/// A device's outputs `got` of `build(dtype)` against the CPU in `dtype` and the CPU in f64,
/// at tolerance `tol`. Rounding to the storage type compounds along a graph, and an
/// ill-conditioned graph can leave any evaluation in this dtype far from exact: the CPU's own
/// distance from the oracle is the scale of what evaluation order alone may change, and the
/// device may be up to `SLACK` times that from either, never less strict than `tol`.
pub fn check_outputs(
    name: &str,
    build: &dyn Fn(DType) -> Graph,
    feeds: &[Feed],
    dtype: DType,
    got: &[HostTensor],
    tol: f64,
) {
    const SLACK: f64 = 4.0;
    let cpu = run_cpu(&build(dtype), feeds);
    let oracle = (dtype != DType::F64).then(|| run_cpu(&build(DType::F64), feeds));
    for (i, (a, b)) in got.iter().zip(&cpu).enumerate() {
        let cpu_err = match &oracle {
            Some(o) if b.dtype.is_float() => rel_l2(&b.to_f64_vec(), &o[i].to_f64_vec()),
            _ => 0.0,
        };
        let allowed = tol.max(SLACK * cpu_err);
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
}
