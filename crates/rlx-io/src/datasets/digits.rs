//! The embedded default dataset: scikit-learn's copy of the UCI optical handwritten digits
//! (1797 samples, 8×8 pixels with values 0..16, 10 classes). Licence and provenance:
//! `data/LICENSE-digits.txt` (BSD-3, also exported as `DIGITS_LICENSE`).
use super::error::{DatasetError, Result};
use super::Dataset;
use flate2::read::GzDecoder;
use std::io::Read;

/// `digits.csv.gz` exactly as shipped in the scikit-learn wheel.
pub const DIGITS_CSV_GZ: &[u8] = include_bytes!("../../data/digits.csv.gz");
/// Its licence and source note.
pub const DIGITS_LICENSE: &str = include_str!("../../data/LICENSE-digits.txt");

const SOURCE: &str = "embedded digits.csv.gz";
const SIDE: usize = 8;
/// Pixel values count on-pixels in a 4×4 block, so 16 is the maximum.
const MAX_PIXEL: f32 = 16.0;

impl Dataset {
    /// The embedded 8×8 digits, pixels scaled to `[0, 1]` (value / 16).
    pub fn digits() -> Result<Dataset> {
        let mut text = String::new();
        GzDecoder::new(DIGITS_CSV_GZ)
            .read_to_string(&mut text)
            .map_err(|e| DatasetError::Csv {
                source_name: SOURCE.into(),
                line: 0,
                msg: format!("cannot decompress: {e}"),
            })?;
        parse_digits_csv(&text, SOURCE)
    }
}

/// Parse digits CSV text: per line 64 pixel values in 0..=16, then the label in 0..=9.
pub fn parse_digits_csv(text: &str, source_name: &str) -> Result<Dataset> {
    let px = SIDE * SIDE;
    let mut images = Vec::new();
    let mut labels = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |msg: String| DatasetError::Csv {
            source_name: source_name.into(),
            line: line_no,
            msg,
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != px + 1 {
            return Err(err(format!(
                "expected {} fields, found {}",
                px + 1,
                fields.len()
            )));
        }
        for (j, f) in fields.iter().enumerate() {
            let v: f32 = f
                .trim()
                .parse()
                .map_err(|_| err(format!("field {} is not a number: {f:?}", j + 1)))?;
            let max = if j < px { MAX_PIXEL } else { 9.0 };
            if !(0.0..=max).contains(&v) || v.fract() != 0.0 {
                return Err(err(format!(
                    "field {} = {v} is not an integer in 0..={max}",
                    j + 1
                )));
            }
            if j < px {
                images.push(v / MAX_PIXEL);
            } else {
                labels.push(v as u8);
            }
        }
    }
    Dataset::new(images, labels, SIDE, SIDE)
}
