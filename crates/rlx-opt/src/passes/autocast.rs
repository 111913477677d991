//! Autocast: the half-precision policies. Matmul-class ops (MatMul, FusedMatMulBiasAct,
//! Attention, Conv and its gradients) whose float operands are f32 run in f16 / bf16: their
//! f32 inputs are cast down, the op computes in half (kernels accumulate in f32) and the
//! result is cast back to f32. Everything else — norms and their statistics, softmax, losses,
//! optimizer state — stays f32, like PyTorch's autocast. Later fusion folds the casts into
//! neighbouring elementwise regions.
use crate::{OptError, Pass};
use rlx_ir::{DType, Graph, NodeId, Op};

#[derive(Clone, Copy, Debug)]
pub struct Autocast {
    pub half: DType,
}

impl Autocast {
    pub fn new(half: DType) -> Autocast {
        Autocast { half }
    }
}

fn heavy(op: &Op) -> bool {
    matches!(
        op,
        Op::MatMul
            | Op::FusedMatMulBiasAct { .. }
            | Op::Attention(_)
            | Op::Conv(_)
            | Op::Conv2dBackwardInput { .. }
            | Op::Conv2dBackwardWeight(_)
    )
}

impl Pass for Autocast {
    fn name(&self) -> &'static str {
        "autocast"
    }

    fn run(&self, g: &Graph) -> Result<Graph, OptError> {
        let mut out = Graph::new(g.name.clone());
        let mut map: Vec<NodeId> = Vec::with_capacity(g.nodes.len());
        for n in &g.nodes {
            let ins: Vec<NodeId> = n.inputs.iter().map(|i| map[i.0]).collect();
            let cast_it = heavy(&n.op)
                && n.shape.dtype == DType::F32
                && ins.iter().all(|&i| out.nodes[i.0].shape.dtype.is_float());
            let id = if cast_it {
                let half_ins: Vec<NodeId> = ins
                    .iter()
                    .map(|&i| {
                        let s = out.nodes[i.0].shape.clone();
                        if s.dtype == DType::F32 {
                            out.push_node(
                                Op::Cast { to: self.half },
                                vec![i],
                                s.with_dtype(self.half),
                            )
                        } else {
                            i
                        }
                    })
                    .collect();
                let h = out.push_node(n.op.clone(), half_ins, n.shape.with_dtype(self.half));
                out.push_node(Op::Cast { to: DType::F32 }, vec![h], n.shape.clone())
            } else {
                out.push_node(n.op.clone(), ins, n.shape.clone())
            };
            if let Some(name) = &n.name {
                out.nodes[id.0].name = Some(name.clone());
            }
            map.push(id);
        }
        out.set_outputs(g.outputs.iter().map(|o| map[o.0]).collect());
        Ok(out)
    }
}
