//! Host-side token sampling and stop strings for a generator.
//!
//! [`Sampler`] turns one decoding step's logits into a token id with llama.cpp's default
//! sampler chain and its option meanings (`common_params_sampling` and `llama-sampler.cpp`):
//!
//! 1. **repeat penalty** over the distinct tokens among the last `repeat_last_n` of the
//!    history: a positive logit is divided by the penalty, any other multiplied by it;
//! 2. **top-k**: the `k` largest logits (0 = off);
//! 3. **top-p**: softmax over what is left, then the shortest prefix (by descending
//!    probability) whose cumulative probability reaches `p`, the token that crosses `p`
//!    included (1 = off);
//! 4. **min-p**: the tokens whose probability is at least `min_p` times the largest one,
//!    decided on the logits as `logit >= max_logit + ln(min_p)` (0 = off);
//! 5. **temperature**: logits divided by it, then softmax and one draw. Temperature 0 is
//!    greedy: the largest penalised logit.
//!
//! Every filter keeps the most likely token, so at least one candidate always survives.
//! Where llama.cpp's order among equal logits is left to `std::partial_sort`, this one is
//! fixed: larger logit first, then smaller token id, so a tie at the top-k boundary keeps
//! the smaller id and greedy picks the first maximum. Penalties are applied in f32 as
//! llama.cpp does; softmax, cumulative sums and the draw are in f64 (llama.cpp sums top-p in
//! f32, which can only differ from this on a boundary closer than f32 rounding).
//!
//! The random source is rlx's SplitMix64 ([`rlx_ir::rng::SplitMix64`]): 64 bits of state,
//! one `unit_f64` (53 random bits, uniform in [0, 1)) per non-greedy draw and none for a
//! greedy one, so a seed reproduces a sequence of draws exactly on every platform. It is
//! not llama.cpp's mt19937, so the same seed gives other tokens than llama.cpp does.
//!
//! [`StopMatcher`] cuts streamed text at the first stop string, holding back any tail that
//! could still begin one.
use rlx_ir::rng::{SplitMix64, GOLDEN_GAMMA};
use std::cmp::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Sampling options, with llama.cpp's defaults (`common_params_sampling`).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Divides the logits before the draw; 0 = greedy. Default 0.8.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; 0 = off. Default 40.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`, in
    /// (0, 1]; 1 = off. Default 0.95.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one, in [0, 1]; 0 = off.
    /// Default 0.05.
    pub min_p: f32,
    /// Penalty for tokens seen among the last `repeat_last_n` of the history, > 0;
    /// 1 = off. Default 1.
    pub repeat_penalty: f32,
    /// How many of the latest history tokens the penalty looks at; 0 = off, `usize::MAX` =
    /// the whole history. Default 64.
    pub repeat_last_n: usize,
    /// Seed of the draws; `None` picks one from the clock (see [`Sampler::seed`]).
    pub seed: Option<u64>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            seed: None,
        }
    }
}

impl SamplerConfig {
    /// Greedy decoding (temperature 0) with the other options at their defaults.
    pub fn greedy() -> Self {
        SamplerConfig {
            temperature: 0.0,
            ..SamplerConfig::default()
        }
    }

    /// Checks every option's range; the error names the first bad one.
    pub fn validate(&self) -> Result<(), SampleError> {
        let bad = |option, value: f32, rule| {
            Err(SampleError::BadOption {
                option,
                value,
                rule,
            })
        };
        // Written as negations so NaN fails every check.
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return bad(
                "temperature",
                self.temperature,
                "a finite number >= 0 (0 = greedy)",
            );
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad("top_p", self.top_p, "in (0, 1] (1 = off)");
        }
        if !(self.min_p >= 0.0 && self.min_p <= 1.0) {
            return bad("min_p", self.min_p, "in [0, 1] (0 = off)");
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad(
                "repeat_penalty",
                self.repeat_penalty,
                "a finite number > 0 (1 = off)",
            );
        }
        Ok(())
    }
}

/// Why a sampler could not be built or a step could not be sampled.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SampleError {
    /// An option outside its range.
    #[error("sampler option {option} = {value} is out of range: it must be {rule}")]
    BadOption {
        option: &'static str,
        value: f32,
        rule: &'static str,
    },
    /// A NaN or +inf logit: the forward pass produced garbage (-inf is allowed, it masks a
    /// token).
    #[error("logit of token {index} is {value}: the model's output is not finite")]
    BadLogit { index: usize, value: f32 },
    /// No logits at all.
    #[error("no logits to sample from (empty vocabulary)")]
    NoLogits,
    /// More logits than u32 token ids can name.
    #[error("{len} logits: more than u32 token ids can name")]
    TooManyLogits { len: usize },
    /// Every logit is -inf, so no token has any probability.
    #[error("all {len} logits are -inf: no token can be drawn")]
    NoCandidate { len: usize },
}

