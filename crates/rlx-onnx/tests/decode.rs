//! TensorProto decoding per dtype (raw_data and the typed fields) against hand-built protos,
//! external data (in bounds, out of bounds, escaping the model folder), malformed files.
use half::{bf16, f16};
use prost::Message;
use rlx_ir::DType;
use rlx_onnx::proto::{tensor_proto::DataType as P, StringStringEntryProto, TensorProto};
use rlx_onnx::tensor::decode_tensor;
use rlx_onnx::{load_bytes, OnnxError};
use rlx_testutil::Rng;

fn proto(name: &str, dims: &[i64], dt: P) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(dt as i32),
        ..Default::default()
    }
}

/// Random integers in [lo, hi].
fn ints(rng: &mut Rng, n: usize, lo: i64, hi: i64) -> Vec<i64> {
    let span = (hi as i128 - lo as i128 + 1) as u128;
    (0..n)
        .map(|_| (lo as i128 + (rng.next_u64() as u128 % span) as i128) as i64)
        .collect()
}

/// Every integer ONNX type: raw little-endian bytes and int32_data / int64_data / uint64_data
/// decode to the same values, held in the rlx dtype the type widens to.
#[test]
fn integer_types_decode_from_raw_and_typed_fields() {
    let mut rng = Rng::new("integer_types_decode_from_raw_and_typed_fields");
    let cases: [(P, i64, i64, usize, DType); 8] = [
        (P::Int8, -128, 127, 1, DType::I32),
        (P::Uint8, 0, 255, 1, DType::U8),
        (P::Int16, -32768, 32767, 2, DType::I32),
        (P::Uint16, 0, 65535, 2, DType::I32),
        (P::Int32, i32::MIN as i64, i32::MAX as i64, 4, DType::I32),
        (P::Uint32, 0, u32::MAX as i64, 4, DType::I64),
        (P::Int64, i64::MIN / 2, i64::MAX / 2, 8, DType::I64),
        (P::Uint64, 0, i64::MAX / 2, 8, DType::I64),
    ];
    for (dt, lo, hi, width, want_dt) in cases {
        let dims = [2i64, 3, 1 + rng.below(4) as i64];
        let n = dims.iter().product::<i64>() as usize;
        let vals = ints(&mut rng, n, lo, hi);
        let mut raw = vec![];
        for &v in &vals {
            raw.extend_from_slice(&v.to_le_bytes()[..width]);
        }
        let mut a = proto("a", &dims, dt);
        a.raw_data = Some(raw);
        let mut b = proto("b", &dims, dt);
        match dt {
            P::Int64 => b.int64_data = vals.clone(),
            P::Uint32 | P::Uint64 => b.uint64_data = vals.iter().map(|&v| v as u64).collect(),
            _ => b.int32_data = vals.iter().map(|&v| v as i32).collect(),
        }
        for t in [a, b] {
            let h = decode_tensor(&t, None).unwrap();
            assert_eq!(h.dtype, want_dt, "{dt:?}");
            assert_eq!(h.shape, dims.map(|d| d as usize).to_vec(), "{dt:?}");
            assert_eq!(h.to_i64_vec(), vals, "{dt:?} via {:?}", t.name);
        }
    }
}

