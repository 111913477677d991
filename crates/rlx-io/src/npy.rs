//! NumPy `.npy` files (format versions 1.0, 2.0 and 3.0) to and from `HostTensor`:
//! little-endian f32 / f64 / f16 / i64 / i32 / u8 / bool in C order. `HostTensor` already
//! stores little-endian element bytes, so the data section is copied as it is; everything
//! the header says (magic, version, length, descr, order, shape against the byte count) is
//! checked, and what rlx does not represent (big-endian, Fortran order, other dtypes) is a
//! typed error rather than a guess.
use rlx_ir::{DType, HostTensor};
use std::path::Path;
use thiserror::Error;

const MAGIC: &[u8] = b"\x93NUMPY";

#[derive(Debug, Error, Clone, PartialEq)]
pub enum NpyError {
    #[error("{path}: {msg}")]
    Io { path: String, msg: String },
    /// The bytes are not a valid `.npy` file.
    #[error("{what}: not a valid .npy file: {msg}")]
    Format { what: String, msg: String },
    /// A valid file holding something rlx does not represent.
    #[error("{what}: unsupported .npy content: {msg}")]
    Unsupported { what: String, msg: String },
}

/// The npy `descr` of a dtype; bf16 has none (it is written as f32 by `npy_bytes`).
fn descr(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "<f4",
        DType::F64 => "<f8",
        DType::F16 => "<f2",
        DType::I64 => "<i8",
        DType::I32 => "<i4",
        DType::U8 => "|u1",
        DType::Bool => "|b1",
        DType::BF16 => return None,
    })
}

fn dtype_of(descr: &str) -> Option<DType> {
    // One-byte types carry no byte order; numpy writes `|`, but `<` and `=` mean the same.
    Some(match descr {
        "<f4" => DType::F32,
        "<f8" => DType::F64,
        "<f2" => DType::F16,
        "<i8" => DType::I64,
        "<i4" => DType::I32,
        "|u1" | "<u1" | "=u1" => DType::U8,
        "|b1" | "<b1" | "=b1" => DType::Bool,
        _ => return None,
    })
}

/// Read an `.npy` file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<HostTensor, NpyError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| NpyError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    parse_npy(&bytes, &path.display().to_string())
}

/// Write `t` as an `.npy` file.
pub fn write_npy(path: impl AsRef<Path>, t: &HostTensor) -> Result<(), NpyError> {
    let path = path.as_ref();
    std::fs::write(path, npy_bytes(t)).map_err(|e| NpyError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    })
}

/// Decode `.npy` bytes; `what` names the source in errors.
pub fn parse_npy(bytes: &[u8], what: &str) -> Result<HostTensor, NpyError> {
    let bad = |msg: String| NpyError::Format {
        what: what.to_string(),
        msg,
    };
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad("missing the \\x93NUMPY magic".into()));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            let b = bytes
                .get(8..12)
                .ok_or_else(|| bad("truncated header length".into()))?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        _ => return Err(bad(format!("format version {major}.{minor}"))),
    };
    let end = start
        .checked_add(len)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| bad(format!("header of {len} bytes runs past the file end")))?;
    // Version 3 allows UTF-8 in the header; 1 and 2 are latin-1, whose ASCII subset is
    // all a valid header for a plain dtype uses.
    let text =
        std::str::from_utf8(&bytes[start..end]).map_err(|_| bad("header is not text".into()))?;
    let header = parse_header(text).map_err(bad)?;
    let unsupported = |msg: String| NpyError::Unsupported {
        what: what.to_string(),
        msg,
    };
    if header.fortran_order {
        return Err(unsupported("Fortran order (rlx reads C order)".into()));
    }
    let dtype = dtype_of(&header.descr).ok_or_else(|| {
        unsupported(format!(
            "dtype '{}' (rlx reads <f4 <f8 <f2 <i8 <i4 |u1 |b1)",
            header.descr
        ))
    })?;
    let data = bytes[end..].to_vec();
    let t = HostTensor::new(&header.shape, dtype, data).map_err(|e| bad(e.to_string()))?;
    if dtype == DType::Bool && t.data.iter().any(|&b| b > 1) {
        return Err(bad("a bool element that is neither 0 nor 1".into()));
    }
    Ok(t)
}

