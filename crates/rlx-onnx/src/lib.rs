//! rlx-onnx: ONNX models into rlx. `load(path)` decodes the ModelProto (prost types generated
//! from the committed `onnx.proto`), turns graph inputs into `Input`s and initializers into
//! `Param`s or constants, and maps every node through a registry of translators
//! (`ops/*.rs`, one file per op family) onto the existing IR ops. Nodes whose inputs are all
//! known are folded at import on the CPU executor. `suite` runs ONNX backend test cases.
mod attrs;
mod ctx;
mod error;
pub mod inspect;
pub mod lowp;
mod model;
pub mod ops;
pub mod proto;
pub mod suite;
pub mod tensor;

pub use attrs::Attrs;
pub use ctx::ImportCtx;
pub use error::OnnxError;
pub use model::{
    import_model, import_model_with, load, load_bytes, load_with, value_shape, ImportOptions,
    OnnxModel,
};
