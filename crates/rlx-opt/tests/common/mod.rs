//! Test support: a seeded RNG (seed printed; RLX_SEED replays), a plain f64 reference
//! interpreter for the ops the tests use (independent of every backend), and a random
//! graph generator.
#![allow(dead_code)]
use rlx_ir::{
    Activation, BinaryOp, CompareOp, DType, Graph, HostTensor, Node, NodeId, Op, OpKind, Shape,
};
use rlx_opt::ConstEvaluator;
pub mod compare;
pub mod gen;
pub mod widen;
use std::collections::HashMap;

pub use rlx_testutil::Rng;

/// A value in the reference interpreter: concrete dims, storage dtype, values as f64
/// (already rounded into the dtype).
#[derive(Clone, Debug, PartialEq)]
pub struct Val {
    pub dims: Vec<usize>,
    pub dtype: DType,
    pub data: Vec<f64>,
}

impl Val {
    pub fn new(dims: &[usize], dtype: DType, data: Vec<f64>) -> Val {
        let data = round(dims, &data, dtype);
        Val {
            dims: dims.to_vec(),
            dtype,
            data,
        }
    }
    pub fn from_host(t: &HostTensor) -> Val {
        Val {
            dims: t.shape.clone(),
            dtype: t.dtype,
            data: t.to_f64_vec(),
        }
    }
    pub fn to_host(&self) -> HostTensor {
        HostTensor::from_f64_as(&self.dims, &self.data, self.dtype)
    }
}

/// Round f64 values into a storage dtype (f32 / half rounding, integer truncation).
fn round(dims: &[usize], v: &[f64], dtype: DType) -> Vec<f64> {
    match dtype {
        DType::F64 => v.to_vec(),
        DType::Bool => v.iter().map(|&x| (x != 0.0) as u8 as f64).collect(),
        _ => HostTensor::from_f64_as(dims, v, dtype).to_f64_vec(),
    }
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Value of `v` at the multi-index `idx` of a (right-aligned) broadcast output.
fn at_broadcast(v: &Val, idx: &[usize]) -> f64 {
    let off = idx.len() - v.dims.len();
    let st = strides(&v.dims);
    let mut p = 0;
    for (k, &d) in v.dims.iter().enumerate() {
        let i = if d == 1 { 0 } else { idx[off + k] };
        p += i * st[k];
    }
    v.data[p]
}

fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        idx[k] = flat % dims[k].max(1);
        flat /= dims[k].max(1);
    }
    idx
}

fn act(a: Activation, x: f64) -> Option<f64> {
    Some(match a {
        Activation::Relu => x.max(0.0),
        Activation::Neg => -x,
        Activation::Abs => x.abs(),
        Activation::Tanh => x.tanh(),
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Activation::Silu => x / (1.0 + (-x).exp()),
        Activation::Square => x * x,
        Activation::Exp => x.exp(),
        Activation::Sin => x.sin(),
        Activation::Cos => x.cos(),
        _ => return None,
    })
}

fn bin(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Mod { fmod: false } => a - b * (a / b).floor(),
        BinaryOp::Mod { fmod: true } => a - b * (a / b).trunc(),
        // Integer-only: the generated float graphs never hold them.
        BinaryOp::BitAnd
        | BinaryOp::BitOr
        | BinaryOp::BitXor
        | BinaryOp::ShiftLeft
        | BinaryOp::ShiftRight => f64::NAN,
    }
}

