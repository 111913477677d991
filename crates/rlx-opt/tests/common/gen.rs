//! Random graphs: elementwise ops with broadcasting, comparisons, selects, casts, and
//! (optionally) views and the redundancies the passes remove.
use super::Rng;
use rlx_ir::{
    broadcast_dims, Activation, AttentionSpec, BinaryOp, CompareOp, DType, Dim, Graph, HostTensor,
    NodeId, Op, Shape,
};

#[derive(Clone, Copy, Debug)]
pub struct GenOpts {
    /// Non-leaf nodes to add (roughly).
    pub ops: usize,
    /// Reshape / Narrow / Transpose nodes.
    pub views: bool,
    /// x·1, x+0, duplicate nodes, casts to the same dtype, transpose pairs.
    pub redundancy: bool,
    /// Casts between dtypes (f16/f64/bool/i64), compares and selects.
    pub mixed_dtypes: bool,
    /// MatMul (square weights, so shapes stay in the broadcast family), Softmax, LayerNorm.
    pub heavy: bool,
}

pub const ACTS: [Activation; 8] = [
    Activation::Relu,
    Activation::Neg,
    Activation::Abs,
    Activation::Tanh,
    Activation::Sigmoid,
    Activation::Silu,
    Activation::Square,
    Activation::Sin,
];
const BINS: [BinaryOp; 5] = [
    BinaryOp::Add,
    BinaryOp::Sub,
    BinaryOp::Mul,
    BinaryOp::Max,
    BinaryOp::Min,
];
const CMPS: [CompareOp; 4] = [CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ne];

fn dims(g: &Graph, id: NodeId) -> Vec<usize> {
    g.nodes[id.0].shape.static_dims().unwrap()
}

fn dtype(g: &Graph, id: NodeId) -> DType {
    g.nodes[id.0].shape.dtype
}

/// A random shape `x` broadcasts against without growing: some dims set to 1, some leading
/// dims dropped.
fn sub_shape(rng: &mut Rng, d: &[usize]) -> Vec<usize> {
    let drop = if d.is_empty() {
        0
    } else {
        rng.below(d.len() + 1)
    };
    d[drop..]
        .iter()
        .map(|&x| if rng.chance(0.3) { 1 } else { x })
        .collect()
}

fn constant(g: &mut Graph, rng: &mut Rng, d: &[usize], dt: DType, fill: Option<f64>) -> NodeId {
    let n = d.iter().product();
    let v = match fill {
        Some(f) => vec![f; n],
        None => rng.normals(n),
    };
    g.constant(HostTensor::from_f64_as(d, &v, dt)).unwrap()
}

/// Add `op` through the builder; the op's shape rule must accept it.
fn add(g: &mut Graph, op: Op, ins: &[NodeId]) -> NodeId {
    g.add_node(op.clone(), ins)
        .unwrap_or_else(|e| panic!("generator built a bad {op:?}: {e}"))
}

/// A random activation of `x`. Sin gets tanh(x): chains of squares and SwiGLUs reach 1e6,
/// where sin keeps no correct digit in f32 and few in f64, whatever the rewrite does.
fn activation(g: &mut Graph, rng: &mut Rng, x: NodeId) -> NodeId {
    let act = rng.pick(&ACTS);
    let x = if act == Activation::Sin {
        add(g, Op::Activation(Activation::Tanh), &[x])
    } else {
        x
    };
    add(g, Op::Activation(act), &[x])
}

/// Add a Reshape / Narrow / Transpose through the builder, checking its shape rule gives
/// the shape the generator expects.
pub fn view(g: &mut Graph, op: Op, x: NodeId) -> NodeId {
    let d = dims(g, x);
    let out: Vec<usize> = match &op {
        Op::Reshape { shape } => shape.iter().map(|&v| v as usize).collect(),
        Op::Narrow { axis, len, .. } => {
            let a = rlx_ir::normalize_axis(*axis, d.len()).unwrap();
            let mut o = d.clone();
            o[a] = *len;
            o
        }
        Op::Transpose { perm } => perm.iter().map(|&p| d[p]).collect(),
        _ => panic!("not a view op: {op:?}"),
    };
    let id = add(g, op.clone(), &[x]);
    assert_eq!(g.nodes[id.0].shape, Shape::new(&out, dtype(g, x)), "{op:?}");
    id
}

