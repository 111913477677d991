//! The I/O binding table of a graph: for every input and param, its name, node, declared
//! shape and the dynamic dims it binds — built in one pass over the graph, so a run's inputs
//! and a param's value are checked in one place (the runtime's session) with typed errors
//! naming the tensor, and looked up by hash instead of by scanning the nodes.
use crate::{DType, Dim, Graph, HostTensor, IrError, NodeId, Op, Shape};
use std::collections::HashMap;
use thiserror::Error;

/// Sizes bound to the graph's dynamic dims by one run's inputs, by symbol.
pub type DimBindings = HashMap<String, usize>;

/// A user mistake in a run's inputs or a param's value; every variant names the tensor.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BindError {
    #[error("unknown input \"{name}\": the graph's inputs are [{known}]")]
    UnknownInput { name: String, known: String },
    #[error("unknown param \"{name}\": the graph's params are [{known}]")]
    UnknownParam { name: String, known: String },
    #[error("missing input \"{name}\" ({shape}): every graph input must be fed")]
    MissingInput { name: String, shape: String },
    #[error("input \"{name}\" given more than once")]
    DuplicateInput { name: String },
    #[error("{kind} \"{name}\": {got} values given, its shape {shape} needs {expected}")]
    WrongLength {
        kind: &'static str,
        name: String,
        shape: String,
        expected: usize,
        got: usize,
    },
    #[error("{kind} \"{name}\": shape {got:?} given, the graph declares {expected}")]
    WrongShape {
        kind: &'static str,
        name: String,
        expected: String,
        got: Vec<usize>,
    },
    #[error("{kind} \"{name}\": dtype {got} given, the graph declares {expected}")]
    WrongDtype {
        kind: &'static str,
        name: String,
        expected: DType,
        got: DType,
    },
    #[error("{kind} \"{name}\" has dynamic dims {shape} that a flat slice cannot bind: use a typed tensor")]
    Unbindable {
        kind: &'static str,
        name: String,
        shape: String,
    },
    #[error(
        "input \"{name}\": dim {symbol} = {got}, but input \"{bound_by}\" bound it to {bound}"
    )]
    InconsistentDim {
        name: String,
        symbol: String,
        got: usize,
        bound: usize,
        bound_by: String,
    },
    #[error("two {kind}s are named \"{name}\" (nodes {first} and {second}): names must be unique")]
    DuplicateName {
        kind: &'static str,
        name: String,
        first: NodeId,
        second: NodeId,
    },
}

/// One input or param of the graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// `"input"` or `"param"` (the word errors use).
    pub kind: &'static str,
    pub name: String,
    pub node: NodeId,
    /// Position among the graph's inputs (or params), in node order.
    pub index: usize,
    /// The declared shape (dynamic dims as symbols).
    pub shape: Shape,
    /// `(axis, symbol)` for each dynamic dim of the declared shape.
    pub dynamic: Vec<(usize, String)>,
}

impl Binding {
    fn new(kind: &'static str, name: &str, node: NodeId, index: usize, shape: &Shape) -> Binding {
        let dynamic = (shape.dims.iter().enumerate())
            .filter_map(|(k, d)| match d {
                Dim::Dynamic(s) => Some((k, s.clone())),
                Dim::Static(_) => None,
            })
            .collect();
        Binding {
            kind,
            name: name.into(),
            node,
            index,
            shape: shape.clone(),
            dynamic,
        }
    }

    /// Check a tensor against the declaration: dtype, rank and static dims, then that its
    /// bytes fill its shape. Dynamic dims take any size here (see `IoBindings::check_inputs`).
    pub fn check(&self, t: &HostTensor) -> Result<(), BindError> {
        self.check_parts(&t.shape, t.dtype, t.data.len())
    }

