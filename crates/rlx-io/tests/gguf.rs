//! The GGUF reader against files written by an independent test writer (`gguf_writer`):
//! every metadata type round-trips in v2 and v3, tensor byte ranges follow each ggml type's
//! block size, and hostile files (truncated anywhere, huge counts, tensors out of range or
//! overlapping, bad magic/version/alignment, seeded mutations) are typed errors, never
//! panics. Files written by the Python `gguf` package and the real SmolLM2 model are read
//! when `scripts/fetch_models.sh` has put them in `$RLX_CACHE` (skipped with a message if not).
mod gguf_writer;

use gguf_writer::{put_str, sample, Writer};
use rlx_io::gguf::{Array, GgmlType, Gguf, GgufError, Strings, Value, MAX_ARRAY_DEPTH};
use rlx_testutil::Rng;
use std::path::PathBuf;

/// Read every metadata value and every tensor's bytes, as a user of the file would.
fn touch_all(g: &Gguf) -> usize {
    let mut n = 0;
    for (k, v) in g.metadata().entries() {
        n += k.len() + v.summary(4).len();
    }
    for t in g.tensors() {
        if let Ok(d) = g.tensor_data(t) {
            n += d.iter().map(|&b| b as usize).sum::<usize>() & 1;
            assert_eq!(d.len() as u64, t.n_bytes().unwrap());
        }
        let _ = t.shape();
    }
    n
}

fn err(bytes: &[u8]) -> GgufError {
    match Gguf::from_bytes(bytes) {
        Ok(g) => panic!("expected an error, parsed {g:?}"),
        Err(e) => e,
    }
}

fn every_value() -> Vec<(String, Value)> {
    let strings: Strings = ["", "x", "héllo ✓", "<0x0A>"].into_iter().collect();
    let vals = vec![
        Value::U8(200),
        Value::I8(-100),
        Value::U16(60000),
        Value::I16(-30000),
        Value::U32(4_000_000_000),
        Value::I32(-2_000_000_000),
        Value::U64(u64::MAX - 1),
        Value::I64(i64::MIN + 1),
        Value::F32(-1.5e-3),
        Value::F64(std::f64::consts::PI),
        Value::Bool(true),
        Value::Bool(false),
        Value::String("llama ✓".as_bytes().to_vec()),
        // Not UTF-8: kept as bytes, refused only when read as text.
        Value::String(vec![0xff, 0xfe, b'a']),
        Value::Array(Array::U8(vec![0, 1, 255])),
        Value::Array(Array::I8(vec![-128, 127])),
        Value::Array(Array::U16(vec![1, 65535])),
        Value::Array(Array::I16(vec![-1, 2])),
        Value::Array(Array::U32(vec![7, 8, 9])),
        Value::Array(Array::I32(vec![-7, 0, 7])),
        Value::Array(Array::U64(vec![1 << 40])),
        Value::Array(Array::I64(vec![-(1 << 40)])),
        Value::Array(Array::F32(vec![0.25, -0.5, 1e30])),
        Value::Array(Array::F64(vec![1e-300])),
        Value::Array(Array::Bool(vec![true, false, true])),
        Value::Array(Array::String(strings)),
        Value::Array(Array::F32(vec![])),
        Value::Array(Array::Array(vec![
            Array::U32(vec![1, 2]),
            Array::String(["a", "b"].into_iter().collect()),
            Array::Array(vec![Array::Bool(vec![true]), Array::Array(vec![])]),
        ])),
    ];
    vals.into_iter()
        .enumerate()
        .map(|(i, v)| (format!("key.{i}.{}", v.type_name()), v))
        .collect()
}

#[test]
fn every_metadata_type_round_trips_in_v2_and_v3() {
    for version in [2, 3] {
        let mut w = Writer::new(version);
        w.kvs = every_value();
        let g = Gguf::from_bytes(&w.bytes()).unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.metadata().entries(), &w.kvs[..]);
        assert_eq!(g.tensors().len(), 0);
        for (k, v) in &w.kvs {
            assert_eq!(g.metadata().get(k), Some(v), "{k}");
        }
    }
}

