//! Builders that expand ONNX ops with no IR op of their own into core ops when the graph is
//! built: DepthToSpace / SpaceToDepth (Reshape + Transpose), InstanceNormalization and
//! GroupNormalization (LayerNorm over a reshaped view, then a per-channel scale and bias)
//! and Einsum (Reduce, Transpose, Reshape and one batched MatMul). Each costs no kernel,
//! autodiff rule or lowering: those of the core ops serve, and fusion re-forms what it can.
//! They need static dims; a size that does not fit is an [`IrError::Tensor`] naming the
//! builder.
use crate::{DType, Graph, HostTensor, IrError, NodeId, ReduceOp};

fn err(what: &str, msg: impl std::fmt::Display) -> IrError {
    IrError::Tensor(format!("{what}: {msg}"))
}

impl Graph {
    /// Static dims of `x`, or an error naming the builder.
    fn dims_for(&self, what: &str, x: NodeId) -> Result<Vec<usize>, IrError> {
        let s = self.shape(x)?;
        s.static_dims()
            .ok_or_else(|| err(what, format!("needs static dims, got {s}")))
    }

    /// ONNX DepthToSpace of `[N, C, H, W]` with `blocksize` b: DCR mode (`crd = false`)
    /// reads the channel as `[b, b, C/b²]`, CRD as `[C/b², b, b]`.
    pub fn depth_to_space(&mut self, x: NodeId, b: usize, crd: bool) -> Result<NodeId, IrError> {
        let what = "DepthToSpace";
        let d = self.dims_for(what, x)?;
        let [n, c, h, w] = d[..] else {
            return Err(err(what, format!("needs [N, C, H, W], got {d:?}")));
        };
        if b == 0 || c % (b * b) != 0 {
            return Err(err(
                what,
                format!("C = {c} is not a multiple of blocksize² ({b}²)"),
            ));
        }
        let cb = c / (b * b);
        let (split, perm): (Vec<usize>, [usize; 6]) = if crd {
            (vec![n, cb, b, b, h, w], [0, 1, 4, 2, 5, 3])
        } else {
            (vec![n, b, b, cb, h, w], [0, 3, 4, 1, 5, 2])
        };
        let v = self.reshape(x, &split)?;
        let t = self.transpose(v, &perm)?;
        self.reshape(t, &[n, cb, h * b, w * b])
    }

    /// ONNX SpaceToDepth of `[N, C, H, W]`: blocks of b × b move into the channel.
    pub fn space_to_depth(&mut self, x: NodeId, b: usize) -> Result<NodeId, IrError> {
        let what = "SpaceToDepth";
        let d = self.dims_for(what, x)?;
        let [n, c, h, w] = d[..] else {
            return Err(err(what, format!("needs [N, C, H, W], got {d:?}")));
        };
        if b == 0 || h % b != 0 || w % b != 0 {
            return Err(err(
                what,
                format!("H, W = {h}, {w} are not multiples of blocksize {b}"),
            ));
        }
        let v = self.reshape(x, &[n, c, h / b, b, w / b, b])?;
        let t = self.transpose(v, &[0, 3, 5, 1, 2, 4])?;
        self.reshape(t, &[n, c * b * b, h / b, w / b])
    }

    /// `y · scale[c] + bias[c]` over dim 1 of `y` (scale, bias `[C]`).
    fn per_channel(
        &mut self,
        y: NodeId,
        scale: NodeId,
        bias: NodeId,
        rank: usize,
    ) -> Result<NodeId, IrError> {
        let c = self.dims_for("per-channel affine", scale)?;
        let mut view = vec![c.iter().product::<usize>()];
        view.extend(std::iter::repeat_n(1, rank.saturating_sub(2)));
        let s = self.reshape(scale, &view)?;
        let b = self.reshape(bias, &view)?;
        let y = self.mul(y, s)?;
        self.add(y, b)
    }

