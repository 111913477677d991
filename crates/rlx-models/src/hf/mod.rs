//! Hugging Face model folders: `config.json` and the other JSON configs ([`json`]), the
//! `BertModel` family ([`bert`]) and sentence-transformers' pooling head ([`pooling`]).
pub mod bert;
pub mod json;
pub mod pooling;

pub use bert::{BertConfig, BertHead};
pub use pooling::Pooling;
