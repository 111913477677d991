//! The committed llama.cpp reference data (tests/data/llama_*.json, written by
//! scripts/llama_ref.py) reads back and holds together: ids inside the vocabulary, top-k
//! lists sorted, and every teacher-forced top-1 at a continuation position equal to the
//! greedy token that followed. Needs no llama.cpp and no model file: a broken or hand-edited
//! data file fails here rather than as a confusing mismatch in a model test.
use serde_json::Value;
use std::path::{Path, PathBuf};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn load(name: &str) -> Value {
    let path = data_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ids(v: &Value, what: &str) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("{what}: not an array"))
        .iter()
        .map(|x| {
            x.as_u64()
                .unwrap_or_else(|| panic!("{what}: {x} is not an id"))
        })
        .collect()
}

fn floats(v: &Value, what: &str) -> Vec<f64> {
    v.as_array()
        .unwrap_or_else(|| panic!("{what}: not an array"))
        .iter()
        .map(|x| {
            x.as_f64()
                .unwrap_or_else(|| panic!("{what}: {x} is not a number"))
        })
        .collect()
}

fn n_vocab(doc: &Value) -> u64 {
    doc["header"]["n_vocab"].as_u64().expect("header.n_vocab")
}

/// Rounding to 5 significant digits moves a value by at most half a unit in its 5th digit.
fn close_5sig(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-4 * scale.abs().max(1e-30)
}

/// Checks one reference file; returns (cases, teacher-forced rows) for the summary line.
fn check_reference(name: &str) -> (usize, usize) {
    let doc = load(name);
    let vocab = n_vocab(&doc);
    let header = &doc["header"];
    assert!(
        header["model"]["sha256"]
            .as_str()
            .is_some_and(|s| s.len() == 64),
        "{name}: sha256"
    );
    let k = header["settings"]["teacher_forced"]["top_k"]
        .as_u64()
        .expect("top_k") as usize;
    let n_cont = header["settings"]["sampling"]["n_continue"]
        .as_u64()
        .expect("n_continue");
    let cases = doc["cases"].as_array().expect("cases");
    assert!(!cases.is_empty(), "{name}: no cases");
    let mut rows_seen = 0;
    for case in cases {
        let cname = format!("{name}/{}", case["name"].as_str().expect("case name"));
        let prompt = ids(&case["prompt_ids"], &cname);
        let cont = ids(&case["continuation_ids"], &cname);
        assert!(!prompt.is_empty(), "{cname}: empty prompt");
        assert_eq!(cont.len() as u64, n_cont, "{cname}: continuation length");
        for &t in prompt.iter().chain(&cont) {
            assert!(t < vocab, "{cname}: id {t} >= vocab {vocab}");
        }
        for &t in &ids(&case["prompt_ids_no_bos_no_special"], &cname) {
            assert!(t < vocab, "{cname}: id {t} >= vocab {vocab}");
        }
        let rows = case["teacher_forced"].as_array().expect("teacher_forced");
        assert_eq!(
            rows.len(),
            prompt.len() + cont.len(),
            "{cname}: one row per position"
        );
        for (pos, row) in rows.iter().enumerate() {
            let what = format!("{cname} row {pos}");
            let top = ids(&row["ids"], &what);
            let logits = floats(&row["logits"], &what);
            assert_eq!(top.len(), k, "{what}: top-k ids");
            assert_eq!(logits.len(), k, "{what}: top-k logits");
            assert!(
                top.iter().all(|&t| t < vocab),
                "{what}: id out of vocabulary"
            );
            let mut distinct = top.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), k, "{what}: repeated id");
            assert!(
                logits.iter().all(|x| x.is_finite()),
                "{what}: non-finite logit"
            );
            assert!(
                logits.windows(2).all(|w| w[0] >= w[1]),
                "{what}: top-k not sorted"
            );
            let gap = row["gap"].as_f64().expect("gap");
            assert!(gap >= 0.0, "{what}: negative gap");
            assert!(
                close_5sig(
                    gap,
                    logits[0] - logits[1],
                    logits[0].abs().max(logits[1].abs())
                ),
                "{what}: gap {gap} vs {} - {}",
                logits[0],
                logits[1]
            );
        }
        // Each greedy token is the top-1 of the incremental row that chose it. Row i of the
        // teacher-forced (batched) logits predicts token i + 1 and agrees with it, except where
        // llama.cpp's own batched and incremental logits, which differ by rounding (recorded as
        // step_vs_batch_max_abs_diff), swap two candidates whose gap is within that difference.
        let steps = case["continuation_step_topk"]
            .as_array()
            .expect("continuation_step_topk");
        assert_eq!(
            steps.len(),
            cont.len(),
            "{cname}: one step row per continuation token"
        );
        let step_vs_batch = case["step_vs_batch_max_abs_diff"]
            .as_f64()
            .expect("step_vs_batch");
        let mut swapped = 0;
        for (i, &t) in cont.iter().enumerate() {
            let step_top = ids(&steps[i]["ids"], &cname);
            assert_eq!(
                step_top[0], t,
                "{cname}: step {i} top-1 is not the greedy token"
            );
            let row = &rows[prompt.len() - 1 + i];
            let top = ids(&row["ids"], &cname);
            if top[0] != t {
                // The greedy token among the batched row's top-k, behind its top-1 by no more
                // than the two runs' difference (both logits may move by it).
                let vals = floats(&row["logits"], &cname);
                let gap = top.iter().position(|&x| x == t).map(|j| vals[0] - vals[j]);
                assert!(
                    gap.is_some_and(|g| g <= 2.0 * step_vs_batch),
                    "{cname}: teacher-forced top-1 at continuation step {i} is {}, greedy chose \
                     {t} (gap {gap:?}), beyond twice llama.cpp's batch-vs-step difference \
                     {step_vs_batch}",
                    top[0]
                );
                swapped += 1;
            }
        }
        if swapped > 0 {
            println!("{cname}: {swapped} near-tie swap(s) between batched and incremental logits");
        }
        rows_seen += rows.len();
    }
    (cases.len(), rows_seen)
}

