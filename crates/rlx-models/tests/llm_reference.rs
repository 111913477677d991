//! The decoder builders against llama.cpp on the CPU: teacher-forced logits of the committed
//! reference data (tests/data/llama_ref_*.json; batched logits, compared with our batched
//! run), greedy continuations through repeated full-sequence runs, and the typed errors of
//! an unknown architecture, a missing tensor and a tensor of the wrong shape.
//!
//! Model files come from scripts/fetch_models.sh (into `rlx_io::model_cache()`); a test
//! whose file is absent prints why and passes.
use rlx_io::gguf::Gguf;
use rlx_ir::HostTensor;
use rlx_models::llm::{self, BuildOptions, LlmConfig};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, QuantAct, Session};
mod common;
use common::{model, reference};
use serde_json::Value;
use std::path::Path;

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_i64().expect("id"))
        .collect()
}

/// A compiled decoder with its weights set.
struct Model {
    exe: CompiledGraph,
    vocab: usize,
    all_logits: bool,
}

impl Model {
    fn open(path: &Path, all_logits: bool) -> Model {
        let opts = BuildOptions {
            all_logits,
            ..BuildOptions::default()
        };
        Model::with(path, opts)
    }

    fn with(path: &Path, opts: BuildOptions) -> Model {
        Model::with_numerics(path, opts, QuantAct::F32)
    }

    fn with_numerics(path: &Path, opts: BuildOptions, quant_act: QuantAct) -> Model {
        let gguf = Gguf::open(path).unwrap();
        let cfg = LlmConfig::from_gguf(&gguf).unwrap();
        let all_logits = opts.all_logits;
        let (graph, decls) = llm::build(&cfg, &opts).unwrap();
        let copts = CompileOptions::default().quant_act(quant_act);
        let exe = Session::new(Device::Cpu)
            .compile_with(graph, &copts)
            .unwrap();
        for (name, value) in llm::load(&gguf, &decls).unwrap() {
            exe.set_param_typed(&name, value).unwrap();
        }
        Model {
            exe,
            vocab: cfg.vocab,
            all_logits,
        }
    }

    /// Logits of every position (`all_logits`) or of the last, row-major.
    fn logits(&self, tokens: &[i64]) -> Vec<f32> {
        let n = tokens.len();
        let positions: Vec<i64> = (0..n as i64).collect();
        let mut inputs = vec![
            (llm::TOKENS, HostTensor::from_i64(&[1, n], tokens)),
            (llm::POSITIONS, HostTensor::from_i64(&[n], &positions)),
        ];
        if !self.all_logits {
            inputs.push((llm::LAST, HostTensor::from_i64(&[1], &[n as i64 - 1])));
        }
        let out = self.exe.run_typed(&inputs).unwrap();
        let v = out[0].to_f32_vec();
        let rows = if self.all_logits { n } else { 1 };
        assert_eq!(v.len(), rows * self.vocab);
        v
    }
    /// With a KV cache: feed `tokens` at positions `start..`, after `start` cached ones;
    /// the logits of the last.
    fn step(&self, tokens: &[i64], start: usize) -> Vec<f32> {
        let n = tokens.len();
        let positions: Vec<i64> = (start as i64..(start + n) as i64).collect();
        let inputs = [
            (llm::TOKENS, HostTensor::from_i64(&[1, n], tokens)),
            (llm::POSITIONS, HostTensor::from_i64(&[n], &positions)),
            (llm::POS, HostTensor::from_i64(&[1], &[start as i64])),
            (llm::LAST, HostTensor::from_i64(&[1], &[n as i64 - 1])),
        ];
        self.exe.run_typed(&inputs).unwrap()[0].to_f32_vec()
    }
}

/// Greedy continuation with the KV cache: the prompt as one batch, then one token a step
/// (as llama.cpp made the reference); the number of tokens that match before the first
/// difference, and the length.
fn greedy_cached(m: &Model, prompt: &[i64], want: &[i64]) -> (usize, usize) {
    let mut got = Vec::with_capacity(want.len());
    let mut t = argmax(&m.step(prompt, 0)) as i64;
    for i in 0..want.len() {
        got.push(t);
        if i + 1 < want.len() {
            t = argmax(&m.step(&[t], prompt.len() + i)) as i64;
        }
    }
    let same = got.iter().zip(want).take_while(|(a, b)| a == b).count();
    (same, want.len())
}

