//! Text generation with a GGUF decoder: load (config, tokenizer, weights, one compiled graph
//! with a KV cache), prefill the prompt, then one step per token, streaming text as it is
//! decoded.
//!
//! One graph serves every call: its sequence dim is dynamic, so a prefill chunk and the
//! one-token step are two bindings of it, each planned (on CUDA: captured) once and replayed.
//! On a GPU, prompts are padded up to a length bucket (a power of two from 16), so a chat
//! session captures a handful of prefill plans, not one per prompt length; the padded rows
//! are written to the cache past the prompt and overwritten by the tokens that follow before
//! any query can see them (attention reads only `pos + seq` keys, causally). The CPU runs
//! each prompt at its own length.
use crate::generate_tp::ShardedDecoder;
use crate::llm::{self, BuildOptions, LlmConfig, LAST, POS, POSITIONS, TOKENS};
use crate::sample::{Sampler, SamplerConfig, StopMatcher};
use crate::tokenizer::{Message, StreamDecoder, Tokenizer};
use crate::ModelError;
use rlx_io::gguf::Gguf;
use rlx_ir::{DType, HostTensor};
use rlx_runtime::{CompiledGraph, Device, Mesh, Session};
use std::path::Path;
use std::time::{Duration, Instant};

/// The largest prefill chunk; longer prompts go in several.
pub const MAX_PREFILL_CHUNK: usize = 512;
/// The default context when the model's is larger (its KV cache is allocated up front).
pub const DEFAULT_MAX_CTX: usize = 8192;

/// How to load a model.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub device: Device,
    /// Context length (KV-cache positions); `None`: the model's, capped at `DEFAULT_MAX_CTX`.
    pub ctx: Option<usize>,
    /// For Hugging Face folders: the dtype weights are converted to at load (`None`: as
    /// stored). GGUF weights always run as stored.
    pub dtype: Option<DType>,
    /// A device list such as `cpu,cpu` (see [`Mesh::parse`]): the model is split over its
    /// ranks by tensor parallelism (`crate::generate_tp`), and `device` is not used.
    pub devices: Option<String>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            device: Device::Cpu,
            ctx: None,
            dtype: None,
            devices: None,
        }
    }
}

/// What one generation may do.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
    /// Text that ends the generation (not printed).
    pub stop: Vec<String>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            max_tokens: 128,
            sampler: SamplerConfig::greedy(),
            stop: Vec::new(),
        }
    }
}

/// Why a generation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-generation token (EOS / EOT).
    EndOfText,
    /// One of `GenerateOptions::stop`.
    StopString(String),
    /// `max_tokens` were produced.
    MaxTokens,
    /// The context is full.
    ContextFull,
}

/// Figures of one generation.
#[derive(Clone, Debug)]
pub struct GenerateStats {
    pub prompt_tokens: usize,
    /// Decode steps run (tokens fed back through the model).
    pub generated_tokens: usize,
    pub prefill_time: Duration,
    pub decode_time: Duration,
    pub stop: StopReason,
    /// The generated ids (the stop token included when it was EOS).
    pub tokens: Vec<u32>,
}

impl GenerateStats {
    pub fn prompt_tokens_per_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_time.as_secs_f64().max(1e-9)
    }
    pub fn generated_tokens_per_s(&self) -> f64 {
        self.generated_tokens as f64 / self.decode_time.as_secs_f64().max(1e-9)
    }
}

/// The compiled decoder and its cache position: what a step needs.
pub struct Decoder {
    cfg: LlmConfig,
    exe: Engine,
    ctx: usize,
    /// Positions already in the KV cache.
    pos: usize,
    device: Device,
    /// The last run's logits (kept, so a step allocates nothing once it has grown).
    logits: Vec<f32>,
}

/// What runs the decoder graph: one compiled graph, or one per rank of a mesh.
enum Engine {
    One(Box<CompiledGraph>),
    Ranks(ShardedDecoder),
}

/// A loaded model: decoder + tokenizer.
pub struct Llm {
    decoder: Decoder,
    tokenizer: Tokenizer,
}

