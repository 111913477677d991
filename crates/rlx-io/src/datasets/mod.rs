//! Image-classification datasets held on the host: pixels as f32 in `[0, 1]`, labels as u8.
//! Sources: IDX files (`load_idx_pair`, `load_mnist_dir`) and the embedded scikit-learn
//! digits (`Dataset::digits`). `split` and `batches` are deterministic given their seed.
mod digits;
mod error;
mod idx;

pub use digits::{parse_digits_csv, DIGITS_CSV_GZ, DIGITS_LICENSE};
pub use error::{DatasetError, Result};
pub use idx::{
    load_idx_pair, load_mnist_dir, parse_idx, read_idx, IdxArray, IdxDType,
    DEBIAN_FASHION_MNIST_DIR, MNIST_FILES,
};

use rlx_ir::{DType, HostTensor, SplitMix64};

/// `n` single-channel images of `rows × cols` (row-major, sample-major) with their labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// `n * rows * cols` pixels scaled to `[0, 1]`.
    pub images: Vec<f32>,
    pub labels: Vec<u8>,
    pub n: usize,
    pub rows: usize,
    pub cols: usize,
}

impl Dataset {
    /// Checked constructor: `images.len()` must be `labels.len() * rows * cols`.
    pub fn new(images: Vec<f32>, labels: Vec<u8>, rows: usize, cols: usize) -> Result<Dataset> {
        let n = labels.len();
        let want = n.checked_mul(rows).and_then(|v| v.checked_mul(cols));
        if want != Some(images.len()) {
            return Err(DatasetError::BadArgument(format!(
                "{n} labels of {rows}x{cols} images need {} pixels, got {}",
                n.saturating_mul(rows).saturating_mul(cols),
                images.len()
            )));
        }
        Ok(Dataset {
            images,
            labels,
            n,
            rows,
            cols,
        })
    }

    /// Check the public fields agree (they can be edited by hand).
    pub fn validate(&self) -> Result<()> {
        let want = self
            .n
            .checked_mul(self.rows)
            .and_then(|v| v.checked_mul(self.cols));
        if self.labels.len() != self.n || want != Some(self.images.len()) {
            return Err(DatasetError::BadArgument(format!(
                "dataset fields disagree: n = {}, {} labels, {} pixels for {}x{} images",
                self.n,
                self.labels.len(),
                self.images.len(),
                self.rows,
                self.cols
            )));
        }
        Ok(())
    }

    /// Pixels of sample `i`, or None past the end.
    pub fn image(&self, i: usize) -> Option<&[f32]> {
        let px = self.rows * self.cols;
        self.images.get(i * px..(i + 1) * px)
    }

    /// One past the largest label (0 for an empty dataset).
    pub fn num_classes(&self) -> usize {
        self.labels
            .iter()
            .map(|&l| l as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// Per-class sample counts, indexed by label.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut c = vec![0; self.num_classes()];
        for &l in &self.labels {
            c[l as usize] += 1;
        }
        c
    }

    /// The samples at `indices`, in that order.
    pub fn subset(&self, indices: &[usize]) -> Result<Dataset> {
        let px = self.rows * self.cols;
        let mut images = Vec::with_capacity(indices.len() * px);
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            let img = self.image(i).ok_or_else(|| {
                DatasetError::BadArgument(format!("sample {i} out of range (n = {})", self.n))
            })?;
            images.extend_from_slice(img);
            labels.push(self.labels[i]);
        }
        Dataset::new(images, labels, self.rows, self.cols)
    }

    /// Stratified split into `(train, test)`: each class puts `round(count * test_fraction)`
    /// of its samples, chosen by `seed`, into the test set. Both sets keep the original
    /// sample order. `test_fraction` must lie strictly between 0 and 1.
    pub fn split(&self, test_fraction: f64, seed: u64) -> Result<(Dataset, Dataset)> {
        if !(test_fraction > 0.0 && test_fraction < 1.0) {
            return Err(DatasetError::BadArgument(format!(
                "test_fraction must be in (0, 1), got {test_fraction}"
            )));
        }
        self.validate()?;
        let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); self.num_classes()];
        for (i, &l) in self.labels.iter().enumerate() {
            by_class[l as usize].push(i);
        }
        // SplitMix64: identical on every platform, so splits are reproducible from the seed.
        let mut rng = SplitMix64::new(seed);
        let mut is_test = vec![false; self.n];
        for members in &mut by_class {
            rng.shuffle(members);
            let k = (members.len() as f64 * test_fraction).round() as usize;
            for &i in &members[..k.min(members.len())] {
                is_test[i] = true;
            }
        }
        let (test, train): (Vec<usize>, Vec<usize>) = (0..self.n).partition(|&i| is_test[i]);
        Ok((self.subset(&train)?, self.subset(&test)?))
    }

    /// One pass over the data in an order shuffled by `seed`, `batch_size` samples at a
    /// time; the last batch holds the remainder (see `Batches::drop_last`).
    pub fn batches(&self, batch_size: usize, seed: u64) -> Result<Batches<'_>> {
        if batch_size == 0 {
            return Err(DatasetError::BadArgument("batch_size must be > 0".into()));
        }
        self.validate()?;
        let mut order: Vec<usize> = (0..self.n).collect();
        SplitMix64::new(seed).shuffle(&mut order);
        Ok(Batches {
            data: self,
            order,
            batch_size,
            pos: 0,
            drop_last: false,
        })
    }
}

/// Iterator over shuffled batches of a dataset.
pub struct Batches<'a> {
    data: &'a Dataset,
    order: Vec<usize>,
    batch_size: usize,
    pos: usize,
    drop_last: bool,
}

impl Batches<'_> {
    /// Skip a final batch smaller than `batch_size` (keeps every batch the same shape, so
    /// one compiled graph serves the whole epoch).
    pub fn drop_last(mut self) -> Self {
        self.drop_last = true;
        self
    }
}

impl Iterator for Batches<'_> {
    type Item = Batch;

    fn next(&mut self) -> Option<Batch> {
        let left = self.order.len() - self.pos;
        if left == 0 || (self.drop_last && left < self.batch_size) {
            return None;
        }
        let take = left.min(self.batch_size);
        let idx = &self.order[self.pos..self.pos + take];
        self.pos += take;
        let d = self.data;
        let px = d.rows * d.cols;
        let mut images = Vec::with_capacity(take * px);
        let mut labels = Vec::with_capacity(take);
        for &i in idx {
            images.extend_from_slice(&d.images[i * px..(i + 1) * px]);
            labels.push(d.labels[i]);
        }
        Some(Batch {
            images,
            labels,
            rows: d.rows,
            cols: d.cols,
        })
    }
}

/// A batch: images `[B, 1, rows, cols]` and labels `[B]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    pub images: Vec<f32>,
    pub labels: Vec<u8>,
    pub rows: usize,
    pub cols: usize,
}

impl Batch {
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    /// `[B, 1, rows, cols]`
    pub fn image_shape(&self) -> [usize; 4] {
        [self.len(), 1, self.rows, self.cols]
    }
    /// The images as an NCHW tensor of a float `dtype`.
    pub fn images_tensor(&self, dtype: DType) -> HostTensor {
        HostTensor::from_f32_as(&self.image_shape(), &self.images, dtype)
    }
    /// The labels as an I64 `[B]` tensor (the integer-label cross-entropy input).
    pub fn labels_tensor(&self) -> HostTensor {
        let l: Vec<i64> = self.labels.iter().map(|&v| v as i64).collect();
        HostTensor::from_i64(&[self.len()], &l)
    }
}
