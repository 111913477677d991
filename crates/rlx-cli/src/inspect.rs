//! `rlx inspect FILE`: load a serialized graph, verify it, print it.
use crate::CliError;
use rlx::prelude::*;
use std::path::Path;

pub fn run(file: &Path) -> Result<(), CliError> {
    let g = Graph::load(file)?;
    println!("{g}");
    println!("{}", g.summary());
    match g.verify() {
        Ok(()) => println!("verify: ok"),
        Err(e) => println!("verify: FAILED: {e}"),
    }
    Ok(())
}