/// One candidate token: its (penalised) logit, then its probability once known.
#[derive(Debug, Clone, Copy)]
struct Cand {
    id: u32,
    logit: f32,
}

/// Larger logit first, then smaller id: a total order, so every selection is deterministic.
fn by_rank(a: &Cand, b: &Cand) -> Ordering {
    b.logit
        .partial_cmp(&a.logit)
        .unwrap_or(Ordering::Equal)
        .then(a.id.cmp(&b.id))
}

/// Draws token ids from one step's logits (see the module doc for the chain).
#[derive(Debug, Clone)]
pub struct Sampler {
    cfg: SamplerConfig,
    seed: u64,
    rng: SplitMix64,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Result<Sampler, SampleError> {
        cfg.validate()?;
        let seed = cfg.seed.unwrap_or_else(|| {
            let t = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ GOLDEN_GAMMA
        });
        Ok(Sampler {
            cfg,
            seed,
            rng: SplitMix64::new(seed),
        })
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// The seed in use (the clock's pick when the config had none), so a run can be
    /// replayed with `seed: Some(sampler.seed())`.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// One token from `logits` (one per vocabulary entry). `history` is every token so far
    /// (prompt and generated, as llama.cpp feeds both to its penalty sampler); only its last
    /// `repeat_last_n` count, and ids outside the vocabulary are ignored.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32, SampleError> {
        let probs = self.distribution(logits, history)?;
        if probs.len() == 1 {
            return Ok(probs[0].0);
        }
        let total: f64 = probs.iter().map(|&(_, p)| p).sum();
        let target = self.rng.unit_f64() * total;
        let mut run = 0.0;
        for &(id, p) in &probs {
            run += p;
            // Strict, so a zero-probability candidate is never picked.
            if run > target {
                return Ok(id);
            }
        }
        // Rounding left `run` a hair under `target`: the last token with any mass.
        let last = probs
            .iter()
            .rev()
            .find(|&&(_, p)| p > 0.0)
            .unwrap_or(&probs[0]);
        Ok(last.0)
    }

    /// The distribution [`Sampler::sample`] draws from: the surviving tokens and their
    /// probabilities (summing to 1), most likely first, ties by smaller id. Greedy gives one
    /// token with probability 1.
    pub fn probabilities(
        &self,
        logits: &[f32],
        history: &[u32],
    ) -> Result<Vec<(u32, f64)>, SampleError> {
        self.distribution(logits, history)
    }

    fn distribution(
        &self,
        logits: &[f32],
        history: &[u32],
    ) -> Result<Vec<(u32, f64)>, SampleError> {
        let cfg = &self.cfg;
        if logits.is_empty() {
            return Err(SampleError::NoLogits);
        }
        if u32::try_from(logits.len() - 1).is_err() {
            return Err(SampleError::TooManyLogits { len: logits.len() });
        }
        // Whole chunks are tested branch-free first; the index is looked for in the bad one.
        let bad = |v: &f32| v.is_nan() || *v == f32::INFINITY;
        if let Some(c) = logits
            .chunks(256)
            .position(|c| c.iter().fold(false, |a, v| a | bad(v)))
        {
            let index = 256 * c + logits[256 * c..].iter().position(bad).unwrap_or(0);
            let value = logits[index];
            return Err(SampleError::BadLogit { index, value });
        }

        // The logits are read in place (a 150k-token vocabulary is 600 KB a step): only the
        // penalised tokens get new values, in a short list beside them.
        let pen = self.penalised(logits, history);
        if cfg.temperature == 0.0 {
            // Every filter keeps the maximum, so greedy is the argmax of the penalised logits.
            let best =
                greedy(logits, &pen).ok_or(SampleError::NoCandidate { len: logits.len() })?;
            return Ok(vec![(best.id, 1.0)]);
        }
        let mut cands = if cfg.top_k > 0 {
            top_k(logits, &pen, cfg.top_k)
        } else {
            all_candidates(logits, &pen)
        };
        if cands.is_empty() {
            return Err(SampleError::NoCandidate { len: logits.len() });
        }
        cands.sort_unstable_by(by_rank);

        if cfg.top_p < 1.0 {
            let probs = softmax(&cands, 1.0);
            let p = f64::from(cfg.top_p);
            let mut cum = 0.0;
            let mut keep = cands.len();
            for (i, q) in probs.iter().enumerate() {
                cum += q;
                if cum >= p {
                    keep = i + 1;
                    break;
                }
            }
            cands.truncate(keep);
        }

        if cfg.min_p > 0.0 {
            let floor = f64::from(cands[0].logit) + f64::from(cfg.min_p).ln();
            let keep = 1 + cands[1..]
                .iter()
                .take_while(|c| f64::from(c.logit) >= floor)
                .count();
            cands.truncate(keep);
        }

        let probs = softmax(&cands, f64::from(cfg.temperature));
        Ok(cands.iter().zip(probs).map(|(c, p)| (c.id, p)).collect())
    }

