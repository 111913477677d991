//! rlx — an ML compiler and runtime. Build a graph, compile it for a device, run it:
//!
//! ```
//! use rlx::prelude::*;
//!
//! fn main() -> Result<(), Error> {
//!     let mut g = Graph::new("scale");
//!     let x = g.input("x", Shape::new(&[2, 3], DType::F32))?;
//!     let w = g.param("w", Shape::new(&[2, 3], DType::F32))?;
//!     let y = g.mul(x, w)?;
//!     let y = g.activation(Activation::Relu, y)?;
//!     g.set_outputs(vec![y]);
//!
//!     let compiled = Session::new(Device::Cpu).compile(g)?;
//!     compiled.set_param("w", &[1.0, -1.0, 2.0, -2.0, 0.5, -0.5])?;
//!     let out = compiled.run(&[("x", &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])])?;
//!     assert_eq!(out[0], vec![1.0, 0.0, 6.0, 0.0, 2.5, 0.0]);
//!     Ok(())
//! }
//! ```
pub use rlx_cpu as cpu;
pub use rlx_ir as ir;
pub use rlx_opt as opt;
pub use rlx_runtime as runtime;

pub mod prelude {
    pub use rlx_ir::{
        Activation, AttentionLayout, AttentionSpec, BinaryOp, ChainOperand, ChainStep, CompareOp,
        ConvSpec, DType, Dim, FftNorm, Graph, HostTensor, IrError, MaskKind, Node, NodeId, Op,
        PoolKind, PoolSpec, QuantScheme, ReduceOp, RegionPrologue, RopeStyle, Shape, TransformStep,
    };
    pub use rlx_runtime::{
        CompileOptions, CompiledGraph, Device, Error, Precision, QuantAct, Session,
    };
}

#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
