//! Optimizer updates as ordinary graph ops, so forward, backward and update form ONE graph.
//!
//! [`train_step`]`(&forward, params, &optimizer)` differentiates output 0 (a 1-element loss)
//! with respect to the named params and appends the update. The result's outputs are
//! `[loss, new_param…, new_state…]`, in the order of [`TrainStep::params`] and
//! [`TrainStep::state`]. Optimizer state (momentum, Adam's m and v, the step counter) are
//! extra params of the graph that the trainer initialises to zero; hyperparameters are 0-d
//! graph inputs ([`TrainStep::hyper`]), so a schedule can change them without recompiling.
//! [`TrainStep::updates`] says which output replaces which param after each run.
//!
//! Formulas (PyTorch's, dampening 0, no Nesterov):
//! - SGD: `g = grad + wd·p; v = μ·v + g; p -= lr·v`
//! - Adam: `m = β1·m + (1-β1)·g; v = β2·v + (1-β2)·g²; t += 1;
//!   p -= lr · (m / (1-β1^t)) / (sqrt(v / (1-β2^t)) + ε)`
//! - AdamW: as Adam with `p ← p·(1 - lr·wd)` first (decoupled weight decay).
use crate::{grad_with_loss, AdError};
use rlx_ir::{Activation, BinaryOp, Graph, NodeId, Op, Shape};

/// Which update rule, with its default hyperparameters (fed as graph inputs each step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Optimizer {
    Sgd {
        lr: f64,
        momentum: f64,
        weight_decay: f64,
    },
    Adam {
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
    },
    AdamW {
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        weight_decay: f64,
    },
}

