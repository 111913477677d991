//! Hugging Face decoder folders with a wrong config.json — every top-level key removed, or
//! set to 0, -1, a huge number, a fraction, a string, null, a list or the other boolean — or
//! a wrong model.safetensors (each tensor removed, transposed, cut to one row, or stored as
//! I64 / F64 / U8), through load, tokenize and generate. Each must work or fail with a typed
//! error; a panic is a bug.
mod common;

use common::{hf_model, use_variants};
use rlx_io::safetensors::SafeTensors;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// Labelled file contents to try one by one.
type Variants = Vec<(String, Vec<u8>)>;

/// A copy of the tiny folder to mutate (removed when dropped).
struct Scratch(PathBuf);

impl Scratch {
    fn of(src: &Path, tag: &str) -> Scratch {
        let name = src.file_name().unwrap().to_string_lossy();
        let dir = std::env::temp_dir().join(format!("rlx-{tag}-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
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

/// Every config.json variant of one folder: each key removed or given each replacement.
fn config_variants(src: &Path) -> Variants {
    let text = std::fs::read_to_string(src.join("config.json")).unwrap();
    let base: Map<String, Value> = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    let as_bytes = |c: Map<String, Value>| Value::Object(c).to_string().into_bytes();
    for (key, value) in &base {
        let mut c = base.clone();
        c.remove(key);
        out.push((format!("{key} removed"), as_bytes(c)));
        for v in variants(value) {
            let mut c = base.clone();
            c.insert(key.clone(), v.clone());
            out.push((format!("{key} = {v}"), as_bytes(c)));
        }
    }
    out
}

/// A safetensors file of `(name, dtype, shape, bytes)` (its spec: an 8-byte header length, a
/// JSON header of dtypes, shapes and data offsets, then the data).
fn safetensors_bytes(tensors: &[(String, String, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let (mut header, mut data) = (Map::new(), Vec::new());
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            name.clone(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let header = Value::Object(header).to_string();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend(data);
    out
}

/// Every model.safetensors variant of one folder: each tensor removed, transposed, cut to
/// one row, or stored as another dtype.
fn weight_variants(src: &Path) -> Variants {
    let st = SafeTensors::open_file(src.join("model.safetensors")).unwrap();
    let base: Vec<(String, String, Vec<usize>, Vec<u8>)> = (st.names())
        .map(|n| {
            let t = st.get(n).unwrap();
            (
                n.to_string(),
                t.file_dtype.to_string(),
                t.shape.to_vec(),
                t.data.to_vec(),
            )
        })
        .collect();
    let mut out = Vec::new();
    for i in 0..base.len() {
        let (name, dt, shape, bytes) = &base[i];
        let mut v = base.clone();
        v.remove(i);
        out.push((format!("{name} removed"), safetensors_bytes(&v)));
        let width = bytes.len() / shape.iter().product::<usize>().max(1);
        if shape.len() == 2 {
            let mut v = base.clone();
            v[i].2 = vec![shape[1], shape[0]];
            out.push((format!("{name} transposed"), safetensors_bytes(&v)));
            let mut v = base.clone();
            v[i].2 = vec![1, shape[1]];
            v[i].3 = bytes[..shape[1] * width].to_vec();
            out.push((format!("{name} cut to one row"), safetensors_bytes(&v)));
        }
        for (other, w) in [("I64", 8), ("F64", 8), ("U8", 1)] {
            if other == dt {
                continue;
            }
            let mut v = base.clone();
            v[i].1 = other.to_string();
            v[i].3 = vec![1; shape.iter().product::<usize>() * w];
            out.push((format!("{name} as {other}"), safetensors_bytes(&v)));
        }
    }
    out
}

/// Each variant of `file` in a copy of each tiny folder, used as a model; no panic allowed.
fn check_folders(file: &str, variants: fn(&Path) -> Variants) {
    let mut panics = Vec::new();
    for folder in ["tiny-llama", "tiny-qwen2"] {
        let Some(src) = hf_model(folder) else {
            continue;
        };
        let scratch = Scratch::of(&src, &format!("hostile-{file}"));
        let label = format!("{folder} {file}");
        panics.extend(use_variants(
            &label,
            &scratch.0.join(file),
            &scratch.0,
            &variants(&src),
        ));
    }
    assert!(panics.is_empty(), "panicked:\n{}", panics.join("\n"));
}

#[test]
fn wrong_weights_are_errors_not_panics() {
    check_folders("model.safetensors", weight_variants);
}

#[test]
fn wrong_configs_are_errors_not_panics() {
    check_folders("config.json", config_variants);
}
