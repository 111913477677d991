//! The `RLX_*` switches are declared once, in `rlx_ir::env::SWITCHES`: the README's
//! environment table must be exactly the table generated from it, and every `RLX_*` name
//! the crates' Rust sources mention must be declared there.
use rlx_ir::env::{markdown_table, SWITCHES};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of the table under the README's "Environment switches" heading.
fn readme_table(readme: &str) -> Option<String> {
    let start = readme.find("## Environment switches")?;
    let rest = &readme[start..];
    let rows: Vec<&str> = rest
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    Some(rows.iter().map(|l| format!("{l}\n")).collect())
}

#[test]
fn readme_table_is_the_declared_table() {
    let path = repo_root().join("README.md");
    let readme = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let got = readme_table(&readme).expect("README.md has a \"## Environment switches\" table");
    let want = markdown_table();
    assert!(
        got == want,
        "README.md's environment table differs from rlx_ir::env::SWITCHES; replace it with:\n\n{want}"
    );
}

/// Every `RLX_` + `[A-Z0-9_]+` word of `text`.
fn names_in(text: &str) -> Vec<String> {
    let prefix = concat!("RLX", "_");
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = text[from..].find(prefix) {
        let s = from + k;
        let mut e = s + prefix.len();
        while e < b.len() && (b[e].is_ascii_uppercase() || b[e].is_ascii_digit() || b[e] == b'_') {
            e += 1;
        }
        // A name continuing an identifier (`XRLX_A`) is some other word.
        let inside = s > 0 && (b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_');
        if e > s + prefix.len() && !inside {
            out.push(text[s..e].trim_end_matches('_').to_string());
        }
        from = e;
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_rlx_name_in_the_sources_is_declared() {
    let declared: BTreeSet<&str> = SWITCHES.iter().map(|s| s.name).collect();
    let crates = repo_root().join("crates");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).unwrap().flatten() {
        // Kernel sources (.cu) use RLX_ macros of their own; only Rust reads the environment.
        for sub in ["src", "tests", "benches", "examples"] {
            rust_files(&c.path().join(sub), &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} Rust files", files.len());
    // Rust code may name the kernels' own `RLX_…` macros (the CUDA backend's signature test
    // reads them, a library shard's text defines its gates); those are not switches.
    let mut macros = BTreeSet::new();
    for c in std::fs::read_dir(&crates).unwrap().flatten() {
        let Ok(kernels) = std::fs::read_dir(c.path().join("kernels")) else {
            continue;
        };
        for k in kernels.flatten() {
            let text = std::fs::read_to_string(k.path()).unwrap_or_default();
            // Macros a kernel defines or tests (RLX_SHARD: defined by the shard's text).
            for line in text.lines() {
                let l = line.trim_start();
                let rest = ["#define ", "#ifndef ", "#ifdef "]
                    .iter()
                    .find_map(|p| l.strip_prefix(p));
                if let Some(rest) = rest {
                    macros.extend(names_in(rest).into_iter().take(1));
                }
            }
        }
    }
    assert!(
        !macros.is_empty(),
        "no kernel macros found under crates/*/kernels"
    );
    let mut missing = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for n in names_in(&text) {
            if !declared.contains(n.as_str()) && !macros.contains(&n) {
                missing.insert(format!("{n} ({})", f.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "RLX_ names used but not declared in rlx_ir::env::SWITCHES: {missing:?}"
    );
}

#[test]
fn the_scanner_finds_names() {
    let p = concat!("RLX", "_");
    let text = format!("var(\"{p}ONE\") {p}TWO_2=1 X{p}NOT and {p} alone");
    assert_eq!(
        names_in(&text),
        vec![format!("{p}ONE"), format!("{p}TWO_2")]
    );
}
