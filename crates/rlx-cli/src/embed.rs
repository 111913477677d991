//! `rlx embed`: sentence embeddings of texts (arguments or the lines of a file) with a
//! sentence-transformers folder, as one JSON line per text on stdout or an `.npy` file
//! (`[n, dim]` f32); a progress bar on stderr for long inputs, and what was done and how
//! long it took.
use crate::CliError;
use indicatif::{ProgressBar, ProgressStyle};
use rlx::prelude::{DType, Device};
use rlx_models::{EmbedOptions, Embedder};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct EmbedArgs {
    /// A sentence-transformers folder (modules.json, config.json, model.safetensors,
    /// tokenizer.json, 1_Pooling/config.json).
    #[arg(long)]
    pub model: PathBuf,
    /// cpu, cuda[:N] or wgpu[:N] (default: the best available)
    #[arg(long)]
    pub device: Option<String>,
    /// Texts per run.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Compute dtype: f32, f16 or bf16.
    #[arg(long, default_value = "f32")]
    pub precision: String,
    /// Read the texts from this file, one per line (empty lines are skipped).
    #[arg(long, conflicts_with = "texts")]
    pub input: Option<PathBuf>,
    /// Write the embeddings here as .npy (f32, [n, dim]) instead of JSON lines on stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// The texts to embed.
    pub texts: Vec<String>,
}

/// More batches than this show a progress bar.
const BAR_AFTER: usize = 4;

pub fn parse_precision(s: &str) -> Result<DType, CliError> {
    match s.to_ascii_lowercase().as_str() {
        "f32" | "fp32" => Ok(DType::F32),
        "f16" | "fp16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        _ => Err(CliError::Usage(format!(
            "unknown precision \"{s}\": use f32, f16 or bf16"
        ))),
    }
}

fn read_texts(a: &EmbedArgs) -> Result<Vec<String>, CliError> {
    let texts = match &a.input {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CliError::Usage(format!("cannot read --input {}: {e}", path.display()))
            })?;
            text.lines()
                .map(|l| l.trim_end_matches('\r'))
                .filter(|l| !l.trim().is_empty())
                .map(str::to_string)
                .collect()
        }
        None => a.texts.clone(),
    };
    if texts.is_empty() {
        return Err(CliError::Usage(
            "nothing to embed: give texts as arguments or --input FILE".into(),
        ));
    }
    Ok(texts)
}

pub fn run(a: &EmbedArgs) -> Result<(), CliError> {
    let precision = parse_precision(&a.precision)?;
    let device = crate::parse_device(a.device.as_deref())?;
    if a.batch == 0 {
        return Err(CliError::Usage("--batch must be positive".into()));
    }
    let texts = read_texts(a)?;
    let t0 = Instant::now();
    let opts = EmbedOptions {
        device,
        precision,
        batch: a.batch,
    };
    let emb = Embedder::load(&a.model, &opts)?;
    let load_s = t0.elapsed().as_secs_f64();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let batches = emb.batches(refs.len());
    let bar = if batches > BAR_AFTER {
        let bar = ProgressBar::new(batches as u64);
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} batches {eta}") {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let t1 = Instant::now();
    let vecs = emb.embed_with(&refs, |done, _| bar.set_position(done as u64))?;
    bar.finish_and_clear();
    let embed_s = t1.elapsed().as_secs_f64();
    match &a.output {
        Some(path) => write_npy(path, &vecs, emb.dim())?,
        None => write_json_lines(&vecs)?,
    }
    eprintln!(
        "embedded {} texts (dim {}, {batches} batches of up to {}) with {} on {} in {}: \
         load {load_s:.2} s, embed {embed_s:.2} s ({:.1} texts/s){}",
        vecs.len(),
        emb.dim(),
        a.batch,
        a.model.display(),
        device_name(device),
        precision,
        vecs.len() as f64 / embed_s.max(1e-9),
        a.output
            .as_ref()
            .map(|p| format!(", wrote {}", p.display()))
            .unwrap_or_default()
    );
    Ok(())
}

fn device_name(d: Device) -> String {
    d.to_string()
}

fn write_json_lines(vecs: &[Vec<f32>]) -> Result<(), CliError> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let io = |e: std::io::Error| CliError::Usage(format!("writing stdout: {e}"));
    for (i, v) in vecs.iter().enumerate() {
        let line = serde_json::json!({ "index": i, "embedding": v });
        writeln!(out, "{line}").map_err(io)?;
    }
    out.flush().map_err(io)
}

/// The `.npy` v1.0 bytes of a row-major f32 `[rows.len(), dim]` array.
pub fn npy_bytes(rows: &[Vec<f32>], dim: usize) -> Vec<u8> {
    let dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {dim}), }}",
        rows.len()
    );
    // Magic (6) + version (2) + header length (2) + dict + padding + '\n' is a multiple of
    // 64, as the format asks so the data is aligned.
    let unpadded = 10 + dict.len() + 1;
    let header_len = dict.len() + 1 + (64 - unpadded % 64) % 64;
    let mut out = Vec::with_capacity(10 + header_len + rows.len() * dim * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header_len as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out.resize(10 + header_len - 1, b' ');
    out.push(b'\n');
    for r in rows {
        for x in r {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

fn write_npy(path: &Path, rows: &[Vec<f32>], dim: usize) -> Result<(), CliError> {
    std::fs::write(path, npy_bytes(rows, dim))
        .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_header_is_aligned_and_describes_the_array() {
        let rows = vec![vec![1.0f32, -2.5, 3.0], vec![0.5, 0.0, -1.0]];
        let b = npy_bytes(&rows, 3);
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hl) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + hl]).unwrap();
        assert!(header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert!(header.ends_with('\n'));
        let data: Vec<f32> = (b[10 + hl..].chunks(4))
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(data, [1.0, -2.5, 3.0, 0.5, 0.0, -1.0]);
    }

    #[test]
    fn precision_names() {
        assert_eq!(parse_precision("bf16").unwrap(), DType::BF16);
        assert_eq!(parse_precision("FP16").unwrap(), DType::F16);
        assert!(parse_precision("int8").is_err());
    }
}