impl Llm {
    /// Load `path` for `opts.device`: a GGUF file, or a Hugging Face folder
    /// (`LlamaForCausalLM` / `Qwen2ForCausalLM` with safetensors and tokenizer.json).
    pub fn load(path: impl AsRef<Path>, opts: &LoadOptions) -> Result<Llm, ModelError> {
        let path = path.as_ref();
        if path.is_dir() {
            let (cfg, store) = crate::hf::hf_decoder(path, opts.dtype)?;
            let tokenizer = Tokenizer::from_hf_dir(path)?;
            let decoder = Decoder::from_store(cfg, &store, opts)?;
            return Ok(Llm { decoder, tokenizer });
        }
        let gguf = Gguf::open(path)?;
        let tokenizer = Tokenizer::from_gguf(&gguf)?;
        let decoder = Decoder::from_gguf(&gguf, opts)?;
        Ok(Llm { decoder, tokenizer })
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }
    pub fn decoder(&mut self) -> &mut Decoder {
        &mut self.decoder
    }
    pub fn config(&self) -> &LlmConfig {
        &self.decoder.cfg
    }
    /// The context (KV-cache positions) this model was loaded with.
    pub fn decoder_ctx(&self) -> usize {
        self.decoder.ctx
    }

    /// Forget the conversation: the next prompt starts at position 0.
    pub fn reset(&mut self) {
        self.decoder.reset();
    }

    /// Prompt text → ids as llama.cpp's CLI tokenizes it (BOS where the vocabulary asks,
    /// special-token texts parsed).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        Ok(self.tokenizer.encode(text, true, true)?)
    }

    /// The ids of one user turn through the model's chat template (with the assistant's
    /// header appended), for a conversation that starts at position 0 or continues.
    pub fn encode_chat(&self, history: &[Message]) -> Result<Vec<u32>, ModelError> {
        let text = self.tokenizer.render_chat(history, true)?;
        let bos_text = (self.tokenizer.bos_id())
            .and_then(|b| self.tokenizer.token_text(b))
            .unwrap_or("");
        // A template that writes BOS itself must not get a second one.
        let add = bos_text.is_empty() || !text.starts_with(bos_text);
        Ok(self.tokenizer.encode(&text, add, true)?)
    }

    /// Generate from `prompt` ids, calling `on_text` with each piece of text as it is
    /// decoded (never a split UTF-8 character, never part of a stop string).
    pub fn generate(
        &mut self,
        prompt: &[u32],
        opts: &GenerateOptions,
        mut on_text: impl FnMut(&str),
    ) -> Result<GenerateStats, ModelError> {
        let mut gen = self.stream(prompt, opts)?;
        for piece in gen.by_ref() {
            on_text(&piece?);
        }
        gen.finish(&mut on_text)
    }

    /// The same as an iterator of text pieces; call [`Generation::finish`] at the end for
    /// the figures (and any text held back while a stop string was still possible).
    pub fn stream(
        &mut self,
        prompt: &[u32],
        opts: &GenerateOptions,
    ) -> Result<Generation<'_>, ModelError> {
        let Llm { decoder, tokenizer } = self;
        Generation::start(decoder, tokenizer, prompt, opts)
    }
}

fn i64s(v: &[i64]) -> HostTensor {
    HostTensor::from_i64(&[v.len()], v)
}

impl Decoder {
    /// Build, compile and fill the decoder of a GGUF file.
    pub fn from_gguf(gguf: &Gguf, opts: &LoadOptions) -> Result<Decoder, ModelError> {
        Decoder::from_store(LlmConfig::from_gguf(gguf)?, gguf, opts)
    }

    /// Build, compile and fill the decoder `cfg` with the tensors of `store`.
    pub fn from_store(
        cfg: LlmConfig,
        store: &(impl llm::TensorStore + ?Sized),
        opts: &LoadOptions,
    ) -> Result<Decoder, ModelError> {
        let ctx = opts.ctx.unwrap_or(cfg.ctx.min(DEFAULT_MAX_CTX));
        if ctx == 0 || ctx > cfg.ctx.max(1) {
            return Err(ModelError::Config(format!(
                "--ctx {ctx}: the model takes 1 to {} positions",
                cfg.ctx
            )));
        }
        // An f32 cache: at these context lengths a step reads far more weight than cache,
        // and a half cache costs three casts a layer (launches dominate a decode step; see
        // BENCHMARKS.md).
        let cache_dtype = DType::F32;
        let bo = BuildOptions {
            all_logits: false,
            cache: true,
            ctx,
            cache_dtype,
            tensor_parallel: Default::default(),
        };
        let (exe, device) = match opts.devices.as_deref() {
            Some(spec) => {
                let mesh = Mesh::parse(spec)?;
                let device = mesh.session(0).device();
                let ranks = ShardedDecoder::new(&cfg, store, &bo, mesh)?;
                (Engine::Ranks(ranks), device)
            }
            None => {
                let (graph, decls) = llm::build(&cfg, &bo)?;
                let exe = Session::new(opts.device).compile(graph)?;
                llm::load_each_shared(store, &decls, |name, value| match value {
                    llm::ParamValue::Host(t) => Ok(exe.set_param_typed(name, t)?),
                    llm::ParamValue::Shared { shape, bytes } => {
                        Ok(exe.set_param_shared(name, &shape, bytes)?)
                    }
                })?;
                (Engine::One(Box::new(exe)), opts.device)
            }
        };
        let mut d = Decoder {
            cfg,
            exe,
            ctx,
            pos: 0,
            device,
            logits: Vec::new(),
        };
        d.warm_up()?;
        Ok(d)
    }

