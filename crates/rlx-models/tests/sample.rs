//! The sampler against an independent f64 reference of llama.cpp's default chain (penalty →
//! top-k → top-p → min-p → temperature), on random logits and options: the distribution,
//! greedy and top-k = 1, a chi-square test of 20 000 draws, seed reproducibility and every
//! validation error. The stop matcher on random texts split into random pieces.
use rlx_models::sample::{SampleError, Sampler, SamplerConfig, StopMatcher};
use rlx_testutil::Rng;

// ---------------------------------------------------------------------------------------
// Reference sampler: dense, index-based, written from the rules rather than the code.
// ---------------------------------------------------------------------------------------

/// Penalised logits. The penalty itself is f32 arithmetic, as llama.cpp applies it, so the
/// reference sees the same values the sampler filters on.
fn ref_penalised(logits: &[f32], history: &[u32], c: &SamplerConfig) -> Vec<f64> {
    let n = logits.len();
    let mut out: Vec<f64> = logits.iter().map(|&l| f64::from(l)).collect();
    if c.repeat_penalty == 1.0 || c.repeat_last_n == 0 {
        return out;
    }
    let start = history.len().saturating_sub(c.repeat_last_n);
    let mut seen = vec![false; n];
    for &t in &history[start..] {
        let t = t as usize;
        if t < n && !seen[t] {
            seen[t] = true;
            let l = logits[t];
            let pen = if l > 0.0 {
                l / c.repeat_penalty
            } else {
                l * c.repeat_penalty
            };
            out[t] = f64::from(pen);
        }
    }
    out
}

/// The final distribution as a dense vector (0 for dropped tokens) and the kept mask.
fn reference(logits: &[f32], history: &[u32], c: &SamplerConfig) -> (Vec<bool>, Vec<f64>) {
    let l = ref_penalised(logits, history, c);
    let n = l.len();
    let mut keep: Vec<bool> = l.iter().map(|v| *v > f64::NEG_INFINITY).collect();
    // Rank: larger logit first, then smaller id.
    let mut order: Vec<usize> = (0..n).filter(|&i| keep[i]).collect();
    order.sort_by(|&a, &b| l[b].partial_cmp(&l[a]).unwrap().then(a.cmp(&b)));
    let best = order[0];
    if c.temperature == 0.0 {
        let mut p = vec![0.0; n];
        p[best] = 1.0;
        let mut k = vec![false; n];
        k[best] = true;
        return (k, p);
    }
    let lmax = l[best];
    if c.top_k > 0 {
        for &i in order.iter().skip(c.top_k) {
            keep[i] = false;
        }
    }
    if c.top_p < 1.0 {
        let z: f64 = (0..n)
            .filter(|&i| keep[i])
            .map(|i| (l[i] - lmax).exp())
            .sum();
        let mut cum = 0.0;
        let mut crossed = false;
        for &i in &order {
            if !keep[i] {
                continue;
            }
            if crossed {
                keep[i] = false;
                continue;
            }
            cum += (l[i] - lmax).exp() / z;
            crossed = cum >= f64::from(c.top_p);
        }
    }
    if c.min_p > 0.0 {
        for i in 0..n {
            // p_i / p_max in the untempered softmax.
            if keep[i] && (l[i] - lmax).exp() < f64::from(c.min_p) {
                keep[i] = false;
            }
        }
    }
    let t = f64::from(c.temperature);
    let e: Vec<f64> = (0..n)
        .map(|i| {
            if keep[i] {
                ((l[i] - lmax) / t).exp()
            } else {
                0.0
            }
        })
        .collect();
    let z: f64 = e.iter().sum();
    (keep, e.iter().map(|v| v / z).collect())
}

fn random_config(rng: &mut Rng, n: usize) -> SamplerConfig {
    SamplerConfig {
        temperature: if rng.chance(0.15) {
            0.0
        } else {
            rng.range(0.05, 2.5) as f32
        },
        top_k: if rng.chance(0.3) {
            0
        } else {
            1 + rng.below(n + 3)
        },
        top_p: if rng.chance(0.3) {
            1.0
        } else {
            rng.range(0.02, 1.0) as f32
        },
        min_p: if rng.chance(0.3) {
            0.0
        } else {
            rng.range(0.0, 0.6) as f32
        },
        repeat_penalty: if rng.chance(0.3) {
            1.0
        } else {
            rng.range(0.5, 2.0) as f32
        },
        repeat_last_n: match rng.below(6) {
            0 => 0,
            1 => usize::MAX,
            _ => rng.below(40),
        },
        seed: Some(rng.next_u64()),
    }
}

