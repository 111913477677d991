//! `rlx`: run the demo, inspect graphs, train, generate, embed, run ONNX models and test cases.
mod bench;
mod bench_embed;
mod bench_llm;
mod bench_sample;
mod demo;
mod embed;
mod generate;
mod inspect;
mod inspect_gguf;
mod inspect_onnx;
mod onnx_test;
mod run_onnx;
mod train;

use clap::{Parser, Subcommand};
use rlx::prelude::Device;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "rlx", version, about = "rlx — an ML compiler and runtime")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build a transformer block on random weights, run it, print a summary and checksum.
    Demo {
        /// cpu, cuda[:N] or wgpu[:N] (default: the best available)
        #[arg(long)]
        device: Option<String>,
        /// Sequence length.
        #[arg(long, default_value_t = 64, value_parser = demo::size_arg(demo::MAX_SEQ))]
        seq: usize,
        /// Model width.
        #[arg(long, default_value_t = 256, value_parser = demo::size_arg(demo::MAX_WIDTH))]
        width: usize,
        /// Attention heads (must divide the width).
        #[arg(long, default_value_t = 8, value_parser = demo::size_arg(demo::MAX_WIDTH))]
        heads: usize,
        /// Write the graph here as well (.json, or the binary form otherwise).
        #[arg(long)]
        save: Option<PathBuf>,
    },
    /// Print a serialized graph (JSON or binary) and check it, a GGUF model's metadata
    /// and tensor table, or an ONNX model's inputs, outputs, opsets, op counts and the ops
    /// rlx cannot import.
    Inspect {
        file: PathBuf,
        /// Also run the optimisation pipeline and show the graph after every pass.
        #[arg(long)]
        optimized: bool,
        /// ONNX: the size of a symbolic dim for the trial import, NAME=N (repeatable).
        #[arg(long = "dim", value_name = "NAME=N")]
        dims: Vec<String>,
        /// ONNX: a whole input shape for the trial import, NAME=D0,D1,… (repeatable).
        #[arg(long = "shape", value_name = "NAME=D0,D1,...")]
        shapes: Vec<String>,
    },
    /// Run an ONNX model on .npy or random inputs; outputs to .npy, timings printed.
    Run(run_onnx::RunArgs),
    /// Time matmul, a MiniLM-shaped encoder and the MNIST CNN training step; print a table.
    Bench {
        /// cpu, cuda[:N] or wgpu[:N] (default: the best available)
        #[arg(long)]
        device: Option<String>,
        /// Comma-separated suites: matmul, encoder, cnn, llm (decode tg128 / prefill pp512 of
        /// each --gguf file), embed (256 mixed-length texts through --model, batch 32),
        /// sample (the host sampler per token at 49k and 152k logits).
        #[arg(long, default_value = "matmul,encoder,cnn")]
        suites: String,
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// Smaller sizes only.
        #[arg(long)]
        quick: bool,
        /// Also write the figures as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// After each GPU workload, print its kernels by device time.
        #[arg(long)]
        profile: bool,
        /// GGUF decoders for the llm suite (repeatable).
        #[arg(long)]
        gguf: Vec<PathBuf>,
        /// A sentence-transformers folder for the embed suite.
        #[arg(long)]
        model: Option<PathBuf>,
        /// The embed suite's texts, cycled to 256: a JSON list of strings, or a reference
        /// file with `cases[].text` (the peers' workload:
        /// crates/rlx-models/tests/data/st_ref_minilm.json). Default: a built-in list.
        #[arg(long)]
        texts: Option<PathBuf>,
    },
    /// Sentence embeddings with a sentence-transformers folder: one JSON line per text on
    /// stdout (`{"index":i,"embedding":[…]}`), or an .npy file with --output.
    Embed(embed::EmbedArgs),
    /// Generate text with a GGUF LLM (llama, qwen2, gemma3), streamed to stdout.
    Generate {
        #[command(flatten)]
        model: generate::ModelArgs,
        /// The prompt.
        #[arg(long)]
        prompt: String,
        /// Wrap the prompt in the model's chat template (as one user turn).
        #[arg(long)]
        chat: bool,
    },
    /// Chat with a GGUF LLM through its chat template (reads turns from stdin).
    Chat {
        #[command(flatten)]
        model: generate::ModelArgs,
        /// A system message to start the conversation with.
        #[arg(long)]
        system: Option<String>,
    },
    /// Run ONNX backend test cases: each DIR is a case folder (model.onnx +
    /// test_data_set_0/) or a folder of them (the node suite: scripts/fetch_onnx_suite.sh).
    OnnxTest {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// cpu, cuda[:N] or wgpu[:N] (default: cpu)
        #[arg(long)]
        device: Option<String>,
        /// Write the failing cases (name, tab, reason category) to this file.
        #[arg(long)]
        failures_list: Option<PathBuf>,
    },
    /// Train the CNN on a dataset and report test accuracy.
    Train {
        #[command(subcommand)]
        what: train::TrainCmd,
    },
    /// List the devices rlx can run on: the CPU, CUDA GPUs, wgpu adapters (Metal, Vulkan,
    /// DX12; software ones such as lavapipe marked).
    Devices,
}