    /// llama.cpp's repetition penalty: each distinct recent token once, whatever its count,
    /// as (id, penalised logit) in ascending id order; ids outside the vocabulary are ignored.
    fn penalised(&self, logits: &[f32], history: &[u32]) -> Vec<(u32, f32)> {
        let cfg = &self.cfg;
        if cfg.repeat_penalty == 1.0 || cfg.repeat_last_n == 0 {
            return Vec::new();
        }
        let start = history.len().saturating_sub(cfg.repeat_last_n);
        let mut recent: Vec<u32> = (history[start..].iter())
            .copied()
            .filter(|&id| (id as usize) < logits.len())
            .collect();
        recent.sort_unstable();
        recent.dedup();
        (recent.into_iter())
            .map(|id| {
                let l = logits[id as usize];
                let p = if l > 0.0 {
                    l / cfg.repeat_penalty
                } else {
                    l * cfg.repeat_penalty
                };
                (id, p)
            })
            .collect()
    }
}

/// The logits in id order as runs of unpenalised ids (`on_run(first id, values)`) between
/// the penalised tokens (`pen`, ascending), which `on_pen` gets with their new values.
fn runs(
    logits: &[f32],
    pen: &[(u32, f32)],
    mut on_run: impl FnMut(usize, &[f32]),
    mut on_pen: impl FnMut(Cand),
) {
    let mut from = 0;
    for next in pen.iter().map(Some).chain([None]) {
        let to = next.map_or(logits.len(), |&(id, _)| id as usize);
        on_run(from, &logits[from..to]);
        if let Some(&(id, logit)) = next {
            on_pen(Cand { id, logit });
            from = id as usize + 1;
        }
    }
}

/// The first token of the largest penalised logit above -inf: per run a branch-free
/// maximum, then the first index holding it; a later run or penalised id wins only with a
/// strictly larger logit, so ties go to the smaller id.
fn greedy(logits: &[f32], pen: &[(u32, f32)]) -> Option<Cand> {
    let best = std::cell::Cell::new(None::<Cand>);
    let offer = |c: Cand| {
        if c.logit > best.get().map_or(f32::NEG_INFINITY, |b| b.logit) {
            best.set(Some(c));
        }
    };
    let on_run = |from: usize, run: &[f32]| {
        let max = run_max(run);
        if let Some(i) = run.iter().position(|&x| x == max) {
            offer(Cand {
                id: (from + i) as u32,
                logit: max,
            });
        }
    };
    runs(logits, pen, on_run, offer);
    best.get()
}

/// The largest value of `xs` (-inf if empty): sixteen independent lanes, which the
/// compiler keeps in vector registers (a single running maximum is a serial chain).
fn run_max(xs: &[f32]) -> f32 {
    let pick = |m: f32, x: f32| if x > m { x } else { m };
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = xs.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for (m, &x) in lanes.iter_mut().zip(c) {
            *m = pick(*m, x);
        }
    }
    let m = tail.iter().fold(f32::NEG_INFINITY, |m, &x| pick(m, x));
    lanes.iter().fold(m, |a, &b| pick(a, b))
}

/// Every token that can be drawn (penalised logit above -inf), in id order.
fn all_candidates(logits: &[f32], pen: &[(u32, f32)]) -> Vec<Cand> {
    let all = std::cell::RefCell::new(Vec::with_capacity(logits.len()));
    let push = |c: Cand| {
        if c.logit > f32::NEG_INFINITY {
            all.borrow_mut().push(c);
        }
    };
    let on_run = |from: usize, run: &[f32]| {
        for (i, &logit) in run.iter().enumerate() {
            push(Cand {
                id: (from + i) as u32,
                logit,
            });
        }
    };
    runs(logits, pen, on_run, push);
    all.into_inner()
}