/// Index of the largest value, lowest on ties (llama.cpp's greedy rule).
fn argmax(row: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in row.iter().enumerate() {
        if x > row[best] {
            best = i;
        }
    }
    best
}

/// Per-case teacher-forced comparison: (positions, top-1 agreements, rel-L2 sum of squares
/// of differences, of reference) over the reference's top-k ids.
#[derive(Default)]
struct Agreement {
    rows: usize,
    top1: usize,
    diff2: f64,
    ref2: f64,
    worst_rel: f64,
    /// Top-1 disagreements where llama.cpp's top two are closer than our difference from
    /// its logits: a swap either side of a near-tie, not a wrong model.
    near_ties: usize,
    /// Count, rather than fail on, a disagreement that is no such swap (QuantAct::Q8, whose
    /// rounding of x turns llama.cpp's second and third choices over more often).
    lenient: bool,
    /// Those disagreements.
    others: usize,
}

impl Agreement {
    /// Top-1 agreement at ≥ `per_mille` / 1000 of the positions.
    #[track_caller]
    fn top1_at_least(&self, per_mille: usize) {
        assert!(
            self.top1 * 1000 >= self.rows * per_mille,
            "top-1 {}/{} below {:.1} %",
            self.top1,
            self.rows,
            per_mille as f64 / 10.0
        );
    }
}

fn teacher_forced(m: &Model, case: &Value, acc: &mut Agreement) {
    let mut seq = ids(&case["prompt_ids"]);
    seq.extend(ids(&case["continuation_ids"]));
    let rows = case["teacher_forced"].as_array().expect("teacher_forced");
    assert_eq!(rows.len(), seq.len());
    let logits = m.logits(&seq);
    for (pos, row) in rows.iter().enumerate() {
        let ours = &logits[pos * m.vocab..(pos + 1) * m.vocab];
        compare_row(ours, row, &format!("{} position {pos}", case["name"]), acc);
    }
}

