//! `rlx generate` and `rlx chat`: a GGUF decoder or a Hugging Face folder on the CPU or CUDA, streaming text to
//! stdout as it is decoded, with prompt and generation speeds at the end (on stderr, so the
//! text on stdout is exactly the model's).
use crate::{parse_device, CliError};
use clap::Args;
use rlx_models::generate::{GenerateOptions, GenerateStats, Llm, LoadOptions};
use rlx_models::sample::SamplerConfig;
use rlx_models::tokenizer::Message;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::time::Instant;

/// Options shared by `generate` and `chat`.
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// A GGUF file (llama, qwen2 or gemma3 architecture) or a Hugging Face folder
    /// (LlamaForCausalLM / Qwen2ForCausalLM: config.json, safetensors, tokenizer.json).
    #[arg(long)]
    pub model: PathBuf,
    /// Hugging Face folders: compute in f32, f16 or bf16 (default: the weights' own dtype).
    #[arg(long)]
    pub precision: Option<String>,
    /// cpu, cuda[:N] or wgpu[:N] (default: the best available)
    #[arg(long)]
    pub device: Option<String>,
    /// Split the model over several ranks by tensor parallelism: a device list such as
    /// `cpu,cpu` or `cpu*4` (CPU ranks simulated in this process). The head counts and the
    /// FFN width must divide by the rank count.
    #[arg(long, conflicts_with = "device")]
    pub devices: Option<String>,
    /// Context length (default: the model's, at most 8192).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Most tokens to generate (per turn in chat).
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// 0 = off.
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// 1 = off.
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// Tokens the repeat penalty looks back over.
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Seed of the sampler (default: from the clock; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Text that ends a generation (repeatable).
    #[arg(long)]
    pub stop: Vec<String>,
}

impl ModelArgs {
    fn options(&self) -> GenerateOptions {
        GenerateOptions {
            max_tokens: self.max_tokens,
            sampler: SamplerConfig {
                temperature: self.temperature,
                top_k: self.top_k,
                top_p: self.top_p,
                min_p: self.min_p,
                repeat_penalty: self.repeat_penalty,
                repeat_last_n: self.repeat_last_n,
                seed: self.seed,
            },
            stop: self.stop.clone(),
        }
    }

    fn load(&self) -> Result<Llm, CliError> {
        let folder = self.model.is_dir();
        if folder && !self.model.join("config.json").is_file() {
            return Err(CliError::Usage(format!(
                "{} is a folder without config.json: pass a Hugging Face model folder or a GGUF file",
                self.model.display()
            )));
        }
        if !folder && !self.model.is_file() {
            return Err(CliError::Usage(format!(
                "model file {} not found: pass a GGUF file or a Hugging Face folder (scripts/fetch_models.sh fetches SmolLM2 into $RLX_CACHE/gguf)",
                self.model.display()
            )));
        }
        let dtype = match self.precision.as_deref() {
            None => None,
            Some(_) if !folder => return Err(CliError::Usage(
                "--precision applies to Hugging Face folders; a GGUF runs its weights as stored"
                    .into(),
            )),
            Some("f32") => Some(rlx::ir::DType::F32),
            Some("f16") => Some(rlx::ir::DType::F16),
            Some("bf16") => Some(rlx::ir::DType::BF16),
            Some(p) => {
                return Err(CliError::Usage(format!(
                    "--precision {p}: use f32, f16 or bf16"
                )))
            }
        };
        let device = match &self.devices {
            // The mesh decides the devices; `device` is unused (and clap refuses both).
            Some(_) => rlx::prelude::Device::Cpu,
            None => parse_device(self.device.as_deref())?,
        };
        // Validate the sampler before the (slow) load.
        self.options()
            .sampler
            .validate()
            .map_err(rlx_models::ModelError::from)?;
        let on = match &self.devices {
            Some(d) => format!("{d} (tensor parallel)"),
            None => device.to_string(),
        };
        eprintln!("loading {} on {on} ...", self.model.display());
        let t0 = Instant::now();
        let llm = Llm::load(
            &self.model,
            &LoadOptions {
                device,
                ctx: self.ctx,
                dtype,
                devices: self.devices.clone(),
            },
        )?;
        let c = llm.config();
        eprintln!(
            "loaded {} ({} layers, width {}, {} / {} heads, vocab {}) with a {}-position cache in {:.2} s",
            c.arch.name(),
            c.n_layer,
            c.n_embd,
            c.n_head,
            c.n_head_kv,
            c.vocab,
            llm.decoder_ctx(),
            t0.elapsed().as_secs_f64()
        );
        Ok(llm)
    }
}