/// Random logits with some exact ties and, sometimes, masked (-inf) tokens; at least one is
/// finite.
fn random_logits(rng: &mut Rng, n: usize) -> Vec<f32> {
    let scale = rng.range(0.3, 6.0);
    let mut v: Vec<f32> = (0..n).map(|_| (rng.normal() * scale) as f32).collect();
    for _ in 0..rng.below(n / 4 + 1) {
        let (a, b) = (rng.below(n), rng.below(n));
        v[a] = v[b];
    }
    if rng.chance(0.3) {
        for x in v.iter_mut() {
            if rng.chance(0.1) {
                *x = f32::NEG_INFINITY;
            }
        }
    }
    let k = rng.below(n);
    if v[k] == f32::NEG_INFINITY {
        v[k] = 0.0;
    }
    v
}

fn random_history(rng: &mut Rng, n: usize) -> Vec<u32> {
    // Some ids past the vocabulary: they match no logit and must be ignored.
    (0..rng.below(80))
        .map(|_| rng.below(n + 5) as u32)
        .collect()
}

fn check_against_reference(got: &[(u32, f64)], logits: &[f32], hist: &[u32], c: &SamplerConfig) {
    let (keep, want) = reference(logits, hist, c);
    let ctx = || format!("config {c:?}, {} logits", logits.len());
    let ids: Vec<usize> = got.iter().map(|&(id, _)| id as usize).collect();
    let mut want_ids: Vec<usize> = (0..keep.len()).filter(|&i| keep[i]).collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    want_ids.sort_unstable();
    assert_eq!(sorted, want_ids, "kept tokens differ: {}", ctx());
    for w in got.windows(2) {
        assert!(
            w[0].1 > w[1].1 || (w[0].1 == w[1].1 && w[0].0 < w[1].0),
            "not sorted by probability then id: {:?} {}",
            &w,
            ctx()
        );
    }
    let sum: f64 = got.iter().map(|&(_, p)| p).sum();
    assert!((sum - 1.0).abs() < 1e-12, "sum {sum}: {}", ctx());
    for &(id, p) in got {
        let w = want[id as usize];
        assert!(
            (p - w).abs() <= 1e-12 + 1e-10 * w,
            "token {id}: p = {p}, reference {w}: {}",
            ctx()
        );
    }
}

#[test]
fn distribution_equals_reference() {
    let mut rng = Rng::new("sample_distribution");
    for case in 0..600 {
        let n = if case == 0 {
            50_000
        } else {
            1 + rng.below(200)
        };
        let logits = random_logits(&mut rng, n);
        let hist = random_history(&mut rng, n);
        let cfg = random_config(&mut rng, n);
        let s = Sampler::new(cfg.clone()).unwrap();
        let got = s.probabilities(&logits, &hist).unwrap();
        check_against_reference(&got, &logits, &hist, &cfg);
    }
}

/// Vocabularies of LLM size, where the sampler reads the logits in one pass and keeps only
/// a top-k buffer (compacted whenever it fills, 2k + 1024 entries): logits drawn from a few
/// levels, so whole runs tie at the k-th value and the smaller ids must win across
/// compactions; masked tokens, penalties either way (history ids scattered over the whole
/// vocabulary) and greedy, against the reference.
#[test]
fn large_vocabularies_equal_reference() {
    let mut rng = Rng::new("sample_large_vocab");
    for case in 0..40 {
        let n = 2_000 + rng.below(70_000);
        let levels: Vec<f32> = (0..2 + rng.below(40))
            .map(|_| (rng.normal() * 4.0) as f32)
            .collect();
        let mut logits: Vec<f32> = if case % 2 == 0 {
            (0..n).map(|_| levels[rng.below(levels.len())]).collect()
        } else {
            random_logits(&mut rng, n)
        };
        if rng.chance(0.3) {
            for x in logits.iter_mut() {
                if rng.chance(0.2) {
                    *x = f32::NEG_INFINITY;
                }
            }
            logits[rng.below(n)] = levels[0];
        }
        let hist: Vec<u32> = (0..rng.below(100))
            .map(|_| rng.below(n + 5) as u32)
            .collect();
        let top_k = match rng.below(4) {
            0 => 1 + rng.below(8),
            1 => 1 + rng.below(600),
            2 => 2_000 + rng.below(3_000),
            _ => 40,
        };
        let mut cfg = SamplerConfig {
            top_k,
            temperature: if rng.chance(0.2) { 0.0 } else { 0.8 },
            ..random_config(&mut rng, n)
        };
        if case % 3 == 0 {
            // Exactly the top-k set, with its ties at the boundary, reaches the draw.
            (cfg.top_p, cfg.min_p) = (1.0, 0.0);
        }
        let got = Sampler::new(cfg.clone())
            .unwrap()
            .probabilities(&logits, &hist)
            .unwrap();
        check_against_reference(&got, &logits, &hist, &cfg);
    }
}