/// The `.npy` v1.0 bytes of `t` (v2.0 when the header would not fit v1's 16-bit length);
/// bf16 is widened to f32, which numpy cannot hold natively.
pub fn npy_bytes(t: &HostTensor) -> Vec<u8> {
    let (d, data) = match descr(t.dtype) {
        Some(d) => (d, std::borrow::Cow::Borrowed(&t.data)),
        None => {
            let v: Vec<u8> = t
                .to_f32_vec()
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect();
            ("<f4", std::borrow::Cow::Owned(v))
        }
    };
    let dims: Vec<String> = t.shape.iter().map(|n| n.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '{d}', 'fortran_order': False, 'shape': {shape}, }}");
    // The data must start on a 64-byte boundary; the header ends in a newline.
    // v1 stores the padded header length (up to 64 more bytes) in 16 bits.
    let v1 = header.len() + 65 <= u16::MAX as usize;
    let prefix = if v1 { 10 } else { 12 };
    let pad = (64 - (prefix + header.len() + 1) % 64) % 64;
    header.extend(std::iter::repeat_n(' ', pad));
    header.push('\n');
    let mut out = Vec::with_capacity(prefix + header.len() + data.len());
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&data);
    out
}

struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// The header is a Python dict literal with exactly the keys `descr`, `fortran_order` and
/// `shape`; this reads that literal, nothing more general.
fn parse_header(text: &str) -> Result<Header, String> {
    let mut p = Lexer {
        s: text.as_bytes(),
        i: 0,
    };
    p.expect(b'{')?;
    let (mut descr, mut order, mut shape) = (None, None, None);
    loop {
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string()?;
        p.expect(b':')?;
        match key.as_str() {
            "descr" => descr = Some(p.string()?),
            "fortran_order" => order = Some(p.boolean()?),
            "shape" => shape = Some(p.tuple()?),
            k => return Err(format!("unexpected header key '{k}'")),
        }
        p.skip_ws();
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    p.skip_ws();
    if p.i != p.s.len() {
        return Err("text after the header dict".into());
    }
    Ok(Header {
        descr: descr.ok_or("header has no 'descr'")?,
        fortran_order: order.ok_or("header has no 'fortran_order'")?,
        shape: shape.ok_or("header has no 'shape'")?,
    })
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lexer<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!(
                "expected '{}' at header byte {}",
                c as char, self.i
            ))
        }
    }
    fn string(&mut self) -> Result<String, String> {
        self.skip_ws();
        let q = match self.s.get(self.i) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(format!("expected a string at header byte {}", self.i)),
        };
        let from = self.i + 1;
        let len = self.s[from..]
            .iter()
            .position(|&c| c == q)
            .ok_or("unterminated string in the header")?;
        self.i = from + len + 1;
        Ok(String::from_utf8_lossy(&self.s[from..from + len]).into_owned())
    }
    fn boolean(&mut self) -> Result<bool, String> {
        self.skip_ws();
        for (word, v) in [("True", true), ("False", false)] {
            if self.s[self.i..].starts_with(word.as_bytes()) {
                self.i += word.len();
                return Ok(v);
            }
        }
        Err(format!("expected True or False at header byte {}", self.i))
    }
    fn tuple(&mut self) -> Result<Vec<usize>, String> {
        self.expect(b'(')?;
        let mut dims = vec![];
        loop {
            if self.eat(b')') {
                return Ok(dims);
            }
            self.skip_ws();
            let from = self.i;
            while self.s.get(self.i).is_some_and(|c| c.is_ascii_digit()) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[from..self.i]).unwrap_or("");
            let n: usize = digits
                .parse()
                .map_err(|_| format!("expected a dim at header byte {from}"))?;
            dims.push(n);
            if !self.eat(b',') {
                self.expect(b')')?;
                return Ok(dims);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_testutil::Rng;

    fn roundtrip(t: &HostTensor) {
        let b = npy_bytes(t);
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0, "data must start 64-byte aligned");
        assert_eq!(&parse_npy(&b, "t").unwrap(), t);
    }

    #[test]
    fn every_dtype_round_trips() {
        let mut rng = Rng::new("npy roundtrip");
        for _ in 0..20 {
            let rank = rng.below(4);
            let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(5)).collect();
            let n: usize = shape.iter().product();
            let vals: Vec<f64> = (0..n).map(|_| rng.range(-100.0, 100.0)).collect();
            for dt in [
                DType::F32,
                DType::F64,
                DType::F16,
                DType::I64,
                DType::I32,
                DType::U8,
                DType::Bool,
            ] {
                let v: Vec<f64> = match dt {
                    DType::U8 => vals.iter().map(|x| x.abs().floor()).collect(),
                    DType::Bool => vals.iter().map(|x| (*x > 0.0) as u8 as f64).collect(),
                    _ if dt.is_int() => vals.iter().map(|x| x.floor()).collect(),
                    _ => vals.clone(),
                };
                roundtrip(&HostTensor::from_f64_as(&shape, &v, dt));
            }
        }
    }

    /// Bytes numpy 1.24 wrote for `np.save(f, np.arange(6, dtype='<i4').reshape(2, 3))`,
    /// header text as numpy formats it: an independent check of the reader.
    #[test]
    fn reads_numpys_own_header() {
        let mut h = b"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }".to_vec();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(b' ');
        }
        h.push(b'\n');
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[1, 0]);
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(&h);
        for i in 0..6i32 {
            b.extend_from_slice(&i.to_le_bytes());
        }
        let t = parse_npy(&b, "arange").unwrap();
        assert_eq!(t.shape, vec![2, 3]);
        assert_eq!(t.dtype, DType::I32);
        assert_eq!(t.to_i64_vec(), vec![0, 1, 2, 3, 4, 5]);
        // A 1-d shape `(6,)` and a 0-d shape `()`.
        let one = HostTensor::from_i32(&[6], &[0, 1, 2, 3, 4, 5]);
        assert!(String::from_utf8_lossy(&npy_bytes(&one)).contains("'shape': (6,)"));
        roundtrip(&HostTensor::from_f32(&[], &[2.5]));
    }

    #[test]
    fn bf16_is_written_as_f32() {
        let t = HostTensor::from_f64_as(&[3], &[1.5, -2.0, 0.25], DType::BF16);
        let back = parse_npy(&npy_bytes(&t), "bf16").unwrap();
        assert_eq!(back.dtype, DType::F32);
        assert_eq!(back.to_f64_vec(), vec![1.5, -2.0, 0.25]);
    }

    #[test]
    fn malformed_files_are_typed_errors() {
        let good = npy_bytes(&HostTensor::from_f32(&[2, 2], &[1.0, 2.0, 3.0, 4.0]));
        let fmt = |b: &[u8]| matches!(parse_npy(b, "x"), Err(NpyError::Format { .. }));
        let uns = |b: &[u8]| matches!(parse_npy(b, "x"), Err(NpyError::Unsupported { .. }));
        assert!(fmt(b""));
        assert!(fmt(b"PK\x03\x04 not npy at all"));
        // Truncated data, truncated header, a header length past the end, a bad version.
        assert!(fmt(&good[..good.len() - 1]));
        assert!(fmt(&good[..40]));
        let mut long = good.clone();
        long[8] = 0xff;
        long[9] = 0xff;
        assert!(fmt(&long));
        let mut v9 = good.clone();
        v9[6] = 9;
        assert!(fmt(&v9));
        // Rewrites header bytes in place (same length, so the header length stays valid).
        let edit = |from: &str, to: &str| {
            assert_eq!(from.len(), to.len());
            let at = good
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .expect("pattern in the header");
            let mut b = good.clone();
            b[at..at + to.len()].copy_from_slice(to.as_bytes());
            b
        };
        assert!(uns(&edit("'<f4'", "'>f4'")));
        assert!(uns(&edit("'<f4'", "'<c8'")));
        assert!(uns(&edit("False", "True ")));
        assert!(fmt(&edit("(2, 2)", "(2, 3)")));
        assert!(fmt(&edit("(2, 2)", "(2,-2)")));
        assert!(fmt(&edit("'descr'", "'dxscr'")));
        let mut b = npy_bytes(&HostTensor::from_bool(&[2], &[true, false]));
        *b.last_mut().unwrap() = 7;
        assert!(fmt(&b));
    }
}