/// A node of dtype `dt` broadcasting with `a`, or a fresh constant that does.
fn partner(g: &mut Graph, rng: &mut Rng, a: NodeId, dt: DType) -> NodeId {
    let da: Vec<usize> = dims(g, a);
    partner_of(g, rng, &da, dt)
}

/// A node of dtype `dt` broadcasting with `da` without growing past it when it is a
/// constant.
fn partner_of(g: &mut Graph, rng: &mut Rng, da: &[usize], dt: DType) -> NodeId {
    let dd: Vec<Dim> = da.iter().map(|&x| Dim::Static(x)).collect();
    let cands: Vec<NodeId> = g
        .nodes
        .iter()
        .filter(|n| n.shape.dtype == dt && broadcast_dims(&dd, &n.shape.dims).is_ok())
        .map(|n| n.id)
        .collect();
    if cands.is_empty() || rng.chance(0.15) {
        let d = sub_shape(rng, da);
        return constant(g, rng, &d, dt, None);
    }
    rng.pick(&cands)
}

/// A random graph whose inputs are named `x0`, `x1`, ….
pub fn random_graph(rng: &mut Rng, o: GenOpts) -> Graph {
    let mut g = Graph::new("random");
    let rank = 1 + rng.below(3);
    let base: Vec<usize> = (0..rank).map(|_| 1 + rng.below(7)).collect();
    let fdt = rng.pick(&[DType::F32, DType::F32, DType::F64, DType::F16]);
    for k in 0..1 + rng.below(3) {
        let d = if k == 0 {
            base.clone()
        } else {
            sub_shape(rng, &base)
        };
        g.input(format!("x{k}"), Shape::new(&d, fdt)).unwrap();
    }
    let mut made = 0;
    while made < o.ops {
        let nodes: Vec<NodeId> = g.nodes.iter().map(|n| n.id).collect();
        let floats: Vec<NodeId> = nodes
            .iter()
            .copied()
            .filter(|&i| dtype(&g, i).is_float())
            .collect();
        let a = rng.pick(&floats);
        let dt = dtype(&g, a);
        let choice = match (o.heavy && rng.chance(0.2), o.views) {
            (true, _) => 12 + rng.below(4),
            (false, true) => rng.below(12),
            (false, false) => rng.below(8),
        };
        match choice {
            0 | 1 if rng.chance(0.1) => add(&mut g, Op::StopGradient, &[a]),
            0 | 1 => activation(&mut g, rng, a),
            2..=4 => {
                let b = partner(&mut g, rng, a, dt);
                let op = Op::Binary(rng.pick(&BINS));
                if rng.chance(0.5) {
                    add(&mut g, op, &[a, b])
                } else {
                    add(&mut g, op, &[b, a])
                }
            }
            5 if o.mixed_dtypes => {
                let b = partner(&mut g, rng, a, dt);
                let c = add(&mut g, Op::Compare(rng.pick(&CMPS)), &[a, b]);
                let t = partner(&mut g, rng, c, dt);
                let ct = broadcast_dims(&g.nodes[c.0].shape.dims, &g.nodes[t.0].shape.dims)
                    .unwrap()
                    .iter()
                    .map(|d| d.as_static().unwrap())
                    .collect::<Vec<_>>();
                let e = partner_of(&mut g, rng, &ct, dt);
                add(&mut g, Op::Where, &[c, t, e])
            }
            6 if o.mixed_dtypes => {
                // Round trips keep float chains going; the integer / bool casts feed views.
                let to = rng.pick(&[DType::F16, DType::F32, DType::F64, DType::BF16, DType::I64]);
                let c = add(&mut g, Op::Cast { to }, &[a]);
                if to.is_float() {
                    c
                } else {
                    add(&mut g, Op::Cast { to: fdt }, &[c])
                }
            }
            7 if o.redundancy => {
                let r = rng.below(4);
                match r {
                    0 => {
                        let one = {
                            let d = sub_shape(rng, &dims(&g, a));
                            constant(&mut g, rng, &d, dt, Some(1.0))
                        };
                        add(&mut g, Op::Binary(BinaryOp::Mul), &[one, a])
                    }
                    1 => {
                        let zero = {
                            let d = sub_shape(rng, &dims(&g, a));
                            constant(&mut g, rng, &d, dt, Some(0.0))
                        };
                        add(&mut g, Op::Binary(BinaryOp::Add), &[a, zero])
                    }
                    2 => add(&mut g, Op::Cast { to: dt }, &[a]),
                    _ => {
                        // A duplicate of an existing non-leaf node (same op, same inputs).
                        let comp: Vec<NodeId> = nodes
                            .iter()
                            .copied()
                            .filter(|&i| !g.nodes[i.0].op.is_leaf())
                            .collect();
                        if comp.is_empty() {
                            continue;
                        }
                        let src = g.nodes[rng.pick(&comp).0].clone();
                        add(&mut g, src.op, &src.inputs)
                    }
                }
            }
            8 => {
                let d = dims(&g, a);
                let n: usize = d.iter().product();
                // Flatten, drop or add leading 1s, or restore the base shape.
                let to: Vec<i64> = match rng.below(3) {
                    0 => vec![n as i64],
                    1 if base.iter().product::<usize>() == n => {
                        base.iter().map(|&x| x as i64).collect()
                    }
                    _ => std::iter::once(1)
                        .chain(d.iter().map(|&x| x as i64))
                        .collect(),
                };
                let r = view(&mut g, Op::Reshape { shape: to }, a);
                if o.redundancy && rng.chance(0.3) {
                    let shape = d.iter().map(|&x| x as i64).collect();
                    view(&mut g, Op::Reshape { shape }, r)
                } else {
                    r
                }
            }
            9 | 10 => {
                let d = dims(&g, a);
                if d.is_empty() {
                    continue;
                }
                let axis = rng.below(d.len());
                let len = 1 + rng.below(d[axis]);
                let start = rng.below(d[axis] - len + 1);
                let ax = if rng.chance(0.5) {
                    axis as i64
                } else {
                    axis as i64 - d.len() as i64
                };
                let op = Op::Narrow {
                    axis: ax,
                    start,
                    len,
                };
                view(&mut g, op, a)
            }
            11 => {
                let d = dims(&g, a);
                let mut perm: Vec<usize> = (0..d.len()).collect();
                for k in (1..perm.len()).rev() {
                    let j = rng.below(k + 1);
                    perm.swap(k, j);
                }
                let t = view(&mut g, Op::Transpose { perm: perm.clone() }, a);
                if o.redundancy && rng.chance(0.4) {
                    let mut inv = vec![0; perm.len()];
                    for (i, &p) in perm.iter().enumerate() {
                        inv[p] = i;
                    }
                    view(&mut g, Op::Transpose { perm: inv }, t)
                } else {
                    t
                }
            }
            12 => {
                let d = dims(&g, a);
                let k = *d.last().unwrap_or(&1);
                if d.is_empty() {
                    continue;
                }
                let w = constant(&mut g, rng, &[k, k], dt, None);
                add(&mut g, Op::MatMul, &[a, w])
            }
            13 => {
                let d = dims(&g, a);
                if d.is_empty() {
                    continue;
                }
                let axis =
                    rng.below(d.len()) as i64 - if rng.chance(0.5) { d.len() as i64 } else { 0 };
                add(&mut g, Op::Softmax { axis }, &[a])
            }
            14 => {
                let d = dims(&g, a);
                if d.is_empty() {
                    continue;
                }
                let k = d[d.len() - 1];
                let gamma = constant(&mut g, rng, &[k], dt, None);
                let beta = constant(&mut g, rng, &[k], dt, None);
                let op = Op::LayerNorm {
                    axis: -1,
                    eps: 1e-5,
                };
                add(&mut g, op, &[a, gamma, beta])
            }
            15 => {
                // Packed [B, S, H*D] attention over nodes of a's shape.
                let d = dims(&g, a);
                if d.len() != 3 {
                    continue;
                }
                let e = d[2];
                let divisors: Vec<usize> = (1..=e).filter(|h| e.is_multiple_of(*h)).collect();
                let h = rng.pick(&divisors);
                let same: Vec<NodeId> = g
                    .nodes
                    .iter()
                    .filter(|n| n.shape == g.nodes[a.0].shape)
                    .map(|n| n.id)
                    .collect();
                let (k, v) = (rng.pick(&same), rng.pick(&same));
                let mut spec = AttentionSpec::new(h, e / h);
                if rng.chance(0.5) {
                    spec = spec.causal();
                }
                add(&mut g, Op::Attention(spec), &[a, k, v])
            }
            _ => continue,
        };
        made += 1;
    }
    let last = NodeId(g.nodes.len() - 1);
    let comp: Vec<NodeId> = g
        .nodes
        .iter()
        .filter(|n| !n.op.is_leaf())
        .map(|n| n.id)
        .collect();
    let mut outs = vec![last];
    for _ in 0..rng.below(3) {
        outs.push(rng.pick(&comp));
    }
    g.set_outputs(outs);
    g
}