impl Optimizer {
    /// SGD with momentum 0.9 and no weight decay.
    pub fn sgd(lr: f64) -> Optimizer {
        Optimizer::Sgd {
            lr,
            momentum: 0.9,
            weight_decay: 0.0,
        }
    }
    /// Adam with PyTorch's defaults (β = 0.9, 0.999; ε = 1e-8).
    pub fn adam(lr: f64) -> Optimizer {
        Optimizer::Adam {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
    /// AdamW with PyTorch's defaults (weight decay 0.01).
    pub fn adamw(lr: f64) -> Optimizer {
        Optimizer::AdamW {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Optimizer::Sgd { .. } => "sgd",
            Optimizer::Adam { .. } => "adam",
            Optimizer::AdamW { .. } => "adamw",
        }
    }

    pub fn lr(&self) -> f64 {
        match *self {
            Optimizer::Sgd { lr, .. }
            | Optimizer::Adam { lr, .. }
            | Optimizer::AdamW { lr, .. } => lr,
        }
    }

    /// The same optimizer with another learning rate.
    pub fn with_lr(mut self, new: f64) -> Optimizer {
        match &mut self {
            Optimizer::Sgd { lr, .. }
            | Optimizer::Adam { lr, .. }
            | Optimizer::AdamW { lr, .. } => *lr = new,
        }
        self
    }

    /// `(input name, value)` for every hyperparameter input of its train-step graph.
    pub fn hyper_values(&self) -> Vec<(&'static str, f64)> {
        match *self {
            Optimizer::Sgd {
                lr,
                momentum,
                weight_decay,
            } => vec![
                (HP_LR, lr),
                (HP_MOMENTUM, momentum),
                (HP_WEIGHT_DECAY, weight_decay),
            ],
            Optimizer::Adam {
                lr,
                beta1,
                beta2,
                eps,
            } => vec![
                (HP_LR, lr),
                (HP_BETA1, beta1),
                (HP_BETA2, beta2),
                (HP_EPS, eps),
            ],
            Optimizer::AdamW {
                lr,
                beta1,
                beta2,
                eps,
                weight_decay,
            } => vec![
                (HP_LR, lr),
                (HP_BETA1, beta1),
                (HP_BETA2, beta2),
                (HP_EPS, eps),
                (HP_WEIGHT_DECAY, weight_decay),
            ],
        }
    }
}

pub const HP_LR: &str = "opt.lr";
pub const HP_MOMENTUM: &str = "opt.momentum";
pub const HP_WEIGHT_DECAY: &str = "opt.weight_decay";
pub const HP_BETA1: &str = "opt.beta1";
pub const HP_BETA2: &str = "opt.beta2";
pub const HP_EPS: &str = "opt.eps";
/// The step-counter param of Adam / AdamW (a 0-d float, 0 before the first step).
pub const STEP_PARAM: &str = "opt.step";

/// A whole training step as one graph.
#[derive(Clone, Debug)]
pub struct TrainStep {
    /// Outputs `[loss, new_param…, new_state…]`.
    pub graph: Graph,
    /// The trained params, in output order (output `1 + i` is the new value of `params[i]`).
    pub params: Vec<String>,
    /// Optimizer-state params with their shapes, in output order after the params. All
    /// start at zero.
    pub state: Vec<(String, Shape)>,
    /// Hyperparameter inputs (0-d, the params' dtype).
    pub hyper: Vec<String>,
}

impl TrainStep {
    /// `(output index, param name)`: after each run, output k replaces that param.
    pub fn updates(&self) -> Vec<(usize, String)> {
        self.params
            .iter()
            .cloned()
            .chain(self.state.iter().map(|(n, _)| n.clone()))
            .enumerate()
            .map(|(i, n)| (i + 1, n))
            .collect()
    }
}

/// Differentiate `forward`'s output 0 (a 1-element loss) with respect to the named params
/// (all of one float dtype) and append `optimizer`'s update.
pub fn train_step(
    forward: &Graph,
    params: &[&str],
    optimizer: &Optimizer,
) -> Result<TrainStep, AdError> {
    train_step_with(forward, params, optimizer, Ok)
}

/// [`train_step`] with `sync` rewriting the gradient graph before the update is appended.
/// `sync` gets the graph whose outputs are `[loss, grad…]` (grads in `params` order) and
/// must return one with the same outputs' shapes and the same params (by name; it may
/// renumber nodes). Data-parallel training passes [`crate::all_reduce_grads`] here, so the
/// update consumes gradients averaged over the ranks.
pub fn train_step_with(
    forward: &Graph,
    params: &[&str],
    optimizer: &Optimizer,
    sync: impl FnOnce(Graph) -> Result<Graph, AdError>,
) -> Result<TrainStep, AdError> {
    if params.is_empty() {
        return Err(AdError::Optim("no params to train".into()));
    }
    let mut ids = Vec::with_capacity(params.len());
    for (k, &name) in params.iter().enumerate() {
        if params[..k].contains(&name) {
            return Err(AdError::Optim(format!("param \"{name}\" listed twice")));
        }
        let id = find_param(forward, name).ok_or_else(|| {
            AdError::Optim(format!(
                "the graph has no param \"{name}\"; its params are [{}]",
                forward
                    .params()
                    .map(|(n, _)| n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        ids.push(id);
    }
    let dtype = forward.shape(ids[0])?.dtype;
    for (&id, name) in ids.iter().zip(params) {
        let dt = forward.shape(id)?.dtype;
        if !dt.is_float() || dt != dtype {
            return Err(AdError::Optim(format!(
                "param \"{name}\" is {dt}; every trained param must share one float dtype ({dtype})"
            )));
        }
    }
    let taken =
        |n: &str| forward.inputs().any(|(i, _)| i == n) || forward.params().any(|(p, _)| p == n);
    let hyper: Vec<&str> = optimizer.hyper_values().iter().map(|(n, _)| *n).collect();
    for n in hyper.iter().copied().chain([STEP_PARAM]) {
        if taken(n) {
            return Err(AdError::NameClash(n.into()));
        }
    }

    let g = grad_with_loss(forward, &ids)?;
    let want: Vec<Shape> = (g.outputs.iter())
        .map(|&o| g.shape(o).cloned())
        .collect::<Result<_, _>>()?;
    let mut g = sync(g)?;
    let got: Vec<Shape> = (g.outputs.iter())
        .map(|&o| g.shape(o).cloned())
        .collect::<Result<_, _>>()?;
    if got != want {
        return Err(AdError::Optim(format!(
            "the gradient rewrite changed the outputs from {want:?} to {got:?}"
        )));
    }
    // The rewrite may have renumbered nodes: find the params again.
    for (id, &name) in ids.iter_mut().zip(params) {
        *id = find_param(&g, name).ok_or_else(|| {
            AdError::Optim(format!("the gradient rewrite dropped param \"{name}\""))
        })?;
    }
    let loss = g.outputs[0];
    let grads: Vec<NodeId> = g.outputs[1..].to_vec();
    let scalar = Shape::new(&[], dtype);
    let mut h = std::collections::HashMap::new();
    for &n in &hyper {
        h.insert(n, g.input(n, scalar.clone())?);
    }
    let mut b = B { g: &mut g };
    let mut new_params = Vec::new();
    let mut state: Vec<(String, Shape, NodeId)> = Vec::new();
    let pshape = |b: &B, id: NodeId| -> Result<Shape, AdError> { Ok(b.g.shape(id)?.clone()) };
    match optimizer {
        Optimizer::Sgd { .. } => {
            let (lr, mu, wd) = (h[HP_LR], h[HP_MOMENTUM], h[HP_WEIGHT_DECAY]);
            for ((&p, &gr), name) in ids.iter().zip(&grads).zip(params) {
                let shape = pshape(&b, p)?;
                let vname = format!("opt.momentum.{name}");
                if taken(&vname) {
                    return Err(AdError::NameClash(vname));
                }
                let v = b.g.param(vname.as_str(), shape.clone())?;
                let decay = b.mul(wd, p)?;
                let gr = b.add(gr, decay)?;
                let mv = b.mul(mu, v)?;
                let v_new = b.add(mv, gr)?;
                let step = b.mul(lr, v_new)?;
                new_params.push(b.sub(p, step)?);
                state.push((vname, shape, v_new));
            }
        }
        Optimizer::Adam { .. } | Optimizer::AdamW { .. } => {
            let decoupled = matches!(optimizer, Optimizer::AdamW { .. });
            let (lr, b1, b2, eps) = (h[HP_LR], h[HP_BETA1], h[HP_BETA2], h[HP_EPS]);
            let t = b.g.param(STEP_PARAM, scalar.clone())?;
            let one = b.g.scalar(1.0, dtype)?;
            let t_new = b.add(t, one)?;
            // Bias corrections 1 - β^t, shared by every param.
            let b1t = b.bin(BinaryOp::Pow, b1, t_new)?;
            let c1 = b.sub(one, b1t)?;
            let b2t = b.bin(BinaryOp::Pow, b2, t_new)?;
            let c2 = b.sub(one, b2t)?;
            let one_m_b1 = b.sub(one, b1)?;
            let one_m_b2 = b.sub(one, b2)?;
            let mut ms = Vec::new();
            let mut vs = Vec::new();
            for ((&p, &gr), name) in ids.iter().zip(&grads).zip(params) {
                let shape = pshape(&b, p)?;
                let (mname, vname) = (format!("opt.m.{name}"), format!("opt.v.{name}"));
                for n in [&mname, &vname] {
                    if taken(n) {
                        return Err(AdError::NameClash(n.clone()));
                    }
                }
                let m = b.g.param(mname.as_str(), shape.clone())?;
                let v = b.g.param(vname.as_str(), shape.clone())?;
                let bm = b.mul(b1, m)?;
                let gm = b.mul(one_m_b1, gr)?;
                let m_new = b.add(bm, gm)?;
                let bv = b.mul(b2, v)?;
                let g2 = b.g.activation(Activation::Square, gr)?;
                let gv = b.mul(one_m_b2, g2)?;
                let v_new = b.add(bv, gv)?;
                let mhat = b.bin(BinaryOp::Div, m_new, c1)?;
                let vhat = b.bin(BinaryOp::Div, v_new, c2)?;
                let root = b.g.activation(Activation::Sqrt, vhat)?;
                let denom = b.add(root, eps)?;
                let ratio = b.bin(BinaryOp::Div, mhat, denom)?;
                let step = b.mul(lr, ratio)?;
                let base = if decoupled {
                    let wd = h[HP_WEIGHT_DECAY];
                    let lwd = b.mul(lr, wd)?;
                    let keep = b.sub(one, lwd)?;
                    b.mul(p, keep)?
                } else {
                    p
                };
                new_params.push(b.sub(base, step)?);
                ms.push((mname, shape.clone(), m_new));
                vs.push((vname, shape, v_new));
            }
            state.extend(ms);
            state.extend(vs);
            state.push((STEP_PARAM.into(), scalar.clone(), t_new));
        }
    }
    g.outputs = std::iter::once(loss)
        .chain(new_params)
        .chain(state.iter().map(|s| s.2))
        .collect();
    g.verify()?;
    Ok(TrainStep {
        graph: g,
        params: params.iter().map(|s| s.to_string()).collect(),
        state: state.into_iter().map(|(n, s, _)| (n, s)).collect(),
        hyper: hyper.iter().map(|s| s.to_string()).collect(),
    })
}

/// The Param node called `name`.
fn find_param(g: &Graph, name: &str) -> Option<NodeId> {
    (g.nodes.iter())
        .find(|n| matches!(&n.op, Op::Param { name: p } if p == name))
        .map(|n| n.id)
}

/// Short builder calls for the update arithmetic.
struct B<'a> {
    g: &'a mut Graph,
}

impl B<'_> {
    fn bin(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> Result<NodeId, AdError> {
        Ok(self.g.binary(op, a, b)?)
    }
    fn add(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, AdError> {
        self.bin(BinaryOp::Add, a, b)
    }
    fn sub(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, AdError> {
        self.bin(BinaryOp::Sub, a, b)
    }
    fn mul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, AdError> {
        self.bin(BinaryOp::Mul, a, b)
    }
}
