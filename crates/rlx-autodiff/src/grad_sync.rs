//! Data-parallel gradient synchronisation as a graph rewrite.
//!
//! In data-parallel training every rank runs the same step graph on its own shard of the
//! global batch, and before the optimizer consumes a gradient every rank must hold the mean
//! over the ranks of it. With equal shards the mean of the shard-mean gradients is the
//! full-batch mean gradient, so R ranks train like one rank on the whole batch (up to f32
//! rounding). [`all_reduce_grads`] rewrites a gradient graph (outputs `[loss, grad…]`, the
//! layout of [`crate::grad_with_loss`]) the way PyTorch's DistributedDataParallel
//! schedules its all-reduces:
//!
//! - **Buckets.** One collective per gradient pays the collective's fixed cost once per
//!   param; one collective for all of them waits for the whole backward pass before any
//!   communication starts. So gradients are grouped, in the order the backward pass
//!   produces them (node order: the reverse of the forward's use, the last layer first),
//!   into buckets of at most `bucket_bytes` ([`DEFAULT_BUCKET_BYTES`] = DDP's 25 MiB). A
//!   gradient larger than the cap gets a bucket of its own; a bucket never mixes dtypes.
//!   Each bucket is flattened (reshape to 1-D) and concatenated into one tensor,
//!   all-reduced (Mean) once, and cut back (narrow + reshape) into its gradients.
//! - **Placement.** Each bucket's nodes go right after its last gradient in node
//!   (topological) order, ahead of the rest of the backward pass, so an executor that runs
//!   collectives on a stream of their own overlaps the all-reduce of the last layers'
//!   gradients with the backward of the first layers'. (The CPU executor runs them in
//!   place, in that order.)
//! - **The loss.** A rank's loss is its shard's mean; it is all-reduced (Mean) too, so every
//!   rank reports the global batch's loss. It rides in the first bucket (one more element,
//!   no collective of its own) when it has that bucket's dtype; otherwise it gets its own
//!   all-reduce at the end of the graph.
//! - A gradient that is a `Constant` (a param the loss does not depend on: zeros) is the
//!   same on every rank by construction and is left alone.
//!
//! What else must agree across ranks: params start equal (the trainer seeds every rank
//! alike) and every rank applies the same optimizer update to the same reduced gradients,
//! so params and optimizer state stay identical (the CPU communicator combines in rank
//! order on every rank: bit-identical). State that a forward pass itself updates, such as
//! batch-norm running statistics, is no gradient and is not synchronised here: a model
//! with it must all-reduce it itself (DDP broadcasts rank 0's buffers instead).
use crate::AdError;
use rlx_ir::{CollectiveReduce, DType, Graph, NodeId, Op};
use std::collections::HashMap;

/// DDP's default bucket cap (`bucket_cap_mb = 25`).
pub const DEFAULT_BUCKET_BYTES: usize = 25 << 20;

/// One all-reduce of the rewritten graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GradBucket {
    /// The gradients it carries as indices into the gradient list (output `1 + i` of the
    /// graph is gradient `i`), in concatenation order. Several indices share one slot when
    /// they are the same node.
    pub grads: Vec<usize>,
    /// Gradient bytes it all-reduces (the loss, when it rides along, not counted).
    pub bytes: usize,
    /// The loss rides in this bucket.
    pub loss: bool,
}

/// A distinct gradient node to all-reduce.
struct Item {
    node: NodeId,
    /// Output positions (gradient indices) that are this node.
    grads: Vec<usize>,
    dims: Vec<usize>,
    numel: usize,
    dtype: DType,
}

impl Item {
    fn bytes(&self) -> usize {
        self.numel.saturating_mul(self.dtype.size_bytes())
    }
}