#[test]
fn edge_options_equal_reference() {
    // min_p = 1 keeps exactly the ties of the maximum; top_p tiny keeps the top token;
    // top_k past the vocabulary keeps all.
    let mut rng = Rng::new("sample_edges");
    for _ in 0..100 {
        let n = 1 + rng.below(50);
        let logits = random_logits(&mut rng, n);
        let hist = random_history(&mut rng, n);
        for (min_p, top_p, top_k) in [(1.0, 1.0, 0), (0.0, 1e-6, 0), (0.0, 1.0, n + 10)] {
            let cfg = SamplerConfig {
                temperature: rng.range(0.1, 2.0) as f32,
                top_k,
                top_p,
                min_p,
                ..random_config(&mut rng, n)
            };
            let got = Sampler::new(cfg.clone())
                .unwrap()
                .probabilities(&logits, &hist)
                .unwrap();
            check_against_reference(&got, &logits, &hist, &cfg);
        }
    }
}

#[test]
fn penalty_is_llama_cpp_s() {
    let cfg = SamplerConfig {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 2.0,
        repeat_last_n: 4,
        seed: Some(1),
    };
    let s = Sampler::new(cfg).unwrap();
    // Window = the last 4: [0, 1, 0, 3]; token 0 twice is penalised once; token 5 is only
    // outside the window; 99 is outside the vocabulary.
    let logits = [2.0, -2.0, 0.0, 1.0, 0.5, 0.25];
    let got = s.probabilities(&logits, &[5, 99, 0, 1, 0, 3]).unwrap();
    let want_l = [1.0f64, -4.0, 0.0, 0.5, 0.5, 0.25];
    let z: f64 = want_l.iter().map(|l| l.exp()).sum();
    for (id, p) in got {
        let w = want_l[id as usize].exp() / z;
        assert!((p - w).abs() < 1e-12, "token {id}: {p} vs {w}");
    }
}

#[test]
fn greedy_is_first_argmax() {
    let mut rng = Rng::new("sample_greedy");
    for _ in 0..300 {
        let n = 1 + rng.below(100);
        let mut logits = random_logits(&mut rng, n);
        let top = logits.iter().cloned().fold(f32::MIN, f32::max) + 1.0;
        for _ in 0..1 + rng.below(3) {
            logits[rng.below(n)] = top;
        }
        let hist = random_history(&mut rng, n);
        let cfg = SamplerConfig {
            temperature: 0.0,
            ..random_config(&mut rng, n)
        };
        let pen = ref_penalised(&logits, &hist, &cfg);
        let m = pen.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let want = pen.iter().position(|&v| v == m).unwrap() as u32;
        let mut s = Sampler::new(cfg.clone()).unwrap();
        assert_eq!(s.probabilities(&logits, &hist).unwrap(), vec![(want, 1.0)]);
        assert_eq!(s.sample(&logits, &hist).unwrap(), want, "{cfg:?}");
        if cfg.repeat_penalty == 1.0 {
            let first = logits.iter().position(|&v| v == top).unwrap() as u32;
            assert_eq!(want, first);
        }
    }
}

