//! `rlx onnx-test DIR… [--device cpu|cuda]`: run ONNX backend test cases (the suite root or
//! single case folders), one line per case, then `N passed, M failed (U unsupported)`.
use crate::CliError;
use rlx::prelude::Device;
use rlx_onnx::suite;
use std::path::PathBuf;

pub fn run(dirs: &[PathBuf], device: Device) -> Result<(), CliError> {
    let mut cases = vec![];
    for d in dirs {
        let found = suite::case_dirs(d).map_err(|e| CliError::Usage(e.to_string()))?;
        if found.is_empty() {
            return Err(CliError::Usage(format!(
                "{}: no model.onnx in it or in its subfolders",
                d.display()
            )));
        }
        cases.extend(found);
    }
    let results = suite::run_cases(&cases, device);
    for (name, outcome) in &results {
        println!("{name}: {outcome}");
    }
    println!("{}", suite::summary(&results));
    Ok(())
}
