//! Host emulation of `norm_split_*` (kernels/norm.cu), the strict prefill's RMS norm with its
//! input split as the epilogue: warps of fibers (`hostemu::THREADED`) run `norm_v<V>` and
//! `norm_split_v<V>` on the same rows, and the split's parts and scales must be exactly what
//! `dq_split_in` makes of the norm's output — written out here from its formula (the row's
//! largest |value| scaled into [2^13, 2^14) by a power of two, then each part the half
//! rounding of what the parts before it left). Rows of 896 (the 0.5B shape), 300 and 64
//! values, f32 and f16 activations, two f16 and three bf16 parts, a row of zeros and rows
//! spanning six decades.
use crate::hostemu::{self, FILE_IO, PRELUDE_BITS, THREADED};
use rlx_testutil::Rng;
use std::fmt::Write;

struct Case {
    f16: bool,
    bf16_parts: bool,
    rows: usize,
    len: usize,
}

const CASES: [Case; 4] = [
    Case {
        f16: false,
        bf16_parts: false,
        rows: 6,
        len: 896,
    },
    Case {
        f16: false,
        bf16_parts: true,
        rows: 4,
        len: 300,
    },
    Case {
        f16: true,
        bf16_parts: false,
        rows: 5,
        len: 64,
    },
    Case {
        f16: true,
        bf16_parts: true,
        rows: 3,
        len: 896,
    },
];

/// C's ilogbf for a finite nonzero f32.
fn ilogb(x: f32) -> i32 {
    let bits = x.abs().to_bits();
    let e = (bits >> 23) as i32;
    if e == 0 {
        // Subnormal: the leading one's position below 2^-126.
        -127 - (bits.leading_zeros() as i32 - 9)
    } else {
        e - 127
    }
}

/// dq_split_in's parts (as raw 16-bit words, part-major) and scale inverses of rows of `y`.
fn split(y: &[f32], rows: usize, len: usize, parts: usize, bf16: bool) -> (Vec<u16>, Vec<f32>) {
    let mut h = vec![0u16; parts * rows * len];
    let mut inv = vec![0f32; rows];
    for r in 0..rows {
        let row = &y[r * len..(r + 1) * len];
        let mx = row.iter().fold(0f32, |m, v| m.max(v.abs()));
        let e = if mx > 0.0 && mx.is_finite() {
            (13 - ilogb(mx)).clamp(-120, 120)
        } else {
            0
        };
        let s = 2f32.powi(e);
        inv[r] = 2f32.powi(-e);
        for (i, v) in row.iter().enumerate() {
            let mut left = v * s;
            for p in 0..parts {
                let (bits, back) = if bf16 {
                    let b = half::bf16::from_f32(left);
                    (b.to_bits(), b.to_f32())
                } else {
                    let b = half::f16::from_f32(left);
                    (b.to_bits(), b.to_f32())
                };
                h[(p * rows + r) * len + i] = bits;
                left -= back;
            }
        }
    }
    (h, inv)
}

#[test]
fn norm_split_is_the_norm_then_dq_split_in_bit_for_bit() {
    let Some((dir, inc)) = hostemu::workdir("norm_split") else {
        return;
    };
    let mut rng = Rng::new("norm_split_is_the_norm_then_dq_split_in_bit_for_bit");
    let mut blob: Vec<u8> = Vec::new();
    let mut main = String::from("int main() {\n  char* D = (char*)rd(\"in.bin\");\n");
    for (ci, c) in CASES.iter().enumerate() {
        let (t, sfx, es) = if c.f16 {
            ("__half", "f16", 2)
        } else {
            ("float", "f32", 4)
        };
        let (w, wsfx, parts) = if c.bf16_parts {
            ("__nv_bfloat16", "bf16", 3)
        } else {
            ("__half", "f16", 2)
        };
        let n = c.rows * c.len;
        // Row r spans 10^(r - 3): zeros in row 1, tiny and large rows around it.
        let mut x = rng.normals(n);
        for (r, row) in x.chunks_mut(c.len).enumerate() {
            let scale = if r == 1 {
                0.0
            } else {
                10f64.powi(r as i32 - 3)
            };
            row.iter_mut().for_each(|v| *v *= scale);
        }
        let g: Vec<f64> = rng.uniforms(c.len, 0.5, 1.5);
        let mut put = |v: &[f64]| hostemu::put_aligned(&mut blob, hostemu::storage_bytes(v, c.f16));
        let (ox, og) = (put(&x), put(&g));
        let v = (c.len / 4).div_ceil(32).next_power_of_two();
        let _ = write!(
            main,
            "  {{ const {t}* x = (const {t}*)(D + {ox}); const {t}* g = (const {t}*)(D + {og});\n    \
             {t}* y = ({t}*)aligned_alloc(256, {yb}); {w}* h = ({w}*)aligned_alloc(256, {hb}); float* inv = (float*)calloc({rows}, 4);\n    \
             emu_launch({rows}, 32, 0, [&] {{ norm_v{v}_{sfx}(x, nullptr, nullptr, g, nullptr, y, {rows}, {len}, 1e-6f, 1); }});\n    \
             emu_launch({rows}, 32, 0, [&] {{ norm_split_v{v}_{sfx}_{wsfx}(x, g, h, inv, {rows}, {len}, 1e-6f, {parts}); }});\n    \
             wr(\"y{ci}.bin\", y, {yb}); wr(\"h{ci}.bin\", h, {hb}); wr(\"i{ci}.bin\", inv, {rows} * 4); }}\n",
            yb = (n * es).next_multiple_of(256),
            hb = (parts * n * 2).next_multiple_of(256),
            rows = c.rows,
            len = c.len,
        );
    }
    main.push_str("  return 0;\n}\n");
    let src = hostemu::dynamic_shared(super::Lib::Norm.source());
    let text = format!(
        "{THREADED}{PRELUDE_BITS}{}\n{src}\n{FILE_IO}{main}",
        crate::kernels::COMMON
    );
    std::fs::write(dir.join("in.bin"), &blob).unwrap();
    hostemu::build_and_run(&dir, &inc, "norm_split", &text);
    let read = |name: String| std::fs::read(dir.join(name)).unwrap();
    for (ci, c) in CASES.iter().enumerate() {
        let n = c.rows * c.len;
        let yb = read(format!("y{ci}.bin"));
        let y: Vec<f32> = if c.f16 {
            (yb.chunks_exact(2).take(n))
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect()
        } else {
            (yb.chunks_exact(4).take(n))
                .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                .collect()
        };
        let parts = if c.bf16_parts { 3 } else { 2 };
        let (want_h, want_inv) = split(&y, c.rows, c.len, parts, c.bf16_parts);
        let got_h: Vec<u16> = (read(format!("h{ci}.bin")).chunks_exact(2).take(parts * n))
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        let got_inv: Vec<f32> = (read(format!("i{ci}.bin")).chunks_exact(4))
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let bad = got_h.iter().zip(&want_h).position(|(a, b)| a != b);
        assert!(bad.is_none(), "case {ci}: part word {bad:?} differs");
        assert_eq!(got_inv, want_inv, "case {ci}: row scales differ");
        assert!(
            y.iter().any(|v| *v != 0.0),
            "case {ci}: the norm wrote nothing"
        );
        println!(
            "case {ci}: {} rows of {} ({} activations, {parts} {} parts): parts and scales equal",
            c.rows,
            c.len,
            if c.f16 { "f16" } else { "f32" },
            if c.bf16_parts { "bf16" } else { "f16" }
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
