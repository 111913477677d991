//! Graph files: JSON (readable, diffable) and a compact versioned binary form.
//!
//! Binary layout (all integers little-endian):
//!
//! ```text
//! offset 0   b"RLXG"                      magic
//! offset 4   u16  format version          (GRAPH_FORMAT_VERSION)
//! offset 6   u64  body length in bytes
//! offset 14  body                         postcard encoding of the Graph's fields
//! end - 4    u32  CRC-32 (IEEE) of every byte before it
//! ```
//!
//! The body is postcard over the serde derives of `Graph`, so any change to the order or
//! fields of `Op` (or its parameter types) changes the body: bump `GRAPH_FORMAT_VERSION`
//! when that happens. Decoding checks the frame (magic, version, length, checksum) before
//! touching the body, so a truncated or corrupted file is reported as such rather than as
//! a confusing decode error; the body is then decoded node by node so errors say which
//! node broke, and the decoded graph is verified.
use crate::{Graph, IrError, Node, NodeId, Op};
use postcard::de_flavors::Flavor;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// First four bytes of a binary graph file.
pub const GRAPH_MAGIC: [u8; 4] = *b"RLXG";
/// Version of the binary and JSON layouts this build writes and reads.
pub const GRAPH_FORMAT_VERSION: u16 = 1;
/// Bytes before the body: magic, version, body length.
pub const GRAPH_HEADER_LEN: usize = 4 + 2 + 8;
const CRC_LEN: usize = 4;

/// CRC-32 (IEEE 802.3, reflected, as zlib / PNG / gzip use).
pub fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut c = !0u32;
    for &b in bytes {
        c = TABLE[((c ^ b as u32) & 0xFF) as usize] ^ (c >> 8);
    }
    !c
}

fn decode_err(offset: usize, msg: impl Into<String>) -> IrError {
    IrError::Decode {
        offset,
        msg: msg.into(),
    }
}

/// A postcard input that remembers where it is, so errors carry a byte offset.
struct Tracked<'de> {
    data: &'de [u8],
    pos: usize,
    /// Start of the most recent read: where a value that failed to decode begins
    /// (or its last byte, for a multi-byte varint).
    last: usize,
}

impl<'de> Flavor<'de> for Tracked<'de> {
    /// `(bytes consumed, start of the last read)`.
    type Remainder = (usize, usize);
    type Source = &'de [u8];

    fn pop(&mut self) -> postcard::Result<u8> {
        self.last = self.pos;
        let b = *self
            .data
            .get(self.pos)
            .ok_or(postcard::Error::DeserializeUnexpectedEnd)?;
        self.pos += 1;
        Ok(b)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.data.len() - self.pos)
    }

    fn try_take_n(&mut self, ct: usize) -> postcard::Result<&'de [u8]> {
        self.last = self.pos;
        let end = self
            .pos
            .checked_add(ct)
            .filter(|&e| e <= self.data.len())
            .ok_or(postcard::Error::DeserializeUnexpectedEnd)?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn finalize(self) -> postcard::Result<(usize, usize)> {
        Ok((self.pos, self.last))
    }
}

/// Decodes successive values from the body, turning postcard errors into offsets.
struct BodyReader<'de> {
    de: Option<postcard::Deserializer<'de, Tracked<'de>>>,
    /// Absolute offset of the body in the file.
    base: usize,
    len: usize,
}

impl<'de> BodyReader<'de> {
    fn new(body: &'de [u8], base: usize) -> BodyReader<'de> {
        BodyReader {
            de: Some(postcard::Deserializer::from_flavor(Tracked {
                data: body,
                pos: 0,
                last: 0,
            })),
            base,
            len: body.len(),
        }
    }

    fn read<T: Deserialize<'de>>(&mut self, what: &str) -> Result<T, IrError> {
        let Some(de) = self.de.as_mut() else {
            return Err(decode_err(self.base, "reader already finished"));
        };
        match T::deserialize(&mut *de) {
            Ok(v) => Ok(v),
            Err(e) => {
                // The deserializer is spent after an error; take it to learn the offset.
                let (pos, last) = self
                    .de
                    .take()
                    .map(|d| d.finalize().unwrap_or((self.len, self.len)))
                    .unwrap_or((self.len, self.len));
                let at = if e == postcard::Error::DeserializeUnexpectedEnd {
                    pos
                } else {
                    last
                };
                Err(decode_err(self.base + at, format!("{what}: {e}")))
            }
        }
    }

    /// Bytes consumed so far.
    fn finish(mut self) -> usize {
        self.de
            .take()
            .and_then(|d| d.finalize().ok())
            .map(|(pos, _)| pos)
            .unwrap_or(self.len)
    }
}

