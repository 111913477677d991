//! The ONNX backend node-suite runner: one case folder holds `model.onnx` and
//! `test_data_set_0/{input,output}_*.pb`; inputs bind by the graph's input order. Outputs
//! compare with `|a − b| <= atol + rtol·|b|` (rtol 1e-3, atol 1e-5) for floats, exactly for
//! integers and bools; NaN positions must match.
use crate::proto::ModelProto;
use crate::proto::TensorProto;
use crate::tensor::decode_tensor;
use crate::{load, load_with, ImportOptions, OnnxError};
use prost::Message;
use rayon::prelude::*;
use rlx_ir::HostTensor;
use rlx_runtime::{Device, Session};
use std::fmt;
use std::path::{Path, PathBuf};

pub const RTOL: f64 = 1e-3;
pub const ATOL: f64 = 1e-5;

/// The result of one case.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Pass,
    /// The worst element of the first output that differs.
    Mismatch {
        output: usize,
        index: usize,
        got: f64,
        want: f64,
        what: String,
    },
    Unsupported {
        reason: String,
    },
    Error {
        reason: String,
    },
}

impl Outcome {
    pub fn passed(&self) -> bool {
        *self == Outcome::Pass
    }
    /// A short category for lists and counts: `pass`, `mismatch`, `unsupported: <op>`, `error`.
    pub fn category(&self) -> String {
        match self {
            Outcome::Pass => "pass".into(),
            Outcome::Mismatch { .. } => "mismatch".into(),
            Outcome::Unsupported { reason } => format!("unsupported: {}", reason_key(reason)),
            Outcome::Error { .. } => "error".into(),
        }
    }
}

/// The stable part of an unsupported reason: the op type and what is missing, without the
/// node name (`Abs (opset 13): op type`).
fn reason_key(reason: &str) -> String {
    // "node \"n\" (Op, opset 13): unsupported: what"
    if let (Some(a), Some(b)) = (reason.find(" ("), reason.find("): unsupported: ")) {
        if a < b {
            let inner = &reason[a + 2..b];
            let op = inner.split(',').next().unwrap_or(inner);
            let what = &reason[b + "): unsupported: ".len()..];
            let what: String = what.chars().take(60).collect();
            return format!("{op}: {what}");
        }
    }
    let r: String = reason.chars().take(80).collect();
    r
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Pass => write!(f, "pass"),
            Outcome::Mismatch {
                output,
                index,
                got,
                want,
                what,
            } => write!(
                f,
                "mismatch: output {output}{what} at {index}: got {got}, want {want}"
            ),
            Outcome::Unsupported { reason } => write!(f, "unsupported: {reason}"),
            Outcome::Error { reason } => write!(f, "error: {reason}"),
        }
    }
}

fn read_pb(path: &Path) -> Result<HostTensor, OnnxError> {
    let bytes = std::fs::read(path).map_err(|e| OnnxError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    let t = TensorProto::decode(bytes.as_slice()).map_err(|e| OnnxError::Decode {
        what: path.display().to_string(),
        msg: e.to_string(),
    })?;
    decode_tensor(&t, path.parent())
}

/// `prefix_0.pb`, `prefix_1.pb` … in index order.
fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v = vec![];
    for i in 0.. {
        let p = dir.join(format!("{prefix}_{i}.pb"));
        if !p.exists() {
            break;
        }
        v.push(p);
    }
    v
}

fn to_outcome(e: OnnxError) -> Outcome {
    if e.is_unsupported() {
        Outcome::Unsupported {
            reason: e.to_string(),
        }
    } else {
        Outcome::Error {
            reason: e.to_string(),
        }
    }
}

/// Run one case folder on `device`.
pub fn run_case(dir: &Path, device: Device) -> Outcome {
    run_case_full(dir, device).outcome
}

