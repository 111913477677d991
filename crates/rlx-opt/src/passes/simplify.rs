//! Algebraic simplification. Every rewrite keeps the node's exact shape (dims and dtype):
//! a replacement with a different shape is refused by the rebuilder, a new node whose shape
//! rule disagrees is not emitted.
//!
//! - `x·1`, `1·x`, `x/1`, `x+0`, `0+x`, `x−0` → `x`, where the other operand is a
//!   `Constant` of all ones / all zeros that broadcasts without changing x's shape. A zero
//!   of either sign counts: the only value that can differ is the sign of a zero result
//!   (`-0 + 0 = +0`), which compares equal.
//! - `reshape(reshape(x))` → one reshape; a reshape to its input's shape → removed.
//! - `transpose(transpose(x))` → one transpose with the composed permutation; an identity
//!   permutation → removed.
//! - a cast to the input's own dtype → removed.
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{BinaryOp, Dim, Graph, HostTensor, Node, NodeId, Op, Shape};

pub struct Simplify;

/// Whether `id` (a new-graph node) is a constant every element of which equals `v`.
fn const_all(rb: &Rebuilder, id: NodeId, v: f64) -> bool {
    let Ok(n) = rb.new_node(id) else {
        return false;
    };
    let Op::Constant { data } = &n.op else {
        return false;
    };
    let Some(dims) = n.shape.static_dims() else {
        return false;
    };
    match HostTensor::new(&dims, n.shape.dtype, data.clone()) {
        Ok(t) => t.to_f64_vec().iter().all(|&x| x == v),
        Err(_) => false,
    }
}

/// The operand a binary identity reduces to, if any.
fn binary_identity(rb: &Rebuilder, op: BinaryOp, n: &Node, a: NodeId, b: NodeId) -> Option<NodeId> {
    let same = |x: NodeId| rb.new_node(x).is_ok_and(|m| m.shape == n.shape);
    let (right, left) = match op {
        BinaryOp::Mul => (Some(1.0), Some(1.0)),
        BinaryOp::Add => (Some(0.0), Some(0.0)),
        BinaryOp::Div => (Some(1.0), None),
        BinaryOp::Sub => (Some(0.0), None),
        _ => (None, None),
    };
    if let Some(v) = right {
        if same(a) && const_all(rb, b, v) {
            return Some(a);
        }
    }
    if let Some(v) = left {
        if same(b) && const_all(rb, a, v) {
            return Some(b);
        }
    }
    None
}

/// Whether a reshape from `from` to `to` keeps the element count (as opposed to the
/// broadcasting reshape of a 1-element tensor): equal static products and the same
/// symbols, which are compared by name (an unknown relation between symbols says no).
fn same_numel(from: &Shape, to: &Shape) -> bool {
    fn key(s: &Shape) -> (Vec<&str>, u128) {
        let mut syms: Vec<&str> = Vec::new();
        let mut prod: u128 = 1;
        for d in &s.dims {
            match d {
                Dim::Static(n) => prod = prod.saturating_mul(*n as u128),
                Dim::Dynamic(name) => syms.push(name),
            }
        }
        syms.sort_unstable();
        (syms, prod)
    }
    key(from) == key(to)
}

fn is_identity(perm: &[usize]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| i == p)
}

impl Simplify {
    /// Rewrite one node; `false` when it should be copied unchanged.
    fn rewrite(&self, rb: &mut Rebuilder, n: &Node) -> Result<bool, OptError> {
        let ins = rb.inputs(n)?;
        match &n.op {
            Op::Binary(op) if ins.len() == 2 => {
                if let Some(x) = binary_identity(rb, *op, n, ins[0], ins[1]) {
                    rb.replace(n.id, x)?;
                    return Ok(true);
                }
            }
            Op::Cast { to } if ins.len() == 1 && rb.new_node(ins[0])?.shape.dtype == *to => {
                rb.replace(n.id, ins[0])?;
                return Ok(true);
            }
            Op::Reshape { shape } if ins.len() == 1 => {
                let src = rb.new_node(ins[0])?;
                if src.shape == n.shape {
                    rb.replace(n.id, ins[0])?;
                    return Ok(true);
                }
                if let (Op::Reshape { .. }, [x]) = (&src.op, src.inputs.as_slice()) {
                    let x = *x;
                    let xs = &rb.new_node(x)?.shape;
                    if !same_numel(xs, &src.shape) {
                        return Ok(false);
                    }
                    if *xs == n.shape {
                        rb.replace(n.id, x)?;
                        return Ok(true);
                    }
                    // A `0` in the outer spec copies a dim of the inner result, which x may
                    // not have at that index: spell the target out when it is static.
                    let spec = match n.shape.static_dims() {
                        Some(d) => d.iter().map(|&v| v as i64).collect(),
                        None if !shape.contains(&0) => shape.clone(),
                        None => return Ok(false),
                    };
                    let op = Op::Reshape { shape: spec };
                    return Ok(rb.try_emit(n.id, op, vec![x])?.is_some());
                }
            }
            Op::Transpose { perm } if ins.len() == 1 => {
                if is_identity(perm) {
                    rb.replace(n.id, ins[0])?;
                    return Ok(true);
                }
                let src = rb.new_node(ins[0])?;
                if let (Op::Transpose { perm: inner }, [x]) = (&src.op, src.inputs.as_slice()) {
                    let x = *x;
                    if inner.len() != perm.len() || perm.iter().any(|&p| p >= inner.len()) {
                        return Ok(false);
                    }
                    // out[i] = mid[perm[i]] = x[inner[perm[i]]]
                    let composed: Vec<usize> = perm.iter().map(|&p| inner[p]).collect();
                    if is_identity(&composed) {
                        rb.replace(n.id, x)?;
                        return Ok(true);
                    }
                    let op = Op::Transpose { perm: composed };
                    return Ok(rb.try_emit(n.id, op, vec![x])?.is_some());
                }
            }
            _ => {}
        }
        Ok(false)
    }
}

impl Pass for Simplify {
    fn name(&self) -> &'static str {
        "simplify"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let mut rb = Rebuilder::new(self.name(), g);
        for n in &g.nodes {
            if n.op.is_leaf() || !self.rewrite(&mut rb, n)? {
                rb.copy(n.id)?;
            }
        }
        rb.finish()
    }
}
