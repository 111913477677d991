//! The prefill's q, k and v read straight from the fused qkv product. A decoder's fused
//! product `X` (`[b, s, W]`) reaches its `CachedAttention` through three last-axis narrows;
//! with one row they are offsets into X (memory views), but with a prompt's rows each is a
//! copy. When those narrows feed nothing else, the attention's lowering reads X itself
//! (`qkv_rope_cache_*`: q rotated into scratch, k rotated and v copied into the caches, one
//! launch) and the narrows are not run. X must still hold the product when the attention
//! runs: the memory plan counts its life only to the narrows, so a node lowered in between
//! whose output overlaps X rules the rewrite out. The fused decode step (few rows) reads its
//! rows itself and is left alone.
use crate::lower::DevTensor;
use rlx_ir::{AttentionLayout, Graph, NodeId, Op};
use std::collections::{HashMap, HashSet};

/// Query rows up to which `CachedAttention` runs the fused decode kernel
/// (`lower/transformer_attention.rs`, `SPLIT_MAX_SQ`).
const DECODE_MAX_ROWS: usize = 8;

/// One attention's reading of the fused product: X's node and the (start, len) columns of
/// q, k and v in its rows, and the three narrow nodes it stands for.
#[derive(Clone, Debug)]
pub(crate) struct QkvSource {
    pub src: usize,
    pub cols: [(usize, usize); 3],
    pub narrows: [usize; 3],
}

/// For each `CachedAttention` (by node id) that reads q, k and v out of one fused product:
/// where they lie in it. `views`: the memory plan's views (a narrow that is a view costs
/// nothing and is left alone); `tensors`: every node's device tensor.
pub(crate) fn sources(
    g: &Graph,
    views: &[Option<(usize, usize)>],
    tensors: &[DevTensor],
) -> HashMap<usize, QkvSource> {
    let mut uses = vec![0usize; g.nodes.len()];
    for n in &g.nodes {
        for i in &n.inputs {
            uses[i.0] += 1;
        }
    }
    for o in &g.outputs {
        uses[o.0] += 1;
    }
    let mut out = HashMap::new();
    for n in &g.nodes {
        let Op::CachedAttention {
            spec,
            rope: Some(_),
        } = &n.op
        else {
            continue;
        };
        if spec.layout != AttentionLayout::Packed || n.inputs.len() < 3 {
            continue;
        }
        let Some((src, cols)) = narrowed(g, &n.inputs[..3], views, &uses) else {
            continue;
        };
        let x = &tensors[src];
        if x.rank() != 3 || x.dims[1] <= DECODE_MAX_ROWS {
            continue;
        }
        let narrows = [n.inputs[0].0, n.inputs[1].0, n.inputs[2].0];
        // X's bytes must survive every node lowered between its narrows and this attention.
        let first = *narrows.iter().min().unwrap_or(&n.id.0);
        let (lo, hi) = (x.ptr, x.ptr + x.bytes() as u64);
        let clobbered = (first + 1..n.id.0)
            .filter(|&j| !narrows.contains(&j) && views[j].is_none())
            .filter(|&j| !g.nodes[j].op.is_leaf())
            .any(|j| {
                let t = &tensors[j];
                t.ptr < hi && lo < t.ptr + t.bytes() as u64
            });
        if clobbered {
            continue;
        }
        out.insert(n.id.0, QkvSource { src, cols, narrows });
    }
    out
}

/// The narrows' common input and their (start, len) when all three are last-axis narrows
/// of one tensor, run as copies, each read only here.
fn narrowed(
    g: &Graph,
    ins: &[NodeId],
    views: &[Option<(usize, usize)>],
    uses: &[usize],
) -> Option<(usize, [(usize, usize); 3])> {
    let mut src = None;
    let mut cols = [(0, 0); 3];
    for (k, i) in ins.iter().enumerate() {
        let node = &g.nodes[i.0];
        let Op::Narrow { axis, start, len } = node.op else {
            return None;
        };
        let x = *node.inputs.first()?;
        let rank = g.nodes[x.0].shape.rank();
        let last = axis == -1 || (axis >= 0 && axis as usize + 1 == rank);
        if !last || views[i.0].is_some() || uses[i.0] != 1 || *src.get_or_insert(x.0) != x.0 {
            return None;
        }
        cols[k] = (start, len);
    }
    Some((src?, cols))
}