#[test]
fn top_k_one_is_greedy_at_any_temperature() {
    let mut rng = Rng::new("sample_topk1");
    for _ in 0..300 {
        let n = 1 + rng.below(100);
        let logits = random_logits(&mut rng, n);
        let hist = random_history(&mut rng, n);
        let cfg = SamplerConfig {
            temperature: rng.range(0.01, 5.0) as f32,
            top_k: 1,
            ..random_config(&mut rng, n)
        };
        let greedy = SamplerConfig {
            temperature: 0.0,
            ..cfg.clone()
        };
        let want = Sampler::new(greedy)
            .unwrap()
            .sample(&logits, &hist)
            .unwrap();
        let mut s = Sampler::new(cfg).unwrap();
        for _ in 0..5 {
            assert_eq!(s.sample(&logits, &hist).unwrap(), want);
        }
    }
}

/// Pearson's statistic of `counts` against `probs` (same order), with bins of expected
/// count under `MIN_EXPECTED` pooled; returns (statistic, degrees of freedom).
fn pearson(counts: &[u64], probs: &[f64], draws: f64) -> (f64, usize) {
    const MIN_EXPECTED: f64 = 50.0;
    let mut bins: Vec<(f64, f64)> = Vec::new(); // (observed, expected)
    let mut pool = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(probs) {
        let e = p * draws;
        if e >= MIN_EXPECTED {
            bins.push((c as f64, e));
        } else {
            pool.0 += c as f64;
            pool.1 += e;
        }
    }
    if pool.1 >= MIN_EXPECTED || bins.is_empty() {
        bins.push(pool);
    } else if pool.1 > 0.0 || pool.0 > 0.0 {
        // Too small to stand alone: fold into the smallest bin.
        let k = (0..bins.len())
            .min_by(|&a, &b| bins[a].1.partial_cmp(&bins[b].1).unwrap())
            .unwrap();
        bins[k].0 += pool.0;
        bins[k].1 += pool.1;
    }
    let stat = bins.iter().map(|&(o, e)| (o - e) * (o - e) / e).sum();
    (stat, bins.len() - 1)
}

#[test]
fn draws_follow_probabilities() {
    const DRAWS: usize = 20_000;
    let mut rng = Rng::new("sample_chi2");
    for _ in 0..6 {
        let n = 5 + rng.below(60);
        let logits: Vec<f32> = (0..n).map(|_| (rng.normal() * 1.5) as f32).collect();
        let hist = random_history(&mut rng, n);
        let cfg = SamplerConfig {
            temperature: rng.range(0.5, 1.5) as f32,
            top_k: if rng.chance(0.5) { 0 } else { 2 + rng.below(n) },
            top_p: if rng.chance(0.5) {
                1.0
            } else {
                rng.range(0.6, 1.0) as f32
            },
            min_p: if rng.chance(0.5) {
                0.0
            } else {
                rng.range(0.0, 0.1) as f32
            },
            ..random_config(&mut rng, n)
        };
        let mut s = Sampler::new(cfg.clone()).unwrap();
        let probs = s.probabilities(&logits, &hist).unwrap();
        let mut counts = vec![0u64; probs.len()];
        for _ in 0..DRAWS {
            let t = s.sample(&logits, &hist).unwrap();
            let k = probs
                .iter()
                .position(|&(id, _)| id == t)
                .unwrap_or_else(|| panic!("drew token {t}, which has probability 0: {cfg:?}"));
            counts[k] += 1;
        }
        let p: Vec<f64> = probs.iter().map(|&(_, p)| p).collect();
        let (stat, df) = pearson(&counts, &p, DRAWS as f64);
        // Laurent–Massart: P(X >= df + 2·sqrt(df·x) + 2x) <= e^-x for X ~ chi²(df); x =
        // ln(1e7) leaves a factor 10 for Pearson's statistic being chi² only approximately
        // (every bin expects >= 50), so a correct sampler fails with probability < 1e-6.
        let x = 1e7f64.ln();
        let bound = df as f64 + 2.0 * (df as f64 * x).sqrt() + 2.0 * x;
        println!(
            "chi2 = {stat:.2}, df = {df}, bound {bound:.2}, {} tokens",
            p.len()
        );
        assert!(stat < bound, "chi2 {stat} >= {bound} (df {df}) for {cfg:?}");
    }
}

