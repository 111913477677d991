//! What the decoder tests share: the model files of `scripts/fetch_models.sh` (a test whose
//! file is absent skips with a message) and the committed llama.cpp reference data.
#![allow(dead_code)]
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `$RLX_CACHE/gguf/<file>`, or `None` (after saying so) when it is absent.
pub fn model(file: &str) -> Option<PathBuf> {
    let path = rlx_io::model_cache()?.join("gguf").join(file);
    if path.exists() {
        Some(path)
    } else {
        println!(
            "skipped: {} is absent (scripts/fetch_models.sh fetches it)",
            path.display()
        );
        None
    }
}

/// `$RLX_CACHE/hf/<folder>` (a Hugging Face folder), or `None` (after saying so).
pub fn hf_model(folder: &str) -> Option<PathBuf> {
    let path = rlx_io::model_cache()?.join("hf").join(folder);
    if path.join("config.json").is_file() {
        Some(path)
    } else {
        println!(
            "skipped: {} is absent (scripts/fetch_models.sh writes it)",
            path.display()
        );
        None
    }
}

/// `tests/data/<name>` parsed: from the build's own path, or (a test binary run from its
/// crate folder elsewhere, as on the device) the relative one.
pub fn reference(name: &str) -> Value {
    let built = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let path = if built.exists() {
        built
    } else {
        Path::new("tests/data").join(name)
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether a CUDA device is there; without one a GPU test skips with a message, unless
/// `RLX_REQUIRE_CUDA=1` (the device runs), where its absence fails the test.
pub fn cuda() -> bool {
    match rlx_cuda::check_available(0) {
        Ok(()) => true,
        Err(e) => {
            assert!(
                std::env::var("RLX_REQUIRE_CUDA").as_deref() != Ok("1"),
                "RLX_REQUIRE_CUDA=1 but no GPU: {e}"
            );
            println!("skipped: no CUDA device ({e})");
            false
        }
    }
}

/// Loads `path` (a GGUF file or a Hugging Face folder) on the CPU and uses it as a user
/// would — plain and chat text tokenized, three tokens generated — for the hostile-input
/// tests: how far it got, or `Err` with the message of a panic (a bug: bad input must be a
/// typed error).
pub fn use_model(path: &Path) -> Result<&'static str, String> {
    use rlx_models::generate::{GenerateOptions, Llm, LoadOptions};
    use rlx_models::tokenizer::Message;
    let run = || -> &'static str {
        let opts = LoadOptions {
            device: rlx_runtime::Device::Cpu,
            ctx: Some(24),
            ..LoadOptions::default()
        };
        let Ok(mut llm) = Llm::load(path, &opts) else {
            return "refused at load";
        };
        let _ = llm.encode_chat(&[Message::new("user", "Hi <|im_start|> 🍕")]);
        let Ok(prompt) = llm.encode("Hello world 123 日本") else {
            return "refused the prompt";
        };
        let gen = GenerateOptions {
            max_tokens: 3,
            ..GenerateOptions::default()
        };
        match llm.generate(&prompt, &gen, |_| {}) {
            Ok(_) => "generated",
            Err(_) => "refused to generate",
        }
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

/// Writes each `(what, bytes)` variant to `path` in turn and uses the model at `model`
/// (`use_model`) with the panic report silenced; returns the panics as "label, what:
/// message" and prints how many variants got each outcome.
pub fn use_variants(
    label: &str,
    path: &Path,
    model: &Path,
    variants: &[(String, Vec<u8>)],
) -> Vec<String> {
    // The panic hook is process-wide: tests that silence it take turns, so each puts back
    // the hook it found.
    static QUIET: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = QUIET
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    let mut panics = Vec::new();
    for (what, bytes) in variants {
        std::fs::write(path, bytes).expect("temp file");
        match use_model(model) {
            Ok(o) => *outcomes.entry(o).or_default() += 1,
            Err(msg) => panics.push(format!("{label}, {what}: {msg}")),
        }
    }
    std::panic::set_hook(hook);
    println!("{label}: {} variants, {outcomes:?}", variants.len());
    panics
}
