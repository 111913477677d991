//! `rlx demo`: a pre-LN transformer block (causal attention + GELU MLP) on random weights.
use crate::CliError;
use rlx::ir::SplitMix64;
use rlx::prelude::*;
use std::path::Path;
use std::time::Instant;

/// Largest `--seq` accepted (the attention scores grow with its square).
pub const MAX_SEQ: usize = 1 << 16;
/// Largest `--width` (and `--heads`) accepted (the params grow with its square).
pub const MAX_WIDTH: usize = 1 << 16;
/// The most memory the demo may plan to use: params, activations and attention scores.
pub const MAX_DEMO_BYTES: u128 = 8 << 30;

/// A clap parser for a size in `1..=max` (so an absurd value is a usage error, not an
/// allocation abort).
pub fn size_arg(max: usize) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..=max as u64)
}

/// Bytes the demo block needs, roughly and from above: f32 params (12·d² + 13·d), one
/// buffer per activation (about 16 of `seq × d`, the MLP's 3 of `seq × 4d`) and one
/// `seq × seq` score matrix per head. Computed in u128, so no argument can overflow it.
pub fn planned_bytes(seq: usize, d: usize, heads: usize) -> u128 {
    let (s, d, h) = (seq as u128, d as u128, heads as u128);
    let params = 12 * d * d + 13 * d;
    let acts = 16 * s * d + 3 * s * 4 * d;
    let scores = h * s * s;
    4 * (params + acts + scores)
}

/// Uniform demo weights in [-scale, scale) from the shared SplitMix64 (24-bit draws).
fn uniform_vec(rng: &mut SplitMix64, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| (rng.unit_f32() * 2.0 - 1.0) * scale)
        .collect()
}

/// The block's graph, written with primitive ops as an importer would produce it (the
/// compiler fuses them): x [1, S, D] → x + attn(LN(x)) → + MLP(LN(·)).
pub fn block_graph(seq: usize, d: usize, heads: usize) -> Result<Graph, IrError> {
    let f = DType::F32;
    let mut g = Graph::new("transformer_block");
    let x = g.input("x", Shape::new(&[1, seq, d], f))?;
    let p = |g: &mut Graph, n: &str, dims: &[usize]| g.param(n, Shape::new(dims, f));
    let (ln1_g, ln1_b) = (p(&mut g, "ln1.gamma", &[d])?, p(&mut g, "ln1.beta", &[d])?);
    let linear = |g: &mut Graph, name: &str, x: NodeId, i: usize, o: usize| {
        let w = p(g, &format!("{name}.w"), &[i, o])?;
        let b = p(g, &format!("{name}.b"), &[o])?;
        let y = g.matmul(x, w)?;
        g.add(y, b)
    };
    let h = g.layer_norm(x, ln1_g, ln1_b, -1, 1e-5)?;
    let q = linear(&mut g, "attn.q", h, d, d)?;
    let k = linear(&mut g, "attn.k", h, d, d)?;
    let v = linear(&mut g, "attn.v", h, d, d)?;
    let a = g.attention(q, k, v, None, AttentionSpec::new(heads, d / heads).causal())?;
    let a = linear(&mut g, "attn.o", a, d, d)?;
    let x2 = g.add(x, a)?;
    let (ln2_g, ln2_b) = (p(&mut g, "ln2.gamma", &[d])?, p(&mut g, "ln2.beta", &[d])?);
    let h2 = g.layer_norm(x2, ln2_g, ln2_b, -1, 1e-5)?;
    let m = linear(&mut g, "mlp.fc1", h2, d, 4 * d)?;
    let m = g.activation(Activation::Gelu, m)?;
    let m = linear(&mut g, "mlp.fc2", m, 4 * d, d)?;
    let y = g.add(x2, m)?;
    g.set_name(y, "block_out")?;
    g.set_outputs(vec![y]);
    Ok(g)
}

pub fn run(
    device: Device,
    seq: usize,
    d: usize,
    heads: usize,
    save: Option<&Path>,
) -> Result<(), CliError> {
    if heads == 0 || !d.is_multiple_of(heads) {
        return Err(CliError::Usage(format!(
            "--heads {heads} must divide --width {d}: try --heads 4"
        )));
    }
    let want = planned_bytes(seq, d, heads);
    if seq == 0 || d == 0 || want > MAX_DEMO_BYTES {
        return Err(CliError::Usage(format!(
            "--seq {seq} --width {d} --heads {heads} would need about {:.1} GiB, over the \
             demo's {} GiB cap: lower --seq or --width (the defaults are 64 and 256)",
            want as f64 / (1u64 << 30) as f64,
            MAX_DEMO_BYTES >> 30
        )));
    }
    let t0 = Instant::now();
    let g = block_graph(seq, d, heads)?;
    println!("built {}", g.summary());
    if let Some(path) = save {
        g.save(path)?;
        println!(
            "saved graph to {} (view it with `rlx inspect {}`)",
            path.display(),
            path.display()
        );
    }
    let compiled = Session::new(device).compile(&g)?;
    println!(
        "compiled for {device} in {:.1} ms: {} → {} nodes after the optimisation pipeline",
        t0.elapsed().as_secs_f64() * 1e3,
        g.nodes.len(),
        compiled.optimized_graph().nodes.len()
    );
    println!("runs as {}", compiled.optimized_graph().summary());

    let mut rng = SplitMix64::new(0x5eed);
    for (name, shape) in g.params() {
        let dims = shape.static_dims().unwrap_or_default();
        let n: usize = dims.iter().product();
        let vals = if name.ends_with(".b") || name.ends_with("beta") {
            uniform_vec(&mut rng, n, 0.02)
        } else if name.ends_with("gamma") {
            uniform_vec(&mut rng, n, 0.1)
                .iter()
                .map(|v| 1.0 + v)
                .collect()
        } else {
            let fan_in = dims.first().copied().unwrap_or(1) as f32;
            uniform_vec(&mut rng, n, 1.0 / fan_in.sqrt())
        };
        compiled.set_param(name, &vals)?;
    }
    let x = uniform_vec(&mut rng, seq * d, 1.0);
    let t1 = Instant::now();
    let out = compiled.run(&[("x", &x)])?;
    let first = t1.elapsed();
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        compiled.run(&[("x", &x)])?;
        times.push(t.elapsed());
    }
    times.sort();
    let y = &out[0];
    let sum: f64 = y.iter().map(|&v| v as f64).sum();
    let abs: f64 = y.iter().map(|&v| (v as f64).abs()).sum::<f64>() / y.len() as f64;
    println!("output block_out: [1, {seq}, {d}], sum = {sum:.6}, mean |y| = {abs:.6}");
    println!("first values: {:?}", &y[..y.len().min(4)]);
    println!(
        "ran on {device}: first run {:.2} ms, median of 5 {:.2} ms; arena {} KiB planned vs {} KiB one buffer per node",
        first.as_secs_f64() * 1e3,
        times[2].as_secs_f64() * 1e3,
        compiled.arena_bytes() / 1024,
        compiled.unplanned_bytes() / 1024
    );
    println!("total {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    Ok(())
}
