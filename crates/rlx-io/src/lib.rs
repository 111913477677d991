//! rlx-io: getting data into rlx. `datasets` reads IDX files (MNIST / Fashion-MNIST, plain
//! or gzip) and carries an embedded default, scikit-learn's 8×8 handwritten digits, so
//! training demos need no download.
pub mod datasets;

pub use datasets::{Batch, Batches, Dataset, DatasetError};
