//! The `rlx` binary on input a new user might give it: every bad argument is a clear
//! error with a non-zero exit, never a panic, an allocation abort or a silent success.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rlx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(args)
        .output()
        .expect("the rlx binary runs")
}

/// The run failed cleanly (exit 2, no panic) with a message containing every `needle`.
fn fails_with(args: &[&str], needles: &[&str]) {
    let out = rlx(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "rlx {args:?}: {err}");
    assert!(!err.contains("panicked"), "rlx {args:?} panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "rlx {args:?}: \"{n}\" missing from: {err}");
    }
}

#[test]
fn demo_sizes_are_checked_before_anything_is_allocated() {
    // Used to panic with "capacity overflow".
    fails_with(&["demo", "--seq", "18446744073709551615"], &["--seq"]);
    // Used to abort with an allocation failure.
    fails_with(&["demo", "--seq", "100000000"], &["--seq"]);
    fails_with(
        &["demo", "--width", "1000000000", "--heads", "1"],
        &["--width"],
    );
    // Within each range, but together too large: the size check names the cap.
    fails_with(
        &["demo", "--seq", "65536", "--width", "256"],
        &["GiB", "lower --seq or --width"],
    );
    fails_with(&["demo", "--seq", "0"], &["--seq"]);
    fails_with(&["demo", "--heads", "3"], &["must divide"]);
}

#[test]
fn a_learning_rate_that_trains_uphill_is_refused() {
    fails_with(&["train", "digits", "--lr", "-1"], &["--lr", "positive"]);
    fails_with(&["train", "digits", "--lr", "0"], &["positive"]);
    fails_with(&["train", "digits", "--lr", "nan"], &["positive"]);
    fails_with(&["train", "digits", "--lr", "fast"], &["not a number"]);
    fails_with(&["train", "digits", "--epochs", "0"], &["--epochs"]);
    fails_with(&["train", "digits", "--batch", "0"], &["--batch"]);
    fails_with(
        &[
            "train",
            "digits",
            "--batch",
            "65536",
            "--channels",
            "4096",
            "4096",
        ],
        &["GiB", "lower --batch or --channels"],
    );
}

/// Write an uncompressed MNIST-style IDX directory of 28×28 images.
fn idx_dir(name: &str, train_labels: &[u8], test_labels: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rlx-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |file: &str, labels: &[u8], images: bool| {
        let n = labels.len() as u32;
        let mut b = vec![0, 0, 8, if images { 3 } else { 1 }];
        b.extend(n.to_be_bytes());
        if images {
            b.extend(28u32.to_be_bytes());
            b.extend(28u32.to_be_bytes());
            b.extend(std::iter::repeat_n(7u8, labels.len() * 28 * 28));
        } else {
            b.extend(labels);
        }
        std::fs::write(Path::new(&dir).join(file), b).unwrap();
    };
    write("train-images-idx3-ubyte", train_labels, true);
    write("train-labels-idx1-ubyte", train_labels, false);
    write("t10k-images-idx3-ubyte", test_labels, true);
    write("t10k-labels-idx1-ubyte", test_labels, false);
    dir
}

fn train_on(dir: &Path) -> Vec<String> {
    let d = dir.to_str().unwrap().to_string();
    [
        "train",
        "fashion-mnist",
        "--data",
        &d,
        "--epochs",
        "1",
        "--device",
        "cpu",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

#[test]
fn bad_datasets_are_errors_not_results() {
    // Used to print "0.00 % accuracy" and exit 0.
    let dir = idx_dir("labels", &[0, 1, 2, 3], &[1, 12]);
    let args = train_on(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_with(&args, &["evaluation sample 1 has label 12", "10 classes"]);
    std::fs::remove_dir_all(&dir).ok();
    // Used to report loss 0.0000 and exit 0.
    let dir = idx_dir("empty", &[], &[1, 2]);
    let args = train_on(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_with(&args, &["training set is empty"]);
    std::fs::remove_dir_all(&dir).ok();
}

#[path = "../../rlx-io/tests/gguf_writer/mod.rs"]
mod gguf_writer;

#[test]
fn inspect_prints_a_gguf_and_refuses_a_broken_one() {
    use rlx_io::gguf::{Array, Value};
    let dir = std::env::temp_dir().join(format!("rlx-cli-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens: Vec<String> = (0..20).map(|i| format!("tok{i}")).collect();
    let bytes = gguf_writer::Writer::new(3)
        .kv("general.architecture", Value::String(b"llama".to_vec()))
        .kv("llama.block_count", Value::U32(30))
        .kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::String(tokens.iter().collect())),
        )
        .tensor("output_norm.weight", &[8], 0, vec![0; 32])
        .tensor("blk.0.attn_q.weight", &[64, 2], 8, vec![1; 4 * 34])
        .tensor("future.weight", &[4], 99, vec![])
        .bytes();
    let good = dir.join("model.gguf");
    std::fs::write(&good, &bytes).unwrap();
    let out = rlx(&["inspect", good.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "GGUF v3",
        "general.architecture",
        "\"llama\"",
        "array[string]",
        "\"tok5\", … (20 items)]",
        "blk.0.attn_q.weight",
        "Q8_0",
        "[2, 64]",
        "type#99",
        "total: 3 tensors",
    ] {
        assert!(text.contains(needle), "\"{needle}\" missing from:\n{text}");
    }
    // Recognised by its magic whatever the name.
    let renamed = dir.join("model.bin");
    std::fs::write(&renamed, &bytes).unwrap();
    assert!(rlx(&["inspect", renamed.to_str().unwrap()])
        .status
        .success());
    fails_with(
        &["inspect", good.to_str().unwrap(), "--optimized"],
        &["--optimized", "GGUF"],
    );

    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    fails_with(
        &["inspect", cut.to_str().unwrap()],
        &["cut.gguf", "truncated at byte"],
    );
    let mut v1 = bytes.clone();
    v1[4] = 1;
    std::fs::write(&cut, &v1).unwrap();
    fails_with(&["inspect", cut.to_str().unwrap()], &["version 1"]);
    fails_with(
        &["inspect", dir.join("absent.gguf").to_str().unwrap()],
        &["absent.gguf"],
    );
    std::fs::remove_dir_all(&dir).ok();
}