    /// On a GPU, build the plans a short conversation uses — one decode step and the
    /// smallest prompt bucket — at load, as llama.cpp's warm-up decode does: a plan's first
    /// run compiles, tunes and captures it (tens of milliseconds), which would otherwise land
    /// in the first reply's tokens/s. The rows it writes are never read (`reset`). The CPU
    /// has no capture to do, and its plans cost a memory plan each.
    fn warm_up(&mut self) -> Result<(), ModelError> {
        if self.device == Device::Cpu || !matches!(self.exe, Engine::One(_)) {
            return Ok(());
        }
        self.prefill(&[0])?;
        if self.pos < self.ctx {
            self.step(0)?;
        }
        self.reset();
        Ok(())
    }

    pub fn ctx(&self) -> usize {
        self.ctx
    }
    pub fn config(&self) -> &LlmConfig {
        &self.cfg
    }
    /// Positions in the KV cache.
    pub fn pos(&self) -> usize {
        self.pos
    }
    pub fn device(&self) -> Device {
        self.device
    }
    /// The compiled graph; with tensor-parallel ranks, rank 0's (inspect it, but run it
    /// only through the decoder: alone it would wait at its first all-reduce).
    pub fn compiled(&self) -> &CompiledGraph {
        match &self.exe {
            Engine::One(e) => e,
            Engine::Ranks(r) => r.rank_graph(0).expect("a mesh has at least one rank"),
        }
    }
    /// How many tensor-parallel ranks run the model (1 without a mesh).
    pub fn ranks(&self) -> usize {
        match &self.exe {
            Engine::One(_) => 1,
            Engine::Ranks(r) => r.ranks(),
        }
    }

    /// Start over (the cache's old rows are never read again: attention sees only `pos`).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.logits.clear();
    }

    /// Run `tokens` (at most the context left) through the model at the current position;
    /// returns the logits of the last one. `bucket` pads the chunk to a fixed length.
    fn run_chunk(&mut self, tokens: &[u32], bucket: usize) -> Result<&[f32], ModelError> {
        let n = tokens.len();
        let s = bucket.max(n);
        if n == 0 || self.pos + s > self.ctx {
            return Err(ModelError::Config(format!(
                "a chunk of {s} tokens at position {} does not fit the context of {}",
                self.pos, self.ctx
            )));
        }
        let mut ids: Vec<i64> = tokens.iter().map(|&t| t as i64).collect();
        ids.resize(s, ids[n - 1]);
        let positions: Vec<i64> = (self.pos..self.pos + s).map(|p| p as i64).collect();
        let inputs = [
            (TOKENS, HostTensor::from_i64(&[1, s], &ids)),
            (POSITIONS, i64s(&positions)),
            (LAST, i64s(&[(n - 1) as i64])),
            (POS, i64s(&[self.pos as i64])),
        ];
        match &self.exe {
            Engine::One(e) => e.run_f32_into(&inputs, 0, &mut self.logits)?,
            Engine::Ranks(r) => r.run_typed(&inputs)?[0].f32_into(&mut self.logits),
        }
        self.pos += n;
        Ok(&self.logits)
    }

    /// The logits of the last prefill or step (empty before the first, and after `reset`).
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Feed a prompt (in chunks of at most `MAX_PREFILL_CHUNK`, on a GPU each padded to its
    /// bucket);
    /// returns the last position's logits.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<&[f32], ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Config(
                "an empty prompt has nothing to continue".into(),
            ));
        }
        if self.pos + tokens.len() > self.ctx {
            return Err(ModelError::PromptTooLong {
                tokens: tokens.len(),
                pos: self.pos,
                ctx: self.ctx,
            });
        }
        for chunk in tokens.chunks(MAX_PREFILL_CHUNK) {
            let room = self.ctx - self.pos;
            // A GPU compiles and captures a plan per length, so its prompts are padded to a
            // few bucket sizes; on the CPU a new length only costs a memory plan, while every
            // padded row is computed (a 2-token chat turn ran as 16: 70 ms against 10 ms).
            let bucket = if self.device == Device::Cpu {
                chunk.len()
            } else {
                chunk.len().next_power_of_two().max(16).min(room)
            };
            self.run_chunk(chunk, bucket)?;
        }
        Ok(&self.logits)
    }

    /// One decode step: `token` at the current position; returns the next logits.
    pub fn step(&mut self, token: u32) -> Result<&[f32], ModelError> {
        if self.pos >= self.ctx {
            return Err(ModelError::PromptTooLong {
                tokens: 1,
                pos: self.pos,
                ctx: self.ctx,
            });
        }
        self.run_chunk(&[token], 1)
    }
}