/// A transformer-like stack: pre-norm attention + MLP blocks over `[B, S, D]`.
#[derive(Clone, Copy, Debug)]
pub struct Tf {
    pub layers: usize,
    pub batch: usize,
    pub seq: usize,
    pub dim: usize,
    pub heads: usize,
    pub ff: usize,
    /// Add what importers typically leave behind: reshape chains, identity casts and
    /// transposes, `·1` scales, a constant scale computed from two constants, a layer norm
    /// computed twice.
    pub redundant: bool,
}

pub fn transformer(t: Tf) -> Graph {
    let (b, s, d, h) = (t.batch, t.seq, t.dim, t.heads);
    let hd = d / h;
    let mut g = Graph::new("transformer");
    let dt = DType::F32;
    let mut x = g.input("x", Shape::new(&[b, s, d], dt)).unwrap();
    let i64s = |v: &[usize]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    for l in 0..t.layers {
        let mut p = |name: &str, dims: &[usize]| {
            g.param(format!("l{l}.{name}"), Shape::new(dims, dt))
                .unwrap()
        };
        let (g1, b1, g2, b2) = (
            p("ln1.g", &[d]),
            p("ln1.b", &[d]),
            p("ln2.g", &[d]),
            p("ln2.b", &[d]),
        );
        let (wq, bq, wk, bk) = (
            p("wq", &[d, d]),
            p("bq", &[d]),
            p("wk", &[d, d]),
            p("bk", &[d]),
        );
        let (wv, bv, wo, bo) = (
            p("wv", &[d, d]),
            p("bv", &[d]),
            p("wo", &[d, d]),
            p("bo", &[d]),
        );
        let (w1, c1, w2, c2) = (
            p("w1", &[d, t.ff]),
            p("b1", &[t.ff]),
            p("w2", &[t.ff, d]),
            p("b2", &[d]),
        );
        if t.redundant {
            x = add(&mut g, Op::Cast { to: dt }, &[x]);
        }
        let ln = Op::LayerNorm {
            axis: -1,
            eps: 1e-5,
        };
        let hn = add(&mut g, ln.clone(), &[x, g1, b1]);
        let hn2 = if t.redundant {
            add(&mut g, ln.clone(), &[x, g1, b1])
        } else {
            hn
        };
        let proj = |g: &mut Graph, inp: NodeId, w: NodeId, bias: NodeId| {
            let m = add(g, Op::MatMul, &[inp, w]);
            add(g, Op::Binary(BinaryOp::Add), &[m, bias])
        };
        let q = proj(&mut g, hn, wq, bq);
        let k = proj(&mut g, hn2, wk, bk);
        let v = proj(&mut g, hn2, wv, bv);
        let heads = |g: &mut Graph, y: NodeId, perm: &[usize]| {
            let y = if t.redundant {
                add(
                    g,
                    Op::Reshape {
                        shape: i64s(&[b * s, d]),
                    },
                    &[y],
                )
            } else {
                y
            };
            let y = add(
                g,
                Op::Reshape {
                    shape: i64s(&[b, s, h, hd]),
                },
                &[y],
            );
            add(
                g,
                Op::Transpose {
                    perm: perm.to_vec(),
                },
                &[y],
            )
        };
        let qh = heads(&mut g, q, &[0, 2, 1, 3]);
        let kt = heads(&mut g, k, &[0, 2, 3, 1]);
        let vh = heads(&mut g, v, &[0, 2, 1, 3]);
        let scores = add(&mut g, Op::MatMul, &[qh, kt]);
        let scale = if t.redundant {
            let a = g.scalar(1.0 / (hd as f64).sqrt().sqrt(), dt).unwrap();
            let c = g.scalar(1.0 / (hd as f64).sqrt().sqrt(), dt).unwrap();
            add(&mut g, Op::Binary(BinaryOp::Mul), &[a, c])
        } else {
            g.scalar(1.0 / (hd as f64).sqrt(), dt).unwrap()
        };
        let scaled = add(&mut g, Op::Binary(BinaryOp::Mul), &[scores, scale]);
        let probs = add(&mut g, Op::Softmax { axis: -1 }, &[scaled]);
        let ctx = add(&mut g, Op::MatMul, &[probs, vh]);
        let mut ctx = add(
            &mut g,
            Op::Transpose {
                perm: vec![0, 2, 1, 3],
            },
            &[ctx],
        );
        if t.redundant {
            ctx = add(
                &mut g,
                Op::Transpose {
                    perm: vec![0, 1, 2, 3],
                },
                &[ctx],
            );
        }
        let ctx = add(
            &mut g,
            Op::Reshape {
                shape: i64s(&[b, s, d]),
            },
            &[ctx],
        );
        let mut o = proj(&mut g, ctx, wo, bo);
        if t.redundant {
            let one = g.scalar(1.0, dt).unwrap();
            o = add(&mut g, Op::Binary(BinaryOp::Mul), &[o, one]);
        }
        x = add(&mut g, Op::Binary(BinaryOp::Add), &[x, o]);
        let hn = add(&mut g, ln, &[x, g2, b2]);
        let f = proj(&mut g, hn, w1, c1);
        let f = add(&mut g, Op::Activation(Activation::Silu), &[f]);
        let f = proj(&mut g, f, w2, c2);
        x = add(&mut g, Op::Binary(BinaryOp::Add), &[x, f]);
    }
    g.set_outputs(vec![x]);
    g
}

