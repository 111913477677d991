//! The passes, one file each.
mod const_fold;
mod cse;
mod dce;
mod simplify;

pub use const_fold::{ConstEvaluator, ConstFold, DEFAULT_FOLD_LIMIT};
pub use cse::Cse;
pub use dce::Dce;
pub use simplify::Simplify;