/// The `k` best candidates by [`by_rank`] (all of them when there are at most `k`), in no
/// particular order, from one pass: a candidate enters a buffer only if it ranks above the
/// k-th best of the last compaction (`floor`), so the buffer stays small; a 16-value chunk
/// whose maximum is under the floor is passed over whole. Nothing dropped could be among the
/// k best: k kept ones rank at least as high.
fn top_k(logits: &[f32], pen: &[(u32, f32)], k: usize) -> Vec<Cand> {
    struct Sel {
        k: usize,
        cap: usize,
        buf: Vec<Cand>,
        floor: Option<Cand>,
    }
    impl Sel {
        fn offer(&mut self, c: Cand) {
            if c.logit == f32::NEG_INFINITY {
                return;
            }
            if let Some(t) = self.floor {
                if c.logit < t.logit || by_rank(&c, &t) != Ordering::Less {
                    return;
                }
            }
            self.buf.push(c);
            if self.buf.len() >= self.cap {
                self.keep_k();
                self.floor = Some(self.buf[self.k - 1]);
            }
        }
        fn keep_k(&mut self) {
            if self.buf.len() > self.k {
                self.buf.select_nth_unstable_by(self.k - 1, by_rank);
                self.buf.truncate(self.k);
            }
        }
    }
    let cap = 2 * k + 1024;
    let sel = std::cell::RefCell::new(Sel {
        k,
        cap,
        buf: Vec::with_capacity(cap.min(logits.len())),
        floor: None,
    });
    let on_run = |from: usize, run: &[f32]| {
        for (j, chunk) in run.chunks(16).enumerate() {
            let floor = sel.borrow().floor.map_or(f32::NEG_INFINITY, |t| t.logit);
            if !chunk.iter().fold(false, |a, &x| a | (x >= floor)) {
                continue;
            }
            let mut s = sel.borrow_mut();
            for (i, &logit) in chunk.iter().enumerate() {
                let id = (from + 16 * j + i) as u32;
                s.offer(Cand { id, logit });
            }
        }
    };
    runs(logits, pen, on_run, |c| sel.borrow_mut().offer(c));
    let mut s = sel.into_inner();
    s.keep_k();
    s.buf
}

/// Softmax of `logit / temperature` over sorted candidates (max first). Subtracting the max
/// before dividing keeps a tiny temperature from overflowing to inf - inf.
fn softmax(cands: &[Cand], temperature: f64) -> Vec<f64> {
    let max = f64::from(cands[0].logit);
    let mut e: Vec<f64> = cands
        .iter()
        .map(|c| ((f64::from(c.logit) - max) / temperature).exp())
        .collect();
    let sum: f64 = e.iter().sum();
    for v in &mut e {
        *v /= sum;
    }
    e
}

/// Stop strings over streamed text: [`StopMatcher::push`] returns the text that is safe to
/// print, holding back any tail that could still begin a stop string, so the printed text
/// never contains a stop string and loses nothing that turned out not to be one.
///
/// The stop taken is the first to complete in the stream (smallest end; among those ending
/// at the same place, the one starting first): generation has to stop as soon as one is
/// complete, so a longer stop string that would have started earlier but is not yet
/// complete does not count. Empty stop strings are ignored.
#[derive(Debug, Clone, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    pending: String,
    stopped: Option<usize>,
}

impl StopMatcher {
    pub fn new<S: AsRef<str>>(stops: &[S]) -> StopMatcher {
        StopMatcher {
            stops: stops
                .iter()
                .map(|s| s.as_ref().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            pending: String::new(),
            stopped: None,
        }
    }

    /// Feeds one piece; returns the text now safe to print and whether a stop string has
    /// completed (the text before it is included; after a stop every push returns
    /// `("", true)`).
    pub fn push(&mut self, piece: &str) -> (String, bool) {
        if self.stopped.is_some() {
            return (String::new(), true);
        }
        self.pending.push_str(piece);
        let hit = self
            .stops
            .iter()
            .enumerate()
            .filter_map(|(k, s)| {
                self.pending
                    .find(s.as_str())
                    .map(|at| (at + s.len(), at, k))
            })
            .min();
        if let Some((_, at, k)) = hit {
            self.stopped = Some(k);
            let mut out = std::mem::take(&mut self.pending);
            out.truncate(at);
            return (out, true);
        }
        let hold = self.held_tail();
        let rest = self.pending.split_off(self.pending.len() - hold);
        (std::mem::replace(&mut self.pending, rest), false)
    }

    /// The held-back text once the stream has ended (empty after a stop).
    pub fn finish(&mut self) -> String {
        if self.stopped.is_some() {
            return String::new();
        }
        std::mem::take(&mut self.pending)
    }

    /// Whether a stop string has completed.
    pub fn stopped(&self) -> bool {
        self.stopped.is_some()
    }

    /// The stop string that completed, if any.
    pub fn matched(&self) -> Option<&str> {
        self.stopped.map(|k| self.stops[k].as_str())
    }

    /// Byte length of the longest tail of `pending` that is a proper prefix of a stop
    /// string (0 when none). A stop string starts on a char boundary, so a tail equal to
    /// its prefix does too.
    fn held_tail(&self) -> usize {
        let p = self.pending.as_bytes();
        let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
        let from = p.len().saturating_sub(longest.saturating_sub(1));
        (from..p.len())
            .find(|&i| {
                self.pending.is_char_boundary(i)
                    && self
                        .stops
                        .iter()
                        .any(|s| s.len() > p.len() - i && s.as_bytes().starts_with(&p[i..]))
            })
            .map_or(0, |i| p.len() - i)
    }
}
