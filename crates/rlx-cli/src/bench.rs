//! `rlx bench`: matmul, a MiniLM-shaped encoder and the MNIST CNN training step, timed on one
//! device and printed as a table (and optionally written as JSON for BENCHMARKS.md and the
//! comparison with PyTorch's anchor on the same machine).
use crate::CliError;
use indicatif::{ProgressBar, ProgressStyle};
use rlx::prelude::*;
use rlx_autodiff::{train_step, Optimizer};
use rlx_models::EncoderConfig;
use std::path::Path;
use std::time::Instant;

pub struct BenchOpts<'a> {
    pub device: Device,
    pub suites: Vec<String>,
    pub warmup: usize,
    pub iters: usize,
    pub quick: bool,
    pub json: Option<&'a Path>,
    /// Print where each workload's GPU time goes, kernel by kernel.
    pub profile: bool,
    /// GGUF decoders of the `llm` suite.
    pub gguf: &'a [std::path::PathBuf],
    /// The sentence-transformers folder of the `embed` suite.
    pub model: Option<&'a Path>,
    /// The `embed` suite's texts (see `bench_embed::load_texts`).
    pub texts: Option<&'a Path>,
}

pub(crate) struct Row {
    pub key: String,
    pub workload: String,
    pub dtype: String,
    pub ms: f64,
    pub rate: String,
}

fn rand_tensor(dims: &[usize], dtype: DType, seed: u64, scale: f64) -> HostTensor {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let n: usize = dims.iter().product();
    let data: Vec<f64> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect();
    HostTensor::from_f64_as(dims, &data, dtype)
}

fn flops(work: f64, ms: f64) -> String {
    let per_s = work / ms * 1e3;
    if per_s >= 1e12 {
        format!("{:.1} TFLOP/s", per_s / 1e12)
    } else {
        format!("{:.1} GFLOP/s", per_s / 1e9)
    }
}

/// With `--profile`: the workload's kernels by device time (top 15), after its timing row.
pub(crate) fn profile(
    o: &BenchOpts,
    cg: &CompiledGraph,
    inputs: &[(&str, HostTensor)],
    title: &str,
) -> Result<(), CliError> {
    if !o.profile {
        return Ok(());
    }
    let Some(rows) = cg.profile_device(inputs, o.iters.max(3))? else {
        return Ok(());
    };
    let total: f64 = rows.iter().map(|r| r.ms).sum();
    println!(
        "\nprofile: {title} (each step launched alone, {total:.4} ms in all; launch start-up included)"
    );
    println!("| kernel | launches | ms | share |");
    println!("|---|---:|---:|---:|");
    for r in rows.iter().take(15) {
        println!(
            "| {} | {} | {:.4} | {:.1}% |",
            r.what,
            r.launches,
            r.ms,
            100.0 * r.ms / total.max(1e-12)
        );
    }
    Ok(())
}

fn compile(device: Device, g: Graph, precision: Precision) -> Result<CompiledGraph, CliError> {
    let opts = CompileOptions::default().precision(precision);
    Ok(Session::new(device).compile_with(g, &opts)?)
}

fn matmul(o: &BenchOpts, rows: &mut Vec<Row>) -> Result<(), CliError> {
    let sizes: &[usize] = if o.quick || o.device == Device::Cpu {
        &[256, 1024]
    } else {
        &[1024, 4096, 8192]
    };
    let cases: &[(DType, Precision, &str)] = if o.device == Device::Cpu {
        &[(DType::F32, Precision::F32, "f32")]
    } else if matches!(o.device, Device::Wgpu(_)) {
        // wgpu computes in f32 over f32 or half storage: TF32 is a CUDA policy.
        &[
            (DType::F32, Precision::F32, "f32"),
            (DType::F16, Precision::F32, "f16"),
        ]
    } else {
        &[
            (DType::F32, Precision::F32, "f32"),
            (DType::F32, Precision::Tf32, "tf32"),
            (DType::F16, Precision::F32, "f16"),
            (DType::BF16, Precision::F32, "bf16"),
        ]
    };
    for &n in sizes {
        for &(dt, prec, tag) in cases {
            let mut g = Graph::new("matmul");
            let a = g.input("a", Shape::new(&[n, n], dt))?;
            let b = g.param("b", Shape::new(&[n, n], dt))?;
            let c = g.matmul(a, b)?;
            g.set_outputs(vec![c]);
            let cg = compile(o.device, g, prec)?;
            cg.set_param_typed("b", rand_tensor(&[n, n], dt, 2, 1.0))?;
            let ms = cg.time_device(
                &[("a", rand_tensor(&[n, n], dt, 1, 1.0))],
                o.warmup,
                o.iters,
            )?;
            rows.push(Row {
                key: format!("matmul_{tag}_{n}"),
                workload: format!("matmul {n}x{n}x{n}"),
                dtype: tag.into(),
                ms,
                rate: flops(2.0 * (n as f64).powi(3), ms),
            });
        }
    }
    Ok(())
}

