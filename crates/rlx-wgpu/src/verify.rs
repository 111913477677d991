//! Verify mode's per-node comparison of GPU values with the CPU reference (`RLX_VERIFY=1`).
use crate::WgpuError;
use rlx_ir::{DType, HostTensor, Node};

/// Per-node tolerance: looser than the per-op oracle tolerances, since rounding differences
/// compound along a graph; a real miscompile is far above these.
pub fn verify_tolerance(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 3e-2,
        _ => 1e-4,
    }
}

fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    if a.iter().chain(b).any(|v| v.is_nan()) {
        return f64::INFINITY;
    }
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        num += (x - y) * (x - y);
        den += y * y;
    }
    (num / den.max(1e-30)).sqrt()
}

/// Compare one node's GPU value with the CPU reference.
pub(crate) fn check_node(n: &Node, got: &HostTensor, want: &HostTensor) -> Result<(), WgpuError> {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let (err, tol) = if n.shape.dtype.is_float() {
        (rel_l2(&g, &w), verify_tolerance(n.shape.dtype))
    } else {
        let bad = g.iter().zip(&w).filter(|(a, b)| a != b).count();
        (bad as f64 / g.len().max(1) as f64, 0.01)
    };
    if g.len() != w.len() || err > tol {
        return Err(WgpuError::Diverged {
            node: n.label(),
            kind: n.op.kind().name(),
            err,
            tol,
        });
    }
    Ok(())
}
