//! The embedder's parts without the real model: pooling (every combination of CLS / max /
//! mean / mean-sqrt-len, with and without normalisation) against an f64 loop on random
//! hidden states and padding masks (seeded; `RLX_SEED` replays), config fields no graph can
//! honour as typed errors naming the field, and safetensors checked tensor by tensor (a wrong
//! shape names the tensor; the `bert.` prefix and unused extra tensors are accepted).
use rlx_ir::{DType, Dim, Graph, HostTensor, Shape};
use rlx_models::hf::bert::{self, BertConfig, BertHead};
use rlx_models::hf::json::JsonFile;
use rlx_models::hf::pooling::{self, Pooling};
use rlx_models::ModelError;
use rlx_runtime::{Device, Session};
use rlx_testutil::Rng;
use std::path::PathBuf;

/// sentence-transformers' pooling and `F.normalize`, in f64.
fn pool_ref(
    p: Pooling,
    norm: bool,
    x: &[f64],
    mask: &[f64],
    b: usize,
    s: usize,
    h: usize,
) -> Vec<f64> {
    let mut out = Vec::new();
    for bi in 0..b {
        let at = |t: usize, j: usize| x[(bi * s + t) * h + j];
        let m = |t: usize| mask[bi * s + t];
        let mut row = Vec::new();
        if p.cls {
            row.extend((0..h).map(|j| at(0, j)));
        }
        if p.max {
            row.extend((0..h).map(|j| {
                (0..s)
                    .map(|t| if m(t) == 0.0 { -1e9 } else { at(t, j) })
                    .fold(f64::NEG_INFINITY, f64::max)
            }));
        }
        let count = (0..s).map(m).sum::<f64>().max(1e-9);
        let sums: Vec<f64> = (0..h)
            .map(|j| (0..s).map(|t| at(t, j) * m(t)).sum())
            .collect();
        if p.mean {
            row.extend(sums.iter().map(|v| v / count));
        }
        if p.mean_sqrt_len {
            row.extend(sums.iter().map(|v| v / count.sqrt()));
        }
        if norm {
            let n = row.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12);
            row.iter_mut().for_each(|v| *v /= n);
        }
        out.extend(row);
    }
    out
}

