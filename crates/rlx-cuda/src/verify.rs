//! Verify mode's per-node comparison of GPU values with the CPU reference.
use crate::{CudaError, Precision};
use rlx_ir::{DType, HostTensor, Node};

/// Per-node tolerance of verify mode: looser than the per-op oracle tolerances, since
/// rounding differences compound along the graph; a real miscompile is far above these.
pub fn verify_tolerance(dtype: DType, precision: Precision) -> f64 {
    match (dtype, precision) {
        (DType::F16 | DType::BF16, _) | (_, Precision::F16 | Precision::Bf16) => 3e-2,
        (_, Precision::Tf32) => 5e-3,
        _ => 1e-4,
    }
}

fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        num += (x - y) * (x - y);
        den += y * y;
    }
    if a.iter().chain(b).any(|v| v.is_nan()) {
        return f64::INFINITY;
    }
    (num / den.max(1e-30)).sqrt()
}

/// Compare one node's GPU value with the CPU reference.
pub(crate) fn check_node(
    n: &Node,
    got: &HostTensor,
    want: &HostTensor,
    p: Precision,
) -> Result<(), CudaError> {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let (err, tol) = if n.shape.dtype.is_float() {
        (rel_l2(&g, &w), verify_tolerance(n.shape.dtype, p))
    } else {
        // Integer results (argmax of near-ties) may legitimately differ in a few places.
        let bad = g.iter().zip(&w).filter(|(a, b)| a != b).count();
        (bad as f64 / g.len().max(1) as f64, 0.01)
    };
    if g.len() != w.len() || err > tol {
        return Err(CudaError::Diverged {
            node: n.label(),
            kind: n.op.kind().name(),
            err,
            tol,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{Graph, Shape};

    fn node(dtype: DType) -> Node {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[4], dtype)).unwrap();
        let y = g.activation(rlx_ir::Activation::Relu, x).unwrap();
        g.nodes[y.0].clone()
    }

    #[test]
    fn verify_names_a_diverging_node_and_passes_rounding() {
        let n = node(DType::F32);
        let want = HostTensor::from_f32(&[4], &[1.0, 2.0, 3.0, 4.0]);
        let close = HostTensor::from_f32(&[4], &[1.0, 2.0, 3.0, 4.000_01]);
        let wrong = HostTensor::from_f32(&[4], &[1.0, 2.0, 3.5, 4.0]);
        let nan = HostTensor::from_f32(&[4], &[1.0, f32::NAN, 3.0, 4.0]);
        assert!(check_node(&n, &close, &want, Precision::F32).is_ok());
        match check_node(&n, &wrong, &want, Precision::F32) {
            Err(CudaError::Diverged {
                node, kind, err, ..
            }) => {
                assert!(node.contains("%1"), "{node}");
                assert_eq!(kind, "Activation");
                assert!(err > 0.05);
            }
            other => panic!("expected Diverged, got {other:?}"),
        }
        assert!(
            check_node(&n, &nan, &want, Precision::F32).is_err(),
            "NaN never passes"
        );
    }

    #[test]
    fn verify_tolerance_follows_the_policy() {
        assert!(
            verify_tolerance(DType::F32, Precision::F32)
                < verify_tolerance(DType::F32, Precision::Tf32)
        );
        assert!(
            verify_tolerance(DType::F32, Precision::Tf32)
                < verify_tolerance(DType::F16, Precision::F32)
        );
    }
}