    /// [`Binding::check`] of a value given as its dims, dtype and byte length (bytes held
    /// elsewhere, e.g. a mapped file's).
    pub fn check_parts(
        &self,
        shape: &[usize],
        dtype: DType,
        bytes: usize,
    ) -> Result<(), BindError> {
        let want = &self.shape;
        if dtype != want.dtype {
            return Err(BindError::WrongDtype {
                kind: self.kind,
                name: self.name.clone(),
                expected: want.dtype,
                got: dtype,
            });
        }
        let dims_ok = shape.len() == want.rank()
            && (want.dims.iter().zip(shape)).all(|(d, &n)| d.as_static().is_none_or(|m| m == n));
        if !dims_ok {
            return Err(BindError::WrongShape {
                kind: self.kind,
                name: self.name.clone(),
                expected: want.to_string(),
                got: shape.to_vec(),
            });
        }
        let size = dtype.size_bytes().max(1);
        let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if numel.and_then(|n| n.checked_mul(size)) != Some(bytes) {
            return Err(BindError::WrongLength {
                kind: self.kind,
                name: self.name.clone(),
                shape: want.to_string(),
                expected: numel.unwrap_or(usize::MAX),
                got: bytes / size,
            });
        }
        Ok(())
    }

    /// Dims of a tensor given as `len` flat values: static dims as declared; for an input,
    /// one dynamic dim can be solved from the length (a param's shape must be static).
    pub fn flat_dims(&self, len: usize) -> Result<Vec<usize>, BindError> {
        let unbindable = || BindError::Unbindable {
            kind: self.kind,
            name: self.name.clone(),
            shape: self.shape.to_string(),
        };
        let known = (self.shape.dims.iter().filter_map(Dim::as_static))
            .try_fold(1usize, |a, d| a.checked_mul(d))
            .ok_or_else(unbindable)?;
        match self.dynamic.len() {
            0 if len == known => Ok(self.shape.dims.iter().filter_map(Dim::as_static).collect()),
            0 => Err(BindError::WrongLength {
                kind: self.kind,
                name: self.name.clone(),
                shape: self.shape.to_string(),
                expected: known,
                got: len,
            }),
            1 if self.kind == "input" && known > 0 && len.is_multiple_of(known) => Ok((self.shape)
                .dims
                .iter()
                .map(|d| d.as_static().unwrap_or(len / known))
                .collect()),
            _ => Err(unbindable()),
        }
    }
}

/// Inputs a binding table has checked, with the dynamic dims they bind. Only
/// [`IoBindings::check_inputs`] makes one, so a backend handed one may trust it.
#[derive(Clone, Debug)]
pub struct CheckedInputs<'a> {
    tensors: Vec<(&'a str, &'a HostTensor)>,
    dims: DimBindings,
}

impl<'a> CheckedInputs<'a> {
    /// `(name, value)` of every graph input, in the order given.
    pub fn tensors(&self) -> &[(&'a str, &'a HostTensor)] {
        &self.tensors
    }
    /// The sizes the inputs bind to the graph's dynamic dims.
    pub fn dims(&self) -> &DimBindings {
        &self.dims
    }
    /// Owned `(name, value)` pairs, for executors that take them so.
    pub fn to_owned_pairs(&self) -> Vec<(&'a str, HostTensor)> {
        self.tensors.iter().map(|&(n, t)| (n, t.clone())).collect()
    }
}

/// The name → node / declared shape / dynamic-dim table of a graph's inputs and params.
#[derive(Clone, Debug, Default)]
pub struct IoBindings {
    inputs: Vec<Binding>,
    params: Vec<Binding>,
    input_index: HashMap<String, usize>,
    param_index: HashMap<String, usize>,
}

impl IoBindings {
    /// One pass over the graph. Two inputs (or two params) with one name are an error: the
    /// second could never be fed.
    pub fn new(g: &Graph) -> Result<IoBindings, BindError> {
        let mut io = IoBindings::default();
        for n in &g.nodes {
            let (kind, name, list, index) = match &n.op {
                Op::Input { name } => ("input", name, &mut io.inputs, &mut io.input_index),
                Op::Param { name } => ("param", name, &mut io.params, &mut io.param_index),
                _ => continue,
            };
            if let Some(&k) = index.get(name.as_str()) {
                return Err(BindError::DuplicateName {
                    kind,
                    name: name.clone(),
                    first: list[k].node,
                    second: n.id,
                });
            }
            index.insert(name.clone(), list.len());
            list.push(Binding::new(kind, name, n.id, list.len(), &n.shape));
        }
        Ok(io)
    }

    /// The graph's inputs, in node order.
    pub fn inputs(&self) -> &[Binding] {
        &self.inputs
    }

    /// The graph's params, in node order.
    pub fn params(&self) -> &[Binding] {
        &self.params
    }