#[test]
fn pooling_matches_an_f64_loop() {
    let mut rng = Rng::new("pooling_matches_an_f64_loop");
    let h = 6;
    for bits in 1u32..16 {
        let p = Pooling {
            cls: bits & 1 != 0,
            max: bits & 2 != 0,
            mean: bits & 4 != 0,
            mean_sqrt_len: bits & 8 != 0,
        };
        for norm in [false, true] {
            let mut g = Graph::new("pool");
            let dims = vec![Dim::dynamic("b"), Dim::dynamic("s")];
            let mut xd = dims.clone();
            xd.push(Dim::Static(h));
            let x = g.input("x", Shape::with_dims(xd, DType::F32)).unwrap();
            let m = g.input("m", Shape::with_dims(dims, DType::F32)).unwrap();
            let mut y = p.build(&mut g, x, m).unwrap();
            if norm {
                y = pooling::normalize(&mut g, y).unwrap();
            }
            g.set_outputs(vec![y]);
            let exe = Session::new(Device::Cpu).compile(g).unwrap();
            for _ in 0..3 {
                let (b, s) = (1 + rng.below(4), 1 + rng.below(9));
                let xs = rng.normals(b * s * h);
                // Each row keeps its first token (the CLS position) and a random rest.
                let mask: Vec<f64> = (0..b * s)
                    .map(|i| {
                        if i % s == 0 || rng.chance(0.6) {
                            1.0
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let want = pool_ref(p, norm, &xs, &mask, b, s, h);
                let got = exe
                    .run_typed(&[
                        ("x", HostTensor::from_f64_as(&[b, s, h], &xs, DType::F32)),
                        ("m", HostTensor::from_f64_as(&[b, s], &mask, DType::F32)),
                    ])
                    .unwrap()[0]
                    .to_f64_vec();
                assert_eq!(got.len(), b * p.dim(h), "{p:?}");
                let err = rlx_testutil::rel_l2(&got, &want);
                assert!(
                    err <= 1e-6,
                    "{p:?} normalize {norm} b {b} s {s}: rel-L2 {err}"
                );
            }
        }
    }
}

const GOOD: &str = r#"{"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 11,
  "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
  "intermediate_size": 12, "max_position_embeddings": 16, "type_vocab_size": 2,
  "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "absolute"}"#;

fn config(text: &str) -> Result<BertConfig, ModelError> {
    BertConfig::from_json(&JsonFile::parse("config.json", text)?)
}

#[test]
fn config_fields_no_graph_can_honour_are_typed_errors() {
    let c = config(GOOD).unwrap();
    assert_eq!(c.hidden_act, rlx_ir::Activation::Gelu);
    let tanh = config(&GOOD.replace("\"gelu\"", "\"gelu_new\"")).unwrap();
    assert_eq!(tanh.hidden_act, rlx_ir::Activation::GeluApprox);
    for (from, to, key) in [
        ("\"gelu\"", "\"relu\"", "hidden_act"),
        (
            "\"absolute\"",
            "\"relative_key\"",
            "position_embedding_type",
        ),
        (
            "\"num_attention_heads\": 2",
            "\"num_attention_heads\": 3",
            "num_attention_heads",
        ),
        (
            "\"hidden_size\": 8",
            "\"hidden_size\": \"8\"",
            "hidden_size",
        ),
        ("\"vocab_size\": 11,", "", "vocab_size"),
        (
            "\"model_type\": \"bert\"",
            "\"model_type\": \"roberta\"",
            "model_type",
        ),
    ] {
        let text = GOOD.replace(from, to);
        assert_ne!(text, GOOD, "{from} not in the config");
        match config(&text) {
            Err(ModelError::HfConfig { key: k, path, .. }) => {
                assert_eq!(k, key);
                assert_eq!(path, PathBuf::from("config.json"));
            }
            other => panic!("{key}: expected a config error, got {other:?}"),
        }
    }
    assert!(matches!(config("{"), Err(ModelError::HfConfig { .. })));
    let pool = |t: &str| Pooling::from_json(&JsonFile::parse("1_Pooling/config.json", t)?, 8);
    assert_eq!(
        pool(r#"{"pooling_mode_mean_tokens": true}"#).unwrap(),
        Pooling::mean()
    );
    for bad in [
        r#"{"pooling_mode_lasttoken": true, "pooling_mode_mean_tokens": true}"#,
        r#"{"pooling_mode_mean_tokens": false}"#,
        r#"{"word_embedding_dimension": 9, "pooling_mode_mean_tokens": true}"#,
    ] {
        assert!(
            matches!(pool(bad), Err(ModelError::HfConfig { .. })),
            "{bad}"
        );
    }
}

/// A safetensors file of `tensors` (name, shape, f32 values).
fn write_safetensors(path: &PathBuf, tensors: &[(String, Vec<usize>, Vec<f32>)]) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let start = data.len();
        for v in values {
            data.extend_from_slice(&v.to_le_bytes());
        }
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let h = serde_json::Value::Object(header).to_string();
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(h.as_bytes());
    bytes.extend_from_slice(&data);
    std::fs::write(path, bytes).unwrap();
}

/// The tiny config's tensors in HF layout, `prefix`ed, with `extra` appended.
fn tensors(c: &BertConfig, prefix: &str, rng: &mut Rng) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    (c.params().into_iter())
        .map(|p| {
            let n = p.hf_shape.iter().product();
            let v = rng.normals(n).into_iter().map(|x| 0.1 * x as f32).collect();
            (format!("{prefix}{}", p.name), p.hf_shape, v)
        })
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlx-embed-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("model.safetensors")
}

#[test]
fn weights_are_checked_tensor_by_tensor() {
    let mut rng = Rng::new("weights_are_checked_tensor_by_tensor");
    let c = config(GOOD).unwrap();
    // With the `bert.` prefix and tensors the graph does not use: loads, and runs.
    let mut ts = tensors(&c, "bert.", &mut rng);
    ts.push(("bert.pooler.dense.weight".into(), vec![8, 8], vec![0.5; 64]));
    ts.push((
        "bert.embeddings.position_ids".into(),
        vec![1, 16],
        vec![0.0; 16],
    ));
    let path = scratch("prefixed");
    write_safetensors(&path, &ts);
    let st = rlx_io::SafeTensors::open(&path).unwrap();
    let weights = c.load_weights(&st, DType::F32).unwrap();
    assert_eq!(weights.len(), c.params().len());
    let g = c.build(DType::F32, BertHead::Hidden).unwrap();
    let exe = Session::new(Device::Cpu).compile(g).unwrap();
    for (name, v) in weights {
        exe.set_param_typed(&name, v).unwrap();
    }
    let (b, s) = (2, 5);
    let ids: Vec<i64> = (0..b * s).map(|_| rng.below(11) as i64).collect();
    let out = exe
        .run_typed(&[
            (bert::INPUT_IDS, HostTensor::from_i64(&[b, s], &ids)),
            (
                bert::TOKEN_TYPE_IDS,
                HostTensor::from_i64(&[b, s], &[0; 10]),
            ),
            (
                bert::ATTENTION_MASK,
                HostTensor::from_f32(&[b, s], &[1.0; 10]),
            ),
            (
                bert::POSITION_IDS,
                HostTensor::from_i64(&[s], &[0, 1, 2, 3, 4]),
            ),
        ])
        .unwrap();
    assert_eq!(out[0].shape, vec![b, s, 8]);
    assert!(out[0].to_f64_vec().iter().all(|v| v.is_finite()));
    std::fs::remove_file(&path).ok();

    // One tensor of the wrong shape: the error names it.
    let bad = "encoder.layer.0.attention.self.key.weight";
    let mut ts = tensors(&c, "", &mut rng);
    let t = ts.iter_mut().find(|t| t.0 == bad).unwrap();
    t.1 = vec![8, 7];
    t.2.truncate(56);
    let path = scratch("bad_shape");
    write_safetensors(&path, &ts);
    let st = rlx_io::SafeTensors::open(&path).unwrap();
    let err = c.load_weights(&st, DType::F32).unwrap_err();
    assert!(matches!(err, ModelError::Safetensors(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(bad) && msg.contains("[8, 7]"), "{msg}");
    // A tensor missing: named too.
    ts.retain(|t| t.0 != bad);
    write_safetensors(&path, &ts);
    let st = rlx_io::SafeTensors::open(&path).unwrap();
    let msg = c.load_weights(&st, DType::F32).unwrap_err().to_string();
    assert!(msg.contains(bad), "{msg}");
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_folder_that_is_not_sentence_transformers_is_refused() {
    let dir = scratch("not_st");
    let dir = dir.parent().unwrap();
    let opts = rlx_models::EmbedOptions::default();
    let err = rlx_models::Embedder::load(dir, &opts).unwrap_err();
    assert!(err.to_string().contains("modules.json"), "{err}");
    let err = rlx_models::Embedder::load(dir.join("absent"), &opts).unwrap_err();
    assert!(err.to_string().contains("no such folder"), "{err}");
}
