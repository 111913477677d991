//! The runners of the case tables, one module per check; `case_tests!` calls
//! `<device>::check(set_name, &cases)`. `cpu` checks the CPU against the f64 oracle, `grad`
//! checks VJPs against finite differences, and `parity` is the device-independent half of a
//! device's parity check (a device module wraps it with its own compile-and-run).
pub mod cpu;
pub mod device;
pub mod grad;
pub mod parity;

use rlx_ir::{Graph, Op};

/// The declared dtype of the leaf named `name` (an Input or a Param), if the graph has one.
pub(crate) fn is_leaf(g: &Graph, name: &str) -> bool {
    g.nodes
        .iter()
        .any(|n| matches!(&n.op, Op::Input { name: m } | Op::Param { name: m } if m == name))
}

/// Whether the leaf named `name` is a `Param` (fed as a param, not an input).
pub(crate) fn is_param(g: &Graph, name: &str) -> bool {
    g.nodes
        .iter()
        .any(|n| matches!(&n.op, Op::Param { name: m } if m == name))
}
