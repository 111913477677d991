//! Real ONNX models against ONNX Runtime on the same inputs: all-MiniLM-L6-v2 (f32, exported
//! by scripts/ort_export.py), PP-OCR's MobileNetV3 text-direction classifier (f32, from a PyPI
//! wheel), and their int8 forms (quantize_dynamic's QOperator MiniLM, quantize_static's QDQ
//! classifier); scripts/fetch_onnx_models.sh writes them into `$RLX_CACHE/onnx`. Inputs are
//! drawn here (seeded), written as .npy, run through rlx and through scripts/ort_run.py.
//! f32 outputs must agree to rel-L2 ≤ 1e-4. An int8 model's outputs must agree within one
//! quantization step of its last quantized activation (see each case). A test skips with a
//! message when its model or the Python reference (venv + onnxruntime) is not there.
use rlx_ir::{DType, HostTensor};
use rlx_onnx::inspect;
use rlx_runtime::{Device, Session};
use rlx_testutil::Rng;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn cache() -> Option<PathBuf> {
    rlx_io::model_cache()
}

/// The venv Python with numpy and onnxruntime, or None (with the reason printed).
fn python() -> Option<PathBuf> {
    let c = cache()?;
    let py = c.join("hf-venv/bin/python");
    if !py.exists() || !c.join("py-ort/onnxruntime").exists() {
        eprintln!(
            "skip: no {} or py-ort (scripts/fetch_onnx_models.sh)",
            py.display()
        );
        return None;
    }
    Some(py)
}

fn model(rel: &str) -> Option<PathBuf> {
    let p = cache()?.join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skip: {} is missing (scripts/fetch_onnx_models.sh)",
            p.display()
        );
        None
    }
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rlx-real-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// rlx's outputs and ORT's for `inputs` (all dims of the model fixed by the inputs' shapes);
/// `ort_flags` go to scripts/ort_run.py (`--no-opt`: ORT without graph optimisations).
fn both(
    path: &Path,
    inputs: &[(&str, HostTensor)],
    tag: &str,
    ort_flags: &[&str],
) -> Option<Vec<(HostTensor, HostTensor)>> {
    let py = python()?;
    let dir = scratch(tag);
    let mut args = vec![];
    for (name, t) in inputs {
        let f = dir.join(format!("{name}.npy"));
        rlx_io::write_npy(&f, t).unwrap();
        args.push(format!("--input={name}={}", f.display()));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/ort_run.py");
    let st = Command::new(&py)
        .arg(&script)
        .arg(path)
        .args(&args)
        .arg(format!("--output={}", dir.join("ort").display()))
        .args(ort_flags)
        .status()
        .expect("start python");
    assert!(st.success(), "ort_run.py failed on {}", path.display());

    let mut proto = inspect::read_model(path).unwrap();
    let shapes: HashMap<String, Vec<usize>> = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), t.shape.clone()))
        .collect();
    let free = inspect::fix_dims(&mut proto, &HashMap::new(), &shapes).unwrap();
    assert!(free.is_empty(), "unfixed dims {free:?}");
    let m = rlx_onnx::import_model(&proto, path.parent()).unwrap();
    let exe = Session::new(Device::Cpu).compile(m.graph.clone()).unwrap();
    for (n, v) in &m.params {
        exe.set_param_typed(n, v.clone()).unwrap();
    }
    let feeds: Vec<(String, HostTensor)> = inputs
        .iter()
        .map(|(n, t)| (n.to_string(), t.clone()))
        .collect();
    let got = exe.run_typed(&feeds).unwrap();
    let mut out = vec![];
    for (name, g) in m.outputs.iter().zip(got) {
        let fname: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let want = rlx_io::read_npy(dir.join("ort").join(format!("{fname}.npy"))).unwrap();
        assert_eq!(g.shape, want.shape, "output {name}: shape");
        out.push((g, want));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Some(out)
}