fn encoder(o: &BenchOpts, rows: &mut Vec<Row>) -> Result<(), CliError> {
    // Batch 32 on the CPU too: it is the throughput row compared with ONNX Runtime.
    let batches: &[usize] = if o.quick { &[1] } else { &[1, 32] };
    let dtypes: &[DType] = if o.device == Device::Cpu {
        &[DType::F32]
    } else {
        &[DType::F32, DType::F16]
    };
    for &dt in dtypes {
        let cfg = EncoderConfig::minilm_l6().with_dtype(dt);
        for &b in batches {
            let cg = compile(o.device, cfg.build(b, 128)?, Precision::F32)?;
            for (name, t) in cfg.random_params(7) {
                cg.set_param_typed(&name, t)?;
            }
            let ids: Vec<f64> = (0..b * 128)
                .map(|i| ((i * 7919) % cfg.vocab) as f64)
                .collect();
            let ids = HostTensor::from_f64_as(&[b, 128], &ids, DType::I64);
            let feed = [(rlx_models::encoder::IDS, ids)];
            let ms = cg.time_device(&feed, o.warmup, o.iters)?;
            profile(
                o,
                &cg,
                &feed,
                &format!("MiniLM-L6 {} batch {b} x 128", dt.name()),
            )?;
            rows.push(Row {
                key: format!(
                    "minilm_{}_b{b}_s128",
                    dt.name()
                        .replace("f16", "float16")
                        .replace("f32", "float32")
                ),
                workload: format!("MiniLM-L6 encoder, batch {b} x 128"),
                dtype: dt.name().into(),
                ms,
                rate: format!("{:.0} seq/s", b as f64 / ms * 1e3),
            });
        }
    }
    Ok(())
}

/// PyTorch anchor's MNIST CNN: conv(1→32,3,p1)-relu-pool2, conv(32→64,3,p1)-relu-pool2,
/// linear(3136→128)-relu, linear(128→10), mean cross-entropy; one SGD step (lr 0.01).
type ParamShapes = Vec<(String, Vec<usize>)>;

fn cnn_step_graph(batch: usize) -> Result<(Graph, ParamShapes), CliError> {
    let f = DType::F32;
    let mut g = Graph::new("mnist_cnn_step");
    let x = g.input("images", Shape::new(&[batch, 1, 28, 28], f))?;
    let shapes: ParamShapes = vec![
        ("c1.w".into(), vec![32, 1, 3, 3]),
        ("c1.b".into(), vec![32]),
        ("c2.w".into(), vec![64, 32, 3, 3]),
        ("c2.b".into(), vec![64]),
        ("fc1.w".into(), vec![3136, 128]),
        ("fc1.b".into(), vec![128]),
        ("fc2.w".into(), vec![128, 10]),
        ("fc2.b".into(), vec![10]),
    ];
    let ps: Vec<NodeId> = shapes
        .iter()
        .map(|(n, d)| g.param(n.clone(), Shape::new(d, f)))
        .collect::<Result<_, _>>()?;
    let conv = ConvSpec::new([3, 3]).padding([1, 1]);
    let pool = PoolSpec {
        kind: PoolKind::Max,
        kernel_size: [2, 2],
        stride: [2, 2],
        padding: [0, 0],
    };
    let mut h = x;
    for l in 0..2 {
        h = g.add_node(Op::Conv(conv), &[h, ps[2 * l], ps[2 * l + 1]])?;
        h = g.activation(Activation::Relu, h)?;
        h = g.add_node(Op::Pool(pool), &[h])?;
    }
    let h = g.reshape(h, &[batch as i64, 3136])?;
    let h = g.matmul_bias_act(h, ps[4], ps[5], Some(Activation::Relu))?;
    let logits = g.matmul_bias_act(h, ps[6], ps[7], None)?;
    let labels = g.input("labels", Shape::new(&[batch], DType::I64))?;
    let per = g.add_node(Op::SoftmaxCrossEntropyWithLogits, &[logits, labels])?;
    let loss = g.add_node(
        Op::Reduce {
            op: ReduceOp::Mean,
            axes: vec![],
            keep_dim: false,
        },
        &[per],
    )?;
    g.set_outputs(vec![loss]);
    let names: Vec<&str> = shapes.iter().map(|(n, _)| n.as_str()).collect();
    let ts = train_step(&g, &names, &Optimizer::sgd(0.01))
        .map_err(|e| CliError::Usage(e.to_string()))?;
    Ok((ts.graph, shapes))
}