/// The narrow nodes the plan does not run (their attention reads the product itself).
pub(crate) fn skipped(found: &HashMap<usize, QkvSource>) -> HashSet<usize> {
    found.values().flat_map(|s| s.narrows).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{AttentionSpec, CachedRope, DType, RopeStyle, Shape};

    /// A prefill layer's shape: X [1, s, 48] narrowed into q (32), k (8), v (8), into a
    /// CachedAttention with its rotation; `between`: a computed node after the narrows.
    /// Returns the graph and the ids of X, q, k, v, the attention and the node in between.
    fn layer(s: usize, extra_use: bool, between: bool) -> (Graph, [usize; 6]) {
        let mut g = Graph::new("qkv");
        let f32s = |d: &[usize]| Shape::new(d, DType::F32);
        let z = g.input("z", f32s(&[4])).unwrap();
        let x = g.input("x", f32s(&[1, s, 48])).unwrap();
        let q = g.narrow(x, -1, 0, 32).unwrap();
        let k = g.narrow(x, -1, 32, 8).unwrap();
        let v = g.narrow(x, -1, 40, 8).unwrap();
        let mid = if between {
            let y = g.add(z, z).unwrap();
            g.outputs.push(y);
            y
        } else {
            NodeId(0)
        };
        let kc = g.input("kc", f32s(&[1, 64, 8])).unwrap();
        let vc = g.input("vc", f32s(&[1, 64, 8])).unwrap();
        let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
        let cos = g.input("cos", f32s(&[s, 1, 4])).unwrap();
        let sin = g.input("sin", f32s(&[s, 1, 4])).unwrap();
        let rope = CachedRope {
            n_rot: 8,
            style: RopeStyle::Half,
        };
        let spec = AttentionSpec::new(4, 8).causal();
        let a = g
            .cached_attention([q, k, v], [kc, vc], pos, Some((rope, cos, sin)), spec)
            .unwrap();
        g.outputs.push(a);
        if extra_use {
            g.outputs.push(k);
        }
        (g, [x, q, k, v, a, mid].map(|n| n.0))
    }

    /// Every node its own 4 KiB slot.
    fn tensors(g: &Graph) -> Vec<DevTensor> {
        (g.nodes.iter().enumerate())
            .map(|(i, n)| DevTensor {
                ptr: 4096 * (i as u64 + 1),
                dims: n.shape.static_dims().unwrap(),
                dtype: n.shape.dtype,
            })
            .collect()
    }

    fn found(g: &Graph, t: &[DevTensor]) -> HashMap<usize, QkvSource> {
        sources(g, &vec![None; g.nodes.len()], t)
    }

    #[test]
    fn prefill_reads_the_fused_product_and_skips_the_narrows() {
        let (g, [x, q, k, v, a, _]) = layer(16, false, false);
        let f = found(&g, &tensors(&g));
        assert_eq!(f[&a].src, x);
        assert_eq!(f[&a].cols, [(0, 32), (32, 8), (40, 8)]);
        assert_eq!(skipped(&f), HashSet::from([q, k, v]));
    }

    #[test]
    fn decode_rows_other_readers_and_views_keep_the_narrows() {
        let (g, _) = layer(4, false, false);
        assert!(found(&g, &tensors(&g)).is_empty());
        let (g, _) = layer(16, true, false);
        assert!(found(&g, &tensors(&g)).is_empty());
        let (g, [x, q, ..]) = layer(16, false, false);
        let mut views = vec![None; g.nodes.len()];
        views[q] = Some((x, 0));
        assert!(sources(&g, &views, &tensors(&g)).is_empty());
    }

    #[test]
    fn a_node_written_over_the_product_in_between_keeps_the_narrows() {
        let (g, [x, _, _, _, a, mid]) = layer(16, false, true);
        let mut t = tensors(&g);
        assert!(found(&g, &t).contains_key(&a), "its own slot: no overlap");
        t[mid].ptr = t[x].ptr + 64;
        assert!(
            found(&g, &t).is_empty(),
            "X's bytes reused before the attention"
        );
    }
}