/// One case's outcome and, on a device other than the CPU, the op kinds of the nodes that
/// ran on the CPU instead (each once, with the lowering's first reason): a GPU pass that
/// leaned on the CPU is visible, not silent.
#[derive(Clone, Debug)]
pub struct CaseRun {
    pub outcome: Outcome,
    pub fallback: Vec<String>,
}

/// [`run_case`] with the case's CPU fallbacks.
pub fn run_case_full(dir: &Path, device: Device) -> CaseRun {
    let mut fallback = vec![];
    let outcome = match run_case_inner(dir, device, &mut fallback) {
        Ok(o) => o,
        Err(e) => to_outcome(e),
    };
    CaseRun { outcome, fallback }
}

/// A case imported and its inputs read: the model (specialised on the inputs where a node
/// needs a value at import time), the feeds in graph-input order, the expected-output files.
pub struct Prepared {
    pub model: crate::OnnxModel,
    pub feeds: Vec<(String, HostTensor)>,
    pub outputs: Vec<PathBuf>,
}

/// Import one case and read its first data set's inputs.
pub fn prepare(dir: &Path) -> Result<Prepared, OnnxError> {
    let data = dir.join("test_data_set_0");
    let inputs = numbered(&data, "input");
    let outputs = numbered(&data, "output");
    // Inputs bind by the graph's input order (initializers excluded); their values may
    // specialise the import where rlx needs a static parameter.
    let names = input_names(&dir.join("model.onnx"))?;
    let mut opts = ImportOptions::default();
    for (name, p) in names.iter().zip(&inputs) {
        match read_pb(p) {
            Ok(v) => opts.specialize.insert(name.clone(), v),
            // A sequence or optional input is not a TensorProto: say what the model holds.
            Err(e) => return Err(load(dir.join("model.onnx")).err().unwrap_or(e)),
        };
    }
    let model = load_with(dir.join("model.onnx"), &opts)?;
    if inputs.len() > model.inputs.len() {
        return Err(OnnxError::Graph(format!(
            "{} input files for {} graph inputs",
            inputs.len(),
            model.inputs.len()
        )));
    }
    let mut feeds = vec![];
    for name in &model.inputs {
        if let Some(v) = opts.specialize.remove(name) {
            feeds.push((name.clone(), v));
        }
    }
    Ok(Prepared {
        model,
        feeds,
        outputs,
    })
}

fn run_case_inner(
    dir: &Path,
    device: Device,
    fallback: &mut Vec<String>,
) -> Result<Outcome, OnnxError> {
    let Prepared {
        model,
        feeds,
        outputs,
    } = prepare(dir)?;
    let rt = |e: rlx_runtime::Error| OnnxError::Runtime(e.to_string());
    let exe = Session::new(device)
        .compile(model.graph.clone())
        .map_err(rt)?;
    for (name, v) in &model.params {
        exe.set_param_typed(name, v.clone()).map_err(rt)?;
    }
    let got = exe.run_typed(&feeds).map_err(rt)?;
    // After the run: graphs with dynamic dims are lowered at their first run.
    if device != Device::Cpu {
        for (_, kind, why) in exe.dispatch() {
            if let Some(why) = why {
                let entry = format!("{} ({why})", kind.name());
                if !fallback.iter().any(|f| f.starts_with(kind.name())) {
                    fallback.push(entry);
                }
            }
        }
    }
    if got.len() != outputs.len() {
        return Err(OnnxError::Graph(format!(
            "{} outputs, {} expected",
            got.len(),
            outputs.len()
        )));
    }
    for (k, (g, p)) in got.iter().zip(&outputs).enumerate() {
        let want = read_pb(p)?;
        if let Some(m) = compare(k, g, &want) {
            return Ok(m);
        }
    }
    Ok(Outcome::Pass)
}

