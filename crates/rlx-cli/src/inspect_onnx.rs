//! `rlx inspect model.onnx`: the graph inputs and outputs (symbolic dims by name), opsets,
//! op counts, the op types no translator maps, and — by importing it, with any `--dim`
//! sizes and the other symbolic dims left as they are — the first node rlx cannot import
//! and why. Nothing it finds makes the command fail: the listing is the point.
use crate::run_onnx::{parse_dims, parse_shapes};
use crate::CliError;
use rlx_onnx::inspect;
use std::path::Path;

/// `.onnx` by extension, or a protobuf that decodes as a ModelProto with a graph.
pub fn is_onnx(path: &Path) -> bool {
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        return true;
    }
    // Serialized rlx graphs are JSON or postcard; a GGUF starts with its magic. Only a
    // file that decodes as a model with a graph and an opset counts as ONNX.
    inspect::read_model(path)
        .is_ok_and(|m| m.graph.is_some_and(|g| !g.node.is_empty()) && !m.opset_import.is_empty())
}

fn dims_text(d: &inspect::ValueDecl) -> String {
    match &d.dims {
        Some(v) => format!("[{}]", v.join(", ")),
        None => "(unknown rank)".into(),
    }
}

pub fn run(file: &Path, dims: &[String], shapes: &[String]) -> Result<(), CliError> {
    let mut proto = inspect::read_model(file).map_err(|e| CliError::Usage(e.to_string()))?;
    let info = inspect::info(&proto);
    let opsets: Vec<String> = info
        .opsets
        .iter()
        .map(|(d, v)| format!("{}={v}", if d.is_empty() { "ai.onnx" } else { d }))
        .collect();
    println!("{}: ONNX, opsets {}", file.display(), opsets.join(", "));
    println!("inputs:");
    for d in &info.inputs {
        println!("  {} {} {}", d.name, d.dtype, dims_text(d));
    }
    println!("outputs:");
    for d in &info.outputs {
        println!("  {} {} {}", d.name, d.dtype, dims_text(d));
    }
    let total: usize = info.op_counts.iter().map(|c| c.1).sum();
    println!("ops ({total} nodes):");
    for (op, n) in &info.op_counts {
        println!("  {op:<28}{n:>6}");
    }
    if info.unknown_ops.is_empty() {
        println!("every op type has a translator");
    } else {
        println!("ops rlx cannot import:");
        for (op, why) in &info.unknown_ops {
            println!("  {op}: {why}");
        }
    }
    let free = inspect::fix_dims(&mut proto, &parse_dims(dims)?, &parse_shapes(shapes)?)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let dir = file.parent().unwrap_or(Path::new("."));
    let fixed = if free.is_empty() {
        String::new()
    } else {
        format!(" (symbolic: {}; --dim fixes them)", free.join(", "))
    };
    match rlx_onnx::import_model(&proto, Some(dir)) {
        Ok(m) => println!(
            "import: ok{fixed}: {} nodes, {} params",
            m.graph.nodes.len(),
            m.params.len()
        ),
        Err(e) => println!("import: FAILED{fixed}: {e}"),
    }
    Ok(())
}
