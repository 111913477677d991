//! Low-precision TensorProtos (float8, float4, E8M0, INT4/UINT4/INT2/UINT2) decode into
//! their carriers: packing (low bits first, padded last byte) from raw_data and from
//! int32_data, hand-computed float codes, and wrong lengths as errors naming the tensor.
use rlx_ir::DType;
use rlx_onnx::proto::{tensor_proto::DataType as P, TensorProto};
use rlx_onnx::tensor::decode_tensor;
use rlx_testutil::Rng;

fn proto(dims: &[i64], dt: P) -> TensorProto {
    TensorProto {
        name: Some("t".into()),
        dims: dims.to_vec(),
        data_type: Some(dt as i32),
        ..Default::default()
    }
}

/// Pack `bits`-wide two's-complement values, first element in the lowest bits.
fn pack(vals: &[i64], bits: u32) -> Vec<u8> {
    let per = (8 / bits) as usize;
    let mut out = vec![0u8; vals.len().div_ceil(per)];
    for (k, &v) in vals.iter().enumerate() {
        let code = (v as u8) & ((1u16 << bits) - 1) as u8;
        out[k / per] |= code << ((k % per) as u32 * bits);
    }
    out
}

#[test]
fn packed_integers_decode_from_raw_and_int32_data() {
    let mut rng = Rng::new("packed_integers_decode_from_raw_and_int32_data");
    for (dt, bits, lo, hi) in [
        (P::Int4, 4, -8i64, 7i64),
        (P::Uint4, 4, 0, 15),
        (P::Int2, 2, -2, 1),
        (P::Uint2, 2, 0, 3),
    ] {
        for n in [1usize, 2, 3, 5, 8, 33] {
            let vals: Vec<i64> = (0..n)
                .map(|_| lo + rng.below((hi - lo + 1) as usize) as i64)
                .collect();
            let packed = pack(&vals, bits);
            let mut raw = proto(&[n as i64], dt);
            raw.raw_data = Some(packed.clone());
            let mut typed = proto(&[n as i64], dt);
            typed.int32_data = packed.iter().map(|&b| b as i32).collect();
            for t in [raw, typed] {
                let got = decode_tensor(&t, None).unwrap();
                assert_eq!(got.dtype, DType::I32, "{dt:?}");
                assert_eq!(got.shape, vec![n]);
                assert_eq!(got.to_i64_vec(), vals, "{dt:?} n={n}");
            }
        }
    }
}

#[test]
fn float_codes_decode_to_their_values() {
    let cases: &[(P, &[u8], &[f64])] = &[
        // 0x7E = 0.1111.110 = 1.75·2^8; 0x01 the smallest subnormal 2^-9; 0xFE = −448.
        (
            P::Float8e4m3fn,
            &[0x7E, 0x01, 0xFE, 0x38],
            &[448.0, 1.0 / 512.0, -448.0, 1.0],
        ),
        // FNUZ bias 8: 0x7F = 1.875·2^7; 0x00 is zero.
        (P::Float8e4m3fnuz, &[0x7F, 0x00, 0x40], &[240.0, 0.0, 1.0]),
        // E5M2: 0x7B = 1.75·2^15, 0x7C = +inf, 0xFC = −inf, 0x3C = 1.
        (
            P::Float8e5m2,
            &[0x7B, 0x7C, 0xFC, 0x3C],
            &[57344.0, f64::INFINITY, f64::NEG_INFINITY, 1.0],
        ),
        (P::Float8e5m2fnuz, &[0x7F, 0x40], &[57344.0, 1.0]),
        // E8M0: code c is 2^(c−127).
        (
            P::Float8e8m0,
            &[0x7F, 0x80, 0x00],
            &[1.0, 2.0, 2f64.powi(-127)],
        ),
    ];
    for &(dt, raw, want) in cases {
        let mut t = proto(&[raw.len() as i64], dt);
        t.raw_data = Some(raw.to_vec());
        let got = decode_tensor(&t, None).unwrap();
        assert_eq!(got.dtype, DType::F32);
        assert_eq!(got.to_f64_vec(), want, "{dt:?}");
    }
    // NaN codes.
    for (dt, code) in [
        (P::Float8e4m3fn, 0x7F),
        (P::Float8e4m3fn, 0xFF),
        (P::Float8e4m3fnuz, 0x80),
        (P::Float8e5m2, 0x7E),
        (P::Float8e5m2fnuz, 0x80),
        (P::Float8e8m0, 0xFF),
    ] {
        let mut t = proto(&[1], dt);
        t.int32_data = vec![code];
        assert!(
            decode_tensor(&t, None).unwrap().to_f64_vec()[0].is_nan(),
            "{dt:?} {code:#x}"
        );
    }
    // float4, two per byte, low nibble first: 0x7F = [−6, 6]; 0x21 = [0.5, 1]; 0x08 = [−0].
    let mut t = proto(&[5], P::Float4e2m1);
    t.raw_data = Some(vec![0x7F, 0x21, 0x08]);
    let got = decode_tensor(&t, None).unwrap().to_f64_vec();
    assert_eq!(got, [-6.0, 6.0, 0.5, 1.0, 0.0]);
}

#[test]
fn wrong_packed_lengths_are_errors_naming_the_tensor() {
    for (dt, n, bytes) in [
        (P::Int4, 3, 1usize),
        (P::Int4, 3, 3),
        (P::Uint2, 5, 1),
        (P::Float8e4m3fn, 4, 3),
    ] {
        let mut t = proto(&[n], dt);
        t.raw_data = Some(vec![0; bytes]);
        let e = decode_tensor(&t, None).unwrap_err().to_string();
        assert!(e.contains("\"t\"") || e.contains(" t"), "{e}");
        let mut t = proto(&[n], dt);
        t.int32_data = vec![300];
        assert!(decode_tensor(&t, None).is_err());
    }
}
