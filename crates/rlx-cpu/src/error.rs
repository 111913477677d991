//! CPU executor errors.
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum CpuError {
    /// An op could not run on these inputs; names the node and what is wrong.
    #[error("node {node} ({op}): {msg}")]
    Op {
        node: String,
        op: &'static str,
        msg: String,
    },
    #[error("input \"{name}\": {msg}")]
    Input { name: String, msg: String },
    #[error("param \"{name}\": {msg}")]
    Param { name: String, msg: String },
    /// A run's inputs or a param's value do not match the graph's declarations.
    #[error(transparent)]
    Bind(#[from] rlx_ir::BindError),
    /// Memory for an arena, a param, an input or an output could not be had: the process
    /// goes on, the run fails.
    #[error("cannot allocate {what}: {requested} bytes ({}) asked{}", human(*requested), available.map_or(String::new(), |a| format!(", {} available", human(a as u128))))]
    Alloc {
        what: String,
        requested: u128,
        /// Memory the system could still give, where it says so.
        available: Option<u64>,
    },
    #[error("graph: {0}")]
    Graph(#[from] rlx_ir::IrError),
}

fn human(bytes: u128) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Shorthand for an op error inside a thunk; the executor fills in the node label.
pub fn op_err(msg: impl Into<String>) -> CpuError {
    CpuError::Op {
        node: String::new(),
        op: "",
        msg: msg.into(),
    }
}