/// One row of our logits against llama.cpp's top-k `row` (`ids`, `logits`).
fn compare_row(ours: &[f32], row: &Value, what: &str, acc: &mut Agreement) {
    let top = ids(&row["ids"]);
    let want: Vec<f64> = row["logits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let (mut d2, mut r2, mut dmax) = (0.0, 0.0, 0f64);
    for (&t, &w) in top.iter().zip(&want) {
        let o = ours[t as usize] as f64;
        d2 += (o - w) * (o - w);
        r2 += w * w;
        dmax = dmax.max((o - w).abs());
    }
    acc.rows += 1;
    let pick = argmax(ours) as i64;
    if pick == top[0] {
        acc.top1 += 1;
    } else {
        let gap = want[0] - want[1];
        let swap = pick == top[1] && gap <= 2.0 * dmax;
        if acc.lenient && !swap {
            acc.others += 1;
            acc.diff2 += d2;
            acc.ref2 += r2;
            acc.worst_rel = acc.worst_rel.max((d2 / r2).sqrt());
            return;
        }
        assert!(
            swap,
            "{what}: we pick {pick}, llama.cpp {} (gap {gap}, our largest difference at its \
             top-k {dmax:.3e})",
            top[0]
        );
        acc.near_ties += 1;
    }
    acc.diff2 += d2;
    acc.ref2 += r2;
    acc.worst_rel = acc.worst_rel.max((d2 / r2).sqrt());
}

/// Runs every case of `reference` teacher-forced; returns the totals.
fn check_teacher_forced(file: &str, reference_name: &str, max_cases: usize) -> Option<Agreement> {
    check_teacher_forced_with(file, reference_name, max_cases, QuantAct::F32, false)
}

fn check_teacher_forced_with(
    file: &str,
    reference_name: &str,
    max_cases: usize,
    quant_act: QuantAct,
    lenient: bool,
) -> Option<Agreement> {
    let path = model(file)?;
    let opts = BuildOptions {
        all_logits: true,
        ..BuildOptions::default()
    };
    let m = Model::with_numerics(&path, opts, quant_act);
    let doc = reference(reference_name);
    let mut acc = Agreement {
        lenient,
        ..Agreement::default()
    };
    for case in doc["cases"].as_array().unwrap().iter().take(max_cases) {
        teacher_forced(&m, case, &mut acc);
    }
    let rel = (acc.diff2 / acc.ref2).sqrt();
    println!(
        "{file} ({quant_act:?} activations): top-1 {}/{} positions agree with llama.cpp ({} \
         near-tie swaps, {} other); rel-L2 at its top-k ids {rel:.2e} overall, worst row \
         {:.2e}",
        acc.top1, acc.rows, acc.near_ties, acc.others, acc.worst_rel
    );
    Some(acc)
}

fn greedy(file: &str, reference_name: &str) {
    let Some(path) = model(file) else { return };
    let m = Model::open(&path, false);
    let doc = reference(reference_name);
    for case in doc["cases"].as_array().unwrap() {
        let mut seq = ids(&case["prompt_ids"]);
        let want = ids(&case["continuation_ids"]);
        let mut got = Vec::with_capacity(want.len());
        for _ in 0..want.len() {
            let t = argmax(&m.logits(&seq)) as i64;
            got.push(t);
            seq.push(t);
        }
        assert_eq!(got, want, "{file} {}: greedy continuation", case["name"]);
    }
}

#[test]
fn tiny_llama_matches_llama_cpp() {
    if let Some(a) = check_teacher_forced("tiny-llama.gguf", "llama_ref_llama_tiny.json", 99) {
        assert_eq!(a.top1, a.rows);
        assert!((a.diff2 / a.ref2).sqrt() < 1e-3);
    }
}

#[test]
fn tiny_qwen2_matches_llama_cpp() {
    if let Some(a) = check_teacher_forced("tiny-qwen2.gguf", "llama_ref_qwen2_tiny.json", 99) {
        assert_eq!(a.top1, a.rows);
        assert!((a.diff2 / a.ref2).sqrt() < 1e-3);
    }
}

#[test]
fn tiny_gemma3_matches_llama_cpp() {
    if let Some(a) = check_teacher_forced("tiny-gemma3.gguf", "llama_ref_gemma3_tiny.json", 99) {
        // One prompt position has llama.cpp's top two 0.0017 apart (1.7e-4 of the logit),
        // within its f16 KV cache's rounding.
        assert!(a.near_ties <= 1 && a.top1 + a.near_ties == a.rows);
        assert!((a.diff2 / a.ref2).sqrt() < 1e-3);
    }
}

#[test]
fn tiny_models_continue_greedily_as_llama_cpp() {
    greedy("tiny-llama.gguf", "llama_ref_llama_tiny.json");
    greedy("tiny-qwen2.gguf", "llama_ref_qwen2_tiny.json");
    greedy("tiny-gemma3.gguf", "llama_ref_gemma3_tiny.json");
}

#[test]
fn smollm2_q4_1_matches_llama_cpp() {
    // Q4_1 matrices and a Q8_0 embedding (tied head). llama.cpp quantises x to Q8_1 for its
    // Q4_1 dot products (and keeps K/V in f16); we multiply f32 x by the decoded weights. The
    // logits differ by ~1 % rel-L2 (llama.cpp's own batched and incremental runs differ by
    // 1-3 %), and 16 of the 800 positions (all near-ties: llama.cpp's second choice, its
    // top-two gap under twice our difference from it) pick the other token: 98 %, so the
    // bound is 97.5 % rather than 99 %.
    let Some(a) = check_teacher_forced(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llama_ref_smollm2_q4_1.json",
        99,
    ) else {
        return;
    };
    a.top1_at_least(975);
    assert!((a.diff2 / a.ref2).sqrt() < 2e-2);
}

#[test]
fn smollm2_q4_1_with_q8_activations_matches_llama_cpp() {
    // The same comparison under QuantAct::Q8: x quantised to Q8_1 (Q8_0 for the tied Q8_0
    // head) and integer block dots, llama.cpp's products for the same x (rlx-cpu's
    // tests/q8act_ggml.rs checks them against ggml itself). It agrees no better than the f32
    // mode: 776 of 800 here (97.0 %; 782 with the one-row kernels instead of the tiled
    // prefill ones; the f32 mode 784), rel-L2 9.0e-3, and 2 of the 24 disagreements pick
    // llama.cpp's third choice. The Q8 rounding of x turns any tiny upstream difference
    // (norms, RoPE, softmax, summation order) into whole quantisation steps, so the two runs'
    // errors decorrelate unless every op matches bit for bit. llama.cpp against itself shows
    // the same floor: with an f32 KV cache (its only change: no f16 rounding of q, k, v and
    // the attention weights) it agrees with its default f16-cache run at 777 of 800 (rel-L2
    // 9.3e-3), and its one-token steps differ from its batched logits by 1-3 % rel-L2.
    // Rounding our attention's q, k, v and weights to f16 as well did not help (780 of 800).
    let Some(a) = check_teacher_forced_with(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llama_ref_smollm2_q4_1.json",
        99,
        QuantAct::Q8,
        true,
    ) else {
        return;
    };
    a.top1_at_least(960);
    let rel = (a.diff2 / a.ref2).sqrt();
    assert!(rel < 2e-2, "rel-L2 {rel:.2e}");
}

/// SmolLM2's Q4_1 weights against llama.cpp computing with the same weights in f32
/// (`llama_ref_smollm2_q4_1_exact.json`: scripts/gguf_to_f32.py's F32 copy of the file, an f32
/// KV cache — llama.cpp's arithmetic without its Q8_1 rounding of x and f16 rounding of the
/// cache). What is left between the two is f32 summation order, so top-1 must agree at
/// ≥ 99 % of the 800 teacher-forced positions and the logits within 1e-4 rel-L2; the greedy
/// continuations through our KV cache (prompt batched, then a step a token, as llama.cpp
/// made them) token for token, except where llama.cpp's own top-2 gap is under our
/// difference from its logits.
#[test]
fn smollm2_q4_1_matches_llama_cpp_on_the_same_weights_in_f32() {
    matches_exact_reference(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llama_ref_smollm2_q4_1_exact.json",
    );
}

#[test]
fn smollm2_q4_1_continues_greedily_as_llama_cpp_in_f32() {
    greedy_against_exact(
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "llama_ref_smollm2_q4_1_exact.json",
    );
}

/// Teacher-forced against an exact (f32) reference: what is left is f32 summation order, so
/// top-1 at ≥ 99 % of the positions and the logits within 1e-4 rel-L2.
fn matches_exact_reference(file: &str, reference_name: &str) {
    let Some(a) = check_teacher_forced(file, reference_name, 99) else {
        return;
    };
    a.top1_at_least(990);
    let rel = (a.diff2 / a.ref2).sqrt();
    assert!(rel < 1e-4, "{file}: rel-L2 {rel:.2e}");
}

/// Greedy through our KV cache (prompt batched, then a step a token, as llama.cpp made the
/// exact reference `reference_name`) token for token; where the runs part, llama.cpp's own
/// top-2 gap must be under 1e-3. A step is slow in a debug build: there 3 prompts × 8
/// tokens, in release all 13 × 32.
fn greedy_against_exact(file: &str, reference_name: &str) {
    let Some(path) = model(file) else {
        return;
    };
    let (n_prompts, n_tokens) = if cfg!(debug_assertions) {
        (3, 8)
    } else {
        (13, 32)
    };
    let opts = BuildOptions {
        cache: true,
        ctx: 128,
        ..BuildOptions::default()
    };
    let m = Model::with(&path, opts);
    let doc = reference(reference_name);
    let (mut exact, mut same_total, mut total) = (0, 0, 0);
    for case in doc["cases"].as_array().unwrap().iter().take(n_prompts) {
        let cont = ids(&case["continuation_ids"]);
        let want = &cont[..n_tokens.min(cont.len())];
        let (same, n) = greedy_cached(&m, &ids(&case["prompt_ids"]), want);
        if same < n {
            let row = &case["continuation_step_topk"][same];
            let gap = row["gap"].as_f64().unwrap();
            assert!(
                gap < 1e-3,
                "{file} {}: parted at token {same} where llama.cpp's top-2 gap is {gap}",
                case["name"]
            );
        } else {
            exact += 1;
        }
        same_total += same;
        total += n;
    }
    println!(
        "{file} vs llama.cpp in f32: greedy token-exact on {exact}/{n_prompts} prompts, \
         {same_total}/{total} tokens before a parting"
    );
}

/// SmolLM2 requantized to all eleven types (scripts/gguf_requant.py: Q4_0, Q4_1, Q5_0,
/// Q5_1 and Q8_0 in turn on the 576-column matrices, Q4_K, Q5_K and Q6_K on the FFN down
/// projections, one BF16 and one F16, a Q5_1 embedding and tied head, F32 norms) against
/// llama.cpp on the F32 copy of that file with an f32 cache: every block format decoded by
/// us against gguf-py's port of ggml's formulas, inside a real model. As for the Q4_1 file:
/// top-1 at ≥ 99 % of the 800 positions, logits within 1e-4 rel-L2.
#[test]
fn smollm2_with_every_quant_type_matches_llama_cpp_in_f32() {
    matches_exact_reference(
        "SmolLM2-135M-Instruct.mix.gguf",
        "llama_ref_smollm2_mix_exact.json",
    );
}

#[test]
fn smollm2_with_every_quant_type_continues_greedily_as_llama_cpp_in_f32() {
    greedy_against_exact(
        "SmolLM2-135M-Instruct.mix.gguf",
        "llama_ref_smollm2_mix_exact.json",
    );
}

/// The same file against llama.cpp's own kernels on it (x rounded to Q8_0 / Q8_1 / Q8_K per
/// block type, an f16 cache). Its 4- and 5-bit blocks make that rounding count: llama.cpp's
/// default run agrees with its own f32 run (the exact reference above) at 509 of the 544
/// teacher-forced positions the two runs share (93.6 %; 98.4 % on the Q4_1 file), and ours
/// agrees with the default at 755 / 800 (94.4 %: 38 second-choice swaps, 7 others) while it
/// matches the f32 run at 800 / 800. So the bound here is llama.cpp's own 93 %, with the
/// rounding's signature: nearly every disagreement llama.cpp's second choice.
#[test]
fn smollm2_with_every_quant_type_matches_llama_cpp() {
    mix_against_llama_cpp_kernels(QuantAct::F32);
}

/// The same under QuantAct::Q8, our integer block products for every type (x rounded as
/// llama.cpp rounds it): 768 / 800 (96.0 %, 29 second-choice swaps, 3 others), closer to
/// llama.cpp's kernels than the f32 mode's 94.4 %; the same bounds.
#[test]
fn smollm2_with_every_quant_type_and_q8_activations_matches_llama_cpp() {
    mix_against_llama_cpp_kernels(QuantAct::Q8);
}

fn mix_against_llama_cpp_kernels(quant_act: QuantAct) {
    let Some(a) = check_teacher_forced_with(
        "SmolLM2-135M-Instruct.mix.gguf",
        "llama_ref_smollm2_mix.json",
        99,
        quant_act,
        true,
    ) else {
        return;
    };
    a.top1_at_least(930);
    assert!(
        a.others * 50 <= a.rows,
        "{} not second-choice swaps",
        a.others
    );
    assert!((a.diff2 / a.ref2).sqrt() < 2e-2);
}

/// The cached graph reproduces llama.cpp's greedy continuations (made the same way: prompt
/// batched, then a step per token) on the tiny models, token for token.
#[test]
fn tiny_models_continue_greedily_with_the_cache() {
    for (file, refname) in [
        ("tiny-llama.gguf", "llama_ref_llama_tiny.json"),
        ("tiny-qwen2.gguf", "llama_ref_qwen2_tiny.json"),
        ("tiny-gemma3.gguf", "llama_ref_gemma3_tiny.json"),
    ] {
        let Some(path) = model(file) else { continue };
        let opts = BuildOptions {
            cache: true,
            ctx: 128,
            ..BuildOptions::default()
        };
        let m = Model::with(&path, opts);
        for case in reference(refname)["cases"].as_array().unwrap() {
            let (same, n) = greedy_cached(
                &m,
                &ids(&case["prompt_ids"]),
                &ids(&case["continuation_ids"]),
            );
            assert_eq!(
                same, n,
                "{file} {}: {same}/{n} tokens before a difference",
                case["name"]
            );
        }
    }
}

/// SmolLM2 through the cache (f32 and f16), compared incremental with incremental: the
/// prompt in one call, then llama.cpp's own continuation fed a token a step, each step's
/// logits against llama.cpp's `continuation_step_topk` (top-1 with the near-tie rule, and
/// rel-L2 at its top-k ids). Feeding its tokens rather than ours keeps one near-tie from
/// sending the rest of a continuation elsewhere. A step (M = 1) is dequantisation-bound,
/// slow in a debug build: there it runs 3 prompts × 8 steps, in release all 13 × 32.
#[test]
fn smollm2_cached_steps_match_llama_cpp_steps() {
    let Some(path) = model("SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let (n_prompts, n_steps) = if cfg!(debug_assertions) {
        (3, 8)
    } else {
        (13, 32)
    };
    let doc = reference("llama_ref_smollm2_q4_1.json");
    let (f32, f16) = (rlx_ir::DType::F32, rlx_ir::DType::F16);
    for (dt, qa) in [
        (f32, QuantAct::F32),
        (f16, QuantAct::F32),
        (f16, QuantAct::Q8),
    ] {
        let opts = BuildOptions {
            cache: true,
            ctx: 128,
            cache_dtype: dt,
            ..BuildOptions::default()
        };
        let m = Model::with_numerics(&path, opts, qa);
        let mut acc = Agreement {
            lenient: qa == QuantAct::Q8,
            ..Agreement::default()
        };
        for case in doc["cases"].as_array().unwrap().iter().take(n_prompts) {
            let prompt = ids(&case["prompt_ids"]);
            let cont = ids(&case["continuation_ids"]);
            let steps = case["continuation_step_topk"].as_array().unwrap();
            let mut logits = m.step(&prompt, 0);
            for i in 0..n_steps.min(cont.len()) {
                compare_row(
                    &logits,
                    &steps[i],
                    &format!("{} step {i}", case["name"]),
                    &mut acc,
                );
                logits = m.step(&[cont[i]], prompt.len() + i);
            }
        }
        let rel = (acc.diff2 / acc.ref2).sqrt();
        println!(
            "SmolLM2 {dt} cache, {qa:?} activations: step top-1 {}/{} agree with llama.cpp's \
             steps ({} near-tie swaps, {} other); rel-L2 at its top-k ids {rel:.2e}, worst \
             step {:.2e}",
            acc.top1, acc.rows, acc.near_ties, acc.others, acc.worst_rel
        );
        // Every disagreement was checked a near-tie in compare_row; 2 of the 24 debug steps
        // are.
        assert!(acc.top1 * 100 >= acc.rows * 85, "{}/{}", acc.top1, acc.rows);
        assert!(rel < 3e-2, "rel-L2 {rel:.2e}");
    }
}

/// The per-architecture switches read from the tiny files' metadata, as llama.cpp reads
/// them (gen_gguf_arch.py's docstring lists what each file exercises).
#[test]
fn configs_of_the_tiny_files() {
    use rlx_ir::{Activation, RopeStyle};
    use rlx_models::llm::Arch;
    let open = |f: &str| model(f).map(|p| LlmConfig::from_gguf(&Gguf::open(p).unwrap()).unwrap());
    if let Some(c) = open("tiny-llama.gguf") {
        assert_eq!(c.arch, Arch::Llama);
        assert_eq!((c.n_head, c.n_head_kv, c.head_dim, c.n_rot), (4, 2, 16, 16));
        assert_eq!(c.rope_style, RopeStyle::Interleaved);
        assert!(!c.tied_head && !c.qkv_bias && c.sliding_window.is_none());
        assert_eq!(c.rope_base, 500000.0);
    }
    if let Some(c) = open("tiny-qwen2.gguf") {
        assert_eq!(c.rope_style, RopeStyle::Half);
        assert!(c.tied_head && c.qkv_bias);
    }
    if let Some(c) = open("tiny-gemma3.gguf") {
        assert_eq!(c.rope_style, RopeStyle::Half);
        assert_eq!((c.n_embd, c.head_dim, c.n_rot), (64, 32, 32));
        assert_eq!(c.sliding_window, Some(8));
        // Pattern 2: llama.cpp's set_swa_pattern slides layer il when il % 2 < 1.
        assert_eq!(c.swa_layers, [true, false, true, false]);
        assert_eq!(c.rope_for_layer(0), (10000.0, 1.0));
        assert_eq!(c.rope_for_layer(1), (1000000.0, 1.0));
        assert_eq!(c.embed_scale, Some(8.0));
        assert!(c.qk_norm && c.post_norms && c.tied_head);
        assert_eq!(c.ffn_act, Activation::GeluApprox);
        assert_eq!(c.attn_scale, 1.0 / 32f32.sqrt());
    }
}
