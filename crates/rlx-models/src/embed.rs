//! Sentence embeddings from a sentence-transformers folder, as `SentenceTransformer.encode`
//! computes them: `modules.json` names the pipeline (Transformer → Pooling → optional
//! Normalize), `sentence_bert_config.json` the truncation length and lower-casing,
//! `tokenizer.json` the tokenizer (its own truncation and padding settings are replaced by
//! the pipeline's, as sentence-transformers does), `config.json` + `model.safetensors` the
//! encoder.
//!
//! Batching follows sentence-transformers: texts sorted by length (longest first), cut into
//! batches of `batch`, each padded to its longest text, results put back in the caller's
//! order. Padded lengths are rounded up to a multiple of 8 so a stream of batches meets at
//! most `max_seq_length / 8` sequence lengths; one compiled graph with dynamic `batch` and
//! `seq` dims serves them all (the CPU executor keeps a plan per recent shape).
use crate::hf::bert::{self, BertConfig, BertHead};
use crate::hf::json::JsonFile;
use crate::hf::pooling::Pooling;
use crate::ModelError;
use rayon::prelude::*;
use rlx_io::SafeTensors;
use rlx_ir::{DType, HostTensor};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, Precision, Session};
use std::path::{Path, PathBuf};

/// Padded sequence lengths are multiples of this.
pub const SEQ_MULTIPLE: usize = 8;

/// How to load an embedder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EmbedOptions {
    pub device: Device,
    /// Compute dtype: F32, F16 or BF16 (weights are converted at load).
    pub precision: DType,
    /// Texts per run.
    pub batch: usize,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions {
            device: Device::Cpu,
            precision: DType::F32,
            batch: 32,
        }
    }
}

/// The pipeline `modules.json` describes.
struct Pipeline {
    /// The Transformer module's folder.
    transformer: PathBuf,
    /// The Pooling module's folder.
    pooling: PathBuf,
    normalize: bool,
}

const TRANSFORMER: &str = "sentence_transformers.models.Transformer";
const POOLING: &str = "sentence_transformers.models.Pooling";
const NORMALIZE: &str = "sentence_transformers.models.Normalize";

impl Pipeline {
    fn read(dir: &Path) -> Result<Pipeline, ModelError> {
        let path = dir.join("modules.json");
        if !path.is_file() {
            return Err(ModelError::HfConfig {
                path,
                key: String::new(),
                reason: "missing: not a sentence-transformers folder".into(),
            });
        }
        let j = JsonFile::read(&path)?;
        let modules = j
            .value()
            .as_array()
            .ok_or_else(|| j.error("", "expected a list of modules"))?;
        let mut found: Vec<(&str, PathBuf)> = Vec::new();
        for (i, m) in modules.iter().enumerate() {
            let ty = m.get("type").and_then(|t| t.as_str());
            let ty = ty.ok_or_else(|| j.error(&format!("[{i}].type"), "missing"))?;
            let sub = m.get("path").and_then(|p| p.as_str()).unwrap_or("");
            found.push((ty, dir.join(sub)));
        }
        let expect = |k: usize, want: &str| -> Result<PathBuf, ModelError> {
            match found.get(k) {
                Some((ty, p)) if *ty == want => Ok(p.clone()),
                Some((ty, _)) => Err(j.error(
                    &format!("[{k}].type"),
                    format!("{ty}: module {k} must be {want}"),
                )),
                None => Err(j.error("", format!("module {k} ({want}) is missing"))),
            }
        };
        let transformer = expect(0, TRANSFORMER)?;
        let pooling = expect(1, POOLING)?;
        let normalize = match found.get(2) {
            None => false,
            Some((ty, _)) if *ty == NORMALIZE => true,
            Some((ty, _)) => {
                return Err(j.error(
                    "[2].type",
                    format!("{ty} is not supported (Normalize is the only module after Pooling)"),
                ))
            }
        };
        if found.len() > 3 {
            return Err(j.error(
                &format!("[{}].type", found.len() - 1),
                "no module may follow Normalize",
            ));
        }
        Ok(Pipeline {
            transformer,
            pooling,
            normalize,
        })
    }
}

