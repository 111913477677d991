//! `rlx run model.onnx`: run any ONNX model. Inputs come from `.npy` files (`--input
//! name=file.npy`) or are drawn at random (`--random-inputs`) at the model's shapes, whose
//! symbolic dims `--dim NAME=N` (or a whole `--shape NAME=d0,d1,…`) fix before import —
//! rlx's shapes are static. Outputs go to `DIR/<name>.npy`; import + compile time and the
//! median per-run time over `--iters` runs are printed.
use crate::CliError;
use rlx::prelude::{DType, HostTensor, Op};
use rlx_onnx::inspect::{self, ValueDecl};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args)]
pub struct RunArgs {
    /// The .onnx file (external data is read from its folder).
    pub model: PathBuf,
    /// An input from a .npy file: NAME=FILE (repeatable).
    #[arg(long = "input", value_name = "NAME=FILE")]
    pub inputs: Vec<String>,
    /// Draw the inputs not given by --input at random.
    #[arg(long)]
    pub random_inputs: bool,
    /// The size of a symbolic dim: NAME=N (repeatable; an unnamed dim is INPUT:K).
    #[arg(long = "dim", value_name = "NAME=N")]
    pub dims: Vec<String>,
    /// A whole input shape: NAME=D0,D1,… (for files whose dims share a meaningless name).
    #[arg(long = "shape", value_name = "NAME=D0,D1,...")]
    pub shapes: Vec<String>,
    /// cpu, cuda[:N] or wgpu[:N] (default: cpu)
    #[arg(long)]
    pub device: Option<String>,
    /// Write every output to DIR/<name>.npy.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Timed runs after one warm-up run; the median is printed.
    #[arg(long, default_value_t = 1)]
    pub iters: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

fn onnx(e: rlx_onnx::OnnxError) -> CliError {
    CliError::Usage(e.to_string())
}

/// `NAME=VALUE` pairs; the name may itself hold `=`-free text only.
fn pairs<'a>(args: &'a [String], flag: &str) -> Result<Vec<(&'a str, &'a str)>, CliError> {
    args.iter()
        .map(|a| {
            a.rsplit_once('=')
                .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                .ok_or_else(|| usage(format!("--{flag} {a}: expected NAME=VALUE")))
        })
        .collect()
}

pub fn parse_dims(args: &[String]) -> Result<HashMap<String, usize>, CliError> {
    let mut m = HashMap::new();
    for (k, v) in pairs(args, "dim")? {
        let n = v
            .parse()
            .map_err(|_| usage(format!("--dim {k}={v}: the size must be a whole number")))?;
        m.insert(k.to_string(), n);
    }
    Ok(m)
}

pub fn parse_shapes(args: &[String]) -> Result<HashMap<String, Vec<usize>>, CliError> {
    let mut m = HashMap::new();
    for (k, v) in pairs(args, "shape")? {
        let dims: Result<Vec<usize>, _> = v.split(',').map(|d| d.trim().parse()).collect();
        let dims =
            dims.map_err(|_| usage(format!("--shape {k}={v}: expected sizes like 1,3,224,224")))?;
        m.insert(k.to_string(), dims);
    }
    Ok(m)
}

/// A small deterministic generator (splitmix64): random inputs reproduce from `--seed`.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A random value for input `d` (dims already fixed), and a line saying what was drawn.
fn random_input(
    d: &ValueDecl,
    dtype: DType,
    shape: &[usize],
    model: &rlx_onnx::proto::ModelProto,
    rng: &mut Draw,
) -> (HostTensor, String) {
    let n: usize = shape.iter().product();
    let lname = d.name.to_ascii_lowercase();
    let (lo, hi, why) = if dtype.is_float() {
        (-1.0, 1.0, "uniform in [-1, 1)".to_string())
    } else if dtype == DType::Bool {
        (0.0, 2.0, "random booleans".to_string())
    } else if let Some((node, rows)) = inspect::index_range(model, &d.name) {
        (
            0.0,
            rows as f64,
            format!("integers in 0..{rows} (the rows of the table Gather \"{node}\" reads)"),
        )
    } else if lname.contains("mask") {
        (
            1.0,
            2.0,
            "all ones (a mask: every position valid)".to_string(),
        )
    } else {
        (
            0.0,
            2.0,
            "integers in 0..2 (no table found to bound them)".to_string(),
        )
    };
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            let u = lo + (hi - lo) * rng.unit();
            if dtype.is_float() {
                u
            } else {
                u.floor().min(hi - 1.0)
            }
        })
        .collect();
    (HostTensor::from_f64_as(shape, &vals, dtype), why)
}