fn cmp(op: CompareOp, a: f64, b: f64) -> bool {
    match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

/// One op on concrete values; `None` for ops the reference does not know.
pub fn eval_op(op: &Op, ins: &[Val], out: &Shape) -> Option<Val> {
    let dims = out.static_dims()?;
    let n: usize = dims.iter().product();
    let ew = |f: &dyn Fn(&[usize]) -> f64| -> Vec<f64> {
        (0..n).map(|i| f(&unravel(i, &dims))).collect()
    };
    let data = match op {
        Op::Activation(a) => {
            let mut v = Vec::with_capacity(n);
            for &x in &ins[0].data {
                v.push(act(*a, x)?);
            }
            v
        }
        Op::Binary(b) => ew(&|i| bin(*b, at_broadcast(&ins[0], i), at_broadcast(&ins[1], i))),
        Op::Compare(c) => {
            ew(&|i| cmp(*c, at_broadcast(&ins[0], i), at_broadcast(&ins[1], i)) as u8 as f64)
        }
        Op::Where => ew(&|i| {
            if at_broadcast(&ins[0], i) != 0.0 {
                at_broadcast(&ins[1], i)
            } else {
                at_broadcast(&ins[2], i)
            }
        }),
        Op::Cast { to } if to.is_float() => ins[0].data.clone(),
        Op::Cast { .. } => ins[0].data.iter().map(|v| v.trunc()).collect(),
        Op::StopGradient => ins[0].data.clone(),
        Op::Reshape { .. } if ins[0].data.len() == n => ins[0].data.clone(),
        Op::Reshape { .. } if ins[0].data.len() == 1 => vec![ins[0].data[0]; n],
        Op::Transpose { perm } => {
            let st = strides(&ins[0].dims);
            ew(&|i| {
                let mut p = 0;
                for (k, &ax) in perm.iter().enumerate() {
                    p += i[k] * st[ax];
                }
                ins[0].data[p]
            })
        }
        Op::Narrow { axis, start, .. } => {
            let ax = rlx_ir::normalize_axis(*axis, dims.len()).ok()?;
            let st = strides(&ins[0].dims);
            ew(&|i| {
                let mut p = 0;
                for (k, &x) in i.iter().enumerate() {
                    p += (if k == ax { x + start } else { x }) * st[k];
                }
                ins[0].data[p]
            })
        }
        Op::MatMul => matmul(&ins[0], &ins[1], &dims)?,
        Op::LayerNorm { axis, eps } => layer_norm(ins, *axis, *eps as f64)?,
        Op::Attention(spec) => attention(ins, spec)?,
        Op::Softmax { axis } => softmax(&ins[0], *axis)?,
        _ => return None,
    };
    Some(Val::new(&dims, out.dtype, data))
}

/// Batched matmul with broadcast batch dims (both operands rank ≥ 2).
fn matmul(a: &Val, b: &Val, out: &[usize]) -> Option<Vec<f64>> {
    if a.dims.len() == 1 && b.dims.len() == 2 {
        // NumPy: a vector is a one-row matrix whose row dim is dropped again.
        let row = Val {
            dims: vec![1, a.dims[0]],
            ..a.clone()
        };
        return matmul(&row, b, &[1, b.dims[1]]);
    }
    if a.dims.len() < 2 || b.dims.len() < 2 {
        return None;
    }
    let (m, k) = (a.dims[a.dims.len() - 2], a.dims[a.dims.len() - 1]);
    let nn = b.dims[b.dims.len() - 1];
    let batch = &out[..out.len() - 2];
    let nb: usize = batch.iter().product();
    let mut v = vec![0.0; nb * m * nn];
    let sub = |x: &Val, bi: &[usize], r: usize, c: usize| {
        let lead = &x.dims[..x.dims.len() - 2];
        let off = bi.len() - lead.len();
        let st = strides(&x.dims);
        let mut p = 0;
        for (q, &d) in lead.iter().enumerate() {
            p += if d == 1 { 0 } else { bi[off + q] } * st[q];
        }
        x.data[p + r * st[x.dims.len() - 2] + c]
    };
    for bidx in 0..nb {
        let bi = unravel(bidx, batch);
        for i in 0..m {
            for j in 0..nn {
                let mut s = 0.0;
                for q in 0..k {
                    s += sub(a, &bi, i, q) * sub(b, &bi, q, j);
                }
                v[(bidx * m + i) * nn + j] = s;
            }
        }
    }
    Some(v)
}

/// Packed `[B, S, H*D]` attention, no mask or causal, as many KV heads as query heads.
fn attention(ins: &[Val], spec: &rlx_ir::AttentionSpec) -> Option<Vec<f64>> {
    use rlx_ir::{AttentionLayout, MaskKind};
    let (q, k, v) = (&ins[0], &ins[1], &ins[2]);
    let causal = match spec.mask_kind {
        MaskKind::None => false,
        MaskKind::Causal => true,
        _ => return None,
    };
    if spec.layout != AttentionLayout::Packed
        || spec.v_head_dim.is_some()
        || spec.attn_logit_softcap.is_some()
        || k.dims != v.dims
        || q.dims[2] != k.dims[2]
    {
        return None;
    }
    let (b, sq, sk, hd) = (q.dims[0], q.dims[1], k.dims[1], spec.head_dim);
    let e = q.dims[2];
    let scale = spec
        .score_scale
        .map_or(1.0 / (hd as f64).sqrt(), |s| s as f64);
    let mut out = vec![0.0; b * sq * e];
    for bi in 0..b {
        for h in 0..spec.num_heads {
            for i in 0..sq {
                let at =
                    |x: &Val, t: usize, dd: usize| x.data[(bi * x.dims[1] + t) * e + h * hd + dd];
                let visible: Vec<usize> =
                    (0..sk).filter(|&j| !causal || j <= i + sk - sq).collect();
                let scores: Vec<f64> = visible
                    .iter()
                    .map(|&j| (0..hd).map(|dd| at(q, i, dd) * at(k, j, dd)).sum::<f64>() * scale)
                    .collect();
                let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = scores.iter().map(|s| (s - mx).exp()).sum();
                for dd in 0..hd {
                    let acc: f64 = visible
                        .iter()
                        .zip(&scores)
                        .map(|(&j, s)| (s - mx).exp() / z * at(v, j, dd))
                        .sum();
                    out[(bi * sq + i) * e + h * hd + dd] = acc;
                }
            }
        }
    }
    Some(out)
}

/// LayerNorm over dims axis..rank with gamma (and beta) of those dims.
fn layer_norm(ins: &[Val], axis: i64, eps: f64) -> Option<Vec<f64>> {
    let x = &ins[0];
    let a = rlx_ir::normalize_axis(axis, x.dims.len()).ok()?;
    let inner: usize = x.dims[a..].iter().product();
    let mut v = vec![0.0; x.data.len()];
    for (row, out) in x.data.chunks(inner).zip(v.chunks_mut(inner)) {
        let mean = row.iter().sum::<f64>() / inner as f64;
        let var = row.iter().map(|y| (y - mean) * (y - mean)).sum::<f64>() / inner as f64;
        for j in 0..inner {
            let beta = ins.get(2).map_or(0.0, |b| b.data[j]);
            out[j] = (row[j] - mean) / (var + eps).sqrt() * ins[1].data[j] + beta;
        }
    }
    Some(v)
}

fn softmax(x: &Val, axis: i64) -> Option<Vec<f64>> {
    let ax = rlx_ir::normalize_axis(axis, x.dims.len()).ok()?;
    let st = strides(&x.dims);
    let mut v = x.data.clone();
    for flat in 0..x.data.len() {
        let idx = unravel(flat, &x.dims);
        if idx[ax] != 0 {
            continue;
        }
        let base = flat;
        let items: Vec<usize> = (0..x.dims[ax]).map(|t| base + t * st[ax]).collect();
        let mx = items
            .iter()
            .map(|&p| x.data[p])
            .fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = items.iter().map(|&p| (x.data[p] - mx).exp()).sum();
        for &p in &items {
            v[p] = (x.data[p] - mx).exp() / s;
        }
    }
    Some(v)
}

/// Every node's value; leaves come from `feeds` (inputs and params by name) or constants.
pub fn run_ref(g: &Graph, feeds: &HashMap<String, Val>) -> Vec<Val> {
    let mut vals: Vec<Val> = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let v = match &n.op {
            Op::Input { name } | Op::Param { name } => feeds[name].clone(),
            Op::Constant { data } => {
                let dims = n.shape.static_dims().unwrap();
                Val::from_host(&HostTensor::new(&dims, n.shape.dtype, data.clone()).unwrap())
            }
            op => {
                let ins: Vec<Val> = n.inputs.iter().map(|i| vals[i.0].clone()).collect();
                eval_op(op, &ins, &n.shape)
                    .unwrap_or_else(|| panic!("reference has no rule for {}", op.kind()))
            }
        };
        vals.push(v);
    }
    vals
}

