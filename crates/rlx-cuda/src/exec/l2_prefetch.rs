//! Which weights a decode step's attention requests into L2 for the products after it. A
//! decode layer is a chain of short kernels, each paying HBM's latency for its own weights;
//! the attention between the q/k/v and o products barely touches HBM (a few cache rows). Its
//! kernel (`attn_split_cw_*`) therefore requests the packed weights of the products that
//! follow it — o, gate/up, down — into L2 (`att_weight_prefetch` in attention_decode.cu), so
//! those GEMVs start on weights already in L2 or on their way. Off unless
//! `RLX_L2_PREFETCH=1`: on an H100 (session 36) every decode row was 4-10 % slower with it
//! (the 0.5B Q4_K_M 1314-1347 tok/s against 1410 without, SmolLM2 Q4_1 1737-1851 against
//! 1926), so the GEMVs' own early loads already hide what it would.
use crate::lower::DevTensor;
use rlx_ir::{Graph, Op};
use std::collections::HashMap;

/// The most ranges one attention kernel carries (`AttnCw::pf`).
pub(crate) const MAX_RANGES: usize = 4;

/// For each `CachedAttention` node (by id): the weight ranges `(start, bytes)` of the packed
/// products after it in node order, up to the next `CachedAttention`, at most
/// [`MAX_RANGES`] of them and `budget` bytes in all (the first that does not fit ends the
/// list: the GEMVs run in that order). Starts are rounded down to 16 bytes and sizes down to
/// whole 16-byte units, as the bulk prefetch needs. `fixed`: per node, a param no kernel
/// writes (only those are safe to request ahead).
pub(crate) fn ranges(
    g: &Graph,
    tensors: &[DevTensor],
    fixed: &[bool],
    budget: usize,
) -> HashMap<usize, Vec<(u64, u64)>> {
    let mut out: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
    // The attention whose list is still open, and its bytes so far.
    let mut open: Option<(usize, usize)> = None;
    for n in &g.nodes {
        match n.op {
            Op::CachedAttention { .. } => open = Some((n.id.0, 0)),
            Op::DequantMatMul { .. } | Op::FusedDequantMatMul { .. } => {
                let Some((at, used)) = open.as_mut() else {
                    continue;
                };
                let Some(w) = n.inputs.get(1).map(|w| w.0).filter(|&w| fixed[w]) else {
                    continue;
                };
                let t = &tensors[w];
                let start = t.ptr & !15;
                let bytes = ((t.ptr + t.bytes() as u64 - start) & !15) as usize;
                let list = out.entry(*at).or_default();
                if list.len() == MAX_RANGES || *used + bytes > budget {
                    open = None;
                    continue;
                }
                *used += bytes;
                list.push((start, bytes as u64));
            }
            _ => {}
        }
    }
    out.retain(|_, l| !l.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{AttentionSpec, DType, NodeId, QuantScheme, Shape};

    /// Two decode layers: each attention lists the products after it until the next one, in
    /// order, within the budget, and never a weight some kernel writes.
    #[test]
    fn each_attention_lists_the_weights_after_it() {
        let mut g = Graph::new("layers");
        let x = g.input("x", Shape::new(&[1, 1, 64], DType::F32)).unwrap();
        let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
        let mut ws = Vec::new();
        let mut atts = Vec::new();
        let mut h = x;
        for layer in 0..2 {
            let kc = g.param(format!("kc{layer}"), Shape::new(&[1, 8, 64], DType::F32));
            let vc = g.param(format!("vc{layer}"), Shape::new(&[1, 8, 64], DType::F32));
            let (kc, vc) = (kc.unwrap(), vc.unwrap());
            let spec = AttentionSpec::new(1, 64);
            let a = (g.cached_attention([h, h, h], [kc, vc], pos, None, spec)).unwrap();
            atts.push(a);
            h = a;
            for p in 0..3 {
                let w = g.param(format!("w{layer}{p}"), Shape::new(&[64, 44], DType::U8));
                let w = w.unwrap();
                ws.push(w);
                h = g.dequant_matmul(h, w, QuantScheme::Q5_0).unwrap();
            }
        }
        // Weights at 1000-byte steps from 4096 + 8: starts round down, sizes to 16-byte units.
        let tensors: Vec<DevTensor> = (g.nodes.iter())
            .map(|n| DevTensor {
                ptr: 4104 + 1000 * n.id.0 as u64,
                dims: n.shape.static_dims().unwrap_or_default(),
                dtype: n.shape.dtype,
            })
            .collect();
        let mut fixed: Vec<bool> = g.nodes.iter().map(|n| n.op.is_leaf()).collect();
        fixed[ws[4].0] = false;
        let got = ranges(&g, &tensors, &fixed, 1 << 20);
        let want = |w: &[NodeId]| -> Vec<(u64, u64)> {
            let t = |w: NodeId| &tensors[w.0];
            (w.iter())
                .map(|&w| {
                    (
                        t(w).ptr & !15,
                        (t(w).ptr + 64 * 44 - (t(w).ptr & !15)) & !15,
                    )
                })
                .collect()
        };
        assert_eq!(got[&atts[0].0], want(&ws[0..3]));
        assert_eq!(got[&atts[1].0], want(&[ws[3], ws[5]]));
        // A budget of two weights cuts each list after its second.
        let got = ranges(&g, &tensors, &fixed, 2 * 64 * 44 + 16);
        assert_eq!(got[&atts[0].0], want(&ws[0..2]));
        assert_eq!(got[&atts[1].0], want(&[ws[3], ws[5]]));
        assert!(ranges(&g, &tensors, &fixed, 100).is_empty());
    }
}