/// Rewrite `g` (outputs `[loss, grad…]`) so that every gradient output and the loss are
/// all-reduced (Mean) over the ranks, in buckets of at most `bucket_bytes`, each placed
/// right after its last gradient. Returns the new graph (same outputs layout, shapes and
/// leaves) and its buckets in graph order.
pub fn all_reduce_grads(
    g: &Graph,
    bucket_bytes: usize,
) -> Result<(Graph, Vec<GradBucket>), AdError> {
    g.verify()?;
    let loss = *g.outputs.first().ok_or(AdError::NoOutput)?;
    let loss_shape = g.shape(loss)?.clone();
    if loss_shape.numel() != Some(1) {
        return Err(AdError::NotScalarLoss {
            shape: loss_shape.to_string(),
        });
    }
    if !loss_shape.dtype.is_float() {
        return Err(AdError::Optim(format!(
            "the loss is {loss_shape}: a mean over ranks needs a float loss"
        )));
    }

    // Distinct gradient nodes in the order the backward pass produces them.
    let mut items: Vec<Item> = Vec::new();
    let mut by_node: HashMap<NodeId, usize> = HashMap::new();
    let mut order: Vec<(NodeId, usize)> = (g.outputs[1..].iter().copied())
        .enumerate()
        .map(|(i, n)| (n, i))
        .collect();
    order.sort();
    for (node, i) in order {
        if let Some(&k) = by_node.get(&node) {
            items[k].grads.push(i);
            continue;
        }
        let n = g.node(node)?;
        if matches!(n.op, Op::Constant { .. }) {
            continue;
        }
        let dims = n.shape.static_dims().ok_or_else(|| {
            AdError::Optim(format!(
                "gradient {i} is {}: bucketed all-reduce needs static shapes",
                n.shape
            ))
        })?;
        if !n.shape.dtype.is_float() {
            return Err(AdError::Optim(format!(
                "gradient {i} is {}: a mean over ranks needs a float gradient",
                n.shape
            )));
        }
        by_node.insert(node, items.len());
        items.push(Item {
            node,
            grads: vec![i],
            numel: dims.iter().product(),
            dims,
            dtype: n.shape.dtype,
        });
    }

    // Greedy buckets over the production order.
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    let mut fill = 0usize;
    for (k, it) in items.iter().enumerate() {
        let open = buckets.last().filter(|b| {
            items[b[0]].dtype == it.dtype && fill.saturating_add(it.bytes()) <= bucket_bytes
        });
        match open {
            Some(_) => {
                fill += it.bytes();
                if let Some(b) = buckets.last_mut() {
                    b.push(k);
                }
            }
            None => {
                fill = it.bytes();
                buckets.push(vec![k]);
            }
        }
    }
    let loss_rides = buckets
        .first()
        .is_some_and(|b| items[b[0]].dtype == loss_shape.dtype);

    // Each bucket is anchored at its last member (the loss included when it rides).
    let mut anchored: HashMap<NodeId, Vec<usize>> = HashMap::new();
    for (b, members) in buckets.iter().enumerate() {
        let mut anchor = members.iter().map(|&k| items[k].node).max().unwrap_or(loss);
        if b == 0 && loss_rides {
            anchor = anchor.max(loss);
        }
        anchored.entry(anchor).or_default().push(b);
    }

    let mut out = Graph::new(g.name.clone());
    let mut map: Vec<NodeId> = Vec::with_capacity(g.nodes.len());
    let mut reduced: HashMap<NodeId, NodeId> = HashMap::new();
    for node in &g.nodes {
        let inputs = node.inputs.iter().map(|i| map[i.0]).collect();
        let id = out.push_node(node.op.clone(), inputs, node.shape.clone());
        out.nodes[id.0].name = node.name.clone();
        map.push(id);
        for &b in anchored.get(&node.id).map_or(&[][..], Vec::as_slice) {
            let mut parts: Vec<(NodeId, Vec<usize>, usize)> = Vec::new();
            if b == 0 && loss_rides {
                let dims = loss_shape.static_dims().unwrap_or_default();
                parts.push((loss, dims, 1));
            }
            for &k in &buckets[b] {
                let it = &items[k];
                parts.push((it.node, it.dims.clone(), it.numel));
            }
            let tag = format!("grad_bucket.{b}");
            for (old, new) in emit_bucket(&mut out, &map, &parts, &tag)? {
                reduced.insert(old, new);
            }
        }
    }
    let new_loss = match reduced.get(&loss) {
        Some(&l) => l,
        None => {
            let l = out.all_reduce(map[loss.0], CollectiveReduce::Mean)?;
            out.set_name(l, "loss.all_reduce")?;
            l
        }
    };
    out.outputs = std::iter::once(new_loss)
        .chain((g.outputs[1..].iter()).map(|o| reduced.get(o).copied().unwrap_or(map[o.0])))
        .collect();
    out.verify()?;
    let report = buckets
        .iter()
        .enumerate()
        .map(|(b, members)| {
            let mut grads: Vec<usize> = Vec::new();
            for &k in members {
                grads.extend(&items[k].grads);
            }
            GradBucket {
                grads,
                bytes: members.iter().map(|&k| items[k].bytes()).sum(),
                loss: b == 0 && loss_rides,
            }
        })
        .collect();
    Ok((out, report))
}