/// The graph's outputs under the reference.
pub fn outputs(g: &Graph, feeds: &HashMap<String, Val>) -> Vec<Val> {
    let all = run_ref(g, feeds);
    g.outputs.iter().map(|o| all[o.0].clone()).collect()
}

/// The reference interpreter as a constant evaluator.
pub struct RefEval;

impl ConstEvaluator for RefEval {
    fn eval(&self, op: &Op, inputs: &[HostTensor], out: &Shape) -> Option<HostTensor> {
        let ins: Vec<Val> = inputs.iter().map(Val::from_host).collect();
        eval_op(op, &ins, out).map(|v| v.to_host())
    }
}

/// Random feeds for every input and param of `g`.
pub fn random_feeds(g: &Graph, rng: &mut Rng) -> HashMap<String, Val> {
    let mut m = HashMap::new();
    for n in &g.nodes {
        if let Op::Input { name } | Op::Param { name } = &n.op {
            let dims = n.shape.static_dims().unwrap();
            let k = dims.iter().product();
            m.insert(name.clone(), Val::new(&dims, n.shape.dtype, rng.normals(k)));
        }
    }
    m
}

/// rel-L2 distance of `got` from `want` over the elements where they differ: an element
/// equal in both (an infinity of the same sign at the same place included) adds nothing
/// to either norm, so `inf − inf` cannot turn the measure into NaN. NaN anywhere, or an
/// infinity facing anything else, gives infinity (never passes).
pub fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    let (num, den) = distance(got, want);
    num / den.max(1e-30)
}

