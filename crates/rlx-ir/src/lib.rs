//! rlx-ir: the tensor IR of rlx — graph, shapes, the op set, builders with shape
//! inference, verifier, serialization and text dump.
mod bindings;
mod display;
mod dtype;
pub mod env;
mod error;
mod graph;
mod minifloat;
mod op;
mod op_kind;
pub mod ops;
pub mod rng;
mod serialize;
mod shape;
mod shared_bytes;
mod tensor;
mod verify;

pub use bindings::{BindError, Binding, CheckedInputs, DimBindings, IoBindings};
pub use dtype::{ComputeClass, DType};
pub use error::IrError;
pub use graph::{AxisArg, Graph, Node, NodeId};
pub use minifloat::{E8M0Round, MiniFloat};
pub use op::*;
pub use op_kind::{OpGroup, OpKindSet};
pub use rng::SplitMix64;
pub use serialize::{crc32, GRAPH_FORMAT_VERSION, GRAPH_HEADER_LEN, GRAPH_MAGIC};
pub use shape::{broadcast_dims, broadcast_static, normalize_axis, strides, Dim, DimsFmt, Shape};
pub use shared_bytes::{ByteOwner, SharedBytes};
pub use tensor::HostTensor;