#[test]
fn float_types_decode_from_raw_and_typed_fields() {
    let mut rng = Rng::new("float_types_decode_from_raw_and_typed_fields");
    let n = 5 + rng.below(20);
    let v = rng.normals(n);
    // f32
    let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    let mut a = proto("f", &[n as i64], P::Float);
    a.raw_data = Some(f.iter().flat_map(|x| x.to_le_bytes()).collect());
    let mut b = proto("f", &[n as i64], P::Float);
    b.float_data = f.clone();
    for t in [a, b] {
        let h = decode_tensor(&t, None).unwrap();
        assert_eq!(h.dtype, DType::F32);
        assert_eq!(h.to_f32_vec(), f);
    }
    // f64
    let mut a = proto("d", &[n as i64], P::Double);
    a.raw_data = Some(v.iter().flat_map(|x| x.to_le_bytes()).collect());
    let mut b = proto("d", &[n as i64], P::Double);
    b.double_data = v.clone();
    for t in [a, b] {
        let h = decode_tensor(&t, None).unwrap();
        assert_eq!(h.dtype, DType::F64);
        assert_eq!(h.to_f64_vec(), v);
    }
    // f16 / bf16: raw bytes, and int32_data holding the bit patterns.
    let h16: Vec<f16> = v.iter().map(|&x| f16::from_f64(x)).collect();
    let b16: Vec<bf16> = v.iter().map(|&x| bf16::from_f64(x)).collect();
    let mut a = proto("h", &[n as i64], P::Float16);
    a.raw_data = Some(h16.iter().flat_map(|x| x.to_le_bytes()).collect());
    let mut b = proto("h", &[n as i64], P::Float16);
    b.int32_data = h16.iter().map(|x| x.to_bits() as i32).collect();
    for t in [a, b] {
        let h = decode_tensor(&t, None).unwrap();
        assert_eq!(h.dtype, DType::F16);
        let want: Vec<f64> = h16.iter().map(|x| x.to_f64()).collect();
        assert_eq!(h.to_f64_vec(), want);
    }
    let mut a = proto("bf", &[n as i64], P::Bfloat16);
    a.raw_data = Some(b16.iter().flat_map(|x| x.to_le_bytes()).collect());
    let mut b = proto("bf", &[n as i64], P::Bfloat16);
    b.int32_data = b16.iter().map(|x| x.to_bits() as i32).collect();
    for t in [a, b] {
        let h = decode_tensor(&t, None).unwrap();
        assert_eq!(h.dtype, DType::BF16);
        let want: Vec<f64> = b16.iter().map(|x| x.to_f64()).collect();
        assert_eq!(h.to_f64_vec(), want);
    }
    // bool: raw bytes and int32_data; nonzero is true.
    let bits: Vec<bool> = (0..n).map(|_| rng.chance(0.5)).collect();
    let mut a = proto("b", &[n as i64], P::Bool);
    a.raw_data = Some(bits.iter().map(|&b| b as u8).collect());
    let mut b = proto("b", &[n as i64], P::Bool);
    b.int32_data = bits.iter().map(|&b| b as i32).collect();
    for t in [a, b] {
        let h = decode_tensor(&t, None).unwrap();
        assert_eq!(h.dtype, DType::Bool);
        let want: Vec<i64> = bits.iter().map(|&b| b as i64).collect();
        assert_eq!(h.to_i64_vec(), want);
    }
}

#[test]
fn inconsistent_tensors_are_typed_errors() {
    let mut t = proto("w", &[2, 3], P::Float);
    t.raw_data = Some(vec![0u8; 23]);
    assert!(matches!(decode_tensor(&t, None), Err(OnnxError::Tensor { name, .. }) if name == "w"));
    let mut t = proto("w", &[2, 3], P::Float);
    t.float_data = vec![1.0; 5];
    assert!(matches!(
        decode_tensor(&t, None),
        Err(OnnxError::Tensor { .. })
    ));
    let mut t = proto("w", &[-1], P::Float);
    t.float_data = vec![1.0];
    assert!(matches!(
        decode_tensor(&t, None),
        Err(OnnxError::Tensor { .. })
    ));
    let mut t = proto("w", &[1 << 40, 1 << 40], P::Float);
    t.raw_data = Some(vec![]);
    assert!(matches!(
        decode_tensor(&t, None),
        Err(OnnxError::Tensor { .. })
    ));
    let t = proto("s", &[1], P::String);
    assert!(matches!(
        decode_tensor(&t, None),
        Err(OnnxError::UnsupportedType { .. })
    ));
    let mut t = proto("u", &[1], P::Uint64);
    t.uint64_data = vec![u64::MAX];
    assert!(matches!(
        decode_tensor(&t, None),
        Err(OnnxError::Tensor { .. })
    ));
}