/// A loaded sentence embedder.
pub struct Embedder {
    tokenizer: tokenizers::Tokenizer,
    /// Rows of the token embedding: the bound on pre-tokenized ids.
    vocab: usize,
    tokenizer_path: PathBuf,
    exe: CompiledGraph,
    dim: usize,
    max_seq: usize,
    max_positions: usize,
    lower_case: bool,
    pad_id: u32,
    pad_type_id: u32,
    batch: usize,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("tokenizer", &self.tokenizer_path)
            .field("dim", &self.dim)
            .field("max_seq", &self.max_seq)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

/// One tokenized text.
#[derive(Clone, Debug)]
struct Encoded {
    ids: Vec<u32>,
    types: Vec<u32>,
}

impl Embedder {
    /// Load the sentence-transformers folder `dir`.
    pub fn load(dir: impl AsRef<Path>, opts: &EmbedOptions) -> Result<Embedder, ModelError> {
        let dir = dir.as_ref();
        if !dir.is_dir() {
            return Err(ModelError::HfConfig {
                path: dir.to_path_buf(),
                key: String::new(),
                reason: "no such folder".into(),
            });
        }
        if opts.batch == 0 {
            return Err(ModelError::Config("the batch size must be positive".into()));
        }
        let pipe = Pipeline::read(dir)?;
        let cfg = BertConfig::from_file(pipe.transformer.join("config.json"))?;
        let st_path = pipe.transformer.join("sentence_bert_config.json");
        let (max_seq, lower_case) = if st_path.is_file() {
            let j = JsonFile::read(&st_path)?;
            let n = j.usize_or("max_seq_length", cfg.max_position_embeddings)?;
            if n == 0 {
                return Err(j.error("max_seq_length", "must be positive"));
            }
            (n, j.bool_or("do_lower_case", false)?)
        } else {
            (cfg.max_position_embeddings, false)
        };
        let max_seq = max_seq.min(cfg.max_position_embeddings);
        let pooling = Pooling::from_file(pipe.pooling.join("config.json"), cfg.hidden_size)?;
        let tokenizer_path = pipe.transformer.join("tokenizer.json");
        let mut tokenizer = tokenizers::Tokenizer::from_file(&tokenizer_path).map_err(|e| {
            ModelError::HfTokenizer {
                path: tokenizer_path.clone(),
                reason: e.to_string(),
            }
        })?;
        // Padding is this module's job (per batch, to a multiple of 8); the pad id is the
        // tokenizer's own when it names one.
        let (pad_id, pad_type_id) = match tokenizer.get_padding() {
            Some(p) => (p.pad_id, p.pad_type_id),
            None => (tokenizer.token_to_id("[PAD]").unwrap_or(0), 0),
        };
        tokenizer.with_padding(None);
        let trunc = tokenizers::TruncationParams {
            max_length: max_seq,
            ..Default::default()
        };
        tokenizer
            .with_truncation(Some(trunc))
            .map_err(|e| ModelError::HfTokenizer {
                path: tokenizer_path.clone(),
                reason: format!("truncation at {max_seq}: {e}"),
            })?;

        let head = BertHead::Embedding {
            pooling,
            normalize: pipe.normalize,
        };
        let graph = cfg.build(opts.precision, head)?;
        let precision = match opts.precision {
            DType::F16 => Precision::F16,
            DType::BF16 => Precision::Bf16,
            _ => Precision::F32,
        };
        let copts = CompileOptions::default().precision(precision);
        let exe = Session::new(opts.device).compile_with(graph, &copts)?;
        let st = SafeTensors::open(&pipe.transformer)?;
        for (name, value) in cfg.load_weights(&st, opts.precision)? {
            exe.set_param_typed(&name, value)?;
        }
        Ok(Embedder {
            tokenizer,
            vocab: cfg.vocab_size,
            tokenizer_path,
            exe,
            dim: pooling.dim(cfg.hidden_size),
            max_seq,
            max_positions: cfg.max_position_embeddings,
            lower_case,
            pad_id,
            pad_type_id,
            batch: opts.batch,
        })
    }

    /// The embedding width.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Texts are truncated to this many tokens (special tokens included).
    pub fn max_seq_length(&self) -> usize {
        self.max_seq
    }

    /// Texts per run.
    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// The compiled graph (for timing and dispatch reports).
    pub fn compiled(&self) -> &CompiledGraph {
        &self.exe
    }

    /// How many runs `n` texts take.
    pub fn batches(&self, n: usize) -> usize {
        n.div_ceil(self.batch)
    }

    /// The token ids of `text` as the encoder sees them (stripped, lower-cased when the
    /// config says so, special tokens added, truncated).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        Ok(self.encode(text)?.ids)
    }

    fn encode(&self, text: &str) -> Result<Encoded, ModelError> {
        encode_text(&self.tokenizer, self.lower_case, &self.tokenizer_path, text)
    }

    /// The sequence length a batch whose longest text has `len` tokens runs at.
    pub fn padded_len(&self, len: usize) -> usize {
        len.max(1)
            .next_multiple_of(SEQ_MULTIPLE)
            .min(self.max_positions)
    }

