//! What the device tests of the runtime share: one graph of the common op groups.
use rlx_ir::{Activation, AttentionSpec, DType, Graph, Shape};

/// Matmul, bias, GELU, attention, residual and LayerNorm over `x [3, 21, 64]`.
pub fn mlp_attn() -> Graph {
    let f = DType::F32;
    let mut g = Graph::new("mlp_attn");
    let x = g.input("x", Shape::new(&[3, 21, 64], f)).unwrap();
    let w1 = g.param("w1", Shape::new(&[64, 64], f)).unwrap();
    let b1 = g.param("b1", Shape::new(&[64], f)).unwrap();
    let gm = g.param("gamma", Shape::new(&[64], f)).unwrap();
    let h = g.matmul(x, w1).unwrap();
    let h = g.add(h, b1).unwrap();
    let h = g.activation(Activation::Gelu, h).unwrap();
    let a = g
        .attention(h, h, h, None, AttentionSpec::new(4, 16))
        .unwrap();
    let r = g.add(a, x).unwrap();
    let y = g.layer_norm(r, gm, None, -1, 1e-5).unwrap();
    g.set_outputs(vec![y]);
    g
}