/// The graph's input names that are not initializers, in order (what the data files bind to).
fn input_names(model: &Path) -> Result<Vec<String>, OnnxError> {
    let bytes = std::fs::read(model).map_err(|e| OnnxError::Io {
        path: model.display().to_string(),
        msg: e.to_string(),
    })?;
    let m = ModelProto::decode(bytes.as_slice()).map_err(|e| OnnxError::Decode {
        what: model.display().to_string(),
        msg: e.to_string(),
    })?;
    let g = m.graph.unwrap_or_default();
    let inits: std::collections::HashSet<_> = g
        .initializer
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    Ok(g.input
        .iter()
        .filter_map(|v| v.name.clone())
        .filter(|n| !inits.contains(n))
        .collect())
}

/// None when `got` matches `want`; else the worst element as a Mismatch.
pub fn compare(output: usize, got: &HostTensor, want: &HostTensor) -> Option<Outcome> {
    let mismatch = |index, got, want, what: String| Outcome::Mismatch {
        output,
        index,
        got,
        want,
        what,
    };
    if got.shape != want.shape {
        return Some(mismatch(
            0,
            f64::NAN,
            f64::NAN,
            format!(" shape {:?} vs {:?}", got.shape, want.shape),
        ));
    }
    if got.dtype != want.dtype {
        return Some(mismatch(
            0,
            f64::NAN,
            f64::NAN,
            format!(" dtype {} vs {}", got.dtype, want.dtype),
        ));
    }
    let exact = !want.dtype.is_float();
    if exact {
        let (g, w) = (got.to_i64_vec(), want.to_i64_vec());
        let bad = g.iter().zip(&w).position(|(a, b)| a != b)?;
        return Some(mismatch(bad, g[bad] as f64, w[bad] as f64, String::new()));
    }
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let excess = if a.is_nan() || b.is_nan() {
            if a.is_nan() == b.is_nan() {
                continue;
            }
            f64::INFINITY
        } else if a == b {
            continue; // equal infinities
        } else {
            (a - b).abs() - (ATOL + RTOL * b.abs())
        };
        if (excess > 0.0 || excess.is_nan()) && worst.is_none_or(|(_, e)| excess > e) {
            worst = Some((i, excess));
        }
    }
    worst.map(|(i, _)| mismatch(i, g[i], w[i], String::new()))
}

/// Case folders under `path`: `path` itself when it holds `model.onnx`, else its
/// subfolders that do, sorted by name.
pub fn case_dirs(path: &Path) -> Result<Vec<PathBuf>, OnnxError> {
    if path.join("model.onnx").exists() {
        return Ok(vec![path.to_path_buf()]);
    }
    let rd = std::fs::read_dir(path).map_err(|e| OnnxError::Io {
        path: path.display().to_string(),
        msg: e.to_string(),
    })?;
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    v.sort();
    Ok(v)
}

/// The name of a case (its folder name).
pub fn case_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// Run many cases in parallel (rayon); results in the order given. A panic inside a case
/// is caught and reported as an error of that case.
pub fn run_cases(dirs: &[PathBuf], device: Device) -> Vec<(String, Outcome)> {
    run_cases_full(dirs, device)
        .into_iter()
        .map(|(n, r)| (n, r.outcome))
        .collect()
}

/// [`run_cases`] with each case's CPU fallbacks.
pub fn run_cases_full(dirs: &[PathBuf], device: Device) -> Vec<(String, CaseRun)> {
    dirs.par_iter()
        .map(|d| {
            let o = std::panic::catch_unwind(|| run_case_full(d, device)).unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                CaseRun {
                    outcome: Outcome::Error {
                        reason: format!("panic: {msg}"),
                    },
                    fallback: vec![],
                }
            });
            (case_name(d), o)
        })
        .collect()
}

/// `N passed, M failed (U unsupported)`.
pub fn summary(results: &[(String, Outcome)]) -> String {
    let passed = results.iter().filter(|r| r.1.passed()).count();
    let unsupported = results
        .iter()
        .filter(|r| matches!(r.1, Outcome::Unsupported { .. }))
        .count();
    format!(
        "{passed} passed, {} failed ({unsupported} unsupported)",
        results.len() - passed
    )
}