#[test]
fn smollm2_reference_is_consistent() {
    let (cases, rows) = check_reference("llama_ref_smollm2_q4_1.json");
    assert!(cases >= 12, "{cases} prompts");
    println!("llama_ref_smollm2_q4_1.json: {cases} prompts, {rows} teacher-forced rows");
}

/// An exact reference (`exact`) describes llama.cpp on an F32 copy of the file `base` names,
/// with an f32 cache, and the same prompts tokenized the same way.
fn check_exact_pair(exact: &str, base: &str) {
    let (cases, rows) = check_reference(exact);
    assert!(cases >= 12, "{cases} prompts");
    let doc = load(exact);
    let base = load(base);
    let h = &doc["header"];
    assert_eq!(h["settings"]["kv_cache_type"], "f32");
    assert_eq!(h["source"]["sha256"], base["header"]["model"]["sha256"]);
    for (a, b) in (doc["cases"].as_array().unwrap().iter()).zip(base["cases"].as_array().unwrap()) {
        assert_eq!(a["prompt_ids"], b["prompt_ids"], "{}", a["name"]);
    }
    println!("{exact}: {cases} prompts, {rows} teacher-forced rows");
}

#[test]
fn smollm2_exact_reference_is_consistent() {
    check_exact_pair(
        "llama_ref_smollm2_q4_1_exact.json",
        "llama_ref_smollm2_q4_1.json",
    );
}

/// SmolLM2 requantized to every type (scripts/gguf_requant.py): its two references, and the
/// same prompt ids as the original file's (the vocabulary and template were copied).
#[test]
fn smollm2_mix_references_are_consistent() {
    let (cases, rows) = check_reference("llama_ref_smollm2_mix.json");
    println!("llama_ref_smollm2_mix.json: {cases} prompts, {rows} teacher-forced rows");
    check_exact_pair(
        "llama_ref_smollm2_mix_exact.json",
        "llama_ref_smollm2_mix.json",
    );
    let (mix, q4_1) = (
        load("llama_ref_smollm2_mix.json"),
        load("llama_ref_smollm2_q4_1.json"),
    );
    for (a, b) in (mix["cases"].as_array().unwrap().iter()).zip(q4_1["cases"].as_array().unwrap()) {
        assert_eq!(a["prompt_ids"], b["prompt_ids"], "{}", a["name"]);
    }
}

#[test]
fn tiny_arch_references_are_consistent() {
    // Present only when llama.cpp could load the random-weight files of gen_gguf_arch.py.
    let mut seen = 0;
    for arch in ["llama", "qwen2", "gemma3"] {
        let name = format!("llama_ref_{arch}_tiny.json");
        if data_dir().join(&name).exists() {
            let (cases, rows) = check_reference(&name);
            println!("{name}: {cases} prompts, {rows} teacher-forced rows");
            seen += 1;
        }
    }
    println!("{seen} tiny-architecture reference files");
}

#[test]
fn smollm2_token_cases_are_consistent() {
    let doc = load("llama_tokens_smollm2.json");
    let vocab = n_vocab(&doc);
    let cases = doc["cases"].as_array().expect("cases");
    assert!(cases.len() >= 40, "{} token cases", cases.len());
    // SmolLM2's control tokens (<|endoftext|>, <|im_start|>, ...) are its first 17 ids.
    let control = |t: u64| t < 17;
    for case in cases {
        let cname = case["name"].as_str().expect("case name");
        let text = case["text"].as_str().expect("text");
        let toks = ids(&case["ids"], cname);
        assert!(
            toks.iter().all(|&t| t < vocab),
            "{cname}: id out of vocabulary"
        );
        let special = case["special"].as_bool().expect("special");
        let add_bos = case["add_bos"].as_bool().expect("add_bos");
        if text.is_empty() && !add_bos {
            assert!(toks.is_empty(), "{cname}: the empty string gives no tokens");
        } else {
            assert!(!toks.is_empty(), "{cname}: no tokens");
        }
        if !special && !add_bos {
            // Without special parsing "<|im_start|>" is plain text, never the control id.
            assert!(
                !toks.iter().any(|&t| control(t)),
                "{cname}: control id without special"
            );
        }
        if special && text.contains("<|im_start|>") {
            assert!(
                toks.contains(&1),
                "{cname}: <|im_start|> (id 1) not parsed as special"
            );
        }
    }
}