    /// One embedding per text, in order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.embed_with(texts, |_, _| {})
    }

    /// `embed`, calling `progress(batches done, batches in all)` after every run.
    pub fn embed_with(
        &self,
        texts: &[&str],
        progress: impl FnMut(usize, usize),
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        // Texts are independent: tokenize them on every core, as the fast tokenizers'
        // batch call does; the first failing text (in order) is the one reported.
        let (tok, lower, path) = (&self.tokenizer, self.lower_case, &self.tokenizer_path);
        let encoded: Vec<Encoded> = (texts.par_iter())
            .map(|t| encode_text(tok, lower, path, t))
            .collect::<Result<_, _>>()?;
        self.run_all(&encoded, progress)
    }

    /// One embedding per pre-tokenized text (ids as [`Embedder::tokenize`] gives them:
    /// special tokens included, at most [`Embedder::max_seq_length`] ids, token type 0).
    pub fn embed_ids(&self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        // The model's table, not the tokenizer's vocabulary (whose size is a whole-map copy).
        let vocab = u32::try_from(self.vocab).unwrap_or(u32::MAX);
        let encoded: Vec<Encoded> = (ids.iter().enumerate())
            .map(|(i, t)| {
                if t.len() > self.max_seq {
                    return Err(ModelError::Config(format!(
                        "text {i} has {} token ids, past max_seq_length {}",
                        t.len(),
                        self.max_seq
                    )));
                }
                if let Some(&bad) = t.iter().find(|&&id| id >= vocab) {
                    return Err(ModelError::Config(format!(
                        "text {i}: token id {bad} is outside the vocabulary of {vocab}"
                    )));
                }
                Ok(Encoded {
                    ids: t.clone(),
                    types: vec![0; t.len()],
                })
            })
            .collect::<Result<_, _>>()?;
        self.run_all(&encoded, |_, _| {})
    }

    /// Sorted, batched runs over `encoded`, results in the caller's order.
    fn run_all(
        &self,
        encoded: &[Encoded],
        mut progress: impl FnMut(usize, usize),
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        // Longest first (a stable sort, so equal lengths keep their order).
        let mut order: Vec<usize> = (0..encoded.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encoded[i].ids.len()));
        let mut out = vec![Vec::new(); encoded.len()];
        let total = self.batches(encoded.len());
        for (k, chunk) in order.chunks(self.batch).enumerate() {
            let rows: Vec<&Encoded> = chunk.iter().map(|&i| &encoded[i]).collect();
            let vecs = self.run_batch(&rows)?;
            for (&i, v) in chunk.iter().zip(vecs) {
                out[i] = v;
            }
            progress(k + 1, total);
        }
        Ok(out)
    }

    /// One run over `rows`, padded to a common length.
    fn run_batch(&self, rows: &[&Encoded]) -> Result<Vec<Vec<f32>>, ModelError> {
        let longest = rows.iter().map(|r| r.ids.len()).max().unwrap_or(1);
        let (b, s) = (rows.len(), self.padded_len(longest));
        let mut ids = vec![self.pad_id as i64; b * s];
        let mut types = vec![self.pad_type_id as i64; b * s];
        let mut mask = vec![0f32; b * s];
        for (r, e) in rows.iter().enumerate() {
            let row = r * s;
            for (j, (&id, &ty)) in e.ids.iter().zip(&e.types).enumerate() {
                ids[row + j] = id as i64;
                types[row + j] = ty as i64;
                mask[row + j] = 1.0;
            }
        }
        let positions: Vec<i64> = (0..s as i64).collect();
        let inputs = [
            (bert::INPUT_IDS, HostTensor::from_i64(&[b, s], &ids)),
            (bert::TOKEN_TYPE_IDS, HostTensor::from_i64(&[b, s], &types)),
            (bert::ATTENTION_MASK, HostTensor::from_f32(&[b, s], &mask)),
            (bert::POSITION_IDS, HostTensor::from_i64(&[s], &positions)),
        ];
        let outs = self.exe.run_typed(&inputs)?;
        let flat = outs
            .first()
            .map(HostTensor::to_f32_vec)
            .ok_or_else(|| ModelError::Config("the embedder graph has no output".into()))?;
        if flat.len() != b * self.dim {
            return Err(ModelError::Config(format!(
                "the embedder returned {} values for {b} texts of width {}",
                flat.len(),
                self.dim
            )));
        }
        Ok(flat.chunks(self.dim).map(<[f32]>::to_vec).collect())
    }
}

/// `text` as sentence-transformers feeds it to the tokenizer: stripped, then lower-cased if
/// the pipeline says so.
fn encode_text(
    tokenizer: &tokenizers::Tokenizer,
    lower_case: bool,
    path: &Path,
    text: &str,
) -> Result<Encoded, ModelError> {
    let text = text.trim();
    let lowered;
    let text = if lower_case {
        lowered = text.to_lowercase();
        lowered.as_str()
    } else {
        text
    };
    let e = tokenizer
        .encode(text, true)
        .map_err(|e| ModelError::HfTokenizer {
            path: path.to_path_buf(),
            reason: format!("encoding a text of {} bytes: {e}", text.len()),
        })?;
    Ok(Encoded {
        ids: e.get_ids().to_vec(),
        types: e.get_type_ids().to_vec(),
    })
}
