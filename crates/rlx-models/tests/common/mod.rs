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