/// `(‖got − want‖₂, ‖want‖₂)` over the elements where they differ, as [`rel_err`] takes
/// them; the distance is infinite for a NaN or an unmatched infinity.
pub fn distance(got: &[f64], want: &[f64]) -> (f64, f64) {
    assert_eq!(got.len(), want.len(), "length mismatch");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&p, &q) in got.iter().zip(want) {
        if p.is_nan() || q.is_nan() {
            return (f64::INFINITY, den.sqrt());
        }
        if p == q && p.is_infinite() {
            continue;
        }
        if p.is_infinite() || q.is_infinite() {
            return (f64::INFINITY, den.sqrt());
        }
        num += (p - q) * (p - q);
        den += q * q;
    }
    (num.sqrt(), den.sqrt())
}

/// Outputs of two graphs agree within rel-L2 `tol` (same dims, dtypes; NaN never passes;
/// same-place infinities of the same sign are equal, see [`rel_err`]).
pub fn assert_same(a: &[Val], b: &[Val], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: output count");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.dims, y.dims, "{what}: output {k} dims");
        assert_eq!(x.dtype, y.dtype, "{what}: output {k} dtype");
        let err = rel_err(&x.data, &y.data);
        assert!(err <= tol, "{what}: output {k} differs: rel-L2 {err}");
    }
}

/// Count of nodes of one op kind.
pub fn count(g: &Graph, kind: OpKind) -> usize {
    g.nodes.iter().filter(|n| n.op.kind() == kind).count()
}

pub fn node(g: &Graph, id: NodeId) -> &Node {
    &g.nodes[id.0]
}

/// Node count per op kind.
pub fn kinds(g: &Graph) -> std::collections::BTreeMap<OpKind, usize> {
    rlx_opt::kind_counts(g)
}
