//! `rlx demo`: a pre-LN transformer block (causal attention + GELU MLP) on random weights.
use crate::CliError;
use rlx::prelude::*;
use std::path::Path;
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^= z >> 31;
        ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.next() * scale).collect()
    }
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

    let mut rng = Rng(0x5eed);
    for (name, shape) in g.params() {
        let dims = shape.static_dims().unwrap_or_default();
        let n: usize = dims.iter().product();
        let vals = if name.ends_with(".b") || name.ends_with("beta") {
            rng.vec(n, 0.02)
        } else if name.ends_with("gamma") {
            rng.vec(n, 0.1).iter().map(|v| 1.0 + v).collect()
        } else {
            let fan_in = dims.first().copied().unwrap_or(1) as f32;
            rng.vec(n, 1.0 / fan_in.sqrt())
        };
        compiled.set_param(name, &vals)?;
    }
    let x = rng.vec(seq * d, 1.0);
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