#[test]
fn seed_reproduces_a_sequence() {
    let mut rng = Rng::new("sample_seed");
    let n = 50;
    let logits: Vec<f32> = (0..n).map(|_| (rng.normal() * 0.3) as f32).collect();
    let cfg = SamplerConfig {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.3,
        repeat_last_n: 8,
        seed: Some(rng.next_u64()),
    };
    // As a generator runs: each token joins the history the next step is penalised by.
    let run = |cfg: SamplerConfig| {
        let mut s = Sampler::new(cfg).unwrap();
        let mut hist = Vec::new();
        for _ in 0..300 {
            let t = s.sample(&logits, &hist).unwrap();
            hist.push(t);
        }
        (s.seed(), hist)
    };
    let (seed, a) = run(cfg.clone());
    assert_eq!(Some(seed), cfg.seed);
    assert_eq!(run(cfg.clone()).1, a, "same seed, other sequence");
    let other = SamplerConfig {
        seed: Some(seed ^ 1),
        ..cfg.clone()
    };
    assert_ne!(run(other).1, a, "another seed gave the same 300 draws");
    // A clock seed is reported and replays.
    let (clock_seed, b) = run(SamplerConfig {
        seed: None,
        ..cfg.clone()
    });
    let replay = SamplerConfig {
        seed: Some(clock_seed),
        ..cfg
    };
    assert_eq!(run(replay).1, b);
}

#[test]
fn every_validation_error() {
    let base = SamplerConfig::default();
    assert!(Sampler::new(base.clone()).is_ok());
    assert!(Sampler::new(SamplerConfig::greedy()).is_ok());
    let cases: Vec<(&str, SamplerConfig)> = [-0.1, f32::NAN, f32::INFINITY]
        .iter()
        .map(|&v| {
            (
                "temperature",
                SamplerConfig {
                    temperature: v,
                    ..base.clone()
                },
            )
        })
        .chain([0.0, -0.5, 1.0001, f32::NAN].iter().map(|&v| {
            (
                "top_p",
                SamplerConfig {
                    top_p: v,
                    ..base.clone()
                },
            )
        }))
        .chain([-0.01, 1.01, f32::NAN].iter().map(|&v| {
            (
                "min_p",
                SamplerConfig {
                    min_p: v,
                    ..base.clone()
                },
            )
        }))
        .chain([0.0, -1.0, f32::NAN, f32::INFINITY].iter().map(|&v| {
            (
                "repeat_penalty",
                SamplerConfig {
                    repeat_penalty: v,
                    ..base.clone()
                },
            )
        }))
        .collect();
    for (name, cfg) in cases {
        let err = Sampler::new(cfg.clone()).unwrap_err();
        assert!(
            matches!(err, SampleError::BadOption { option, .. } if option == name),
            "{cfg:?}: {err:?}"
        );
        assert!(err.to_string().contains(name), "{err}");
    }
    // The ends of the ranges are allowed.
    for cfg in [
        SamplerConfig {
            top_p: 1.0,
            min_p: 0.0,
            ..base.clone()
        },
        SamplerConfig {
            min_p: 1.0,
            ..base.clone()
        },
        SamplerConfig {
            temperature: 0.0,
            ..base.clone()
        },
    ] {
        assert!(Sampler::new(cfg).is_ok());
    }
}

#[test]
fn bad_logits_are_typed_errors() {
    for cfg in [SamplerConfig::default(), SamplerConfig::greedy()] {
        let mut s = Sampler::new(cfg).unwrap();
        let nan = [0.5, f32::NAN, 1.0];
        for bad in [&nan[..], &[0.5, 1.0, f32::INFINITY][..]] {
            let want = bad.iter().position(|v| !v.is_finite()).unwrap();
            let err = s.sample(bad, &[]).unwrap_err();
            assert!(
                matches!(err, SampleError::BadLogit { index, .. } if index == want),
                "{err:?}"
            );
            assert!(s.probabilities(bad, &[]).is_err());
        }
        assert_eq!(s.sample(&[], &[]), Err(SampleError::NoLogits));
        assert_eq!(
            s.sample(&[f32::NEG_INFINITY; 3], &[]),
            Err(SampleError::NoCandidate { len: 3 })
        );
        // A single finite token among masked ones is always drawn.
        assert_eq!(
            s.sample(&[f32::NEG_INFINITY, -3.0, f32::NEG_INFINITY], &[1]),
            Ok(1)
        );
    }
}

// ---------------------------------------------------------------------------------------
// StopMatcher
// ---------------------------------------------------------------------------------------