/// ‖a − b‖ / ‖b‖ in f64.
fn rel_l2(a: &HostTensor, b: &HostTensor) -> f64 {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    let num: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

/// BERT-style inputs: [CLS] random ids [SEP], the second row padded after `len2` tokens.
fn bert_inputs(rng: &mut Rng, batch: usize, seq: usize) -> Vec<(&'static str, HostTensor)> {
    let mut ids = vec![0i64; batch * seq];
    let mut mask = vec![0i64; batch * seq];
    let mut types = vec![0i64; batch * seq];
    for b in 0..batch {
        let len = if b == 0 { seq } else { 3 + rng.below(seq - 3) };
        for s in 0..len {
            ids[b * seq + s] = match s {
                0 => 101,
                _ if s == len - 1 => 102,
                _ => 1000 + rng.below(29_000) as i64,
            };
            mask[b * seq + s] = 1;
            types[b * seq + s] = (s >= len / 2) as i64;
        }
    }
    let t = |v: &[i64]| HostTensor::from_i64(&[batch, seq], v);
    vec![
        ("input_ids", t(&ids)),
        ("attention_mask", t(&mask)),
        ("token_type_ids", t(&types)),
    ]
}

fn image(rng: &mut Rng, batch: usize) -> Vec<(&'static str, HostTensor)> {
    let n = batch * 3 * 48 * 192;
    let v = rng.uniforms(n, -1.0, 1.0);
    vec![(
        "x",
        HostTensor::from_f64_as(&[batch, 3, 48, 192], &v, DType::F32),
    )]
}

#[test]
fn minilm_f32_matches_onnxruntime() {
    let Some(p) = model("hf/all-MiniLM-L6-v2/model.onnx") else {
        return;
    };
    let mut rng = Rng::new("real minilm f32");
    let Some(outs) = both(&p, &bert_inputs(&mut rng, 2, 12), "minilm", &[]) else {
        return;
    };
    let e = rel_l2(&outs[0].0, &outs[0].1);
    println!("minilm f32: rel-L2 {e:.3e}");
    assert!(e <= 1e-4, "rel-L2 {e}");
}

#[test]
fn ppocr_cls_f32_matches_onnxruntime() {
    let Some(p) = model("onnx/ppocr_cls.onnx") else {
        return;
    };
    let mut rng = Rng::new("real ppocr cls f32");
    let Some(outs) = both(&p, &image(&mut rng, 2), "cls", &[]) else {
        return;
    };
    let e = rel_l2(&outs[0].0, &outs[0].1);
    println!("ppocr cls f32: rel-L2 {e:.3e}");
    assert!(e <= 1e-4, "rel-L2 {e}");
}

/// Per draw: (rel-L2, max |Δ|) of rlx's first output against ORT's.
fn draws(
    p: &Path,
    n: usize,
    tag: &str,
    flags: &[&str],
    mut inputs: impl FnMut() -> Vec<(&'static str, HostTensor)>,
) -> Option<Vec<(f64, f64)>> {
    let mut v = vec![];
    for i in 0..n {
        let outs = both(p, &inputs(), &format!("{tag}{i}"), flags)?;
        let (g, w) = (&outs[0].0, &outs[0].1);
        let worst = g
            .to_f64_vec()
            .iter()
            .zip(w.to_f64_vec())
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        println!(
            "{tag} draw {i}: rel-L2 {:.3e}, max |rlx - ort| {worst:.3e}",
            rel_l2(g, w)
        );
        v.push((rel_l2(g, w), worst));
    }
    Some(v)
}

/// QOperator MiniLM (DynamicQuantizeLinear before every MatMulInteger) against ORT without
/// graph optimisations, i.e. the ONNX semantics node by node. Such a model is chaotic at
/// rounding ties: on some inputs one activation lands within an ulp of k + ½ steps, the two
/// runtimes' f32 values (GELU, LayerNorm sums) differ by that ulp, one u8 code out of tens of
/// thousands differs by one, and the flip spreads to ~1e-1 rel-L2 at the output. Measured
/// (scripts/onnx_intermediates.py, 2026-12-02): the first divergence on such a draw is one
/// code of 36864 in layer 4's GELU output, x/scale = −6.500007 (ORT) vs −6.4999976 (rlx);
/// ORT's own optimised graph departs from its unoptimised one by up to 7.3e-2 on the same
/// inputs. About half of 2×12-token draws meet a tie; small 2×5 draws about one in ten. So:
/// of 12 draws at least a third agree to f32 rounding (rel-L2 ≤ 1e-4; a wrong translation
/// agrees on none; flips alone leave fewer than 4 with probability ~1e-5), and none differs
/// by more than flips do (rel-L2 ≤ 0.3; seen up to 9.8e-2).
#[test]
fn minilm_int8_matches_onnxruntime() {
    let Some(p) = model("onnx/minilm_int8.onnx") else {
        return;
    };
    let mut rng = Rng::new("real minilm int8");
    let Some(v) = draws(&p, 12, "minilm8-", &["--no-opt"], || {
        bert_inputs(&mut rng, 2, 5)
    }) else {
        return;
    };
    let exact = v.iter().filter(|d| d.0 <= 1e-4).count();
    println!("minilm int8 vs ORT (no graph optimisation): {exact}/12 draws within 1e-4 rel-L2");
    assert!(exact >= 4, "{exact}/12 draws agree: more than tie flips");
    for (e, _) in v {
        assert!(e <= 0.3, "rel-L2 {e}");
    }
}

/// The QDQ classifier against ORT without graph optimisations: its output is a Softmax that
/// quantize_static quantizes to u8 (scale 1/255 for [0, 1]), so agreeing outputs are equal
/// or whole steps of 1/255 apart. Ties inside the network flip a code now and then (as in
/// the MiniLM case), which moves the output by a few steps (measured: 0 steps on most
/// single-image draws, 1–6 on about one in ten). Bound: of 12 draws at least a third within
/// one step (a wrong translation is within none), none beyond 0.1 (25 steps).
#[test]
fn ppocr_cls_qdq_matches_onnxruntime() {
    let Some(p) = model("onnx/ppocr_cls_qdq.onnx") else {
        return;
    };
    let mut rng = Rng::new("real ppocr cls qdq");
    let Some(v) = draws(&p, 12, "clsqdq-", &["--no-opt"], || image(&mut rng, 1)) else {
        return;
    };
    let step = 1.0 / 255.0;
    let close = v.iter().filter(|d| d.1 <= step + 1e-6).count();
    println!("ppocr cls qdq vs ORT (no graph optimisation): {close}/12 draws within one step");
    assert!(close >= 4, "{close}/12 draws within one step");
    for (_, w) in v {
        assert!(w <= 0.1, "max |Δ| {w}");
    }
}
