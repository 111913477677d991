//! `rlx bench --suites sample`: the host sampler's time per token at SmolLM2's and Qwen2's
//! vocabulary sizes (49,152 and 151,936 logits), greedy, llama.cpp's default chain (top-k 40,
//! top-p 0.95, min-p 0.05, temperature 0.8) and that chain with a repeat penalty over a
//! 200-token history. `rlx generate` pays this once a step beside the device's step time.
use crate::bench::{BenchOpts, Row};
use crate::CliError;
use rlx_models::sample::{Sampler, SamplerConfig};
use std::time::Instant;

/// Logits shaped like a model's: most around zero, a few standing out.
fn logits(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = (s >> 40) as f32 / (1u64 << 24) as f32;
            // A long right tail: u^8 puts about 1 % of the tokens above 6.
            -4.0 + 14.0 * u.powi(8) + 2.0 * u
        })
        .collect()
}

pub fn sample(o: &BenchOpts, rows: &mut Vec<Row>) -> Result<(), CliError> {
    let calls = if o.quick { 20 } else { 100 };
    for vocab in [49_152usize, 151_936] {
        let l = logits(vocab, vocab as u64);
        let history: Vec<u32> = (0..200).map(|i| (i * 7_919 % vocab) as u32).collect();
        let chain = SamplerConfig {
            seed: Some(7),
            ..SamplerConfig::default()
        };
        let configs = [
            ("greedy", "greedy", SamplerConfig::greedy()),
            ("chain", "llama.cpp default chain", chain.clone()),
            (
                "chain_penalty",
                "default chain + repeat penalty 1.1",
                SamplerConfig {
                    repeat_penalty: 1.1,
                    ..chain
                },
            ),
        ];
        for (key, name, cfg) in configs {
            let mut s = Sampler::new(cfg).map_err(|e| CliError::Usage(e.to_string()))?;
            let mut once = || -> Result<f64, CliError> {
                let t = Instant::now();
                for _ in 0..calls {
                    std::hint::black_box(
                        s.sample(&l, &history)
                            .map_err(|e| CliError::Usage(e.to_string()))?,
                    );
                }
                Ok(t.elapsed().as_secs_f64() * 1e3 / calls as f64)
            };
            for _ in 0..o.warmup {
                once()?;
            }
            let mut ms: Vec<f64> = (0..o.iters.max(1))
                .map(|_| once())
                .collect::<Result<_, _>>()?;
            ms.sort_by(f64::total_cmp);
            let ms = ms[ms.len() / 2];
            rows.push(Row {
                key: format!("sample_{vocab}_{key}"),
                workload: format!("host sampler, {vocab} logits, {name} (per token)"),
                dtype: "f32".into(),
                ms,
                rate: format!("{:.0} µs", ms * 1e3),
            });
        }
    }
    Ok(())
}