/// Flatten and concatenate `parts` (old node, dims, element count), all-reduce (Mean) the
/// result once, and cut it back; returns `(old node, reduced new node)` per part.
fn emit_bucket(
    g: &mut Graph,
    map: &[NodeId],
    parts: &[(NodeId, Vec<usize>, usize)],
    tag: &str,
) -> Result<Vec<(NodeId, NodeId)>, AdError> {
    let mut flat = Vec::with_capacity(parts.len());
    for (old, dims, numel) in parts {
        let x = map[old.0];
        flat.push(if dims.len() == 1 {
            x
        } else {
            g.reshape(x, &[*numel as i64])?
        });
    }
    let whole = match flat[..] {
        [one] => one,
        _ => g.concat(&flat, 0)?,
    };
    let red = g.all_reduce(whole, CollectiveReduce::Mean)?;
    g.set_name(red, tag)?;
    let mut back = Vec::with_capacity(parts.len());
    let mut offset = 0;
    for (old, dims, numel) in parts {
        let piece = if parts.len() == 1 {
            red
        } else {
            g.narrow(red, 0, offset, *numel)?
        };
        offset += numel;
        let shaped = if dims.len() == 1 {
            piece
        } else {
            let target: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            g.reshape(piece, &target)?
        };
        back.push((*old, shaped));
    }
    Ok(back)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grad_with_loss;
    use rlx_ir::{ReduceOp, Shape};

    /// loss = mean((x·w1 + b1)·w2): grads of w1 [4,3], b1 [3], w2 [3,2] (f32).
    fn mlp() -> (Graph, Vec<NodeId>) {
        let mut g = Graph::new("mlp");
        let x = g.input("x", Shape::new(&[5, 4], DType::F32)).unwrap();
        let w1 = g.param("w1", Shape::new(&[4, 3], DType::F32)).unwrap();
        let b1 = g.param("b1", Shape::new(&[3], DType::F32)).unwrap();
        let w2 = g.param("w2", Shape::new(&[3, 2], DType::F32)).unwrap();
        let h = g.matmul(x, w1).unwrap();
        let h = g.add(h, b1).unwrap();
        let y = g.matmul(h, w2).unwrap();
        let l = g
            .add_node(
                Op::Reduce {
                    op: ReduceOp::Mean,
                    axes: vec![],
                    keep_dim: false,
                },
                &[y],
            )
            .unwrap();
        g.set_outputs(vec![l]);
        (g, vec![w1, b1, w2])
    }

    fn all_reduces(g: &Graph) -> Vec<NodeId> {
        (g.nodes.iter())
            .filter(|n| matches!(n.op, Op::AllReduce { .. }))
            .map(|n| n.id)
            .collect()
    }

    #[test]
    fn one_bucket_holds_everything_under_the_cap() {
        let (f, wrt) = mlp();
        let g = grad_with_loss(&f, &wrt).unwrap();
        let (r, buckets) = all_reduce_grads(&g, DEFAULT_BUCKET_BYTES).unwrap();
        assert_eq!(buckets.len(), 1);
        assert!(buckets[0].loss);
        assert_eq!(buckets[0].bytes, 4 * (12 + 3 + 6));
        // Backward order: w2's gradient comes first, w1's last.
        assert_eq!(buckets[0].grads[0], 2);
        assert_eq!(all_reduces(&r).len(), 1);
        assert_eq!(r.outputs.len(), g.outputs.len());
        for (a, b) in r.outputs.iter().zip(&g.outputs) {
            assert_eq!(r.shape(*a).unwrap(), g.shape(*b).unwrap());
        }
    }

    #[test]
    fn a_small_cap_makes_several_buckets_placed_in_the_backward() {
        let (f, wrt) = mlp();
        let g = grad_with_loss(&f, &wrt).unwrap();
        // 24 bytes: w2 (24 B) alone, then b1 (12 B), then w1 (48 B, over the cap) alone.
        let (r, buckets) = all_reduce_grads(&g, 24).unwrap();
        let grads: Vec<Vec<usize>> = buckets.iter().map(|b| b.grads.clone()).collect();
        assert_eq!(grads, vec![vec![2], vec![1], vec![0]]);
        assert!(buckets[0].loss && !buckets[1].loss);
        let ars = all_reduces(&r);
        assert_eq!(ars.len(), 3);
        // The first bucket's all-reduce precedes the last gradient's computation.
        let last_grad = r.outputs[1..].iter().max().unwrap();
        assert!(ars[0] < *last_grad, "{ars:?} vs {last_grad}");
        // The loss rides in the first bucket: reshape(narrow(all_reduce)).
        let narrow = r.nodes[r.outputs[0].0].inputs[0];
        assert_eq!(r.nodes[narrow.0].inputs, vec![ars[0]]);
    }

    #[test]
    fn constant_gradients_and_shared_nodes() {
        let mut f = Graph::new("f");
        let a = f.param("a", Shape::new(&[3], DType::F32)).unwrap();
        let b = f.param("b", Shape::new(&[3], DType::F32)).unwrap();
        let unused = f.param("u", Shape::new(&[2], DType::F32)).unwrap();
        let s = f.add(a, b).unwrap();
        let l = f
            .add_node(
                Op::Reduce {
                    op: ReduceOp::Sum,
                    axes: vec![],
                    keep_dim: false,
                },
                &[s],
            )
            .unwrap();
        f.set_outputs(vec![l]);
        let g = grad_with_loss(&f, &[a, b, unused]).unwrap();
        let (r, buckets) = all_reduce_grads(&g, DEFAULT_BUCKET_BYTES).unwrap();
        r.verify().unwrap();
        // The zero gradient of `u` is a constant: never all-reduced.
        let carried: Vec<usize> = buckets.iter().flat_map(|b| b.grads.clone()).collect();
        assert!(!carried.contains(&2));
        assert!(matches!(r.nodes[r.outputs[3].0].op, Op::Constant { .. }));
    }
}
