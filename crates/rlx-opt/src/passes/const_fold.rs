//! Constant folding: a node whose inputs are all constants becomes a constant. The values
//! come from a caller-supplied [`ConstEvaluator`] (the CPU runtime implements it), which
//! keeps this crate free of kernels.
use crate::{OptError, Pass, Rebuilder};
use rlx_ir::{Graph, HostTensor, Op, Shape};

/// Evaluates one op on constant inputs. `None` means "cannot or will not" (the node is then
/// kept as it is); a result must have exactly `out`'s dims and dtype.
pub trait ConstEvaluator {
    fn eval(&self, op: &Op, inputs: &[HostTensor], out: &Shape) -> Option<HostTensor>;
}

impl<E: ConstEvaluator + ?Sized> ConstEvaluator for &E {
    fn eval(&self, op: &Op, inputs: &[HostTensor], out: &Shape) -> Option<HostTensor> {
        (**self).eval(op, inputs, out)
    }
}

impl<E: ConstEvaluator + ?Sized> ConstEvaluator for std::sync::Arc<E> {
    fn eval(&self, op: &Op, inputs: &[HostTensor], out: &Shape) -> Option<HostTensor> {
        (**self).eval(op, inputs, out)
    }
}

/// Outputs above this many elements stay computed at run time: baking them in would bloat
/// the graph more than the work saved.
pub const DEFAULT_FOLD_LIMIT: usize = 1 << 20;

pub struct ConstFold {
    eval: Box<dyn ConstEvaluator>,
    limit: usize,
}

impl ConstFold {
    pub fn new(eval: impl ConstEvaluator + 'static) -> ConstFold {
        ConstFold {
            eval: Box::new(eval),
            limit: DEFAULT_FOLD_LIMIT,
        }
    }

    /// Largest output (in elements) to fold.
    pub fn limit(mut self, max_elems: usize) -> ConstFold {
        self.limit = max_elems;
        self
    }
}

impl Pass for ConstFold {
    fn name(&self) -> &'static str {
        "const_fold"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let mut rb = Rebuilder::new(self.name(), g);
        for n in &g.nodes {
            let dims = n.shape.static_dims();
            let small = n.shape.numel().is_some_and(|k| k <= self.limit);
            if n.op.is_leaf() || n.op.kind().is_collective() || n.inputs.is_empty() || !small {
                rb.copy(n.id)?;
                continue;
            }
            let ins = rb.inputs(n)?;
            let mut values = Vec::with_capacity(ins.len());
            for &i in &ins {
                let m = rb.new_node(i)?;
                let Op::Constant { data } = &m.op else {
                    break;
                };
                let Some(d) = m.shape.static_dims() else {
                    break;
                };
                let t = HostTensor::new(&d, m.shape.dtype, data.clone())
                    .map_err(|e| rb.error(n, format!("constant input {i}: {e}")))?;
                values.push(t);
            }
            let folded = if values.len() == ins.len() {
                self.eval.eval(&n.op, &values, &n.shape)
            } else {
                None
            };
            match (folded, dims) {
                (Some(t), Some(d)) => {
                    let want = d.iter().product::<usize>() * n.shape.dtype.size_bytes();
                    if t.shape != d || t.dtype != n.shape.dtype || t.data.len() != want {
                        return Err(rb.error(
                            n,
                            format!(
                                "evaluator returned {:?} {} ({} bytes), the node is {}",
                                t.shape,
                                t.dtype,
                                t.data.len(),
                                n.shape
                            ),
                        ));
                    }
                    rb.emit_with_shape(
                        n.id,
                        Op::Constant { data: t.data },
                        vec![],
                        n.shape.clone(),
                    )?;
                }
                _ => {
                    rb.copy(n.id)?;
                }
            }
        }
        rb.finish()
    }
}
