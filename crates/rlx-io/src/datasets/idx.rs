//! IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed.
//!
//! Layout: two zero bytes, a dtype code, the rank, `rank` big-endian u32 dims, then the
//! elements in big-endian row-major order. Nothing is trusted: every header field is
//! checked, the element count is computed with overflow checks, and the data buffer grows
//! only as bytes actually arrive, so a lying header cannot trigger a huge allocation.
use super::error::{DatasetError, Result};
use super::Dataset;
use flate2::read::GzDecoder;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Element type of an IDX file (the third header byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdxDType {
    U8,
    I8,
    I16,
    I32,
    F32,
    F64,
}

impl IdxDType {
    pub fn from_code(code: u8) -> Option<IdxDType> {
        Some(match code {
            0x08 => IdxDType::U8,
            0x09 => IdxDType::I8,
            0x0B => IdxDType::I16,
            0x0C => IdxDType::I32,
            0x0D => IdxDType::F32,
            0x0E => IdxDType::F64,
            _ => return None,
        })
    }
    pub fn code(self) -> u8 {
        match self {
            IdxDType::U8 => 0x08,
            IdxDType::I8 => 0x09,
            IdxDType::I16 => 0x0B,
            IdxDType::I32 => 0x0C,
            IdxDType::F32 => 0x0D,
            IdxDType::F64 => 0x0E,
        }
    }
    pub fn size_bytes(self) -> usize {
        match self {
            IdxDType::U8 | IdxDType::I8 => 1,
            IdxDType::I16 => 2,
            IdxDType::I32 | IdxDType::F32 => 4,
            IdxDType::F64 => 8,
        }
    }
}

/// A decoded IDX array. `data` keeps the raw big-endian element bytes; `to_f64_vec`
/// decodes them.
#[derive(Clone, Debug, PartialEq)]
pub struct IdxArray {
    pub dtype: IdxDType,
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

impl IdxArray {
    /// Element count (saturating: a hand-built array with absurd dims cannot overflow).
    pub fn numel(&self) -> usize {
        self.dims.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }

    pub fn to_f64_vec(&self) -> Vec<f64> {
        let b = &self.data;
        match self.dtype {
            IdxDType::U8 => b.iter().map(|&v| v as f64).collect(),
            IdxDType::I8 => b.iter().map(|&v| v as i8 as f64).collect(),
            IdxDType::I16 => b
                .chunks_exact(2)
                .map(|c| i16::from_be_bytes([c[0], c[1]]) as f64)
                .collect(),
            IdxDType::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            IdxDType::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_be_bytes([c[0], c[1], c[2], c[3]]) as f64)
                .collect(),
            IdxDType::F64 => b
                .chunks_exact(8)
                .map(|c| f64::from_be_bytes(c.try_into().unwrap_or([0; 8])))
                .collect(),
        }
    }

    /// Encode as IDX bytes (uncompressed); fails when the array cannot be expressed
    /// (rank over 255, a dim over u32, data length not matching the dims).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let rank = u8::try_from(self.dims.len())
            .ok()
            .filter(|&r| r > 0)
            .ok_or_else(|| {
                DatasetError::BadArgument(format!(
                    "IDX rank must be 1..=255, got {}",
                    self.dims.len()
                ))
            })?;
        if self.numel().checked_mul(self.dtype.size_bytes()) != Some(self.data.len()) {
            return Err(DatasetError::BadArgument(format!(
                "IDX dims {:?} of {:?} do not match {} data bytes",
                self.dims,
                self.dtype,
                self.data.len()
            )));
        }
        let mut out = vec![0, 0, self.dtype.code(), rank];
        for &d in &self.dims {
            let d = u32::try_from(d).map_err(|_| {
                DatasetError::BadArgument(format!("IDX dim {d} does not fit in u32"))
            })?;
            out.extend_from_slice(&d.to_be_bytes());
        }
        out.extend_from_slice(&self.data);
        Ok(out)
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Reads the decompressed stream while counting bytes, so errors can name offsets.
struct Counted<'a> {
    path: &'a Path,
    inner: Box<dyn Read + 'a>,
    gzip: bool,
    pos: u64,
}

impl Counted<'_> {
    fn malformed(&self, offset: u64, msg: impl Into<String>) -> DatasetError {
        DatasetError::Idx {
            path: self.path.to_path_buf(),
            offset,
            msg: msg.into(),
        }
    }

    fn io_err(&self, e: std::io::Error) -> DatasetError {
        if self.gzip {
            DatasetError::Gzip {
                path: self.path.to_path_buf(),
                offset: self.pos,
                source: e,
            }
        } else {
            DatasetError::Io {
                path: self.path.to_path_buf(),
                source: e,
            }
        }
    }

    /// Read up to `n` bytes; fewer means the stream ended. The buffer grows with the data.
    fn read_up_to(&mut self, n: u64) -> Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(n.min(1 << 20) as usize);
        let got = (&mut self.inner)
            .take(n)
            .read_to_end(&mut buf)
            .map_err(|e| self.io_err(e))?;
        self.pos += got as u64;
        Ok(buf)
    }

    fn read_exact_or(&mut self, n: u64, what: &str) -> Result<Vec<u8>> {
        let start = self.pos;
        let buf = self.read_up_to(n)?;
        if (buf.len() as u64) < n {
            return Err(self.malformed(
                self.pos,
                format!(
                    "file ends inside the {what} (needed {n} bytes from byte {start}, got {})",
                    buf.len()
                ),
            ));
        }
        Ok(buf)
    }
}

