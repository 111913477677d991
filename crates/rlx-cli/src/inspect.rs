//! `rlx inspect FILE [--optimized]`: load a serialized graph, verify it, print it — and with
//! `--optimized`, the graph after every pass of the compile pipeline with node counts. A GGUF
//! file (by extension or magic) goes to `inspect_gguf`.
use crate::CliError;
use rlx::prelude::*;
use std::path::Path;

pub fn run(file: &Path, optimized: bool) -> Result<(), CliError> {
    if crate::inspect_gguf::is_gguf(file) {
        if optimized {
            return Err(CliError::Usage(
                "--optimized applies to graph files; a GGUF file holds weights, not a graph".into(),
            ));
        }
        return crate::inspect_gguf::run(file);
    }
    let g = Graph::load(file)?;
    println!("{g}");
    println!("{}", g.summary());
    match g.verify() {
        Ok(()) => println!("verify: ok"),
        Err(e) => {
            println!("verify: FAILED: {e}");
            return Ok(());
        }
    }
    if optimized {
        let pipeline = rlx::runtime::cpu_pipeline().verify(true);
        let before = g.nodes.len();
        let (opt, _) = pipeline.run_observed(&g, |report, graph| {
            println!("\n== after pass {report}");
            if report.nodes_before != report.nodes_after || !report.changed_kinds().is_empty() {
                println!("{graph}");
            } else {
                println!("(unchanged)");
            }
        })?;
        println!(
            "\noptimized: {before} → {} nodes; {}",
            opt.nodes.len(),
            opt.summary()
        );
    }
    Ok(())
}