    /// LayerNorm of `x` over the dims from `axis` on, with unit gamma and no beta.
    fn plain_norm(&mut self, x: NodeId, axis: usize, eps: f32) -> Result<NodeId, IrError> {
        let d = self.dims_for("norm", x)?;
        let dt: DType = self.shape(x)?.dtype;
        let tail = &d[axis..];
        let ones = vec![1.0; tail.iter().product()];
        let gamma = self.constant(HostTensor::from_f64_as(tail, &ones, dt))?;
        self.layer_norm(x, gamma, None, axis as i64, eps)
    }

    /// ONNX InstanceNormalization: x `[N, C, ..]` normalised over its spatial dims per
    /// (n, c), then `scale[c]`, `bias[c]`.
    pub fn instance_norm(
        &mut self,
        x: NodeId,
        scale: NodeId,
        bias: NodeId,
        eps: f32,
    ) -> Result<NodeId, IrError> {
        let d = self.dims_for("InstanceNormalization", x)?;
        if d.len() < 3 {
            return Err(err(
                "InstanceNormalization",
                format!("needs [N, C, D..], got {d:?}"),
            ));
        }
        let y = self.plain_norm(x, 2, eps)?;
        self.per_channel(y, scale, bias, d.len())
    }

    /// ONNX GroupNormalization (opset 21: `scale`, `bias` per channel `[C]`): the channels
    /// of x `[N, C, ..]` split into `groups`, each normalised over its channels and
    /// spatial dims.
    pub fn group_norm(
        &mut self,
        x: NodeId,
        scale: NodeId,
        bias: NodeId,
        groups: usize,
        eps: f32,
    ) -> Result<NodeId, IrError> {
        let what = "GroupNormalization";
        let d = self.dims_for(what, x)?;
        if d.len() < 2 || groups == 0 || d[1] % groups != 0 {
            return Err(err(
                what,
                format!("{groups} groups do not divide the channels of {d:?}"),
            ));
        }
        let per: usize = d[1..].iter().product::<usize>() / groups;
        let v = self.reshape(x, &[d[0], groups, per])?;
        let y = self.plain_norm(v, 2, eps)?;
        let y = self.reshape(y, &d)?;
        self.per_channel(y, scale, bias, d.len())
    }

