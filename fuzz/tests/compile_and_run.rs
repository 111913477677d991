//! The `compile_and_run` fuzz target's body on fixed seeds (graphs over most op groups,
//! which must run) and on seeded byte mutations of their encodings (which must not panic).
//! Run with `cd fuzz && cargo test` (the fuzz crate is outside the main workspace);
//! `RLX_SEED` replays a mutation run; `RLX_FUZZ_SEED_DIR=corpus/compile_and_run` also
//! writes the seeds for `cargo fuzz run compile_and_run`.
use rlx_fuzz::{compile_and_run, compile_and_run_bytes, frame, Outcome};
use rlx_ir::*;
use rlx_testutil::Rng;

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

/// Small graphs that verify, between them touching every op group's common ops.
fn seeds() -> Vec<Graph> {
    let mut out = vec![];

    // Elementwise, linalg, norm, reduce, with a dynamic batch dim.
    let mut g = Graph::new("mlp");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 4.into()], DType::F32),
        )
        .unwrap();
    let w = g.param("w", f32s(&[4, 3])).unwrap();
    let b = g.param("b", f32s(&[3])).unwrap();
    let gamma = g.param("gamma", f32s(&[3])).unwrap();
    let h = g.matmul(x, w).unwrap();
    let h = g.add(h, b).unwrap();
    let h = g.activation(Activation::Gelu, h).unwrap();
    let h = g.layer_norm(h, gamma, None, -1, 1e-5).unwrap();
    let s = g.softmax(h, -1).unwrap();
    let m = g.sum(s, &[0], false).unwrap();
    let a = g.argmax(h, 1, false).unwrap();
    g.set_outputs(vec![m, a]);
    out.push(g);

    // Shape ops: pad, slice, concat, transpose, reshape, narrow, expand, gather.
    let mut g = Graph::new("shapes");
    let x = g.input("x", f32s(&[2, 3])).unwrap();
    let idx = g.input("i", Shape::new(&[4], DType::I64)).unwrap();
    let p = g.pad(x, vec![[1, 0], [0, 2]], -1.0).unwrap();
    let sl = g.slice(p, &[1], &[-1], &[0], &[-2]).unwrap();
    let t = g.transpose(x, &[1, 0]).unwrap();
    let r = g.reshape(t, &[2, 3]).unwrap();
    let c = g.concat(&[x, r], 0).unwrap();
    let n = g.narrow(c, 0, 1, 2).unwrap();
    let e = g.expand_to(n, &[3, 2, 3]).unwrap();
    let ga = g.gather(x, idx, 1).unwrap();
    g.set_outputs(vec![sl, e, ga]);
    out.push(g);

    // Vision: conv, pool, resize.
    let mut g = Graph::new("cnn");
    let x = g.input("x", f32s(&[1, 2, 6, 6])).unwrap();
    let w = g.param("w", f32s(&[3, 2, 3, 3])).unwrap();
    let y = g
        .conv2d(x, w, ConvSpec::new([3, 3]).padding([1, 1]).stride([2, 2]))
        .unwrap();
    let y = g.max_pool2d(y, [2, 2], [1, 1], [0, 0]).unwrap();
    let y = g.resize_nearest2x(y).unwrap();
    g.set_outputs(vec![y]);
    out.push(g);

    // Transformer: attention, rope, swiglu.
    let mut g = Graph::new("attn");
    let q = g.input("q", f32s(&[1, 3, 4])).unwrap();
    let cos = g.input("cos", f32s(&[3, 1, 1])).unwrap();
    let sin = g.input("sin", f32s(&[3, 1, 1])).unwrap();
    let r = g.rope(q, cos, sin, 2, 2, RopeStyle::Half).unwrap();
    let a = g
        .attention(r, q, q, None, AttentionSpec::new(2, 2).causal())
        .unwrap();
    let s = g.swiglu(a, false, None).unwrap();
    g.set_outputs(vec![s]);
    out.push(g);

    // Loss with integer labels (the deterministic labels are partly out of range).
    let mut g = Graph::new("loss");
    let l = g.input("logits", f32s(&[3, 4])).unwrap();
    let y = g.input("labels", Shape::new(&[3], DType::I64)).unwrap();
    let loss = g.softmax_cross_entropy_with_logits(l, y).unwrap();
    g.set_outputs(vec![loss]);
    out.push(g);
    out
}

#[test]
fn seeds_compile_and_run() {
    for g in seeds() {
        g.verify().unwrap();
        let got = compile_and_run(&g);
        // The loss graph's labels include negatives: an error, not a panic, is right.
        let want = if g.name == "loss" {
            [Outcome::Ran, Outcome::Failed].as_slice()
        } else {
            [Outcome::Ran].as_slice()
        };
        assert!(want.contains(&got), "{}: {got:?}", g.name);
        // The same graph through the byte and JSON decoders.
        let outs = compile_and_run_bytes(&g.to_bytes());
        assert_eq!(outs, vec![got], "{}", g.name);
        let outs = compile_and_run_bytes(g.to_json().unwrap().as_bytes());
        assert_eq!(outs, vec![got], "{}", g.name);
    }
    if let Ok(dir) = std::env::var("RLX_FUZZ_SEED_DIR") {
        std::fs::create_dir_all(&dir).unwrap();
        for g in seeds() {
            let bytes = g.to_bytes();
            std::fs::write(format!("{dir}/{}.rlxg", g.name), &bytes).unwrap();
            let body = &bytes[GRAPH_HEADER_LEN..bytes.len() - 4];
            std::fs::write(format!("{dir}/{}.body", g.name), body).unwrap();
        }
    }
}

/// The Pad reproducer, as a decoded graph could hold it: refused by verify now
/// (its declared shape is what the old wrapping rule gave), so it never reaches the CPU.
#[test]
fn wrapped_pad_is_refused_before_it_runs() {
    let mut g = Graph::new("pad");
    let x = g.input("x", f32s(&[2])).unwrap();
    let p = g.push_node(
        Op::Pad {
            pads: vec![[usize::MAX, 1]],
            value: 0.0,
        },
        vec![x],
        f32s(&[2]),
    );
    g.set_outputs(vec![p]);
    assert_eq!(compile_and_run(&g), Outcome::Unverified);
    assert_eq!(
        compile_and_run_bytes(&g.to_bytes()),
        vec![Outcome::Unverified]
    );
}

/// Seeded mutations of the seeds' bodies, framed with a valid CRC: none may panic.
#[test]
fn mutated_seeds_never_panic() {
    let mut rng = Rng::new("mutated_seeds_never_panic");
    let bodies: Vec<Vec<u8>> = seeds()
        .iter()
        .map(|g| {
            let b = g.to_bytes();
            b[GRAPH_HEADER_LEN..b.len() - 4].to_vec()
        })
        .collect();
    let mut ran = 0;
    for _ in 0..300 {
        let mut body = bodies[rng.below(bodies.len())].clone();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(body.len());
            match rng.below(3) {
                0 => body[i] = rng.next_u64() as u8,
                1 => body[i] ^= 1 << rng.below(8),
                _ => body[i] = body[i].wrapping_add(1),
            }
        }
        let framed = frame(&body);
        ran += compile_and_run_bytes(&framed)
            .iter()
            .filter(|o| **o == Outcome::Ran)
            .count();
    }
    // Mutations that keep a graph valid are common; if none ran, the harness is broken.
    assert!(ran > 0, "no mutated graph ran");
}