fn report(s: &GenerateStats) {
    eprintln!(
        "\n[prompt: {} tokens, {:.1} tok/s | generation: {} tokens, {:.1} tok/s | stop: {:?}]",
        s.prompt_tokens,
        s.prompt_tokens_per_s(),
        s.generated_tokens,
        s.generated_tokens_per_s(),
        s.stop
    );
}

fn print_piece(p: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) ends the output, not the program with a panic.
    let _ = out.write_all(p.as_bytes());
    let _ = out.flush();
}

/// `rlx generate`: one prompt (raw, or through the chat template with `--chat`).
pub fn generate(args: &ModelArgs, prompt: &str, chat: bool) -> Result<(), CliError> {
    let mut llm = args.load()?;
    let ids = if chat {
        llm.encode_chat(&[Message::new("user", prompt)])?
    } else {
        llm.encode(prompt)?
    };
    let opts = args.options();
    let stats = llm.generate(&ids, &opts, print_piece)?;
    report(&stats);
    Ok(())
}

/// `rlx chat`: an interactive loop over the chat template; the KV cache keeps the
/// conversation, so each turn feeds only its own tokens. `/reset` starts over, `/quit` (or
/// end of input) leaves.
pub fn chat(args: &ModelArgs, system: Option<&str>) -> Result<(), CliError> {
    let mut llm = args.load()?;
    if llm.tokenizer().chat_template().is_none() {
        return Err(CliError::Usage(
            "this model has no chat template (tokenizer.chat_template): use `rlx generate`".into(),
        ));
    }
    let opts = args.options();
    let mut history: Vec<Message> = system
        .map(|s| Message::new("system", s))
        .into_iter()
        .collect();
    // Ids of the conversation so far, as the template renders it.
    let mut fed: Vec<u32> = Vec::new();
    eprintln!("chat: type a message; /reset starts over, /quit leaves");
    let stdin = std::io::stdin();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| CliError::Usage(e.to_string()))?
            == 0
        {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        match line.trim() {
            "" => continue,
            "/quit" | "/exit" => break,
            "/reset" => {
                history.retain(|m| m.role == "system");
                fed.clear();
                llm.reset();
                eprintln!("(conversation cleared)");
                continue;
            }
            _ => {}
        }
        history.push(Message::new("user", line));
        let ids = llm.encode_chat(&history)?;
        // The template re-renders the whole conversation; feed what the cache lacks. When
        // the rendering of earlier turns changed (templates may), start over from 0.
        let cached = llm.decoder().pos() == fed.len();
        let new = if cached && ids.starts_with(&fed) && fed.len() < ids.len() {
            ids[fed.len()..].to_vec()
        } else {
            llm.reset();
            ids.clone()
        };
        let mut reply = String::new();
        let stats = llm.generate(&new, &opts, |p| {
            reply.push_str(p);
            print_piece(p);
        })?;
        report(&stats);
        // What the cache now holds: the prompt and every generated token fed back.
        fed = ids;
        let fed_back = stats.generated_tokens;
        fed.extend(&stats.tokens[..fed_back.min(stats.tokens.len())]);
        // The template's rendering of the reply may differ from the tokens generated (a
        // trimmed reply, an end-of-turn marker): the next turn's prefix check sorts it out.
        history.push(Message::new("assistant", reply.trim()));
    }
    Ok(())
}
