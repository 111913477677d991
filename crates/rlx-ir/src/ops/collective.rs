//! Collectives (`AllReduce`, `AllGather`, `ReduceScatter`): the shape rules and builders.
//! The graph is one rank's program; how many ranks a gather or scatter spans is part of the
//! op, because it decides the output's shape (an all-reduce's does not depend on it).
use super::{arity, mul};
use crate::{CollectiveReduce, DType, Dim, Graph, IrError, NodeId, Op, OpKind, Shape};

/// Integers and floats reduce; `Mean` needs a float (an integer mean would round), and
/// nothing reduces Bool (gathers move any dtype).
fn reducible(kind: OpKind, reduce: CollectiveReduce, x: &Shape) -> Result<(), String> {
    if x.dtype == DType::Bool {
        return Err(format!("{kind} cannot reduce Bool values ({reduce:?})"));
    }
    if reduce == CollectiveReduce::Mean && !x.dtype.is_float() {
        return Err(format!(
            "{kind} Mean needs a float type, got {}: use Sum and divide",
            x.dtype
        ));
    }
    Ok(())
}

/// The static length of `axis` in `x`, checked.
fn axis_len(kind: OpKind, axis: usize, ranks: usize, x: &Shape) -> Result<usize, String> {
    if ranks == 0 {
        return Err(format!("{kind} over 0 ranks"));
    }
    match x.dims.get(axis) {
        Some(Dim::Static(n)) => Ok(*n),
        Some(d) => Err(format!(
            "{kind} axis {axis} of {x} is {d}: the collective's axis must be static"
        )),
        None => Err(format!("{kind} axis {axis} lies outside {x}")),
    }
}

pub(crate) fn all_reduce(reduce: CollectiveReduce, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::AllReduce, inputs, 1, 1)?;
    reducible(OpKind::AllReduce, reduce, inputs[0])?;
    Ok(inputs[0].clone())
}

pub(crate) fn all_gather(axis: usize, ranks: usize, inputs: &[&Shape]) -> Result<Shape, String> {
    arity(OpKind::AllGather, inputs, 1, 1)?;
    let x = inputs[0];
    let n = axis_len(OpKind::AllGather, axis, ranks, x)?;
    let mut out = x.clone();
    out.dims[axis] = Dim::Static(mul("AllGather axis", n, ranks)?);
    Ok(out)
}

pub(crate) fn reduce_scatter(
    reduce: CollectiveReduce,
    axis: usize,
    ranks: usize,
    inputs: &[&Shape],
) -> Result<Shape, String> {
    arity(OpKind::ReduceScatter, inputs, 1, 1)?;
    let x = inputs[0];
    reducible(OpKind::ReduceScatter, reduce, x)?;
    let n = axis_len(OpKind::ReduceScatter, axis, ranks, x)?;
    if !n.is_multiple_of(ranks) {
        return Err(format!(
            "ReduceScatter cuts axis {axis} of {x} into {ranks} parts: {n} does not divide"
        ));
    }
    let mut out = x.clone();
    out.dims[axis] = Dim::Static(n / ranks);
    Ok(out)
}

impl Graph {
    /// `x` combined over every rank of the group (see `Op::AllReduce`).
    pub fn all_reduce(&mut self, x: NodeId, reduce: CollectiveReduce) -> Result<NodeId, IrError> {
        self.add_node(Op::AllReduce { reduce }, &[x])
    }

    /// The `ranks` ranks' `x` concatenated along `axis` (see `Op::AllGather`).
    pub fn all_gather(&mut self, x: NodeId, axis: usize, ranks: usize) -> Result<NodeId, IrError> {
        self.add_node(Op::AllGather { axis, ranks }, &[x])
    }

    /// `x` combined over the `ranks` ranks, this rank's part along `axis` (see
    /// `Op::ReduceScatter`).
    pub fn reduce_scatter(
        &mut self,
        x: NodeId,
        reduce: CollectiveReduce,
        axis: usize,
        ranks: usize,
    ) -> Result<NodeId, IrError> {
        self.add_node(
            Op::ReduceScatter {
                reduce,
                axis,
                ranks,
            },
            &[x],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_follow_the_rank_count() {
        let mut g = Graph::new("c");
        let x = g.input("x", Shape::new(&[6, 4], DType::F32)).unwrap();
        let r = g.all_reduce(x, CollectiveReduce::Mean).unwrap();
        assert_eq!(g.nodes[r.0].shape.static_dims(), Some(vec![6, 4]));
        let a = g.all_gather(x, 1, 3).unwrap();
        assert_eq!(g.nodes[a.0].shape.static_dims(), Some(vec![6, 12]));
        let s = g.reduce_scatter(x, CollectiveReduce::Sum, 0, 3).unwrap();
        assert_eq!(g.nodes[s.0].shape.static_dims(), Some(vec![2, 4]));
    }

    #[test]
    fn bad_collectives_are_errors() {
        let mut g = Graph::new("c");
        let x = g.input("x", Shape::new(&[6, 4], DType::F32)).unwrap();
        let i = g.input("i", Shape::new(&[6], DType::I64)).unwrap();
        let b = g.input("b", Shape::new(&[6], DType::Bool)).unwrap();
        assert!(g.reduce_scatter(x, CollectiveReduce::Sum, 1, 3).is_err());
        assert!(g.reduce_scatter(x, CollectiveReduce::Sum, 2, 2).is_err());
        assert!(g.all_gather(x, 0, 0).is_err());
        assert!(g.all_reduce(i, CollectiveReduce::Mean).is_err());
        assert!(g.all_reduce(i, CollectiveReduce::Max).is_ok());
        assert!(g.all_reduce(b, CollectiveReduce::Sum).is_err());
        assert!(g.all_gather(b, 0, 2).is_ok());
        let mut d = Graph::new("d");
        let y = (d.input("y", Shape::with_dims(vec![Dim::dynamic("n")], DType::F32))).unwrap();
        assert!(d.all_gather(y, 0, 2).is_err());
        assert!(d.all_reduce(y, CollectiveReduce::Sum).is_ok());
    }
}