/// A file name for an output: ONNX names may hold `/` or `:`.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: &RunArgs) -> Result<(), CliError> {
    let device = crate::parse_device(Some(args.device.as_deref().unwrap_or("cpu")))?;
    if args.iters == 0 {
        return Err(usage("--iters must be at least 1"));
    }
    let t0 = Instant::now();
    let mut proto = inspect::read_model(&args.model).map_err(onnx)?;
    let info = inspect::info(&proto);
    let mut files: HashMap<String, PathBuf> = HashMap::new();
    for (k, v) in pairs(&args.inputs, "input")? {
        files.insert(k.to_string(), PathBuf::from(v));
    }
    let mut dims = parse_dims(&args.dims)?;
    let mut shapes = parse_shapes(&args.shapes)?;
    // An input read from a file fixes its symbolic dims, for the other inputs too (ids and
    // mask share batch and seq); symbols the user fixed with --dim must agree.
    let mut from_files = HashMap::new();
    for (name, path) in &files {
        let d = info
            .inputs
            .iter()
            .find(|d| &d.name == name)
            .ok_or_else(|| {
                usage(format!(
                    "--input {name}: the model has no input of that name"
                ))
            })?;
        let t = rlx_io::read_npy(path).map_err(|e| usage(e.to_string()))?;
        let declared = d.dims.clone().unwrap_or_default();
        if declared.len() != t.shape.len() {
            return Err(usage(format!(
                "--input {name}: {} has shape {:?}, the model's input is [{}]",
                path.display(),
                t.shape,
                declared.join(", ")
            )));
        }
        let symbols: Vec<(&String, usize)> = declared
            .iter()
            .zip(&t.shape)
            .filter(|(s, _)| s.parse::<usize>().is_err())
            .map(|(s, &n)| (s, n))
            .collect();
        // A symbol used twice in one input with two sizes (`?` for height and width): the
        // file's shape fixes that input alone.
        let clash = symbols
            .iter()
            .any(|(s, n)| symbols.iter().any(|(s2, n2)| s == s2 && n != n2));
        if clash {
            shapes
                .entry(name.clone())
                .or_insert_with(|| t.shape.clone());
        } else {
            for (s, n) in symbols {
                match dims.get(s) {
                    Some(&m) if m != n => {
                        return Err(usage(format!(
                            "--input {name}: dim {s} is {n} in {}, --dim says {m}",
                            path.display()
                        )))
                    }
                    _ => {
                        dims.insert(s.clone(), n);
                    }
                }
            }
        }
        from_files.insert(name.clone(), t);
    }
    let free = inspect::fix_dims(&mut proto, &dims, &shapes).map_err(onnx)?;
    let missing: Vec<&str> = info
        .inputs
        .iter()
        .map(|d| d.name.as_str())
        .filter(|n| !files.contains_key(*n))
        .collect();
    if !missing.is_empty() && !args.random_inputs {
        return Err(usage(format!(
            "no value for input(s) {}: give --input NAME=FILE.npy or --random-inputs",
            missing.join(", ")
        )));
    }
    if !free.is_empty() {
        return Err(usage(format!(
            "symbolic dim(s) {} have no size: give --dim NAME=N (or --shape)",
            free.join(", ")
        )));
    }
    let dir = args.model.parent().unwrap_or(Path::new("."));
    let model = rlx_onnx::import_model(&proto, Some(dir)).map_err(onnx)?;
    let t_import = t0.elapsed().as_secs_f64();
    let mut rng = Draw(args.seed);
    let mut feeds = vec![];
    for name in &model.inputs {
        let id = model
            .graph
            .nodes
            .iter()
            .position(|n| matches!(&n.op, Op::Input { name: m } if m == name))
            .ok_or_else(|| usage(format!("input \"{name}\" is not in the imported graph")))?;
        let s = &model.graph.nodes[id].shape;
        let dims = s
            .static_dims()
            .ok_or_else(|| usage(format!("input \"{name}\" still has symbolic dims: {s}")))?;
        let t = match from_files.remove(name) {
            Some(t) => {
                if t.dtype != s.dtype {
                    return Err(usage(format!(
                        "--input {name}: the file holds {}, the model takes {}",
                        t.dtype, s.dtype
                    )));
                }
                println!(
                    "input {name}: {:?} {} from {}",
                    t.shape,
                    t.dtype,
                    files[name].display()
                );
                t
            }
            None => {
                let d = info
                    .inputs
                    .iter()
                    .find(|d| &d.name == name)
                    .ok_or_else(|| usage(format!("input \"{name}\" is not declared")))?;
                let (t, why) = random_input(d, s.dtype, &dims, &proto, &mut rng);
                println!("input {name}: {dims:?} {}, random: {why}", s.dtype);
                t
            }
        };
        feeds.push((name.clone(), t));
    }
    let t1 = Instant::now();
    let exe = rlx::runtime::Session::new(device).compile(model.graph.clone())?;
    for (name, v) in &model.params {
        exe.set_param_typed(name, v.clone())?;
    }
    let t_compile = t1.elapsed().as_secs_f64();
    println!(
        "import {:.1} ms, compile {:.1} ms ({} nodes, {} params) on {device:?}",
        t_import * 1e3,
        t_compile * 1e3,
        model.graph.nodes.len(),
        model.params.len()
    );
    let mut out = exe.run_typed(&feeds)?;
    let mut times = vec![];
    for _ in 0..args.iters {
        let t = Instant::now();
        out = exe.run_typed(&feeds)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let med = median_ms(times.clone());
    let min = times.iter().copied().fold(f64::INFINITY, f64::min);
    println!(
        "run: median {med:.3} ms, min {min:.3} ms over {} runs (after 1 warm-up)",
        args.iters
    );
    if let Some(d) = &args.output {
        std::fs::create_dir_all(d).map_err(|e| usage(format!("{}: {e}", d.display())))?;
    }
    for (k, (name, t)) in model.outputs.iter().zip(&out).enumerate() {
        let v = t.to_f64_vec();
        let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
        let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        print!(
            "output {name}: {:?} {}, mean {mean:.6}, min {lo:.6}, max {hi:.6}",
            t.shape, t.dtype
        );
        if let Some(d) = &args.output {
            let p = d.join(format!("{}.npy", file_name(name)));
            rlx_io::write_npy(&p, t).map_err(|e| usage(e.to_string()))?;
            print!(" -> {}", p.display());
        }
        // NumPy has no dtype for these: say what the written values stand for.
        if let Some(code) = model.output_types.get(k).copied().flatten() {
            if let Some(l) = rlx_onnx::lowp::Lowp::of(code) {
                print!(
                    " (ONNX type {}, written as its {} carrier: the exact values)",
                    rlx_onnx::tensor::onnx_dtype_name(code),
                    l.carrier()
                );
            }
        }
        println!();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_or_say_what_is_wrong() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let d = parse_dims(&s(&["batch=2", "x:0=1"])).unwrap();
        assert_eq!((d["batch"], d["x:0"]), (2, 1));
        assert!(parse_dims(&s(&["batch"])).is_err());
        assert!(parse_dims(&s(&["batch=-1"])).is_err());
        assert!(parse_dims(&s(&["=3"])).is_err());
        let sh = parse_shapes(&s(&["x=1,3,48,192"])).unwrap();
        assert_eq!(sh["x"], vec![1, 3, 48, 192]);
        assert!(parse_shapes(&s(&["x=1,,3"])).is_err());
        assert_eq!(
            file_name("save_infer_model/scale_0.tmp_1"),
            "save_infer_model_scale_0.tmp_1"
        );
    }
}