#[test]
fn typed_getters_name_the_key_and_the_type_found() {
    let g = Gguf::from_bytes(&sample(3)).unwrap();
    let m = g.metadata();
    assert_eq!(m.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(m.get_u32("llama.block_count").unwrap(), 2);
    assert_eq!(m.get_usize("llama.block_count").unwrap(), 2);
    assert_eq!(m.get_f32("llama.rope.freq_base").unwrap(), 10000.0);
    assert!(m.get_bool("flag").unwrap());
    assert_eq!(
        m.get_str_array("tokenizer.ggml.tokens").unwrap(),
        ["a", "bc", ""]
    );
    let e = m.get_u64("llama.block_count").unwrap_err().to_string();
    assert!(e.contains("llama.block_count") && e.contains("u32"), "{e}");
    let e = m.get_str("nested").unwrap_err().to_string();
    assert!(e.contains("nested") && e.contains("array[array]"), "{e}");
    assert!(matches!(
        m.get_f32("absent"),
        Err(GgufError::MissingKey { key }) if key == "absent"
    ));
    assert!(matches!(
        m.get_f32_array("tokenizer.ggml.tokens"),
        Err(GgufError::WrongType { .. })
    ));
    let e = m
        .get_str_array("llama.block_count")
        .unwrap_err()
        .to_string();
    assert!(e.contains("array[string]") && e.contains("u32"), "{e}");

    let mut w = Writer::new(3);
    w.kvs = every_value();
    let g = Gguf::from_bytes(&w.bytes()).unwrap();
    let bad = &w.kvs[13].0;
    assert!(matches!(
        g.metadata().get_str(bad),
        Err(GgufError::NotUtf8 { .. })
    ));
    assert_eq!(g.metadata().get_usize(&w.kvs[1].0).ok(), None); // a negative i8
    assert_eq!(g.metadata().get_usize(&w.kvs[0].0).unwrap(), 200);
}

/// (type, id, elements per block, bytes per block), from the GGUF spec / ggml-common.h.
const SIZES: &[(GgmlType, u32, u64, u64)] = &[
    (GgmlType::F32, 0, 1, 4),
    (GgmlType::F16, 1, 1, 2),
    (GgmlType::Q4_0, 2, 32, 18),
    (GgmlType::Q4_1, 3, 32, 20),
    (GgmlType::Q5_0, 6, 32, 22),
    (GgmlType::Q5_1, 7, 32, 24),
    (GgmlType::Q8_0, 8, 32, 34),
    (GgmlType::Q2_K, 10, 256, 84),
    (GgmlType::Q3_K, 11, 256, 110),
    (GgmlType::Q4_K, 12, 256, 144),
    (GgmlType::Q5_K, 13, 256, 176),
    (GgmlType::Q6_K, 14, 256, 210),
    (GgmlType::Q8_K, 15, 256, 292),
    (GgmlType::I8, 24, 1, 1),
    (GgmlType::I16, 25, 1, 2),
    (GgmlType::I32, 26, 1, 4),
    (GgmlType::I64, 27, 1, 8),
    (GgmlType::F64, 28, 1, 8),
    (GgmlType::BF16, 30, 1, 2),
];

#[test]
fn ggml_type_table_matches_the_spec() {
    for &(ty, id, block, size) in SIZES {
        assert_eq!(GgmlType::from_id(id), Some(ty));
        assert_eq!(
            (ty.id(), ty.block_size(), ty.type_size()),
            (id, block, size)
        );
    }
    for ty in GgmlType::all() {
        assert_eq!(GgmlType::from_id(ty.id()), Some(ty), "{ty}");
    }
    for removed in [4, 5, 31, 32, 33, 36, 37, 38, 1000] {
        assert_eq!(GgmlType::from_id(removed), None);
    }
}

#[test]
fn tensor_ranges_follow_each_types_blocks_at_any_alignment() {
    let mut rng = Rng::new("tensor_ranges_follow_each_types_blocks_at_any_alignment");
    for (version, alignment) in [(2, 32), (3, 32), (3, 1), (3, 64), (3, 4096)] {
        let mut w = Writer::new(version);
        if alignment != 32 {
            w.kvs
                .push(("general.alignment".into(), Value::U32(alignment as u32)));
        }
        w.alignment = alignment;
        let mut want = vec![];
        for (i, &(ty, id, block, size)) in SIZES.iter().enumerate() {
            let rows = 1 + rng.below(3) as u64;
            let dims = if i % 3 == 0 {
                vec![block * (1 + rng.below(2) as u64)]
            } else {
                vec![block * 2, rows, 1 + (i as u64 % 2)]
            };
            let n: u64 = dims.iter().product();
            let n_bytes = n / block * size;
            let data: Vec<u8> = (0..n_bytes).map(|_| rng.next_u64() as u8).collect();
            want.push((
                format!("t{i}.{ty}"),
                dims.clone(),
                ty,
                n_bytes,
                data.clone(),
            ));
            w = w.tensor(&format!("t{i}.{ty}"), &dims, id, data);
        }
        let (bytes, layout) = w.write();
        let g = Gguf::from_bytes(&bytes).unwrap();
        assert_eq!(g.alignment(), alignment);
        assert_eq!(g.data_start(), layout.data_start);
        assert_eq!(g.data_start() % alignment, 0);
        assert_eq!(g.tensors().len(), want.len());
        for (t, (name, dims, ty, n_bytes, data)) in g.tensors().iter().zip(&want) {
            assert_eq!(t.name(), name);
            assert_eq!(t.ggml_dims(), &dims[..]);
            let row_major: Vec<usize> = dims.iter().rev().map(|&d| d as usize).collect();
            assert_eq!(t.shape(), row_major);
            assert_eq!(t.ggml_type().unwrap(), *ty);
            assert_eq!(t.n_bytes().unwrap(), *n_bytes);
            assert_eq!(t.offset() % alignment, 0);
            assert_eq!(g.tensor_data(t).unwrap(), &data[..], "{name}");
            assert_eq!(g.tensor(name).unwrap(), t);
        }
        assert!(matches!(
            g.tensor("nope"),
            Err(GgufError::MissingTensor { .. })
        ));
    }
}

#[test]
fn open_maps_the_file_and_names_it_in_errors() {
    let dir = std::env::temp_dir().join(format!("rlx-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sample.gguf");
    std::fs::write(&path, sample(3)).unwrap();
    let g = Gguf::open(&path).unwrap();
    assert_eq!(g.tensors().len(), 4);
    assert!(touch_all(&g) > 0);
    let a = Gguf::from_bytes(&sample(3)).unwrap();
    for (x, y) in g.tensors().iter().zip(a.tensors()) {
        assert_eq!(g.tensor_data(x).unwrap(), a.tensor_data(y).unwrap());
    }
    // Shared views of the mapping (prefaulted) hold the same bytes and outlive the file value.
    let shared: Vec<_> = (g.tensors().iter())
        .map(|t| {
            (
                g.tensor_data(t).unwrap().to_vec(),
                g.tensor_data_shared(t).unwrap(),
            )
        })
        .collect();
    drop(g);
    for (want, got) in &shared {
        assert_eq!(&got[..], &want[..]);
    }
    assert!(shared.iter().any(|(w, _)| !w.is_empty()));

    let bad = dir.join("bad.gguf");
    std::fs::write(&bad, b"GGUF\x01\0\0\0").unwrap();
    let e = Gguf::open(&bad).unwrap_err();
    assert!(matches!(e.root(), GgufError::V1), "{e}");
    assert!(e.to_string().contains("bad.gguf"), "{e}");
    std::fs::write(&bad, b"").unwrap();
    assert!(matches!(
        Gguf::open(&bad).unwrap_err().root(),
        GgufError::Truncated { offset: 0, .. }
    ));
    let missing = Gguf::open(dir.join("missing.gguf")).unwrap_err();
    assert!(matches!(missing, GgufError::Io { .. }), "{missing}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn truncation_at_every_byte_is_an_error() {
    for version in [2, 3] {
        let good = sample(version);
        let g = Gguf::from_bytes(&good).unwrap();
        // Past the last tensor's bytes only padding is left: cutting it is still a valid file.
        let last_byte = g
            .tensors()
            .iter()
            .map(|t| t.file_range().unwrap().end)
            .max()
            .unwrap();
        for len in 0..good.len() {
            let r = Gguf::from_bytes(&good[..len]);
            if (len as u64) < last_byte {
                assert!(r.is_err(), "cut at {len} of {} parsed", good.len());
            } else {
                touch_all(&r.unwrap());
            }
        }
    }
}

fn header(version: u32, tensors: u64, kvs: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(version.to_le_bytes());
    b.extend(tensors.to_le_bytes());
    b.extend(kvs.to_le_bytes());
    b
}

#[test]
fn huge_counts_fail_before_allocating() {
    let e = err(&header(3, 0, 1 << 60));
    assert!(matches!(e, GgufError::TooLarge { offset: 16, .. }), "{e}");
    let e = err(&header(3, u64::MAX, 0));
    assert!(matches!(e, GgufError::TooLarge { offset: 8, .. }), "{e}");

    // A key whose length is 2^60.
    let mut b = header(3, 0, 1);
    b.extend((1u64 << 60).to_le_bytes());
    b.extend([b'x'; 32]);
    let e = err(&b);
    assert!(
        matches!(e, GgufError::Truncated { offset: 24, need, .. } if need == (1 << 60) + 8),
        "{e}"
    );

    // An array of 2^60 u64, and of 2^60 strings.
    for elem in [10u32, 8] {
        let mut b = header(3, 0, 1);
        put_str(&mut b, b"k");
        b.extend(9u32.to_le_bytes());
        b.extend(elem.to_le_bytes());
        b.extend((1u64 << 60).to_le_bytes());
        b.extend([0u8; 64]);
        let e = err(&b);
        assert!(matches!(e, GgufError::TooLarge { offset: 41, .. }), "{e}");
    }
}

/// A file with one tensor entry built by hand.
fn one_tensor(n_dims: u32, dims: &[u64], type_id: u32, offset: u64, data: usize) -> Vec<u8> {
    let mut b = header(3, 1, 0);
    put_str(&mut b, b"t");
    b.extend(n_dims.to_le_bytes());
    for d in dims {
        b.extend(d.to_le_bytes());
    }
    b.extend(type_id.to_le_bytes());
    b.extend(offset.to_le_bytes());
    while !b.len().is_multiple_of(32) {
        b.push(0);
    }
    b.extend(vec![0u8; data]);
    b
}

#[test]
fn tensor_entries_are_checked() {
    assert!(Gguf::from_bytes(&one_tensor(2, &[4, 2], 0, 0, 32)).is_ok());
    let e = err(&one_tensor(5, &[1; 5], 0, 0, 32));
    assert!(matches!(e, GgufError::TooManyDims { n_dims: 5, .. }), "{e}");
    let e = err(&one_tensor(2, &[1 << 40, 1 << 40], 0, 0, 32));
    assert!(matches!(e, GgufError::DimsOverflow { .. }), "{e}");
    let e = err(&one_tensor(2, &[0, u64::MAX], 0, 0, 32));
    assert!(matches!(e, GgufError::DimsOverflow { .. }), "{e}");
    // Elements fit i64, bytes (×4) do not.
    let e = err(&one_tensor(1, &[1 << 62], 0, 0, 32));
    assert!(matches!(e, GgufError::DimsOverflow { .. }), "{e}");
    let e = err(&one_tensor(1, &[48], 8, 0, 64));
    assert!(
        matches!(
            e,
            GgufError::PartialBlock {
                row: 48,
                block: 32,
                ..
            }
        ),
        "{e}"
    );
    let e = err(&one_tensor(1, &[9], 0, 0, 32));
    assert!(matches!(e, GgufError::OutOfBounds { .. }), "{e}");
    let e = err(&one_tensor(1, &[1], 0, u64::MAX - 31, 32));
    assert!(matches!(e, GgufError::OutOfBounds { .. }), "{e}");
    let e = err(&one_tensor(1, &[1], 0, 4, 32));
    assert!(matches!(e, GgufError::Misaligned { offset: 4, .. }), "{e}");

    // An unknown type id parses; its size and data are the error.
    let g = Gguf::from_bytes(&one_tensor(1, &[7], 77, 0, 0)).unwrap();
    let t = &g.tensors()[0];
    assert_eq!(t.type_id(), 77);
    assert!(matches!(
        t.ggml_type(),
        Err(GgufError::UnknownType { id: 77, .. })
    ));
    assert!(matches!(t.n_bytes(), Err(GgufError::UnknownType { .. })));
    assert!(matches!(
        g.tensor_data(t),
        Err(GgufError::UnknownType { .. })
    ));
    // ... but its offset must still lie in the file.
    let e = err(&one_tensor(1, &[7], 77, 1 << 20, 0));
    assert!(matches!(e, GgufError::OutOfBounds { .. }), "{e}");
}

#[test]
fn overlapping_and_duplicate_tensors_are_refused() {
    let data = vec![1u8; 64];
    let mut w =
        Writer::new(3)
            .tensor("a", &[16], 0, data.clone())
            .tensor("b", &[16], 0, data.clone());
    w.tensors[1].offset = Some(32);
    let e = err(&w.bytes());
    assert!(
        matches!(&e, GgufError::Overlap { first, second, .. } if first == "a" && second == "b"),
        "{e}"
    );
    // Adjacent is fine, in any order.
    w.tensors[0].offset = Some(64);
    w.tensors[1].offset = Some(0);
    let g = Gguf::from_bytes(&w.bytes()).unwrap();
    assert_eq!(g.tensor("a").unwrap().offset(), 64);
    // Zero-sized tensors occupy nothing.
    let w = Writer::new(3)
        .tensor("a", &[0, 4], 0, vec![])
        .tensor("b", &[4], 0, vec![0; 16]);
    assert!(Gguf::from_bytes(&w.bytes()).is_ok());

    let w = Writer::new(3)
        .tensor("a", &[4], 0, vec![0; 16])
        .tensor("a", &[4], 0, vec![0; 16]);
    let e = err(&w.bytes());
    assert!(
        matches!(&e, GgufError::DuplicateTensor { name, .. } if name == "a"),
        "{e}"
    );
    let w = Writer::new(3).kv("k", Value::U8(1)).kv("k", Value::U8(2));
    let e = err(&w.bytes());
    assert!(
        matches!(&e, GgufError::DuplicateKey { key, .. } if key == "k"),
        "{e}"
    );
}

#[test]
fn bad_magic_version_and_alignment_are_refused() {
    let mut b = sample(3);
    b[0] = b'g';
    assert!(matches!(err(&b), GgufError::BadMagic { found } if &found == b"gGUF"));
    assert!(matches!(err(&header(1, 0, 0)), GgufError::V1));
    assert!(matches!(
        err(&header(0, 0, 0)),
        GgufError::UnsupportedVersion { version: 0 }
    ));
    assert!(matches!(
        err(&header(4, 0, 0)),
        GgufError::UnsupportedVersion { version: 4 }
    ));
    let mut be = b"GGUF".to_vec();
    be.extend(3u32.to_be_bytes());
    be.extend([0u8; 16]);
    assert!(
        matches!(err(&be), GgufError::BigEndian { .. }),
        "{}",
        err(&be)
    );
    assert!(err(&be).to_string().contains("big-endian"));

    for bad in [
        Value::U32(0),
        Value::U32(3),
        Value::U32(48),
        Value::U64(32),
        Value::I32(32),
        Value::String(b"32".to_vec()),
    ] {
        let w =
            Writer::new(3)
                .kv("general.alignment", bad.clone())
                .tensor("t", &[8], 0, vec![0; 32]);
        let e = err(&w.bytes());
        assert!(matches!(e, GgufError::BadAlignment { .. }), "{bad:?}: {e}");
    }
}

#[test]
fn bad_values_are_refused_with_their_offset() {
    // A bool that is 2, a value type 13, a key that is not UTF-8.
    let kv = |key: &[u8], ty: u32, body: &[u8]| {
        let mut b = header(3, 0, 1);
        put_str(&mut b, key);
        b.extend(ty.to_le_bytes());
        b.extend(body);
        b
    };
    assert!(matches!(
        err(&kv(b"k", 7, &[2])),
        GgufError::BadBool {
            offset: 37,
            value: 2
        }
    ));
    assert!(matches!(
        err(&kv(b"k", 13, &[0; 8])),
        GgufError::BadValueType { offset: 33, id: 13 }
    ));
    assert!(matches!(
        err(&kv(&[0xc3, 0x28], 0, &[1])),
        GgufError::BadString { offset: 24, .. }
    ));

    // Arrays nested one level too deep.
    let mut body = vec![];
    for _ in 0..MAX_ARRAY_DEPTH {
        body.extend(9u32.to_le_bytes());
        body.extend(1u64.to_le_bytes());
    }
    body.extend(0u32.to_le_bytes());
    body.extend(0u64.to_le_bytes());
    assert!(Gguf::from_bytes(&kv(b"k", 9, &body[12..])).is_ok());
    assert!(matches!(
        err(&kv(b"k", 9, &body)),
        GgufError::TooDeep { .. }
    ));
}

#[test]
fn seeded_mutations_are_errors_or_readable_files() {
    let mut rng = Rng::new("seeded_mutations_are_errors_or_readable_files");
    let seeds = [sample(2), sample(3)];
    let (mut ok, mut failed) = (0, 0);
    for i in 0..3000 {
        let mut b = seeds[i % 2].clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(b.len() + 1);
            match rng.below(6) {
                0 if at < b.len() => b[at] ^= 1 << rng.below(8),
                1 if at < b.len() => b[at] = rng.next_u64() as u8,
                2 => b.truncate(at),
                3 => b.insert(at, rng.next_u64() as u8),
                // A length or count field set to something huge.
                4 if at + 8 <= b.len() => {
                    b[at..at + 8].copy_from_slice(&(rng.next_u64() >> rng.below(64)).to_le_bytes())
                }
                _ => {}
            }
        }
        match Gguf::from_bytes(&b) {
            Ok(g) => {
                ok += 1;
                touch_all(&g);
            }
            Err(e) => {
                failed += 1;
                let _ = e.to_string();
            }
        }
    }
    assert!(ok > 0 && failed > 0, "{ok} parsed, {failed} failed");
}

/// `$RLX_CACHE` (default `~/.cache/rlx`), where `scripts/fetch_models.sh` puts its files.
fn cached(name: &str) -> Option<PathBuf> {
    let dir = rlx_io::model_cache()?;
    let p = dir.join(name);
    if p.exists() {
        Some(p)
    } else {
        println!(
            "skipped: {} is absent (run scripts/fetch_models.sh)",
            p.display()
        );
        None
    }
}

#[test]
fn reads_a_file_written_by_gguf_py() {
    let Some(path) = cached("gguf/py_sample.gguf") else {
        return;
    };
    let g = Gguf::open(&path).unwrap();
    let m = g.metadata();
    assert_eq!(m.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(m.get_str("general.name").unwrap(), "rlx gguf-py sample");
    assert_eq!(m.get_u32("test.u32").unwrap(), 123456);
    assert_eq!(m.get_i32("test.i32").unwrap(), -42);
    assert_eq!(m.get_f32("test.f32").unwrap(), 0.5);
    assert_eq!(m.get_u64("test.u64").unwrap(), 1 << 40);
    assert_eq!(m.get_f64("test.f64").unwrap(), 2.25);
    assert!(m.get_bool("test.bool").unwrap());
    assert_eq!(m.get_str_array("test.strings").unwrap(), ["a", "βγ", ""]);
    assert_eq!(m.get_i32_array("test.ints").unwrap(), [1, -2, 3]);
    assert_eq!(m.get_f32_array("test.floats").unwrap(), [0.5, 1.5]);
    assert_eq!(
        m.get_array("test.nested").unwrap(),
        &Array::Array(vec![Array::I32(vec![1, 2]), Array::I32(vec![3])])
    );

    // Values from the script: element i of each tensor is i as f32, scaled by 0.25.
    let f32s = g.tensor("t.f32").unwrap();
    assert_eq!(f32s.ggml_type().unwrap(), GgmlType::F32);
    assert_eq!(f32s.shape(), [3, 4]);
    let d = g.tensor_data(f32s).unwrap();
    for (i, c) in d.chunks_exact(4).enumerate() {
        assert_eq!(f32::from_le_bytes(c.try_into().unwrap()), i as f32 * 0.25);
    }
    let f16s = g.tensor("t.f16").unwrap();
    assert_eq!(f16s.ggml_type().unwrap(), GgmlType::F16);
    assert_eq!((f16s.shape(), f16s.n_bytes().unwrap()), (vec![2, 8], 32));
    let q8 = g.tensor("t.q8_0").unwrap();
    assert_eq!(q8.ggml_type().unwrap(), GgmlType::Q8_0);
    assert_eq!((q8.shape(), q8.n_bytes().unwrap()), (vec![2, 64], 4 * 34));
    // Q8_0 blocks: f16 scale then 32 i8; dequantized they give back i * 0.25 closely.
    let qd = g.tensor_data(q8).unwrap();
    for (b, block) in qd.chunks_exact(34).enumerate() {
        let scale = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        for (j, &q) in block[2..].iter().enumerate() {
            let want = (b * 32 + j) as f32 * 0.25;
            let got = scale * q as i8 as f32;
            assert!((got - want).abs() <= scale, "{b}/{j}: {got} vs {want}");
        }
    }
    touch_all(&g);
}

/// IEEE half to f32 (normal and zero values; enough for a scale).
fn f16_to_f32(h: u16) -> f32 {
    let sign = if h >> 15 == 1 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f32;
    if exp == 0 {
        return sign * frac * 2f32.powi(-24);
    }
    sign * (1.0 + frac / 1024.0) * 2f32.powi(exp - 15)
}

#[test]
fn reads_smollm2_135m_q4_1() {
    let Some(path) = cached("gguf/SmolLM2-135M-Instruct.Q4_1.gguf") else {
        return;
    };
    let g = Gguf::open(&path).unwrap();
    let m = g.metadata();
    assert_eq!(m.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(m.get_usize("llama.block_count").unwrap(), 30);
    assert_eq!(m.get_usize("llama.embedding_length").unwrap(), 576);
    assert_eq!(m.get_usize("llama.attention.head_count").unwrap(), 9);
    assert_eq!(m.get_usize("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(
        m.get_str_array("tokenizer.ggml.tokens").unwrap().len(),
        49152
    );
    let emb = g.tensor("token_embd.weight").unwrap();
    assert_eq!(emb.shape(), [49152, 576]);
    assert_eq!(emb.ggml_type().unwrap(), GgmlType::Q8_0);
    let mut types = std::collections::BTreeSet::new();
    for t in g.tensors() {
        let r = t.file_range().unwrap();
        assert!(r.end <= g.file_len(), "{}", t.name());
        assert_eq!(g.tensor_data(t).unwrap().len() as u64, r.end - r.start);
        types.insert(t.ggml_type().unwrap().name());
    }
    assert!(types.contains("Q4_1"), "{types:?}");
    // 30 layers × 9 tensors + embedding + output norm.
    assert_eq!(g.tensors().len(), 272, "{}", g.tensors().len());
}