fn decode_body(body: &[u8], base: usize) -> Result<Graph, IrError> {
    let mut r = BodyReader::new(body, base);
    let name: String = r.read("graph name")?;
    let count: usize = r.read("node count")?;
    // A node takes at least 6 bytes (id, op, inputs, dims, dtype, name), so this bounds
    // the allocation by the input size; a count that overstates it fails in the loop at
    // the offset where the bytes run out.
    let mut nodes = Vec::with_capacity(count.min(body.len() / 6));
    for i in 0..count {
        let node: Node = r.read(&format!("node {i} of {count}"))?;
        nodes.push(node);
    }
    let outputs: Vec<NodeId> = r.read("graph outputs")?;
    let used = r.finish();
    if used != body.len() {
        return Err(decode_err(
            base + used,
            format!("{} unused bytes at the end of the body", body.len() - used),
        ));
    }
    Ok(Graph {
        name,
        nodes,
        outputs,
    })
}

/// Checks the frame and returns the body with its offset.
fn unframe(bytes: &[u8]) -> Result<(&[u8], usize), IrError> {
    let have = bytes.len();
    let magic_have = &bytes[..have.min(4)];
    if magic_have != &GRAPH_MAGIC[..magic_have.len()] {
        return Err(decode_err(
            0,
            format!("not an rlx graph: magic {magic_have:02x?}, expected \"RLXG\""),
        ));
    }
    if have < GRAPH_HEADER_LEN {
        return Err(decode_err(
            have,
            format!("truncated header: {have} of {GRAPH_HEADER_LEN} bytes"),
        ));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != GRAPH_FORMAT_VERSION {
        return Err(decode_err(
            4,
            format!(
                "unsupported format version {version} (this build reads {GRAPH_FORMAT_VERSION})"
            ),
        ));
    }
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(&bytes[6..14]);
    let body_len = u64::from_le_bytes(len8);
    let total = usize::try_from(body_len)
        .ok()
        .and_then(|b| b.checked_add(GRAPH_HEADER_LEN + CRC_LEN));
    let Some(total) = total else {
        return Err(decode_err(
            6,
            format!("body length {body_len} is impossibly large"),
        ));
    };
    if have < total {
        return Err(decode_err(
            have,
            format!("truncated: the header promises {total} bytes, the input has {have}"),
        ));
    }
    if have > total {
        return Err(decode_err(
            total,
            format!("{} trailing bytes after the checksum", have - total),
        ));
    }
    let crc_at = total - CRC_LEN;
    let mut crc4 = [0u8; 4];
    crc4.copy_from_slice(&bytes[crc_at..]);
    let stored = u32::from_le_bytes(crc4);
    let actual = crc32(&bytes[..crc_at]);
    if stored != actual {
        return Err(decode_err(
            crc_at,
            format!("checksum mismatch: stored {stored:08x}, computed {actual:08x} (corrupted)"),
        ));
    }
    Ok((&bytes[GRAPH_HEADER_LEN..crc_at], GRAPH_HEADER_LEN))
}

/// The JSON document: the graph tagged with the format version.
#[derive(Serialize)]
struct JsonOut<'a> {
    format: &'a str,
    version: u16,
    graph: &'a Graph,
}

#[derive(Deserialize)]
struct JsonIn {
    format: String,
    version: u16,
    graph: Graph,
}

const JSON_FORMAT: &str = "rlx-graph";

/// JSON has no infinities or NaN (serde_json writes `null`, which cannot be read back), so
/// float params that must survive a round trip say so up front. Pad's fill value is the
/// exception: it is written as a string when not finite (see `json_float`).
fn check_json_floats(g: &Graph) -> Result<(), IrError> {
    for n in &g.nodes {
        let floats: Vec<(&str, f32)> = match &n.op {
            Op::LayerNorm { eps, .. }
            | Op::RmsNorm { eps, .. }
            | Op::FusedResidualLN { eps, .. }
            | Op::FusedResidualRmsNorm { eps, .. } => vec![("eps", *eps)],
            Op::Attention(spec) => spec
                .score_scale
                .map(|s| ("score_scale", s))
                .into_iter()
                .chain(spec.attn_logit_softcap.map(|c| ("attn_logit_softcap", c)))
                .collect(),
            _ => vec![],
        };
        if let Some((what, v)) = floats.into_iter().find(|(_, v)| !v.is_finite()) {
            return Err(IrError::Json(format!(
                "node {} ({}): {what} = {v} cannot be written as JSON",
                n.label(),
                n.op.kind()
            )));
        }
    }
    Ok(())
}

