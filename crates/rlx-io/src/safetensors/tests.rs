//! The reader against files written here byte by byte (header JSON + data), so a test does
//! not depend on the writer it would be checking.
use super::*;
use rlx_testutil::Rng;

/// A safetensors file of `(name, dtype, shape, bytes)`, in order.
fn write_file(path: &Path, tensors: &[(&str, &str, Vec<usize>, Vec<u8>)]) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dt, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dt, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    let h = serde_json::Value::Object(header).to_string();
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rlx-st-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn reads_f32_f16_bf16_tensors_with_their_shapes() {
    let mut rng = Rng::new("safetensors_dtypes");
    let d = tmpdir("dtypes");
    let a: Vec<f32> = (0..12).map(|_| rng.normal() as f32).collect();
    let h: Vec<half::f16> = (0..6).map(|_| half::f16::from_f64(rng.normal())).collect();
    let b: Vec<half::bf16> = (0..4).map(|_| half::bf16::from_f64(rng.normal())).collect();
    let hb: Vec<u8> = h.iter().flat_map(|x| x.to_le_bytes()).collect();
    let bb: Vec<u8> = b.iter().flat_map(|x| x.to_le_bytes()).collect();
    let f = d.join("model.safetensors");
    write_file(
        &f,
        &[
            ("w", "F32", vec![3, 4], f32_bytes(&a)),
            ("h", "F16", vec![6], hb),
            ("b", "BF16", vec![2, 2], bb),
        ],
    );
    let st = SafeTensors::open(&d).unwrap();
    assert_eq!(st.names().collect::<Vec<_>>(), ["b", "h", "w"]);
    let w = st.float("w", &[3, 4]).unwrap();
    assert_eq!(w.dtype, Some(DType::F32));
    assert_eq!(w.to_host().unwrap().to_f32_vec(), a);
    let hv = st.float("h", &[6]).unwrap().to_host().unwrap().to_f32_vec();
    assert_eq!(hv, h.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
    let bv = st
        .float("b", &[2, 2])
        .unwrap()
        .to_host()
        .unwrap()
        .to_f32_vec();
    assert_eq!(bv, b.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
}

#[test]
fn wrong_shape_dtype_or_name_is_an_error_naming_the_tensor() {
    let d = tmpdir("errors");
    let f = d.join("m.safetensors");
    write_file(
        &f,
        &[
            ("w", "F32", vec![2, 2], f32_bytes(&[1.0, 2.0, 3.0, 4.0])),
            ("ids", "I64", vec![1], 7i64.to_le_bytes().to_vec()),
        ],
    );
    let st = SafeTensors::open(&f).unwrap();
    let e = st.float("w", &[4]).unwrap_err().to_string();
    assert!(
        e.contains("\"w\"") && e.contains("[2, 2]") && e.contains("[4]"),
        "{e}"
    );
    let e = st.float("ids", &[1]).unwrap_err().to_string();
    assert!(e.contains("\"ids\"") && e.contains("I64"), "{e}");
    let e = st.get("nope").err().unwrap().to_string();
    assert!(e.contains("\"nope\"") && e.contains("m.safetensors"), "{e}");
}

#[test]
fn sharded_folders_map_each_tensor_to_its_shard() {
    let d = tmpdir("shards");
    write_file(
        &d.join("a.safetensors"),
        &[("x", "F32", vec![1], f32_bytes(&[1.5]))],
    );
    write_file(
        &d.join("b.safetensors"),
        &[("y", "F32", vec![2], f32_bytes(&[2.5, 3.5]))],
    );
    let index = serde_json::json!({"metadata": {"total_size": 12},
        "weight_map": {"x": "a.safetensors", "y": "b.safetensors"}});
    std::fs::write(d.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let st = SafeTensors::open(&d).unwrap();
    assert_eq!(st.len(), 2);
    assert_eq!(st.files().count(), 2);
    assert_eq!(
        st.get("y").unwrap().to_host().unwrap().to_f32_vec(),
        [2.5, 3.5]
    );
    assert!(st.get("y").unwrap().path.ends_with("b.safetensors"));

    // An index that sends x to the wrong shard is refused.
    let bad = serde_json::json!({"weight_map": {"x": "b.safetensors", "y": "b.safetensors"}});
    std::fs::write(d.join("model.safetensors.index.json"), bad.to_string()).unwrap();
    let e = SafeTensors::open(&d).err().unwrap().to_string();
    assert!(e.contains("\"x\"") && e.contains("b.safetensors"), "{e}");
    // A shard path that leaves the folder is refused before anything is opened.
    let evil = serde_json::json!({"weight_map": {"x": "../a.safetensors"}});
    std::fs::write(d.join("model.safetensors.index.json"), evil.to_string()).unwrap();
    assert!(matches!(
        SafeTensors::open(&d),
        Err(SafetensorsError::Index { .. })
    ));
}

#[test]
fn truncated_or_garbage_files_are_header_errors_never_panics() {
    let mut rng = Rng::new("safetensors_truncate");
    let d = tmpdir("trunc");
    let f = d.join("m.safetensors");
    let v: Vec<f32> = (0..8).map(|_| rng.normal() as f32).collect();
    write_file(&f, &[("w", "F32", vec![8], f32_bytes(&v))]);
    let whole = std::fs::read(&f).unwrap();
    let g = d.join("cut.safetensors");
    for cut in [0, 4, 8, 20, whole.len() - 1] {
        std::fs::write(&g, &whole[..cut]).unwrap();
        assert!(
            matches!(SafeTensors::open(&g), Err(SafetensorsError::Header { .. })),
            "cut at {cut}"
        );
    }
    // Random bytes after a plausible length prefix.
    for _ in 0..50 {
        let n = rng.below(64);
        let mut bytes = (n as u64).to_le_bytes().to_vec();
        bytes.extend((0..n + rng.below(16)).map(|_| rng.below(256) as u8));
        std::fs::write(&g, &bytes).unwrap();
        let _ = SafeTensors::open(&g);
    }
    let e = SafeTensors::open(d.join("absent.safetensors"))
        .err()
        .unwrap();
    assert!(matches!(e, SafetensorsError::Io { .. }));
    let empty = tmpdir("empty");
    assert!(matches!(
        SafeTensors::open(&empty),
        Err(SafetensorsError::NoWeights { .. })
    ));
}
