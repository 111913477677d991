//! A path-prefixed parameter builder in the manner of candle's `VarBuilder`: a model
//! declares each param once, by its local name under a prefix
//! (`vb.pp("conv1").param("weight", …)` makes `conv1.weight`), and gets back both the graph
//! node and the [`ParamSpec`] list the trainer and the init need, so no name is spelled twice.
use crate::{ModelError, ParamSpec};
use rlx_ir::{DType, Graph, NodeId, Shape};
use std::cell::RefCell;
use std::rc::Rc;

/// The graph and the params declared into it so far, shared by a builder and its children.
struct Vars {
    graph: Graph,
    specs: Vec<ParamSpec>,
}

/// Declares params into one graph under a dotted path prefix. Cloning or [`pp`](Self::pp)
/// gives a view of the same graph.
#[derive(Clone)]
pub struct VarBuilder {
    vars: Rc<RefCell<Vars>>,
    prefix: String,
    dtype: DType,
}

impl VarBuilder {
    /// A builder adding `dtype` params to `graph` (at the root path).
    pub fn new(graph: Graph, dtype: DType) -> VarBuilder {
        VarBuilder {
            vars: Rc::new(RefCell::new(Vars {
                graph,
                specs: Vec::new(),
            })),
            prefix: String::new(),
            dtype,
        }
    }

    /// The builder one level down: `pp("l0").pp("q")` names its params `l0.q.<name>`.
    pub fn pp(&self, name: impl AsRef<str>) -> VarBuilder {
        VarBuilder {
            vars: Rc::clone(&self.vars),
            prefix: self.path(name.as_ref()),
            dtype: self.dtype,
        }
    }

    /// The full name of `name` under this builder's prefix.
    pub fn path(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.prefix)
        }
    }

    /// Add the param `<prefix>.<name>` of `dims` (fan-in `fan_in`, for the init bound).
    pub fn param(&self, name: &str, dims: &[usize], fan_in: usize) -> Result<NodeId, ModelError> {
        let full = self.path(name);
        let mut v = self.vars.borrow_mut();
        let id = v.graph.param(full.clone(), Shape::new(dims, self.dtype))?;
        v.specs.push(ParamSpec {
            name: full,
            dims: dims.to_vec(),
            fan_in,
        });
        Ok(id)
    }

    /// Run `f` on the graph (to add the non-param nodes between declarations).
    pub fn with_graph<T>(&self, f: impl FnOnce(&mut Graph) -> T) -> T {
        f(&mut self.vars.borrow_mut().graph)
    }

    /// The graph and every param declared through this builder or its children, in
    /// declaration order. Children still alive see an empty graph afterwards.
    pub fn finish(self) -> (Graph, Vec<ParamSpec>) {
        let mut v = self.vars.borrow_mut();
        let graph = std::mem::replace(&mut v.graph, Graph::new(""));
        (graph, std::mem::take(&mut v.specs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_nest_and_specs_follow_declaration_order() {
        let vb = VarBuilder::new(Graph::new("t"), DType::F32);
        let l0 = vb.pp("l0");
        let w = l0.pp("q").param("w", &[3, 4], 3).unwrap();
        let b = l0.pp("q").param("b", &[4], 3).unwrap();
        let top = vb.param("top", &[2], 2).unwrap();
        drop(l0);
        let (g, specs) = vb.finish();
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["l0.q.w", "l0.q.b", "top"]);
        assert_eq!(specs[0].dims, [3, 4]);
        assert_eq!(g.nodes[w.0].shape, Shape::new(&[3, 4], DType::F32));
        let params: Vec<&str> = g.params().map(|(n, _)| n).collect();
        assert_eq!(params, ["l0.q.w", "l0.q.b", "top"]);
        assert!(b.0 < top.0);
    }
}