/// A graph built from the patterns fusion looks for, over `[B, S, D]` values: matmul + bias
/// [+ activation], residual add [+ bias] + layer / RMS norm, SwiGLU halves (silu or
/// `x·sigmoid(x)`), elementwise chains with broadcast operands, a nearest-2× resize feeding
/// elementwise ops, and per-sample preprocessing concatenated on axis 0. Each instance
/// sometimes exposes an intermediate as an extra output, which must block its fusion.
pub fn fusion_graph(rng: &mut Rng) -> Graph {
    // No f16: chains of squares and exps overflow it, and inf - inf compares as NaN.
    let dt = rng.pick(&[DType::F32, DType::F32, DType::F64]);
    let (b, s, d) = (1 + rng.below(3), 1 + rng.below(5), 2 * (1 + rng.below(4)));
    let mut g = Graph::new("fusion");
    let x = g.input("x", Shape::new(&[b, s, d], dt)).unwrap();
    let mut pool = vec![x];
    let mut extra = Vec::new();
    let mut params = 0;
    let mut param = |g: &mut Graph, dims: &[usize]| {
        params += 1;
        g.param(format!("p{params}"), Shape::new(dims, dt)).unwrap()
    };
    let row = |rng: &mut Rng, d: usize| -> Vec<usize> {
        match rng.below(3) {
            0 => vec![d],
            1 => vec![1, d],
            _ => vec![1, 1, d],
        }
    };
    for _ in 0..2 + rng.below(6) {
        let a = rng.pick(&pool);
        let leak = rng.chance(0.2);
        let y = match rng.below(6) {
            0 => {
                let w = param(&mut g, &[d, d]);
                let bd = row(rng, d);
                let bias = param(&mut g, &bd);
                let m = add(&mut g, Op::MatMul, &[a, w]);
                let sum = if rng.chance(0.5) {
                    add(&mut g, Op::Binary(BinaryOp::Add), &[m, bias])
                } else {
                    add(&mut g, Op::Binary(BinaryOp::Add), &[bias, m])
                };
                if leak {
                    extra.push(if rng.chance(0.5) { m } else { sum });
                }
                if rng.chance(0.7) {
                    activation(&mut g, rng, sum)
                } else {
                    sum
                }
            }
            1 => {
                let r = rng.pick(&pool);
                let mut sum = add(&mut g, Op::Binary(BinaryOp::Add), &[a, r]);
                if rng.chance(0.5) {
                    let bd = row(rng, d);
                    let bias = param(&mut g, &bd);
                    sum = add(&mut g, Op::Binary(BinaryOp::Add), &[sum, bias]);
                }
                if leak {
                    extra.push(sum);
                }
                let gamma = param(&mut g, &[d]);
                let mut ins = vec![sum, gamma];
                if rng.chance(0.5) {
                    ins.push(param(&mut g, &[d]));
                }
                let axis = if rng.chance(0.5) { -1 } else { 2 };
                let op = if rng.chance(0.5) {
                    Op::LayerNorm { axis, eps: 1e-5 }
                } else {
                    Op::RmsNorm { axis, eps: 1e-6 }
                };
                add(&mut g, op, &ins)
            }
            2 => {
                let w = param(&mut g, &[d, 2 * d]);
                let h = add(&mut g, Op::MatMul, &[a, w]);
                let gate_first = rng.chance(0.5);
                let (gs, us) = if gate_first { (0, d) } else { (d, 0) };
                let mut narrow = |start| Op::Narrow {
                    axis: if rng.chance(0.5) { -1 } else { 2 },
                    start,
                    len: d,
                };
                let (na, nb) = (narrow(gs), narrow(us));
                let gate = add(&mut g, na, &[h]);
                let up = add(&mut g, nb, &[h]);
                let silu = if rng.chance(0.5) {
                    add(&mut g, Op::Activation(Activation::Silu), &[gate])
                } else {
                    let sg = add(&mut g, Op::Activation(Activation::Sigmoid), &[gate]);
                    add(&mut g, Op::Binary(BinaryOp::Mul), &[gate, sg])
                };
                if leak {
                    extra.push(if rng.chance(0.5) { gate } else { silu });
                }
                if rng.chance(0.5) {
                    add(&mut g, Op::Binary(BinaryOp::Mul), &[silu, up])
                } else {
                    add(&mut g, Op::Binary(BinaryOp::Mul), &[up, silu])
                }
            }
            3 => {
                let mut y = a;
                for _ in 0..2 + rng.below(4) {
                    y = if rng.chance(0.4) {
                        activation(&mut g, rng, y)
                    } else {
                        let other = if rng.chance(0.5) {
                            rng.pick(&pool)
                        } else {
                            let rd = row(rng, d);
                            param(&mut g, &rd)
                        };
                        add(&mut g, Op::Binary(rng.pick(&BINS)), &[y, other])
                    };
                    if leak && rng.chance(0.3) {
                        extra.push(y);
                    }
                }
                y
            }
            4 => {
                // NCHW view of a, resized, then elementwise with a per-channel scale.
                let v = add(
                    &mut g,
                    Op::Reshape {
                        shape: vec![b as i64, 1, s as i64, d as i64],
                    },
                    &[a],
                );
                let r = add(&mut g, Op::ResizeNearest2x, &[v]);
                let sc = param(&mut g, &[1, 1, 1, 2 * d]);
                let m = add(&mut g, Op::Binary(BinaryOp::Mul), &[sc, r]);
                let m = activation(&mut g, rng, m);
                if leak {
                    extra.push(r);
                }
                extra.push(m);
                continue;
            }
            _ => {
                if b < 2 {
                    continue;
                }
                let (mean, std) = (param(&mut g, &[d]), param(&mut g, &[1, 1, d]));
                let parts: Vec<NodeId> = (0..b)
                    .map(|i| {
                        let op = Op::Narrow {
                            axis: 0,
                            start: i,
                            len: 1,
                        };
                        let xi = add(&mut g, op, &[a]);
                        let c = add(&mut g, Op::Binary(BinaryOp::Sub), &[xi, mean]);
                        add(&mut g, Op::Binary(BinaryOp::Mul), &[c, std])
                    })
                    .collect();
                if leak {
                    extra.push(parts[0]);
                }
                add(&mut g, Op::Concat { axis: 0 }, &parts)
            }
        };
        pool.push(y);
    }
    let mut outs = vec![*pool.last().unwrap()];
    outs.extend(extra);
    g.set_outputs(outs);
    g
}
