//! Structurally valid GGUF files with wrong model contents — every metadata entry of the tiny
//! llama / qwen2 / gemma3 files removed, zeroed, made huge or negative, given another type or
//! a cut array, and every tensor removed or reshaped — through the whole user path: load
//! (config, tokenizer, graph, weights), tokenize plain and chat text, generate. Each must
//! work or fail with a typed error; a panic is a bug (the GGUF reader's own fuzzing stops at
//! the container: these files parse). `RLX_SEED` replays the random picks.
mod common;
#[path = "../../rlx-io/tests/gguf_writer/mod.rs"]
mod gguf_writer;

use common::{model, use_variants};
use gguf_writer::Writer;
use rlx_io::gguf::{Array, Gguf, Value};
use rlx_testutil::Rng;
use std::path::Path;

/// The file as a writer holds it: the same entries and tensors, in order.
fn writer_of(g: &Gguf) -> Writer {
    let mut w = Writer::new(g.version());
    w.alignment = g.alignment();
    w.kvs = g.metadata().entries().to_vec();
    for t in g.tensors() {
        let data = g.tensor_data(t).expect("the source file reads").to_vec();
        w = w.tensor(t.name(), t.ggml_dims(), t.type_id(), data);
    }
    w
}

/// Replacement values for one metadata entry: other numbers, another type, cut arrays.
fn variants(v: &Value, rng: &mut Rng) -> Vec<Value> {
    let mut out = vec![Value::String(b"x".to_vec())];
    match v {
        Value::U32(_) | Value::U64(_) | Value::I32(_) | Value::I64(_) => {
            out.extend([
                Value::U32(0),
                Value::U32(1),
                Value::U32(3),
                Value::U32(u32::MAX),
                Value::I32(-1),
                Value::U64(u64::MAX),
            ]);
        }
        Value::F32(_) | Value::F64(_) => {
            out.extend([0.0, -1.0, f32::NAN, f32::INFINITY, 1e30].map(Value::F32));
        }
        Value::Bool(b) => out.push(Value::Bool(!b)),
        Value::String(_) => out.extend([Value::String(vec![]), Value::String(b"{{".to_vec())]),
        Value::Array(a) => {
            let cut = |n: usize| -> Array {
                match a {
                    Array::String(s) => Array::String(s.iter().take(n).collect()),
                    Array::I32(x) => Array::I32(x[..n.min(x.len())].to_vec()),
                    Array::U32(x) => Array::U32(x[..n.min(x.len())].to_vec()),
                    Array::F32(x) => Array::F32(x[..n.min(x.len())].to_vec()),
                    other => other.clone(),
                }
            };
            out.push(Value::Array(cut(0)));
            out.push(Value::Array(cut(a.len() / 2)));
            // One element changed where the array's values mean something (token types,
            // scores): out-of-range and non-finite.
            match a {
                Array::I32(x) if !x.is_empty() => {
                    let mut y = x.clone();
                    let i = rng.below(y.len());
                    y[i] = if rng.chance(0.5) { -7 } else { 1000 };
                    out.push(Value::Array(Array::I32(y)));
                }
                Array::F32(x) if !x.is_empty() => {
                    let mut y = x.clone();
                    let i = rng.below(y.len());
                    y[i] = f32::NAN;
                    out.push(Value::Array(Array::F32(y)));
                }
                Array::String(s) if !s.is_empty() => {
                    let mut y: Vec<Vec<u8>> = s.iter().map(<[u8]>::to_vec).collect();
                    let i = rng.below(y.len());
                    y[i] = if rng.chance(0.5) {
                        vec![]
                    } else {
                        vec![0xff, 0xfe]
                    };
                    out.push(Value::Array(Array::String(y.iter().collect())));
                }
                _ => {}
            }
        }
        _ => {}
    }
    out
}

/// Every mutation of one file; returns how many there were and the panics.
fn hostile_variants_of(file: &str, rng: &mut Rng, dir: &Path) -> (usize, Vec<String>) {
    let Some(path) = model(file) else {
        return (0, vec![]);
    };
    let base = writer_of(&Gguf::open(&path).unwrap());
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, (key, value)) in base.kvs.iter().enumerate() {
        let mut w = writer_of(&Gguf::open(&path).unwrap());
        w.kvs.remove(i);
        files.push((format!("{key} removed"), w.bytes()));
        for v in variants(value, rng) {
            let mut w = writer_of(&Gguf::open(&path).unwrap());
            w.kvs[i].1 = v.clone();
            let shown = format!("{v:?}");
            files.push((
                format!("{key} = {}", &shown[..shown.len().min(60)]),
                w.bytes(),
            ));
        }
    }
    for i in 0..base.tensors.len() {
        let name = base.tensors[i].name.clone();
        let mut w = writer_of(&Gguf::open(&path).unwrap());
        w.tensors.remove(i);
        files.push((format!("tensor {name} removed"), w.bytes()));
        let mut w = writer_of(&Gguf::open(&path).unwrap());
        if w.tensors[i].dims.len() >= 2 {
            w.tensors[i].dims.swap(0, 1);
            files.push((format!("tensor {name} transposed"), w.bytes()));
        }
        // Another storage type of the same shape (bytes sized for it, values small).
        let n: u64 = base.tensors[i].dims.iter().product();
        let mut as_type = |ty: u32, what: &str, bytes: Vec<u8>| {
            let mut w = writer_of(&Gguf::open(&path).unwrap());
            w.tensors[i].type_id = ty;
            w.tensors[i].data = bytes;
            files.push((format!("tensor {name} as {what}"), w.bytes()));
        };
        let small = |rng: &mut Rng| half::f16::from_f32(rng.range(-0.1, 0.1) as f32).to_bits();
        let f16s: Vec<u8> = (0..n).flat_map(|_| small(rng).to_le_bytes()).collect();
        as_type(1, "F16", f16s);
        if base.tensors[i].dims[0].is_multiple_of(32) {
            let block = |rng: &mut Rng| {
                let mut b = small(rng).to_le_bytes().to_vec();
                b.extend((0..32).map(|_| rng.below(256) as u8));
                b
            };
            let q8: Vec<u8> = (0..n / 32).flat_map(|_| block(rng)).collect();
            as_type(8, "Q8_0", q8);
        }
        // A type rlx does not run (Q2_K), with a byte count that parses.
        if n.is_multiple_of(256) {
            as_type(10, "Q2_K", vec![0; (n / 256 * 84) as usize]);
        }
    }
    let panics = use_variants(
        file,
        &dir.join("hostile.gguf"),
        &dir.join("hostile.gguf"),
        &files,
    );
    (files.len(), panics)
}

#[test]
fn wrong_model_contents_are_errors_not_panics() {
    let mut rng = Rng::new("hostile_gguf");
    let dir = std::env::temp_dir().join(format!("rlx-hostile-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut n, mut panics) = (0, Vec::new());
    for f in ["tiny-llama.gguf", "tiny-qwen2.gguf", "tiny-gemma3.gguf"] {
        let (k, p) = hostile_variants_of(f, &mut rng, &dir);
        n += k;
        panics.extend(p);
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(panics.is_empty(), "panicked:\n{}", panics.join("\n"));
    println!("{n} hostile variants, no panic");
}
