//! ONNX protobuf messages. `onnx.rs` is prost's output for the committed `onnx.proto`
//! (regenerate with scripts/gen_onnx_proto.sh); nothing is generated at build time.
#[rustfmt::skip]
#[allow(clippy::all, clippy::pedantic)]
mod onnx;
pub use onnx::*;