/// A CLI failure with a hint on what to do next.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Rlx(#[from] rlx::prelude::Error),
    #[error(transparent)]
    Ir(#[from] rlx::prelude::IrError),
    #[error(transparent)]
    Opt(#[from] rlx::opt::OptError),
    #[error(transparent)]
    Model(#[from] rlx_models::ModelError),
    #[error(transparent)]
    Data(#[from] rlx_io::DatasetError),
    #[error(transparent)]
    Gguf(#[from] rlx_io::GgufError),
}

fn parse_device(s: Option<&str>) -> Result<Device, CliError> {
    match s {
        None => Ok(Device::best()),
        Some(d) => Device::parse(d).ok_or_else(|| {
            CliError::Usage(format!(
                "unknown device \"{d}\": use cpu, cuda, cuda:N, wgpu or wgpu:N (`rlx devices` lists them)"
            ))
        }),
    }
}

fn devices() {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("cpu      the reference backend ({threads} threads)");
    match rlx_cuda::check_available(0) {
        Ok(()) => {
            println!("cuda:0   CUDA GPU");
            // Meshes of GPUs (`--devices cuda:0,cuda:1`) need NCCL.
            match rlx_cuda::nccl::version() {
                Ok(v) => println!(
                    "nccl     {}.{}.{} (meshes: --devices cuda:0,cuda:1 or env)",
                    v / 10000,
                    v / 100 % 100,
                    v % 100
                ),
                Err(e) => println!("nccl     not available: {e}"),
            }
        }
        Err(e) => println!("cuda     not available: {e}"),
    }
    let ads = rlx_wgpu::adapters();
    if ads.is_empty() {
        println!("wgpu     no adapter (install a Vulkan driver; lavapipe: mesa-vulkan-drivers)");
    }
    for a in ads {
        let soft = if a.hardware { "" } else { " (software)" };
        println!(
            "wgpu:{:<3} {} [{} {}]{soft}",
            a.index, a.name, a.backend, a.kind
        );
    }
}

fn main() -> ExitCode {
    // Mesa's Vulkan device-select layer, loaded while the best device is probed, tries to
    // reach a Wayland display and prints "XDG_RUNTIME_DIR is invalid" on headless machines;
    // it only orders GPUs for presentation, which compute never needs. Set before any thread
    // exists.
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Demo {
            device,
            seq,
            width,
            heads,
            save,
        } => parse_device(device.as_deref())
            .and_then(|d| demo::run(d, seq, width, heads, save.as_deref())),
        Cmd::Inspect {
            file,
            optimized,
            dims,
            shapes,
        } => {
            if !inspect_gguf::is_gguf(&file) && inspect_onnx::is_onnx(&file) {
                inspect_onnx::run(&file, &dims, &shapes)
            } else {
                inspect::run(&file, optimized)
            }
        }
        Cmd::Run(args) => run_onnx::run(&args),
        Cmd::Train { what } => train::run(what),
        Cmd::Devices => {
            devices();
            Ok(())
        }
        Cmd::OnnxTest {
            dirs,
            device,
            failures_list,
        } => parse_device(Some(device.as_deref().unwrap_or("cpu")))
            .and_then(|d| onnx_test::run(&dirs, d, failures_list.as_deref())),
        Cmd::Generate {
            model,
            prompt,
            chat,
        } => generate::generate(&model, &prompt, chat),
        Cmd::Chat { model, system } => generate::chat(&model, system.as_deref()),
        Cmd::Embed(args) => embed::run(&args),
        Cmd::Bench {
            device,
            suites,
            warmup,
            iters,
            quick,
            json,
            profile,
            gguf,
            model,
            texts,
        } => parse_device(device.as_deref()).and_then(|device| {
            bench::run(&bench::BenchOpts {
                device,
                suites: suites.split(',').map(|s| s.trim().to_string()).collect(),
                warmup,
                iters,
                quick,
                json: json.as_deref(),
                profile,
                gguf: &gguf,
                model: model.as_deref(),
                texts: texts.as_deref(),
            })
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