    /// ONNX Einsum of one or two operands, explicit (`"bij,bjk->bik"`) or implicit
    /// (`"ij,jk"`: the labels seen once, in alphabetical order). Labels summed away in one
    /// operand alone are reduced first; the rest becomes one batched MatMul of
    /// `[batch, kept of a, contracted] × [batch, contracted, kept of b]`. A label repeated
    /// in one operand (a diagonal), an ellipsis, or operands that disagree on a label's size
    /// are errors.
    pub fn einsum(&mut self, equation: &str, xs: &[NodeId]) -> Result<NodeId, IrError> {
        let what = "Einsum";
        let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
        if eq.contains('.') {
            return Err(err(
                what,
                format!("\"{equation}\": an ellipsis is not supported"),
            ));
        }
        let (lhs, out) = match eq.split_once("->") {
            Some((l, r)) => (l.to_string(), Some(r.to_string())),
            None => (eq.clone(), None),
        };
        let terms: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
        if terms.len() != xs.len() || !(1..=2).contains(&xs.len()) {
            return Err(err(
                what,
                format!("\"{equation}\" with {} operands (1 or 2 handled)", xs.len()),
            ));
        }
        let mut size = std::collections::BTreeMap::new();
        for (t, &x) in terms.iter().zip(xs) {
            let d = self.dims_for(what, x)?;
            if d.len() != t.len() {
                return Err(err(
                    what,
                    format!(
                        "term {} does not fit dims {d:?}",
                        t.iter().collect::<String>()
                    ),
                ));
            }
            for (k, (&l, &n)) in t.iter().zip(&d).enumerate() {
                if !l.is_ascii_alphabetic() || t[..k].contains(&l) {
                    return Err(err(
                        what,
                        format!("\"{equation}\": label {l:?} is not one letter used once per term"),
                    ));
                }
                if *size.entry(l).or_insert(n) != n {
                    return Err(err(
                        what,
                        format!("label {l} has sizes {} and {n}", size[&l]),
                    ));
                }
            }
        }
        let out: Vec<char> = match out {
            Some(o) => o.chars().collect(),
            None => {
                let all: Vec<char> = terms.concat();
                size.keys()
                    .copied()
                    .filter(|l| all.iter().filter(|c| *c == l).count() == 1)
                    .collect()
            }
        };
        if let Some(l) = out.iter().find(|l| !size.contains_key(l)) {
            return Err(err(what, format!("output label {l} appears in no operand")));
        }
        let in_out = |l: &char| out.contains(l);
        // Sum each operand over its labels that neither the output nor the other operand has.
        let mut ops: Vec<(NodeId, Vec<char>)> = vec![];
        for (i, (t, &x)) in terms.iter().zip(xs).enumerate() {
            let other: &[char] = if terms.len() == 2 { &terms[1 - i] } else { &[] };
            let lone: Vec<i64> = (0..t.len())
                .filter(|&k| !in_out(&t[k]) && !other.contains(&t[k]))
                .map(|k| k as i64)
                .collect();
            let kept: Vec<char> = t
                .iter()
                .copied()
                .filter(|l| in_out(l) || other.contains(l))
                .collect();
            let x = if lone.is_empty() {
                x
            } else {
                self.add_node(
                    crate::Op::Reduce {
                        op: ReduceOp::Sum,
                        axes: lone,
                        keep_dim: false,
                    },
                    &[x],
                )?
            };
            ops.push((x, kept));
        }
        let (y, labels) = if ops.len() == 1 {
            ops.pop().expect("one operand")
        } else {
            let (b, bl) = ops.pop().expect("two operands");
            let (a, al) = ops.pop().expect("two operands");
            self.einsum_pair(a, &al, b, &bl, &out, &size)?
        };
        // Order the remaining labels as the output asks.
        let perm: Vec<usize> = out
            .iter()
            .map(|l| {
                labels
                    .iter()
                    .position(|m| m == l)
                    .expect("every output label survives")
            })
            .collect();
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            Ok(y)
        } else {
            self.transpose(y, &perm)
        }
    }

    /// `a` (labels `al`) times `b` (labels `bl`) as one batched MatMul; returns the result
    /// and its labels `[batch.., kept of a.., kept of b..]`.
    fn einsum_pair(
        &mut self,
        a: NodeId,
        al: &[char],
        b: NodeId,
        bl: &[char],
        out: &[char],
        size: &std::collections::BTreeMap<char, usize>,
    ) -> Result<(NodeId, Vec<char>), IrError> {
        let batch: Vec<char> = al
            .iter()
            .copied()
            .filter(|l| bl.contains(l) && out.contains(l))
            .collect();
        let con: Vec<char> = al
            .iter()
            .copied()
            .filter(|l| bl.contains(l) && !out.contains(l))
            .collect();
        let ak: Vec<char> = al.iter().copied().filter(|l| !bl.contains(l)).collect();
        let bk: Vec<char> = bl.iter().copied().filter(|l| !al.contains(l)).collect();
        let prod = |ls: &[char]| ls.iter().map(|l| size[l]).product::<usize>();
        let pos = |ls: &[char], want: &[char]| -> Vec<usize> {
            want.iter()
                .map(|l| ls.iter().position(|m| m == l).expect("label present"))
                .collect()
        };
        let a_perm = pos(al, &[batch.clone(), ak.clone(), con.clone()].concat());
        let b_perm = pos(bl, &[batch.clone(), con.clone(), bk.clone()].concat());
        let a = self.transpose(a, &a_perm)?;
        let b = self.transpose(b, &b_perm)?;
        let a = self.reshape(a, &[prod(&batch), prod(&ak), prod(&con)])?;
        let b = self.reshape(b, &[prod(&batch), prod(&con), prod(&bk)])?;
        let m = self.matmul(a, b)?;
        let labels = [batch, ak, bk].concat();
        let dims: Vec<usize> = labels.iter().map(|l| size[l]).collect();
        Ok((self.reshape(m, &dims)?, labels))
    }
}
