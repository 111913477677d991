//! `rlx bench --suites llm --gguf FILE…`: decode (tg128) and prefill (pp512) of GGUF decoders,
//! as llama-bench measures them — tg128 generates 128 tokens one step at a time from an
//! empty cache, pp512 feeds a 512-token prompt in one call; wall-clock per token, synchronised
//! (each step returns its logits to the host), median of `iters` repetitions after a warm-up;
//! a second decode row draws each token with the host sampler, as `rlx generate` does.
//! The HBM column is bytes of weights (and KV cache) read per token over the time, against
//! the H200's 4.8 TB/s on CUDA (in GB/s on other devices).
use crate::bench::{BenchOpts, Row};
use crate::CliError;
use rlx::prelude::*;
use rlx_io::gguf::Gguf;
use rlx_models::generate::{Decoder, LoadOptions};
use rlx_models::llm::{LAST, POS, POSITIONS, TOKENS};
use rlx_models::sample::{Sampler, SamplerConfig};
use std::path::Path;
use std::time::Instant;

/// HBM bandwidth of the H200 (bytes/s) the fraction is taken against.
const HBM: f64 = 4.8e12;

/// Tokens/s and how fast the step reads its bytes: as a fraction of the H200's HBM on CUDA,
/// in GB/s elsewhere (a CPU's or another GPU's bandwidth is not the H200's).
fn read_rate(device: Device, step_ms: f64, bytes: f64) -> String {
    let per_s = bytes / (step_ms * 1e-3);
    match device {
        Device::Cuda(_) => format!(
            "{:.0} tok/s, {:.0}% HBM",
            1e3 / step_ms,
            100.0 * per_s / HBM
        ),
        _ => format!("{:.0} tok/s, {:.1} GB/s read", 1e3 / step_ms, per_s / 1e9),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Bytes one decode step reads: every weight once (an untied embedding only one row), plus
/// the keys and values of `pos` cached positions.
fn step_bytes(d: &Decoder, pos: usize) -> f64 {
    let g = d.compiled().graph();
    let has_head = g.params().any(|(n, _)| n == "output.weight");
    let mut bytes = 0.0;
    for (name, shape) in g.params() {
        let n = shape
            .static_dims()
            .unwrap_or_default()
            .iter()
            .product::<usize>() as f64
            * shape.dtype.size_bytes() as f64;
        if name.starts_with("cache.") {
            let per_pos = n / d.ctx() as f64;
            bytes += per_pos * pos as f64;
        } else if name.starts_with("rope.") || (name == "token_embd.weight" && has_head) {
            continue;
        } else {
            bytes += n;
        }
    }
    bytes
}

fn label(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

pub fn llm(o: &BenchOpts, rows: &mut Vec<Row>) -> Result<(), CliError> {
    if o.gguf.is_empty() {
        return Err(CliError::Usage(
            "the llm suite needs --gguf FILE (repeatable): e.g. $RLX_CACHE/gguf/SmolLM2-135M-Instruct.Q4_1.gguf"
                .into(),
        ));
    }
    let (tg, pp) = if o.quick || o.device == Device::Cpu {
        (32, 128)
    } else {
        (128, 512)
    };
    for path in o.gguf {
        let gguf = Gguf::open(path)?;
        let ctx = 1024.min(rlx_models::llm::LlmConfig::from_gguf(&gguf)?.ctx);
        let t0 = Instant::now();
        let mut d = Decoder::from_gguf(
            &gguf,
            &LoadOptions {
                device: o.device,
                ctx: Some(ctx),
                dtype: None,
                devices: None,
            },
        )?;
        eprintln!(
            "{}: loaded in {:.2} s",
            label(path),
            t0.elapsed().as_secs_f64()
        );
        let vocab = d.config().vocab.max(2) as u32;
        let toks: Vec<u32> = (0..pp as u32).map(|i| (i * 7919 + 13) % vocab).collect();
        // Decode: tg steps from an empty cache (the first run of each binding compiles).
        let mut tg_ms = Vec::new();
        for rep in 0..o.iters.clamp(1, 5) + 1 {
            d.reset();
            let t = Instant::now();
            for &tok in toks.iter().cycle().take(tg) {
                d.step(tok)?;
            }
            if rep > 0 {
                tg_ms.push(t.elapsed().as_secs_f64() * 1e3 / tg as f64);
            }
        }
        let step_ms = median(tg_ms);
        // The same steps as `rlx generate` runs them: each token drawn from the logits by the
        // host sampler (llama.cpp's default chain, seeded) and fed back.
        let mut sampled_ms = Vec::new();
        for rep in 0..o.iters.clamp(1, 5) + 1 {
            let mut sampler = Sampler::new(SamplerConfig {
                seed: Some(rep as u64),
                ..SamplerConfig::default()
            })
            .map_err(|e| CliError::Usage(e.to_string()))?;
            let mut history = vec![toks[0]];
            d.reset();
            let t = Instant::now();
            let mut logits = d.step(toks[0])?;
            for _ in 1..tg {
                let next = sampler
                    .sample(logits, &history)
                    .map_err(|e| CliError::Usage(e.to_string()))?;
                history.push(next);
                logits = d.step(next)?;
            }
            if rep > 0 {
                sampled_ms.push(t.elapsed().as_secs_f64() * 1e3 / tg as f64);
            }
        }
        let sampled_ms = median(sampled_ms);
        // Where one decode step's device time goes (at position tg/2, as the HBM figure).
        let p = (tg / 2) as i64;
        let step_inputs = [
            (TOKENS, HostTensor::from_i64(&[1, 1], &[toks[0] as i64])),
            (POSITIONS, HostTensor::from_i64(&[1], &[p])),
            (LAST, HostTensor::from_i64(&[1], &[0])),
            (POS, HostTensor::from_i64(&[1], &[p])),
        ];
        crate::bench::profile(
            o,
            d.compiled(),
            &step_inputs,
            &format!("{} decode step", label(path)),
        )?;
        let bytes = step_bytes(&d, tg / 2);
        rows.push(Row {
            key: format!("{}_tg{tg}", label(path)),
            workload: format!("{} decode tg{tg} (per token)", label(path)),
            dtype: "gguf".into(),
            ms: step_ms,
            rate: read_rate(d.device(), step_ms, bytes),
        });
        rows.push(Row {
            key: format!("{}_tg{tg}_sampled", label(path)),
            workload: format!(
                "{} decode tg{tg} + host sampling (llama.cpp's default chain)",
                label(path)
            ),
            dtype: "gguf".into(),
            ms: sampled_ms,
            rate: format!(
                "{:.0} tok/s, sampling {:+.1}%",
                1e3 / sampled_ms,
                100.0 * (sampled_ms / step_ms - 1.0)
            ),
        });
        // Prefill: pp tokens in one call.
        let mut pp_ms = Vec::new();
        for rep in 0..o.iters.clamp(1, 5) + 1 {
            d.reset();
            let t = Instant::now();
            d.prefill(&toks[..pp])?;
            if rep > 0 {
                pp_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let ms = median(pp_ms);
        // Where the prefill's device time goes (the same pp tokens from position 0).
        let ids: Vec<i64> = toks[..pp].iter().map(|&t| t as i64).collect();
        let positions: Vec<i64> = (0..pp as i64).collect();
        let prefill_inputs = [
            (TOKENS, HostTensor::from_i64(&[1, pp], &ids)),
            (POSITIONS, HostTensor::from_i64(&[pp], &positions)),
            (LAST, HostTensor::from_i64(&[1], &[pp as i64 - 1])),
            (POS, HostTensor::from_i64(&[1], &[0])),
        ];
        crate::bench::profile(
            o,
            d.compiled(),
            &prefill_inputs,
            &format!("{} prefill pp{pp}", label(path)),
        )?;
        rows.push(Row {
            key: format!("{}_pp{pp}", label(path)),
            workload: format!("{} prefill pp{pp}", label(path)),
            dtype: "gguf".into(),
            ms,
            rate: format!("{:.0} tok/s", pp as f64 / ms * 1e3),
        });
    }
    Ok(())
}