/// Serde helper for an f64 that may be infinite or NaN: a plain number in binary forms, a
/// number or one of `"inf"`, `"-inf"`, `"nan"` in human-readable ones.
pub(crate) mod json_float {
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() && !v.is_finite() {
            let t = if v.is_nan() {
                "nan"
            } else if *v > 0.0 {
                "inf"
            } else {
                "-inf"
            };
            s.serialize_str(t)
        } else {
            s.serialize_f64(*v)
        }
    }

    struct F64Visitor;

    impl Visitor<'_> for F64Visitor {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a number or \"inf\", \"-inf\", \"nan\"")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            match v {
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                "nan" => Ok(f64::NAN),
                _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
            }
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        if d.is_human_readable() {
            d.deserialize_any(F64Visitor)
        } else {
            d.deserialize_f64(F64Visitor)
        }
    }
}

fn file_err(path: &Path, error: IrError) -> IrError {
    IrError::File {
        path: path.display().to_string(),
        error: Box::new(error),
    }
}

fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

impl Graph {
    /// Pretty-printed JSON, tagged with the format version.
    pub fn to_json(&self) -> Result<String, IrError> {
        check_json_floats(self)?;
        serde_json::to_string_pretty(&JsonOut {
            format: JSON_FORMAT,
            version: GRAPH_FORMAT_VERSION,
            graph: self,
        })
        .map_err(|e| IrError::Json(e.to_string()))
    }

    /// Parse JSON written by `to_json` and verify the graph.
    pub fn from_json(text: &str) -> Result<Graph, IrError> {
        let g = Graph::from_json_unverified(text)?;
        g.verify()?;
        Ok(g)
    }

    /// Parse JSON without verifying the graph (to inspect a broken file).
    pub fn from_json_unverified(text: &str) -> Result<Graph, IrError> {
        let doc: JsonIn = serde_json::from_str(text).map_err(|e| IrError::Json(e.to_string()))?;
        if doc.format != JSON_FORMAT {
            return Err(IrError::Json(format!(
                "format is \"{}\", expected \"{JSON_FORMAT}\"",
                doc.format
            )));
        }
        if doc.version != GRAPH_FORMAT_VERSION {
            return Err(IrError::Json(format!(
                "unsupported format version {} (this build reads {GRAPH_FORMAT_VERSION})",
                doc.version
            )));
        }
        Ok(doc.graph)
    }

    /// The compact binary form (see the module docs for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(GRAPH_HEADER_LEN + 64 * self.nodes.len());
        out.extend_from_slice(&GRAPH_MAGIC);
        out.extend_from_slice(&GRAPH_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&[0u8; 8]);
        // postcard fails only on sequences of unknown length or a full fixed buffer; the
        // derives here have neither and the output grows, so this cannot fail.
        let mut out = postcard::to_extend(self, out).expect("postcard encoding of a Graph");
        let body_len = (out.len() - GRAPH_HEADER_LEN) as u64;
        out[6..14].copy_from_slice(&body_len.to_le_bytes());
        let crc = crc32(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decode the binary form and verify the graph. Malformed input is an
    /// `IrError::Decode` with the offset where it went wrong; never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<Graph, IrError> {
        let g = Graph::from_bytes_unverified(bytes)?;
        g.verify()?;
        Ok(g)
    }

    /// Decode the binary form without verifying the graph (to inspect a broken file).
    pub fn from_bytes_unverified(bytes: &[u8]) -> Result<Graph, IrError> {
        let (body, base) = unframe(bytes)?;
        decode_body(body, base)
    }

    /// Write the graph: JSON for a `.json` path, the binary form otherwise.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<(), IrError> {
        let path = path.as_ref();
        let bytes = if is_json(path) {
            self.to_json().map_err(|e| file_err(path, e))?.into_bytes()
        } else {
            self.to_bytes()
        };
        std::fs::write(path, bytes).map_err(|e| file_err(path, IrError::Io(e.to_string())))
    }

    /// Read and verify a graph written by `save` (the form chosen by extension as there).
    pub fn load(path: impl AsRef<Path>) -> Result<Graph, IrError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| file_err(path, IrError::Io(e.to_string())))?;
        let g = if is_json(path) {
            let text = std::str::from_utf8(&bytes).map_err(|e| {
                file_err(
                    path,
                    IrError::Json(format!("not UTF-8 at byte {}", e.valid_up_to())),
                )
            })?;
            Graph::from_json(text)
        } else {
            Graph::from_bytes(&bytes)
        };
        g.map_err(|e| file_err(path, e))
    }
}
