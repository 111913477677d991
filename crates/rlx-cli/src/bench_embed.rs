//! `rlx bench --suites embed --model DIR`: a sentence-transformers folder (all-MiniLM-L6-v2)
//! with its real weights over 256 texts of mixed length (a fixed list of texts cycled, from
//! a few words to past the 256-token truncation), batch 32, as `SentenceTransformer.encode`
//! is called: tokenized, sorted by length, padded per batch. Sentences/s from the median of
//! several rounds after a warm-up round (which also plans every batch shape). Also timed:
//! the first run of a batch shape never seen against the same shape run again — the cost a
//! user meets when a new padded length or batch size turns up. A second row times the same
//! texts pre-tokenized (`Embedder::embed_ids`), the workload of the PyTorch peer script.
use crate::bench::{BenchOpts, Row};
use crate::CliError;
use rlx::prelude::{DType, Device};
use rlx_models::{EmbedOptions, Embedder};
use std::time::Instant;

const TEXTS: usize = 256;
const BATCH: usize = 32;

const SHORT: [&str; 8] = [
    "Hello world.",
    "A man is playing a guitar.",
    "The weather is lovely today, so we are going to the beach.",
    "How do I reset my password if I no longer have access to the email address?",
    "Rust's ownership rules let the compiler free memory without a garbage collector.",
    "Sentence embeddings map a text to a vector whose direction captures its meaning, so \
     that similar texts end up close to each other under the cosine similarity.",
    "The committee met on Tuesday to discuss the budget for next year, but after three \
     hours of debate about the new library, the road repairs and the school lunches, it \
     adjourned without a vote and agreed to meet again next week.",
    "Photosynthesis converts light energy into chemical energy: chlorophyll absorbs light, \
     water is split into oxygen, protons and electrons, and the energy carried by those \
     electrons is used to fix carbon dioxide into sugars in the Calvin cycle.",
];

/// The texts: the short ones cycled, with every ninth a long paragraph (past the
/// truncation) of one of them repeated.
pub fn texts() -> Vec<String> {
    (0..TEXTS)
        .map(|i| {
            let base = SHORT[i % SHORT.len()];
            if i % 9 == 4 {
                vec![base; 6 + i % 5].join(" ")
            } else {
                base.to_string()
            }
        })
        .collect()
}

/// Texts from `path` cycled to 256: a JSON list of strings, or an object whose `cases`
/// hold `text` fields (the reference file the peer scripts time).
pub fn load_texts(path: &std::path::Path) -> Result<Vec<String>, CliError> {
    let bad = |why: String| CliError::Usage(format!("--texts {}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let list = match (&v, v.get("cases")) {
        (serde_json::Value::Array(a), _) => a.clone(),
        (_, Some(serde_json::Value::Array(c))) => c.iter().map(|c| c["text"].clone()).collect(),
        _ => {
            return Err(bad(
                "expected a list of strings or {\"cases\": [{\"text\": …}]}".into(),
            ))
        }
    };
    let list: Vec<String> = (list.iter())
        .map(|t| t.as_str().map(str::to_string))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("every text must be a string".into()))?;
    if list.is_empty() {
        return Err(bad("no texts".into()));
    }
    Ok((0..TEXTS).map(|i| list[i % list.len()].clone()).collect())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median wall time in ms of `rounds` calls of `f`.
fn median_ms(
    rounds: usize,
    mut f: impl FnMut() -> Result<(), rlx_models::ModelError>,
) -> Result<f64, CliError> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(times))
}

pub fn embed(o: &BenchOpts, rows: &mut Vec<Row>) -> Result<(), CliError> {
    let dir = o.model.ok_or_else(|| {
        CliError::Usage(
            "the embed suite needs --model DIR (a sentence-transformers folder, e.g. \
             ~/.cache/rlx/hf/all-MiniLM-L6-v2)"
                .into(),
        )
    })?;
    let owned = match o.texts {
        Some(p) => load_texts(p)?,
        None => texts(),
    };
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let precisions: &[DType] = match o.device {
        Device::Cpu => &[DType::F32],
        Device::Cuda(_) | Device::Wgpu(_) => &[DType::F32, DType::F16],
    };
    let rounds = if o.quick { 3 } else { o.iters.clamp(3, 7) };
    for &precision in precisions {
        let opts = EmbedOptions {
            device: o.device,
            precision,
            batch: BATCH,
        };
        let emb = Embedder::load(dir, &opts)?;
        emb.embed(&texts)?;
        let ms = median_ms(rounds, || emb.embed(&texts).map(drop))?;
        let name = format!("{}", precision).to_lowercase();
        rows.push(Row {
            key: format!("embed_{name}"),
            workload: format!("embed {TEXTS} mixed texts, batch {BATCH}"),
            dtype: name.clone(),
            ms,
            rate: format!("{:.1} sent/s", TEXTS as f64 / ms * 1e3),
        });
        // The same texts pre-tokenized: the encoder and pooling alone, the workload the
        // PyTorch peer (bench/embed_torch.py, committed token ids) times.
        let ids: Vec<Vec<u32>> = (texts.iter())
            .map(|t| emb.tokenize(t))
            .collect::<Result<_, _>>()?;
        let ms = median_ms(rounds, || emb.embed_ids(&ids).map(drop))?;
        rows.push(Row {
            key: format!("embed_{name}_ids"),
            workload: format!("embed {TEXTS} pre-tokenized texts, batch {BATCH}"),
            dtype: name.clone(),
            ms,
            rate: format!("{:.1} sent/s", TEXTS as f64 / ms * 1e3),
        });
        // A batch size and padded length the rounds above never ran.
        let fresh: Vec<&str> = texts[..BATCH - 5].to_vec();
        let t = Instant::now();
        emb.embed(&fresh)?;
        let first = t.elapsed().as_secs_f64() * 1e3;
        let again: Vec<f64> = (0..3)
            .map(|_| {
                let t = Instant::now();
                emb.embed(&fresh).map(|_| t.elapsed().as_secs_f64() * 1e3)
            })
            .collect::<Result<_, _>>()?;
        let again = median(again);
        rows.push(Row {
            key: format!("embed_{name}_new_shape"),
            workload: format!("embed: first run of a new shape ({} texts)", fresh.len()),
            dtype: name.clone(),
            ms: first,
            rate: format!("{:+.2} ms vs steady", first - again),
        });
        rows.push(Row {
            key: format!("embed_{name}_same_shape"),
            workload: format!("embed: that shape again ({} texts)", fresh.len()),
            dtype: name,
            ms: again,
            rate: format!("{:.1} sent/s", fresh.len() as f64 / again * 1e3),
        });
    }
    Ok(())
}
