//! RNN, GRU and LSTM unrolled over their static sequence length: the input projection of
//! every step is one MatMul, then each step is a MatMul of the hidden state by the
//! recurrence weights plus the gate arithmetic. Forward, reverse and bidirectional;
//! `layout` 0 (`[seq, batch, ..]`) and 1 (`[batch, seq, ..]`); `clip`; LSTM peepholes and
//! `input_forget`; GRU `linear_before_reset`. `sequence_lens` must be absent or all equal
//! to the sequence length (shorter sequences would need per-row masking).
use super::{Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Activation as A, BinaryOp as B, NodeId, Op};

pub(super) fn register(r: &mut Registry) {
    r.insert("RNN", |c, n| rnn(c, n, Cell::Rnn));
    r.insert("GRU", |c, n| rnn(c, n, Cell::Gru));
    r.insert("LSTM", |c, n| rnn(c, n, Cell::Lstm));
}

#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }
    /// The default activations (f, g, h as the spec names them).
    fn defaults(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// One named activation (the set the spec lists that the importer maps).
#[derive(Clone, Copy)]
enum Act {
    Plain(A),
    LeakyRelu(f64),
    HardSigmoid(f64, f64),
    Affine(f64, f64),
    ScaledTanh(f64, f64),
}

fn apply(c: &mut ImportCtx, act: Act, x: NodeId) -> Result<NodeId, OnnxError> {
    let dt = c.dtype(x)?;
    let k = |c: &mut ImportCtx, v: f64| c.scalar(v, dt);
    match act {
        Act::Plain(a) => c.add(Op::Activation(a), &[x]),
        Act::LeakyRelu(al) => {
            let a = k(c, al)?;
            let ax = c.add(Op::Binary(B::Mul), &[x, a])?;
            c.add(Op::Binary(B::Max), &[x, ax])
        }
        Act::HardSigmoid(al, be) => {
            let (a, b, z, o) = (k(c, al)?, k(c, be)?, k(c, 0.0)?, k(c, 1.0)?);
            let y = c.add(Op::Binary(B::Mul), &[x, a])?;
            let y = c.add(Op::Binary(B::Add), &[y, b])?;
            let y = c.add(Op::Binary(B::Min), &[y, o])?;
            c.add(Op::Binary(B::Max), &[y, z])
        }
        Act::Affine(al, be) => {
            let (a, b) = (k(c, al)?, k(c, be)?);
            let y = c.add(Op::Binary(B::Mul), &[x, a])?;
            c.add(Op::Binary(B::Add), &[y, b])
        }
        Act::ScaledTanh(al, be) => {
            let (a, b) = (k(c, al)?, k(c, be)?);
            let y = c.add(Op::Binary(B::Mul), &[x, b])?;
            let y = c.add(Op::Activation(A::Tanh), &[y])?;
            c.add(Op::Binary(B::Mul), &[y, a])
        }
    }
}

/// The activations of every direction: `per_dir` names each, `activations` lists them for
/// all directions in order, alpha / beta consumed by the ones that take parameters.
fn activations(
    c: &ImportCtx,
    n: &NodeProto,
    cell: Cell,
    dirs: usize,
) -> Result<Vec<Act>, OnnxError> {
    let a = Attrs(n);
    let per = cell.defaults().len();
    let names: Vec<String> = match a.get("activations") {
        Some(at) if !at.strings.is_empty() => (at.strings.iter())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
        _ => (0..dirs)
            .flat_map(|_| cell.defaults().iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != per * dirs {
        return Err(c.err(format!(
            "{} activations for {dirs} direction(s)",
            names.len()
        )));
    }
    let alphas = a.floats("activation_alpha").unwrap_or(&[]);
    let betas = a.floats("activation_beta").unwrap_or(&[]);
    let (mut ia, mut ib) = (0, 0);
    let take = |v: &[f32], i: &mut usize, d: f64| {
        let r = v.get(*i).map_or(d, |&x| x as f64);
        *i += 1;
        r
    };
    let mut out = vec![];
    for name in &names {
        out.push(match name.to_ascii_lowercase().as_str() {
            "tanh" => Act::Plain(A::Tanh),
            "sigmoid" => Act::Plain(A::Sigmoid),
            "relu" => Act::Plain(A::Relu),
            "softplus" => Act::Plain(A::Softplus),
            "leakyrelu" => Act::LeakyRelu(take(alphas, &mut ia, 0.01)),
            "hardsigmoid" => {
                let al = take(alphas, &mut ia, 0.2);
                Act::HardSigmoid(al, take(betas, &mut ib, 0.5))
            }
            "affine" => {
                let al = take(alphas, &mut ia, 1.0);
                Act::Affine(al, take(betas, &mut ib, 0.0))
            }
            "scaledtanh" => {
                let al = take(alphas, &mut ia, 1.0);
                Act::ScaledTanh(al, take(betas, &mut ib, 1.0))
            }
            o => return Err(c.unsupported(format!("activation \"{o}\""))),
        });
    }
    Ok(out)
}

/// `x[d]` of a `[dirs, ..]` tensor, the leading axis dropped.
fn pick(c: &mut ImportCtx, x: NodeId, d: usize) -> Result<NodeId, OnnxError> {
    let mut dims: Vec<i64> = c.static_dims(x)?.iter().map(|&v| v as i64).collect();
    let op = Op::Narrow {
        axis: 0,
        start: d,
        len: 1,
    };
    let s = c.add(op, &[x])?;
    dims.remove(0);
    c.add(Op::Reshape { shape: dims }, &[s])
}

fn narrow(
    c: &mut ImportCtx,
    x: NodeId,
    axis: i64,
    start: usize,
    len: usize,
) -> Result<NodeId, OnnxError> {
    c.add(Op::Narrow { axis, start, len }, &[x])
}

/// The most time steps an RNN, GRU or LSTM is unrolled into at import.
const MAX_STEPS: usize = 1 << 14;

fn reshape(c: &mut ImportCtx, x: NodeId, dims: &[usize]) -> Result<NodeId, OnnxError> {
    let shape = dims.iter().map(|&v| v as i64).collect();
    c.add(Op::Reshape { shape }, &[x])
}

fn bin(c: &mut ImportCtx, op: B, a: NodeId, b: NodeId) -> Result<NodeId, OnnxError> {
    c.add(Op::Binary(op), &[a, b])
}

fn rnn(c: &mut ImportCtx, n: &NodeProto, cell: Cell) -> Translated {
    let a = Attrs(n);
    let layout = a.i_or("layout", 0);
    let mut x = c.input(n, 0)?;
    if layout != 0 {
        x = c.add(
            Op::Transpose {
                perm: vec![1, 0, 2],
            },
            &[x],
        )?;
    }
    let xd = c.static_dims(x)?;
    let [s_len, batch, input] = xd[..] else {
        return Err(c.err(format!("X must be 3-D, got {xd:?}")));
    };
    // The recurrence is unrolled into a dozen nodes a step: a declared sequence length is
    // a claim a tiny file can make about billions of nodes.
    if s_len > MAX_STEPS {
        return Err(c.unsupported(format!(
            "a sequence of {s_len} steps (more than {MAX_STEPS} unrolled at import)"
        )));
    }
    let (w, r) = (c.input(n, 1)?, c.input(n, 2)?);
    let wd = c.static_dims(w)?;
    let g = cell.gates();
    let hid = match a.i("hidden_size") {
        Some(h) => usize::try_from(h).map_err(|_| c.err("hidden_size < 0"))?,
        None => wd.get(1).copied().unwrap_or(0) / g,
    };
    let dirs = match a.s("direction").as_deref() {
        None | Some("forward") | Some("reverse") => 1,
        Some("bidirectional") => 2,
        Some(o) => return Err(c.err(format!("direction \"{o}\""))),
    };
    let reverse = a.s("direction").as_deref() == Some("reverse");
    let gh = g
        .checked_mul(hid)
        .ok_or_else(|| c.err(format!("hidden_size {hid} overflows")))?;
    if wd != [dirs, gh, input] {
        return Err(c.err(format!("W {wd:?} must be [{dirs}, {gh}, {input}]")));
    }
    if let Some(sl) = c.const_ints(n, 4)? {
        if sl.iter().any(|&v| v != s_len as i64) {
            return Err(c.unsupported("sequence_lens other than the full length"));
        }
    }
    let acts = activations(c, n, cell, dirs)?;
    let per = cell.defaults().len();
    let clip = a.f("clip").map(|v| v as f64);
    let input_forget = a.i_or("input_forget", 0) != 0;
    let lbr = a.i_or("linear_before_reset", 0) != 0;
    let dt = c.dtype(x)?;
    let bias = c.opt_input(n, 3)?;
    let mut init_h = c.opt_input(n, 5)?;
    let mut init_c = if cell == Cell::Lstm {
        c.opt_input(n, 6)?
    } else {
        None
    };
    let peep = if cell == Cell::Lstm {
        c.opt_input(n, 7)?
    } else {
        None
    };
    if layout != 0 {
        for v in [&mut init_h, &mut init_c].into_iter().flatten() {
            *v = c.add(
                Op::Transpose {
                    perm: vec![1, 0, 2],
                },
                &[*v],
            )?;
        }
    }
    c.limit("a zero state", batch.saturating_mul(hid))?;
    let rows = s_len
        .checked_mul(batch)
        .ok_or_else(|| c.err(format!("X {xd:?} overflows")))?;
    let x2 = reshape(c, x, &[rows, input])?;
    let zero_h = c.constant(rlx_ir::HostTensor::from_f64_as(
        &[batch, hid],
        &vec![0.0; batch * hid],
        dt,
    ))?;
    let (mut ys, mut hs, mut cs) = (vec![], vec![], vec![]);
    for d in 0..dirs {
        let act = |i: usize| acts[d * per + i];
        let clipped = |c: &mut ImportCtx, v: NodeId| -> Result<NodeId, OnnxError> {
            match clip {
                Some(cl) => {
                    let (lo, hi) = (c.scalar(-cl, dt)?, c.scalar(cl, dt)?);
                    let v = bin(c, B::Max, v, lo)?;
                    bin(c, B::Min, v, hi)
                }
                None => Ok(v),
            }
        };
        let wt = pick(c, w, d)?;
        let wt = c.add(Op::Transpose { perm: vec![1, 0] }, &[wt])?;
        // Every step's input projection at once: [S·B, G·H] → [S, B, G·H].
        let mut xw = c.add(Op::MatMul, &[x2, wt])?;
        let rd = pick(c, r, d)?;
        let mut rb = None;
        if let Some(b) = bias {
            let bd = pick(c, b, d)?;
            let wbias = narrow(c, bd, 0, 0, g * hid)?;
            let rbias = narrow(c, bd, 0, g * hid, g * hid)?;
            if cell == Cell::Gru && lbr {
                // Rb of the candidate gate stays inside the reset product.
                xw = bin(c, B::Add, xw, wbias)?;
                rb = Some(rbias);
            } else {
                let both = bin(c, B::Add, wbias, rbias)?;
                xw = bin(c, B::Add, xw, both)?;
            }
        }
        let xw = reshape(c, xw, &[s_len, batch, g * hid])?;
        // Per-gate recurrence matrices, transposed: [H, H].
        let mut rg = vec![];
        for k in 0..g {
            let m = narrow(c, rd, 0, k * hid, hid)?;
            rg.push(c.add(Op::Transpose { perm: vec![1, 0] }, &[m])?);
        }
        let rbg: Vec<Option<NodeId>> = match rb {
            Some(rb) => (0..g)
                .map(|k| narrow(c, rb, 0, k * hid, hid).map(Some))
                .collect::<Result<_, _>>()?,
            None => vec![None; g],
        };
        let pg: Vec<NodeId> = match peep {
            Some(p) => {
                let pd = pick(c, p, d)?;
                (0..3)
                    .map(|k| narrow(c, pd, 0, k * hid, hid))
                    .collect::<Result<_, _>>()?
            }
            None => vec![],
        };
        let mut h = match init_h {
            Some(ih) => pick(c, ih, d)?,
            None => zero_h,
        };
        let mut cst = match init_c {
            Some(ic) => pick(c, ic, d)?,
            None => zero_h,
        };
        let back = reverse || d == 1;
        let mut outs = vec![NodeId(0); s_len];
        for step in 0..s_len {
            let t = if back { s_len - 1 - step } else { step };
            let xt = narrow(c, xw, 0, t, 1)?;
            let xt = reshape(c, xt, &[batch, g * hid])?;
            let xg: Vec<NodeId> = (0..g)
                .map(|k| narrow(c, xt, 1, k * hid, hid))
                .collect::<Result<_, _>>()?;
            let hr = |c: &mut ImportCtx, k: usize, hh: NodeId| c.add(Op::MatMul, &[hh, rg[k]]);
            match cell {
                Cell::Rnn => {
                    let p = hr(c, 0, h)?;
                    let p = bin(c, B::Add, xg[0], p)?;
                    let p = clipped(c, p)?;
                    h = apply(c, act(0), p)?;
                }
                Cell::Gru => {
                    let gate = |c: &mut ImportCtx, k: usize| -> Result<NodeId, OnnxError> {
                        let p = hr(c, k, h)?;
                        let p = bin(c, B::Add, xg[k], p)?;
                        let p = match rbg[k] {
                            Some(b) => bin(c, B::Add, p, b)?,
                            None => p,
                        };
                        let p = clipped(c, p)?;
                        apply(c, act(0), p)
                    };
                    let z = gate(c, 0)?;
                    let rr = gate(c, 1)?;
                    let cand = if lbr {
                        let p = hr(c, 2, h)?;
                        let p = match rbg[2] {
                            Some(b) => bin(c, B::Add, p, b)?,
                            None => p,
                        };
                        bin(c, B::Mul, rr, p)?
                    } else {
                        let rh = bin(c, B::Mul, rr, h)?;
                        hr(c, 2, rh)?
                    };
                    let p = bin(c, B::Add, xg[2], cand)?;
                    let p = clipped(c, p)?;
                    let hh = apply(c, act(1), p)?;
                    // H = (1 − z)·h̃ + z·H = h̃ + z·(H − h̃)
                    let dlt = bin(c, B::Sub, h, hh)?;
                    let zd = bin(c, B::Mul, z, dlt)?;
                    h = bin(c, B::Add, hh, zd)?;
                }
                Cell::Lstm => {
                    // Gate order in W / R / B: i, o, f, c; peepholes i, o, f.
                    let pre = |c: &mut ImportCtx, k: usize| -> Result<NodeId, OnnxError> {
                        let p = hr(c, k, h)?;
                        bin(c, B::Add, xg[k], p)
                    };
                    let peep_of = |c: &mut ImportCtx,
                                   v: NodeId,
                                   k: usize,
                                   cc: NodeId|
                     -> Result<NodeId, OnnxError> {
                        match pg.get(k) {
                            Some(&p) => {
                                let m = bin(c, B::Mul, p, cc)?;
                                bin(c, B::Add, v, m)
                            }
                            None => Ok(v),
                        }
                    };
                    let ip = pre(c, 0)?;
                    let ip = peep_of(c, ip, 0, cst)?;
                    let ip = clipped(c, ip)?;
                    let i = apply(c, act(0), ip)?;
                    let f = if input_forget {
                        let one_ = c.scalar(1.0, dt)?;
                        bin(c, B::Sub, one_, i)?
                    } else {
                        let fp = pre(c, 2)?;
                        let fp = peep_of(c, fp, 2, cst)?;
                        let fp = clipped(c, fp)?;
                        apply(c, act(0), fp)?
                    };
                    let cp = pre(c, 3)?;
                    let cp = clipped(c, cp)?;
                    let cand = apply(c, act(1), cp)?;
                    let fc = bin(c, B::Mul, f, cst)?;
                    let ic = bin(c, B::Mul, i, cand)?;
                    cst = bin(c, B::Add, fc, ic)?;
                    let op_ = pre(c, 1)?;
                    let op_ = peep_of(c, op_, 1, cst)?;
                    let op_ = clipped(c, op_)?;
                    let o = apply(c, act(0), op_)?;
                    let hc = apply(c, act(2), cst)?;
                    h = bin(c, B::Mul, o, hc)?;
                }
            }
            outs[t] = reshape(c, h, &[1, 1, batch, hid])?;
        }
        let y = if s_len == 1 {
            outs[0]
        } else {
            c.add(Op::Concat { axis: 0 }, &outs)?
        };
        ys.push(y);
        hs.push(reshape(c, h, &[1, batch, hid])?);
        cs.push(reshape(c, cst, &[1, batch, hid])?);
    }
    let cat = |c: &mut ImportCtx, v: Vec<NodeId>, axis: i64| -> Result<NodeId, OnnxError> {
        if v.len() == 1 {
            Ok(v[0])
        } else {
            c.add(Op::Concat { axis }, &v)
        }
    };
    let mut y = cat(c, ys, 1)?;
    let mut yh = cat(c, hs, 0)?;
    let mut yc = cat(c, cs, 0)?;
    if layout != 0 {
        y = c.add(
            Op::Transpose {
                perm: vec![2, 0, 1, 3],
            },
            &[y],
        )?;
        yh = c.add(
            Op::Transpose {
                perm: vec![1, 0, 2],
            },
            &[yh],
        )?;
        yc = c.add(
            Op::Transpose {
                perm: vec![1, 0, 2],
            },
            &[yc],
        )?;
    }
    let mut outs = vec![y, yh];
    if cell == Cell::Lstm {
        outs.push(yc);
    }
    Ok(Some(outs))
}