/// A generation in progress: an iterator of decoded text pieces.
pub struct Generation<'a> {
    decoder: &'a mut Decoder,
    tok: &'a Tokenizer,
    text: StreamDecoder<'a>,
    stops: StopMatcher,
    sampler: Sampler,
    history: Vec<u32>,
    prompt_tokens: usize,
    generated: Vec<u32>,
    max_tokens: usize,
    prefill_time: Duration,
    decode_time: Duration,
    /// Decode steps run (the last drawn token is not fed back).
    steps: usize,
    stop: Option<StopReason>,
}

impl<'a> Generation<'a> {
    fn start(
        decoder: &'a mut Decoder,
        tok: &'a Tokenizer,
        prompt: &[u32],
        opts: &GenerateOptions,
    ) -> Result<Generation<'a>, ModelError> {
        let sampler = Sampler::new(opts.sampler.clone())?;
        let vocab = decoder.cfg.vocab as u32;
        if let Some(&bad) = prompt.iter().find(|&&t| t >= vocab) {
            return Err(ModelError::Config(format!(
                "prompt token {bad} is outside the vocabulary of {vocab}"
            )));
        }
        let t0 = Instant::now();
        decoder.prefill(prompt)?;
        let prefill_time = t0.elapsed();
        Ok(Generation {
            decoder,
            tok,
            text: tok.stream_decoder(false),
            stops: StopMatcher::new(&opts.stop),
            sampler,
            history: prompt.to_vec(),
            prompt_tokens: prompt.len(),
            generated: Vec::new(),
            max_tokens: opts.max_tokens,
            prefill_time,
            decode_time: Duration::ZERO,
            steps: 0,
            stop: None,
        })
    }

    /// Draw the next token and advance the model; `Ok(None)` once the generation ended.
    pub fn next_token(&mut self) -> Result<Option<u32>, ModelError> {
        if self.stop.is_some() {
            return Ok(None);
        }
        if self.generated.len() >= self.max_tokens {
            self.stop = Some(StopReason::MaxTokens);
            return Ok(None);
        }
        // The decoder's logits of its last run: the ones the next token is drawn from.
        let id = self.sampler.sample(self.decoder.logits(), &self.history)?;
        self.generated.push(id);
        self.history.push(id);
        if self.tok.is_eog(id) {
            self.stop = Some(StopReason::EndOfText);
            return Ok(Some(id));
        }
        if self.generated.len() < self.max_tokens {
            if self.decoder.pos >= self.decoder.ctx {
                self.stop = Some(StopReason::ContextFull);
            } else {
                let t0 = Instant::now();
                self.decoder.step(id)?;
                self.decode_time += t0.elapsed();
                self.steps += 1;
            }
        }
        Ok(Some(id))
    }

    /// The figures, once the iterator is done (or to stop early); `on_text` gets the text
    /// still held back.
    pub fn finish(mut self, mut on_text: impl FnMut(&str)) -> Result<GenerateStats, ModelError> {
        let mut tail = self.text.finish();
        if !self.stops.stopped() {
            let (t, hit) = self.stops.push(&tail);
            tail = t;
            if !hit {
                tail.push_str(&self.stops.finish());
            }
        }
        if !tail.is_empty() {
            on_text(&tail);
        }
        if let Some(s) = self.stops.matched() {
            self.stop = Some(StopReason::StopString(s.to_string()));
        }
        Ok(GenerateStats {
            prompt_tokens: self.prompt_tokens,
            generated_tokens: self.steps,
            prefill_time: self.prefill_time,
            decode_time: self.decode_time,
            stop: self.stop.unwrap_or(StopReason::MaxTokens),
            tokens: self.generated,
        })
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<String, ModelError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.stops.stopped() {
                return None;
            }
            let id = match self.next_token() {
                Ok(Some(id)) => id,
                Ok(None) => return None,
                Err(e) => return Some(Err(e)),
            };
            if self.tok.is_eog(id) {
                return None;
            }
            let piece = match self.text.push(id) {
                Ok(p) => p,
                Err(e) => return Some(Err(e.into())),
            };
            let (emit, hit) = self.stops.push(&piece);
            if hit {
                self.stop = Some(StopReason::StopString(
                    self.stops.matched().unwrap_or_default().to_string(),
                ));
            }
            if !emit.is_empty() {
                return Some(Ok(emit));
            }
            if hit {
                return None;
            }
        }
    }
}
