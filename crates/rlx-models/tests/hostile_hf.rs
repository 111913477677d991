//! Hugging Face decoder folders with a wrong config.json — every top-level key removed, or
//! set to 0, -1, a huge number, a fraction, a string, null, a list or the other boolean —
//! through load, tokenize and generate. Each must work or fail with a typed error; a panic
//! is a bug.
mod common;

use common::hf_model;
use rlx_models::generate::{GenerateOptions, Llm, LoadOptions};
use rlx_runtime::Device;
use serde_json::{json, Map, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// Loads the folder and uses it; `Err` with the panic message if anything panicked.
fn exercise(dir: &Path) -> Result<&'static str, String> {
    let run = || -> &'static str {
        let opts = LoadOptions {
            device: Device::Cpu,
            ctx: Some(24),
            ..LoadOptions::default()
        };
        let mut llm = match Llm::load(dir, &opts) {
            Ok(m) => m,
            Err(_) => return "refused at load",
        };
        let Ok(prompt) = llm.encode("Hello world 123") else {
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
    catch_unwind(AssertUnwindSafe(run)).map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

fn variants(v: &Value) -> Vec<Value> {
    let mut out = vec![
        json!(0),
        json!(-1),
        json!(u64::MAX),
        json!(1e30),
        json!(0.5),
        json!("x"),
        Value::Null,
        json!([1, 2]),
    ];
    if let Value::Bool(b) = v {
        out.push(json!(!b));
    }
    out
}

fn hostile_configs_of(folder: &str, panics: &mut Vec<String>) -> usize {
    let Some(src) = hf_model(folder) else {
        return 0;
    };
    let dir = std::env::temp_dir().join(format!("rlx-hostile-hf-{}-{folder}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
    let text = std::fs::read_to_string(src.join("config.json")).unwrap();
    let base: Map<String, Value> = serde_json::from_str(&text).unwrap();
    let mut configs: Vec<(String, Map<String, Value>)> = Vec::new();
    for (key, value) in &base {
        let mut c = base.clone();
        c.remove(key);
        configs.push((format!("{key} removed"), c));
        for v in variants(value) {
            let mut c = base.clone();
            c.insert(key.clone(), v.clone());
            configs.push((format!("{key} = {v}"), c));
        }
    }
    let mut outcomes = std::collections::BTreeMap::<&str, usize>::new();
    for (what, c) in &configs {
        std::fs::write(
            dir.join("config.json"),
            Value::Object(c.clone()).to_string(),
        )
        .unwrap();
        match exercise(&dir) {
            Ok(o) => *outcomes.entry(o).or_default() += 1,
            Err(msg) => panics.push(format!("{folder}, {what}: {msg}")),
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    println!("{folder}: {} configs, {outcomes:?}", configs.len());
    configs.len()
}

#[test]
fn wrong_configs_are_errors_not_panics() {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut panics = Vec::new();
    let n: usize = ["tiny-llama", "tiny-qwen2"]
        .iter()
        .map(|f| hostile_configs_of(f, &mut panics))
        .sum();
    std::panic::set_hook(hook);
    assert!(panics.is_empty(), "panicked:\n{}", panics.join("\n"));
    println!("{n} hostile configs, no panic");
}
