//! Constant folding's evaluator: runs one op on constant inputs through the CPU thunks, so
//! folded values are bit-for-bit what the graph would have computed at run time.
use crate::CpuExecutable;
use rlx_ir::{Graph, HostTensor, Op, Shape};
use rlx_opt::ConstEvaluator;

#[derive(Clone, Copy, Debug, Default)]
pub struct CpuConstEvaluator;

impl ConstEvaluator for CpuConstEvaluator {
    fn eval(&self, op: &Op, inputs: &[HostTensor], out: &Shape) -> Option<HostTensor> {
        let mut g = Graph::new("const_fold");
        let ids: Vec<_> = inputs
            .iter()
            .map(|t| g.constant(t.clone()))
            .collect::<Result<_, _>>()
            .ok()?;
        let id = g.push_node(op.clone(), ids, out.clone());
        g.set_outputs(vec![id]);
        let mut exe = CpuExecutable::new(g).ok()?;
        let none: [(&str, HostTensor); 0] = [];
        exe.run(&none).ok()?.pop()
    }
}
