//! The encoder builder: its params keep the names, shapes, order and random values they
//! had before the VarBuilder (the runtime and benches set params by these names), and the
//! graph declares them in the same order.
use rlx_ir::DType;
use rlx_models::EncoderConfig;

fn tiny() -> EncoderConfig {
    EncoderConfig {
        vocab: 11,
        hidden: 8,
        layers: 2,
        heads: 2,
        ffn: 12,
        max_positions: 6,
        type_vocab: 2,
        eps: 1e-12,
        dtype: DType::F32,
    }
}

/// The list as the builder wrote it by hand before: `(name, dims, fan_in)`.
fn expected(c: &EncoderConfig) -> Vec<(String, Vec<usize>, usize)> {
    let (h, f) = (c.hidden, c.ffn);
    let mut v = vec![
        ("emb.word".to_string(), vec![c.vocab, h], h),
        ("emb.pos".into(), vec![c.max_positions, h], h),
        ("emb.type".into(), vec![c.type_vocab, h], h),
        ("emb.ln.gamma".into(), vec![h], h),
        ("emb.ln.beta".into(), vec![h], h),
    ];
    for l in 0..c.layers {
        for (name, i, o) in [
            ("q", h, h),
            ("k", h, h),
            ("v", h, h),
            ("o", h, h),
            ("ffn1", h, f),
            ("ffn2", f, h),
        ] {
            v.push((format!("l{l}.{name}.w"), vec![i, o], i));
            v.push((format!("l{l}.{name}.b"), vec![o], i));
        }
        for ln in ["ln1", "ln2"] {
            v.push((format!("l{l}.{ln}.gamma"), vec![h], h));
            v.push((format!("l{l}.{ln}.beta"), vec![h], h));
        }
    }
    v.push(("pool.w".into(), vec![h, h], h));
    v.push(("pool.b".into(), vec![h], h));
    v
}

#[test]
fn params_keep_their_names_shapes_and_order() {
    let c = tiny();
    let got: Vec<(String, Vec<usize>, usize)> = c
        .params()
        .into_iter()
        .map(|p| (p.name, p.dims, p.fan_in))
        .collect();
    assert_eq!(got, expected(&c));
    let g = c.build(2, 5).unwrap();
    let in_graph: Vec<&str> = g.params().map(|(n, _)| n).collect();
    let want: Vec<String> = expected(&c).into_iter().map(|p| p.0).collect();
    assert_eq!(in_graph, want);
    assert_eq!(EncoderConfig::minilm_l6().params().len(), 5 + 6 * 16 + 2);
}

/// The draw the builder made with its own SplitMix64 copy before the shared one.
fn old_random_values(c: &EncoderConfig, seed: u64) -> Vec<Vec<f64>> {
    let mut state = seed ^ 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    };
    expected(c)
        .into_iter()
        .map(|(name, dims, _)| {
            let n: usize = dims.iter().product();
            (0..n)
                .map(|_| {
                    let (u1, u2) = (next().max(1e-300), next());
                    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                    if name.ends_with(".gamma") {
                        1.0 + 0.02 * z
                    } else {
                        0.02 * z
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn random_params_are_bit_identical_to_the_old_draw() {
    let c = tiny();
    for seed in [0, 7, u64::MAX] {
        let got = c.random_params(seed);
        let want = old_random_values(&c, seed);
        assert_eq!(got.len(), want.len());
        for ((name, t), w) in got.iter().zip(&want) {
            let w32: Vec<f32> = w.iter().map(|&v| v as f32).collect();
            assert_eq!(t.to_f32_vec(), w32, "{name} (seed {seed})");
        }
    }
}