fn cnn(o: &BenchOpts, rows: &mut Vec<Row>) -> Result<(), CliError> {
    let batch = 128;
    let (g, shapes) = cnn_step_graph(batch)?;
    let cg = compile(o.device, g, Precision::F32)?;
    for (k, (name, dims)) in shapes.iter().enumerate() {
        cg.set_param_typed(name, rand_tensor(dims, DType::F32, 10 + k as u64, 0.05))?;
        cg.bind_update(k + 1, name)?;
    }
    // SGD without momentum has no state, but the step graph may still declare state params.
    let graph = cg.graph().clone();
    for (name, shape) in graph.params() {
        if !shapes.iter().any(|(n, _)| n == name) {
            let dims = shape.static_dims().unwrap_or_default();
            let n: usize = dims.iter().product();
            cg.set_param_typed(
                name,
                HostTensor::from_f64_as(&dims, &vec![0.0; n], shape.dtype),
            )?;
        }
    }
    let mut inputs: Vec<(String, HostTensor)> = vec![
        (
            "images".into(),
            rand_tensor(&[batch, 1, 28, 28], DType::F32, 3, 1.0),
        ),
        (
            "labels".into(),
            HostTensor::from_f64_as(
                &[batch],
                &(0..batch).map(|i| (i % 10) as f64).collect::<Vec<_>>(),
                DType::I64,
            ),
        ),
    ];
    for (name, v) in Optimizer::sgd(0.01).hyper_values() {
        inputs.push((name.into(), HostTensor::from_f64_as(&[], &[v], DType::F32)));
    }
    let ms = cg.time_device(&inputs, o.warmup, o.iters)?;
    let refs: Vec<(&str, HostTensor)> = inputs
        .iter()
        .map(|(n, t)| (n.as_str(), t.clone()))
        .collect();
    profile(o, &cg, &refs, "MNIST CNN train step, batch 128")?;
    rows.push(Row {
        key: "mnist_cnn_b128_train_step".into(),
        workload: "MNIST CNN train step (SGD), batch 128".into(),
        dtype: "f32".into(),
        ms,
        rate: format!("{:.0} img/s", batch as f64 / ms * 1e3),
    });
    Ok(())
}

pub fn run(o: &BenchOpts) -> Result<(), CliError> {
    let t0 = Instant::now();
    println!(
        "rlx bench on {} (warmup {}, {} timed runs; median)",
        o.device, o.warmup, o.iters
    );
    let mut rows = Vec::new();
    let bar = ProgressBar::new(o.suites.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("static template"),
    );
    for s in &o.suites {
        bar.set_message(s.clone());
        match s.as_str() {
            "matmul" => matmul(o, &mut rows)?,
            "encoder" => encoder(o, &mut rows)?,
            "cnn" => cnn(o, &mut rows)?,
            "llm" => crate::bench_llm::llm(o, &mut rows)?,
            "embed" => crate::bench_embed::embed(o, &mut rows)?,
            "sample" => crate::bench_sample::sample(o, &mut rows)?,
            other => {
                return Err(CliError::Usage(format!(
                    "unknown suite \"{other}\": use matmul, encoder, cnn, llm, embed, sample"
                )))
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!("| workload | device | dtype | median ms | throughput |");
    println!("|---|---|---|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.4} | {} |",
            r.workload, o.device, r.dtype, r.ms, r.rate
        );
    }
    if let Some(path) = o.json {
        let mut m = serde_json::Map::new();
        m.insert("device".into(), o.device.to_string().into());
        for r in &rows {
            m.insert(format!("{}_ms", r.key), r.ms.into());
        }
        std::fs::write(path, serde_json::to_string_pretty(&m).expect("plain map"))
            .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", path.display())))?;
        println!("wrote {}", path.display());
    }
    println!("bench took {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}