/// Parse IDX bytes already in memory; `path` only names the source in errors.
pub fn parse_idx(bytes: &[u8], path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let gzip = bytes.starts_with(&GZIP_MAGIC);
    let inner: Box<dyn Read> = if gzip {
        Box::new(GzDecoder::new(bytes))
    } else {
        Box::new(bytes)
    };
    decode(Counted {
        path,
        inner,
        gzip,
        pos: 0,
    })
}

/// Read an IDX file, gzip-compressed (detected from its first bytes) or plain.
pub fn read_idx(path: impl AsRef<Path>) -> Result<IdxArray> {
    let path = path.as_ref();
    let io = |e| DatasetError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let mut file = BufReader::new(File::open(path).map_err(io)?);
    let mut head = [0u8; 2];
    let mut n = 0;
    while n < 2 {
        let k = file.read(&mut head[n..]).map_err(io)?;
        if k == 0 {
            break;
        }
        n += k;
    }
    let gzip = n == 2 && head == GZIP_MAGIC;
    let chained = (&head[..n]).chain(file);
    let inner: Box<dyn Read> = if gzip {
        Box::new(GzDecoder::new(chained))
    } else {
        Box::new(chained)
    };
    decode(Counted {
        path,
        inner,
        gzip,
        pos: 0,
    })
}

