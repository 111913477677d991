//! Typed access to a node's attributes.
use crate::proto::{AttributeProto, GraphProto, NodeProto, TensorProto};

/// The attributes of one node.
pub struct Attrs<'a>(pub &'a NodeProto);

impl<'a> Attrs<'a> {
    pub fn get(&self, name: &str) -> Option<&'a AttributeProto> {
        self.0
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
    }
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
    pub fn i(&self, name: &str) -> Option<i64> {
        self.get(name).and_then(|a| a.i)
    }
    pub fn i_or(&self, name: &str, d: i64) -> i64 {
        self.i(name).unwrap_or(d)
    }
    pub fn f(&self, name: &str) -> Option<f32> {
        self.get(name).and_then(|a| a.f)
    }
    pub fn f_or(&self, name: &str, d: f32) -> f32 {
        self.f(name).unwrap_or(d)
    }
    pub fn ints(&self, name: &str) -> Option<&'a [i64]> {
        self.get(name).map(|a| a.ints.as_slice())
    }
    pub fn floats(&self, name: &str) -> Option<&'a [f32]> {
        self.get(name).map(|a| a.floats.as_slice())
    }
    pub fn s(&self, name: &str) -> Option<String> {
        self.get(name)
            .and_then(|a| a.s.as_ref())
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
    pub fn t(&self, name: &str) -> Option<&'a TensorProto> {
        self.get(name).and_then(|a| a.t.as_ref())
    }
    pub fn g(&self, name: &str) -> Option<&'a GraphProto> {
        self.get(name).and_then(|a| a.g.as_ref())
    }
}