fn external(
    name: &str,
    dims: &[i64],
    loc: &str,
    offset: Option<u64>,
    len: Option<u64>,
) -> TensorProto {
    let mut t = proto(name, dims, P::Float);
    t.data_location = Some(1);
    let kv = |k: &str, v: String| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v),
    };
    t.external_data.push(kv("location", loc.into()));
    if let Some(o) = offset {
        t.external_data.push(kv("offset", o.to_string()));
    }
    if let Some(l) = len {
        t.external_data.push(kv("length", l.to_string()));
    }
    t
}

#[test]
fn external_data_is_read_inside_the_model_folder_and_checked() {
    let mut rng = Rng::new("external_data_is_read_inside_the_model_folder_and_checked");
    let dir = std::env::temp_dir().join(format!("rlx-onnx-ext-{}", rng.next_u64()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let vals: Vec<f32> = rng.normals(12).iter().map(|&x| x as f32).collect();
    let mut bytes = vec![7u8; 16]; // a header the offset skips
    bytes.extend(vals.iter().flat_map(|v| v.to_le_bytes()));
    std::fs::write(dir.join("sub/w.bin"), &bytes).unwrap();

    let t = external("w", &[3, 4], "sub/w.bin", Some(16), Some(48));
    let h = decode_tensor(&t, Some(&dir)).unwrap();
    assert_eq!(h.to_f32_vec(), vals);
    // No length: the rest of the file.
    let t = external("w", &[3, 4], "sub/w.bin", Some(16), None);
    assert_eq!(decode_tensor(&t, Some(&dir)).unwrap().to_f32_vec(), vals);

    let bad = |t: TensorProto| {
        let e = decode_tensor(&t, Some(&dir)).unwrap_err();
        assert!(matches!(e, OnnxError::ExternalData { .. }), "{e}");
    };
    bad(external("w", &[3, 4], "sub/w.bin", Some(20), Some(48))); // past the end
    bad(external(
        "w",
        &[3, 4],
        "sub/w.bin",
        Some(u64::MAX),
        Some(48),
    )); // overflow
    bad(external("w", &[3, 4], "sub/w.bin", Some(0), Some(40))); // wrong length
    bad(external("w", &[3, 4], "../w.bin", Some(0), Some(48))); // escapes the folder
    bad(external("w", &[3, 4], "/etc/passwd", None, None)); // absolute
    bad(external("w", &[3, 4], "sub/missing.bin", None, None));
    let e = decode_tensor(&external("w", &[3, 4], "sub/w.bin", None, None), None).unwrap_err();
    assert!(matches!(e, OnnxError::ExternalData { .. }));
    std::fs::remove_dir_all(&dir).ok();
}

/// Truncated and garbage model bytes are typed errors, never panics.
#[test]
fn malformed_model_bytes_are_typed_errors() {
    let mut rng = Rng::new("malformed_model_bytes_are_typed_errors");
    let model = rlx_onnx::proto::ModelProto {
        ir_version: Some(8),
        graph: Some(rlx_onnx::proto::GraphProto {
            name: Some("g".into()),
            initializer: vec![{
                let mut t = proto("w", &[4], P::Float);
                t.float_data = vec![1.0, 2.0, 3.0, 4.0];
                t
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let bytes = model.encode_to_vec();
    for cut in 1..bytes.len() {
        // Every prefix either decodes to some model or is a typed error.
        let _ = load_bytes(&bytes[..cut], None, "truncated");
    }
    let e = load_bytes(&bytes[..bytes.len() - 3], None, "truncated").unwrap_err();
    assert!(
        matches!(e, OnnxError::Decode { .. } | OnnxError::Tensor { .. }),
        "{e}"
    );
    for _ in 0..200 {
        let n = 1 + rng.below(300);
        let junk: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
        let _ = load_bytes(&junk, None, "junk");
    }
    let e = load_bytes(&[0xff, 0xff, 0xff], None, "junk").unwrap_err();
    assert!(matches!(e, OnnxError::Decode { .. }), "{e}");
    let e = load_bytes(&[], None, "empty").unwrap_err();
    assert!(matches!(e, OnnxError::Graph(_)), "{e}");
}