/// Text up to the first stop string to complete (smallest end, then smallest start), and
/// whether one did.
fn ref_cut<'a>(text: &'a str, stops: &[String]) -> (&'a str, bool) {
    let hit = stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()).map(|at| (at + s.len(), at)))
        .min();
    match hit {
        Some((_, at)) => (&text[..at], true),
        None => (text, false),
    }
}

/// What may be printed after `seen` has streamed in and no stop completed: all but the
/// longest tail that is a proper prefix of a stop string.
fn ref_safe<'a>(seen: &'a str, stops: &[String]) -> &'a str {
    let cut = (0..=seen.len())
        .filter(|&i| seen.is_char_boundary(i))
        .find(|&i| {
            let tail = &seen[i..];
            !tail.is_empty()
                && stops
                    .iter()
                    .any(|s| s.len() > tail.len() && s.starts_with(tail))
        })
        .unwrap_or(seen.len());
    &seen[..cut]
}

fn random_text(rng: &mut Rng, chars: usize) -> String {
    const ALPHABET: [char; 7] = ['a', 'b', 'c', ' ', '\n', 'é', '😀'];
    (0..chars).map(|_| rng.pick(&ALPHABET[..])).collect()
}

#[test]
fn stop_matcher_cuts_at_the_first_stop() {
    let mut rng = Rng::new("sample_stop");
    for _ in 0..3000 {
        let chars_n = rng.below(60);
        let text = random_text(&mut rng, chars_n);
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut stops = Vec::new();
        for _ in 0..1 + rng.below(4) {
            if !chars.is_empty() && rng.chance(0.6) {
                // A piece of the text, so it does occur.
                let a = rng.below(chars.len());
                let b = (a + 1 + rng.below(6)).min(chars.len());
                let end = chars.get(b).map_or(text.len(), |c| c.0);
                stops.push(text[chars[a].0..end].to_string());
            } else if rng.chance(0.1) {
                stops.push(String::new());
            } else {
                let len = 1 + rng.below(4);
                stops.push(random_text(&mut rng, len));
            }
        }
        let (want, want_stop) = ref_cut(&text, &stops);

        // Random split into pieces at char boundaries, empty pieces included.
        let mut m = StopMatcher::new(&stops);
        let mut out = String::new();
        let mut at = 0;
        let mut stopped = false;
        while at < chars.len() || rng.chance(0.1) {
            let take = rng.below(5).min(chars.len() - at);
            let end = chars.get(at + take).map_or(text.len(), |c| c.0);
            let start = chars.get(at).map_or(text.len(), |c| c.0);
            at += take;
            let (emit, s) = m.push(&text[start..end]);
            out.push_str(&emit);
            let seen = &text[..end];
            let (cut, done) = ref_cut(seen, &stops);
            assert_eq!(s, done, "stopped flag after {seen:?}, stops {stops:?}");
            let expect = if done { cut } else { ref_safe(seen, &stops) };
            assert_eq!(out, expect, "after {seen:?}, stops {stops:?}");
            stopped = s;
        }
        out.push_str(&m.finish());
        assert_eq!(out, want, "text {text:?}, stops {stops:?}");
        assert_eq!(stopped, want_stop);
        assert_eq!(m.stopped(), want_stop);
        if let Some(s) = m.matched() {
            assert!(text[want.len()..].starts_with(s));
        }
    }
}

#[test]
fn stop_matcher_examples() {
    let mut m = StopMatcher::new(&["\nUser:", "</s>"]);
    let mut out = String::new();
    for piece in ["Hel", "lo\n", "Us", "er", ": more", "text"] {
        let (emit, stopped) = m.push(piece);
        out.push_str(&emit);
        if stopped {
            break;
        }
    }
    assert_eq!(out, "Hello");
    assert_eq!(m.matched(), Some("\nUser:"));
    assert_eq!(m.push("more"), (String::new(), true));
    assert_eq!(m.finish(), "");

    // A false start is released once it cannot be a stop any more.
    let mut m = StopMatcher::new(&["</s>"]);
    assert_eq!(m.push("a </"), ("a ".to_string(), false));
    assert_eq!(m.push("b"), ("</b".to_string(), false));
    assert_eq!(m.push("<"), (String::new(), false));
    assert_eq!(m.finish(), "<");

    // No stops: everything passes straight through.
    let mut m = StopMatcher::new::<&str>(&[]);
    assert_eq!(m.push("x"), ("x".to_string(), false));
    assert_eq!(m.finish(), "");
}