    pub fn input(&self, name: &str) -> Result<&Binding, BindError> {
        (self.input_index.get(name).map(|&k| &self.inputs[k])).ok_or_else(|| {
            BindError::UnknownInput {
                name: name.into(),
                known: known(&self.inputs),
            }
        })
    }

    pub fn param(&self, name: &str) -> Result<&Binding, BindError> {
        (self.param_index.get(name).map(|&k| &self.params[k])).ok_or_else(|| {
            BindError::UnknownParam {
                name: name.into(),
                known: known(&self.params),
            }
        })
    }

    /// Check a param's value: it must name a param and match its shape and dtype.
    pub fn check_param(&self, name: &str, value: &HostTensor) -> Result<&Binding, BindError> {
        let b = self.param(name)?;
        b.check(value)?;
        Ok(b)
    }

    /// Check a run's inputs, in the order given: each names an input, once, and matches its
    /// declaration; a dynamic dim shared by several inputs gets one size; no input is left
    /// out. Returns the inputs with the sizes they bind.
    pub fn check_inputs<'a>(
        &self,
        inputs: impl IntoIterator<Item = (&'a str, &'a HostTensor)>,
    ) -> Result<CheckedInputs<'a>, BindError> {
        let mut seen = vec![false; self.inputs.len()];
        let mut dims = DimBindings::new();
        // Which input bound each symbol first, for the error naming both.
        let mut bound_by: HashMap<&str, usize> = HashMap::new();
        let mut tensors = Vec::with_capacity(self.inputs.len());
        for (name, t) in inputs {
            let b = self.input(name)?;
            let k = b.index;
            if std::mem::replace(&mut seen[k], true) {
                return Err(BindError::DuplicateInput { name: name.into() });
            }
            b.check(t)?;
            for (axis, sym) in &b.dynamic {
                let got = t.shape[*axis];
                match dims.get(sym) {
                    Some(&bound) if bound != got => {
                        return Err(BindError::InconsistentDim {
                            name: name.into(),
                            symbol: sym.clone(),
                            got,
                            bound,
                            bound_by: self.inputs[bound_by[sym.as_str()]].name.clone(),
                        })
                    }
                    Some(_) => {}
                    None => {
                        dims.insert(sym.clone(), got);
                        bound_by.insert(sym, k);
                    }
                }
            }
            tensors.push((name, t));
        }
        if let Some(k) = seen.iter().position(|s| !s) {
            return Err(BindError::MissingInput {
                name: self.inputs[k].name.clone(),
                shape: self.inputs[k].shape.to_string(),
            });
        }
        Ok(CheckedInputs { tensors, dims })
    }
}