fn decode(mut r: Counted) -> Result<IdxArray> {
    let magic = r.read_exact_or(4, "4-byte magic header")?;
    if magic[0] != 0 || magic[1] != 0 {
        return Err(r.malformed(
            0,
            format!(
                "bad magic {:02x} {:02x} (an IDX file starts with two zero bytes)",
                magic[0], magic[1]
            ),
        ));
    }
    let dtype = IdxDType::from_code(magic[2]).ok_or_else(|| {
        r.malformed(
            2,
            format!(
                "unknown element type code 0x{:02x} (known: 08 09 0b 0c 0d 0e)",
                magic[2]
            ),
        )
    })?;
    let rank = magic[3] as usize;
    if rank == 0 {
        return Err(r.malformed(3, "rank 0 (an IDX array has at least one dim)"));
    }
    let dim_bytes = r.read_exact_or(4 * rank as u64, "dims")?;
    let dims: Vec<usize> = dim_bytes
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let mut total: u64 = dtype.size_bytes() as u64;
    for (i, &d) in dims.iter().enumerate() {
        total = total
            .checked_mul(d as u64)
            .filter(|&t| t <= isize::MAX as u64)
            .ok_or_else(|| {
                r.malformed(
                    4 + 4 * i as u64,
                    format!("dims {dims:?} of {dtype:?} overflow the addressable size"),
                )
            })?;
    }
    let data_start = r.pos;
    let data = r.read_up_to(total)?;
    if (data.len() as u64) < total {
        return Err(r.malformed(
            r.pos,
            format!(
                "data truncated: dims {dims:?} of {dtype:?} need {total} bytes from byte \
                 {data_start}, the file ends after {}",
                data.len()
            ),
        ));
    }
    let extra = r.read_up_to(1)?;
    if !extra.is_empty() {
        return Err(r.malformed(
            r.pos - 1,
            format!("trailing bytes after the {total} data bytes the dims {dims:?} declare"),
        ));
    }
    Ok(IdxArray { dtype, dims, data })
}

/// Load an image file (u8 `[N, rows, cols]`) and a label file (u8 `[N]`) into a dataset;
/// pixels are scaled to `[0, 1]` by 1/255.
pub fn load_idx_pair(
    images_path: impl AsRef<Path>,
    labels_path: impl AsRef<Path>,
) -> Result<Dataset> {
    let (ip, lp) = (images_path.as_ref(), labels_path.as_ref());
    let images = read_idx(ip)?;
    let labels = read_idx(lp)?;
    let bad = |path: &Path, offset: u64, msg: String| DatasetError::Idx {
        path: path.to_path_buf(),
        offset,
        msg,
    };
    if images.dtype != IdxDType::U8 || images.dims.len() != 3 {
        return Err(bad(
            ip,
            2,
            format!(
                "expected u8 images [N, rows, cols], found {:?} {:?}",
                images.dtype, images.dims
            ),
        ));
    }
    if labels.dtype != IdxDType::U8 || labels.dims.len() != 1 {
        return Err(bad(
            lp,
            2,
            format!(
                "expected u8 labels [N], found {:?} {:?}",
                labels.dtype, labels.dims
            ),
        ));
    }
    let (n, rows, cols) = (images.dims[0], images.dims[1], images.dims[2]);
    if labels.dims[0] != n {
        return Err(DatasetError::CountMismatch {
            images: ip.to_path_buf(),
            n_images: n,
            labels: lp.to_path_buf(),
            n_labels: labels.dims[0],
        });
    }
    Dataset::new(
        images.data.iter().map(|&p| p as f32 / 255.0).collect(),
        labels.data,
        rows,
        cols,
    )
}

/// Where Debian's `dataset-fashion-mnist` package installs the four gzip IDX files.
pub const DEBIAN_FASHION_MNIST_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// The four standard MNIST / Fashion-MNIST file stems.
pub const MNIST_FILES: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

/// `dir/name.gz` if present, else `dir/name`, else an error naming both.
fn find(dir: &Path, name: &str) -> Result<PathBuf> {
    let gz = dir.join(format!("{name}.gz"));
    if gz.is_file() {
        return Ok(gz);
    }
    let plain = dir.join(name);
    if plain.is_file() {
        return Ok(plain);
    }
    Err(DatasetError::NotFound {
        dir: dir.to_path_buf(),
        name: name.to_string(),
    })
}

/// Load the training (`train = true`, 60k for MNIST) or test split from a directory holding
/// the standard file names (`train-images-idx3-ubyte[.gz]`, `t10k-labels-idx1-ubyte[.gz]` …).
pub fn load_mnist_dir(dir: impl AsRef<Path>, train: bool) -> Result<Dataset> {
    let dir = dir.as_ref();
    let (i, l) = if train { (0, 1) } else { (2, 3) };
    load_idx_pair(find(dir, MNIST_FILES[i])?, find(dir, MNIST_FILES[l])?)
}
