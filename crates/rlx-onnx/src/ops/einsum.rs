//! Einsum over one or two operands without ellipsis or repeated letters in one operand,
//! lowered onto Reduce (letters only one operand has and the output lacks), Transpose,
//! Reshape and one batched MatMul: `[batch, left, k] @ [batch, k, right]`.
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{NodeId, Op, ReduceOp};

pub(super) fn register(r: &mut Registry) {
    r.insert("Einsum", einsum);
}

/// Sum `x` (labelled by `labels`) over the labels not in `keep`; returns the new labels.
fn sum_out(
    c: &mut ImportCtx,
    x: NodeId,
    labels: &[char],
    keep: &dyn Fn(char) -> bool,
) -> Result<(NodeId, Vec<char>), OnnxError> {
    let axes: Vec<i64> = (0..labels.len())
        .filter(|&i| !keep(labels[i]))
        .map(|i| i as i64)
        .collect();
    if axes.is_empty() {
        return Ok((x, labels.to_vec()));
    }
    let y = c.add(
        Op::Reduce {
            op: ReduceOp::Sum,
            axes,
            keep_dim: false,
        },
        &[x],
    )?;
    Ok((y, labels.iter().copied().filter(|&l| keep(l)).collect()))
}

/// Transpose `x` from `from` to the order `to` (a permutation of the same labels).
fn permute(c: &mut ImportCtx, x: NodeId, from: &[char], to: &[char]) -> Result<NodeId, OnnxError> {
    let perm: Vec<usize> = to
        .iter()
        .map(|l| from.iter().position(|f| f == l).unwrap_or(0))
        .collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(x);
    }
    c.add(Op::Transpose { perm }, &[x])
}

fn einsum(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let eq: String = Attrs(n)
        .s("equation")
        .ok_or_else(|| c.err("needs equation"))?
        .chars()
        .filter(|ch| !ch.is_whitespace())
        .collect();
    if eq.contains("...") {
        return Err(c.unsupported("ellipsis in the equation"));
    }
    let (lhs, out) = match eq.split_once("->") {
        Some((l, o)) => (l.to_string(), Some(o.chars().collect::<Vec<_>>())),
        None => (eq.clone(), None),
    };
    let ops: Vec<Vec<char>> = lhs.split(',').map(|s| s.chars().collect()).collect();
    let xs = c.inputs(n)?;
    if ops.len() != xs.len() || !(1..=2).contains(&ops.len()) {
        return Err(c.unsupported(format!("einsum with {} operands", ops.len())));
    }
    for (k, (o, &x)) in ops.iter().zip(&xs).enumerate() {
        let rank = c.rank(x)?;
        if o.len() != rank {
            return Err(c.err(format!(
                "operand {k} has {} labels for rank {rank} in \"{eq}\"",
                o.len()
            )));
        }
        for (i, l) in o.iter().enumerate() {
            if o[..i].contains(l) {
                return Err(c.unsupported("a repeated letter in one operand (a diagonal)"));
            }
        }
    }
    let out: Vec<char> = out.unwrap_or_else(|| {
        // Implicit output: the letters seen once, alphabetically.
        let all: Vec<char> = ops.concat();
        let mut v: Vec<char> = all
            .iter()
            .copied()
            .filter(|l| all.iter().filter(|m| *m == l).count() == 1)
            .collect();
        v.sort_unstable();
        v
    });
    let in_out = |l: char| out.contains(&l);
    if ops.len() == 1 {
        let (y, labels) = sum_out(c, xs[0], &ops[0], &in_out)?;
        return one(permute(c, y, &labels, &out)?);
    }
    let (a_l, b_l) = (&ops[0], &ops[1]);
    // Letters only one side has and the output lacks are summed first.
    let (a, a_l) = sum_out(c, xs[0], a_l, &|l| in_out(l) || b_l.contains(&l))?;
    let (b, b_l) = sum_out(c, xs[1], b_l, &|l| in_out(l) || a_l.contains(&l))?;
    let batch: Vec<char> = a_l
        .iter()
        .copied()
        .filter(|l| b_l.contains(l) && in_out(*l))
        .collect();
    let k: Vec<char> = a_l
        .iter()
        .copied()
        .filter(|l| b_l.contains(l) && !in_out(*l))
        .collect();
    let left: Vec<char> = a_l.iter().copied().filter(|l| !b_l.contains(l)).collect();
    let right: Vec<char> = b_l.iter().copied().filter(|l| !a_l.contains(l)).collect();
    let size =
        |c: &ImportCtx, x: NodeId, labels: &[char], of: &[char]| -> Result<Vec<usize>, OnnxError> {
            let d = c.static_dims(x)?;
            Ok(of
                .iter()
                .map(|l| d[labels.iter().position(|m| m == l).unwrap_or(0)])
                .collect())
        };
    let (bd, ld, kd) = (
        size(c, a, &a_l, &batch)?,
        size(c, a, &a_l, &left)?,
        size(c, a, &a_l, &k)?,
    );
    let rd = size(c, b, &b_l, &right)?;
    let prod = |v: &[usize]| v.iter().product::<usize>() as i64;
    let a_order: Vec<char> = [batch.clone(), left.clone(), k.clone()].concat();
    let b_order: Vec<char> = [batch.clone(), k.clone(), right.clone()].concat();
    let a = permute(c, a, &a_l, &a_order)?;
    let b = permute(c, b, &b_l, &b_order)?;
    let a = c.add(
        Op::Reshape {
            shape: vec![prod(&bd), prod(&ld), prod(&kd)],
        },
        &[a],
    )?;
    let b = c.add(
        Op::Reshape {
            shape: vec![prod(&bd), prod(&kd), prod(&rd)],
        },
        &[b],
    )?;
    let y = c.add(Op::MatMul, &[a, b])?;
    let y_l: Vec<char> = [batch, left, right].concat();
    let y_d: Vec<i64> = [bd, ld, rd].concat().iter().map(|&v| v as i64).collect();
    let y = c.add(Op::Reshape { shape: y_d }, &[y])?;
    one(permute(c, y, &y_l, &out)?)
}