fn known(list: &[Binding]) -> String {
    list.iter()
        .map(|b| format!("{}: {}", b.name, b.shape))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Graph {
    /// Every node for one binding of the dynamic dims, as an executor plans it: ops with the
    /// bound sizes substituted into their parameters, shapes re-inferred from the bound
    /// inputs. A shape left with an unbound dim, or one the rule rejects, names its node.
    pub fn bind_static(
        &self,
        bindings: &HashMap<String, usize>,
    ) -> Result<Vec<crate::Node>, IrError> {
        let fail = |n: &crate::Node, msg: String| IrError::Verify {
            node: n.id,
            op: n.op.kind(),
            name: n
                .name
                .as_ref()
                .map(|s| format!(" \"{s}\""))
                .unwrap_or_default(),
            msg,
        };
        let mut nodes: Vec<crate::Node> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let op =
                crate::ops::shape_ops::bind_op(&n.op, bindings).unwrap_or_else(|| n.op.clone());
            let s = if n.op.is_leaf() {
                n.shape.bind(bindings)
            } else {
                let ins: Vec<&Shape> = n.inputs.iter().map(|i| &nodes[i.0].shape).collect();
                crate::ops::infer_shape(&op, &ins).map_err(|m| fail(n, m))?
            };
            if !s.is_static() {
                return Err(fail(n, format!("shape {s} has an unbound dynamic dim")));
            }
            nodes.push(crate::Node {
                op,
                shape: s,
                ..n.clone()
            });
        }
        Ok(nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph() -> Graph {
        let mut g = Graph::new("io");
        let b = || Dim::dynamic("B");
        let x = g
            .input("x", Shape::with_dims(vec![b(), 3.into()], DType::F32))
            .unwrap();
        let y = g
            .input("y", Shape::with_dims(vec![b(), 3.into()], DType::F32))
            .unwrap();
        let w = g.param("w", Shape::new(&[3], DType::F32)).unwrap();
        let s = g.add(x, y).unwrap();
        let s = g.mul(s, w).unwrap();
        g.set_outputs(vec![s]);
        g
    }

    fn t(rows: usize) -> HostTensor {
        HostTensor::from_f32(&[rows, 3], &vec![0.0; rows * 3])
    }

    #[test]
    fn binds_dynamic_dims_and_checks_each_input() {
        let io = IoBindings::new(&graph()).unwrap();
        assert_eq!(io.inputs().len(), 2);
        assert_eq!(io.inputs()[0].dynamic, vec![(0, "B".to_string())]);
        let (a, b) = (t(2), t(2));
        let ok = io.check_inputs([("y", &a), ("x", &b)]).unwrap();
        assert_eq!(ok.dims().get("B"), Some(&2));
        assert_eq!(ok.tensors().len(), 2);

        let c = t(4);
        let e = io.check_inputs([("x", &a), ("y", &c)]).unwrap_err();
        assert_eq!(
            e,
            BindError::InconsistentDim {
                name: "y".into(),
                symbol: "B".into(),
                got: 4,
                bound: 2,
                bound_by: "x".into()
            }
        );
        let e = io.check_inputs([("x", &a)]).unwrap_err();
        assert!(matches!(&e, BindError::MissingInput { name, .. } if name == "y"));
        let e = io.check_inputs([("x", &a), ("x", &a)]).unwrap_err();
        assert!(matches!(&e, BindError::DuplicateInput { name } if name == "x"));
        let e = io.check_inputs([("z", &a)]).unwrap_err();
        assert!(matches!(&e, BindError::UnknownInput { name, .. } if name == "z"));
        assert!(e.to_string().contains("[x: "), "{e}");
        let bad = HostTensor::from_f32(&[2, 4], &[0.0; 8]);
        let e = io.check_inputs([("x", &bad), ("y", &a)]).unwrap_err();
        assert!(matches!(&e, BindError::WrongShape { name, .. } if name == "x"));
        let mut short = t(2);
        short.data.pop();
        let e = io.check_inputs([("x", &short), ("y", &a)]).unwrap_err();
        assert!(matches!(&e, BindError::WrongLength { name, .. } if name == "x"));
    }

    #[test]
    fn checks_params_and_flat_lengths() {
        let io = IoBindings::new(&graph()).unwrap();
        let w = HostTensor::from_f32(&[3], &[1.0; 3]);
        assert_eq!(io.check_param("w", &w).unwrap().node, NodeId(2));
        let e = io.check_param("v", &w).unwrap_err();
        assert!(matches!(&e, BindError::UnknownParam { name, .. } if name == "v"));
        let w64 = HostTensor::from_f64(&[3], &[1.0; 3]);
        let e = io.check_param("w", &w64).unwrap_err();
        assert!(matches!(&e, BindError::WrongDtype { name, .. } if name == "w"));
        assert_eq!(io.input("x").unwrap().flat_dims(12).unwrap(), vec![4, 3]);
        let e = io.input("x").unwrap().flat_dims(7).unwrap_err();
        assert!(matches!(e, BindError::Unbindable { .. }));
        let e = io.param("w").unwrap().flat_dims(4).unwrap_err();
        assert!(matches!(
            e,
            BindError::WrongLength {
                expected: 3,
                got: 4,
                ..
            }
        ));
    }

    #[test]
    fn duplicate_names_are_refused() {
        let mut g = Graph::new("dup");
        let a = g.input("x", Shape::new(&[2], DType::F32)).unwrap();
        let b = g.input("y", Shape::new(&[2], DType::F32)).unwrap();
        let s = g.add(a, b).unwrap();
        g.set_outputs(vec![s]);
        // The builder refuses a second "x"; a deserialized or hand-edited graph can still
        // carry one, so rename the node behind the builder's back.
        g.nodes[b.0].op = crate::Op::Input { name: "x".into() };
        g.nodes[b.0].name = Some("x".into());
        let e = IoBindings::new(&g).unwrap_err();
        assert!(matches!(&e, BindError::DuplicateName { kind: "input", name, .. } if name == "x"));
    }
}
