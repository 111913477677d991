//! Host emulation of the staged decode GEMV's block decoders (`GsUnit<S>` in kernels/quant.cu):
//! every scheme's `load` + `dot` of each 32-value unit of a few packed rows, compiled for the
//! host by g++, against an f64 dot of rlx-cpu's dequantised rows with the same staged values.
//! The decoders turn quants into floats by byte permutes, fold biases into the permute's
//! constant and spread fifth bits by multiplies; this checks that arithmetic (and the unit →
//! byte mapping of every layout) on any machine, before a GPU runs it. Rows are random bytes
//! with finite random scales, so every quant pattern occurs.
use crate::hostemu::{self, FILE_IO as IO, PRELUDE, PRELUDE_BITS};
use rlx_ir::QuantScheme;
use rlx_testutil::Rng;
use std::fmt::Write;

/// Units (32 values) per row: 8 super-blocks of the K-quants.
const UNITS: usize = 64;
const ROWS: usize = 3;
/// Floats a staged unit takes in shared memory (quant.cu's GS_STRIDE).
const STRIDE: usize = 36;

/// quant.cu's name of a scheme (its `#define`): the Rust name, `S` after the half ones.
fn cuda_name(s: QuantScheme) -> String {
    match s {
        QuantScheme::F16 | QuantScheme::BF16 => format!("{s:?}S"),
        _ => format!("{s:?}"),
    }
}

fn put_half(dst: &mut [u8], v: f64) {
    dst.copy_from_slice(&half::f16::from_f64(v).to_le_bytes());
}

/// `rows` packed rows of random bytes whose f16 scale fields hold finite random values.
pub(super) fn packed(rng: &mut Rng, s: QuantScheme, rows: usize, k: usize) -> Vec<u8> {
    let (bb, bl) = (s.block_bytes(), s.block_len());
    let mut w: Vec<u8> = (0..rows * k / bl * bb)
        .map(|_| rng.next_u64() as u8)
        .collect();
    for b in w.chunks_exact_mut(bb) {
        let scale = |rng: &mut Rng| rng.range(-0.05, 0.05);
        match s {
            QuantScheme::F16 => {
                for v in b.chunks_exact_mut(2) {
                    let x = rng.normal();
                    put_half(v, x);
                }
            }
            QuantScheme::BF16 => {
                for v in b.chunks_exact_mut(2) {
                    let x = half::bf16::from_f64(rng.normal());
                    v.copy_from_slice(&x.to_le_bytes());
                }
            }
            QuantScheme::Q6_K => put_half(&mut b[208..210], scale(rng)),
            _ => {
                put_half(&mut b[0..2], scale(rng));
                if matches!(
                    s,
                    QuantScheme::Q4_1 | QuantScheme::Q5_1 | QuantScheme::Q4_K | QuantScheme::Q5_K
                ) {
                    put_half(&mut b[2..4], scale(rng));
                }
            }
        }
    }
    w
}

#[test]
fn staged_gemv_units_match_dequantized_dots() {
    let Some((dir, inc)) = hostemu::workdir("gs") else {
        return;
    };
    let mut rng = Rng::new("staged_gemv_units_match_dequantized_dots");
    let k = UNITS * 32;
    // The staged values: UNITS units of STRIDE floats (the padding is never read).
    let h: Vec<f32> = (0..UNITS * STRIDE).map(|_| rng.normal() as f32).collect();
    let mut bytes = Vec::new();
    let mut main = String::from(
        "int main() {\n  const char* W = rd(\"w.bin\");\n  const float4* H = (const float4*)rd(\"h.bin\");\n  \
         float* O = (float*)calloc(OUTS, 4);\n",
    );
    let mut want: Vec<(QuantScheme, Vec<f64>, Vec<f64>)> = Vec::new();
    for (i, &s) in QuantScheme::ALL.iter().enumerate() {
        let w = packed(&mut rng, s, ROWS, k);
        let vals = rlx_cpu::quant::dequantize(s, &w, ROWS, k).unwrap();
        let (mut dot, mut mag) = (Vec::new(), Vec::new());
        for r in 0..ROWS {
            for u in 0..UNITS {
                let (mut d, mut m) = (0.0f64, 0.0f64);
                for e in 0..32 {
                    let p = vals[r * k + u * 32 + e] as f64 * h[u * STRIDE + e] as f64;
                    d += p;
                    m += p.abs();
                }
                dot.push(d);
                mag.push(m);
            }
        }
        let rb = w.len() / ROWS;
        let _ = writeln!(
            main,
            "  for (int r = 0; r < {ROWS}; ++r)\n    for (int u = 0; u < {UNITS}; ++u) {{\n      \
             GsUnit<{}> g;\n      g.load((const u8*)W + {} + r * {rb}, u, {UNITS});\n      \
             O[{} + r * {UNITS} + u] = g.dot(H + u * {});\n    }}",
            cuda_name(s),
            bytes.len(),
            i * ROWS * UNITS,
            STRIDE / 4
        );
        bytes.extend_from_slice(&w);
        // Each scheme's rows start 256-byte aligned, as a device allocation does.
        bytes.resize(bytes.len().next_multiple_of(256), 0);
        want.push((s, dot, mag));
    }
    let outs = QuantScheme::ALL.len() * ROWS * UNITS;
    main.push_str("  wr(\"out.bin\", O, OUTS * 4);\n  return 0;\n}\n");
    let src = super::Lib::Quant.source();
    let cut = src
        .find("// R: the lane keeps R units")
        .expect("quant.cu's staged GEMV");
    let io = format!("#define OUTS {outs}\n{IO}");
    let text = format!(
        "{PRELUDE}{PRELUDE_BITS}{}\n{WHOLE_FILE}{}\n{io}{main}",
        crate::kernels::COMMON,
        &src[..cut]
    );
    std::fs::write(dir.join("w.bin"), &bytes).unwrap();
    let hb: Vec<u8> = h.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("h.bin"), hb).unwrap();
    hostemu::build_and_run(&dir, &inc, "gs", &text);
    let out = std::fs::read(dir.join("out.bin")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let got: Vec<f32> = out
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let mut failed = Vec::new();
    for (i, (s, dot, mag)) in want.iter().enumerate() {
        let mut worst = 0.0f64;
        for (j, (&d, &m)) in dot.iter().zip(mag).enumerate() {
            let g = got[i * ROWS * UNITS + j] as f64;
            // 32 products summed in f32 (and a scale applied): a few units of f32 rounding of
            // the magnitude sum.
            let err = (g - d).abs() / (m + 1e-30);
            if !err.is_finite() || err > 1e-5 {
                failed.push(format!(
                    "{s:?} row {} unit {}: got {g}, f64 {d} (Σ|w·h| {m})",
                    j / UNITS,
                    j % UNITS
                ));
            }
            worst = worst.max(err);
        }
        println!(
            "{s:?}: {} units, worst error {worst:.2e} of Σ|w·h|",
            dot.len()
        );
    }
    hostemu::assert_none_failed(&failed, "units");
}

/// Host stand-ins for what the whole of quant.cu needs beyond the unit decoders: shared
/// memory as plain storage (one emulated thread a block) and the staged GEMV's dynamic array.
const WHOLE_FILE: &str = "#define __shared__
float4 gs_sh4[64];
";

/// `dq_split_w` (decode and split in one pass) writes exactly the bytes of `dq_dequant` to
/// f32 followed by `dq_split_in` with two f16 parts, for every quantized scheme, and the
/// parts times the row scale give back rlx-cpu's dequantised values to 22 bits. Each kernel
/// runs with one thread per block, blocks in turn.
#[test]
fn fused_weight_split_equals_dequant_then_split() {
    let Some((dir, inc)) = hostemu::workdir("split") else {
        return;
    };
    let mut rng = Rng::new("fused_weight_split_equals_dequant_then_split");
    let (rows, k) = (5usize, 512usize);
    let schemes: Vec<QuantScheme> = QuantScheme::ALL
        .into_iter()
        .filter(|s| !s.is_half())
        .collect();
    let mut bytes = Vec::new();
    let mut want = Vec::new();
    let mut planar = Vec::new();
    let mut main = String::from(
        "int main() {\n  const char* W = rd(\"w.bin\");\n  float* wf = (float*)calloc(ROWS * K, 4);\n  \
         __half* ho = (__half*)calloc(2 * ROWS * K, 2);\n  __half* hn = (__half*)calloc(2 * ROWS * K, 2);\n  \
         float* io = (float*)calloc(ROWS, 4);\n  float* in = (float*)calloc(ROWS, 4);\n  \
         float* wp = (float*)calloc(ROWS * K, 4);\n  blockDim.x = 1;\n  gridDim.x = 1;\n",
    );
    for (i, &s) in schemes.iter().enumerate() {
        let w = packed(&mut rng, s, rows, k);
        want.push(rlx_cpu::quant::dequantize(s, &w, rows, k).unwrap());
        let name = super::scheme_name(s);
        let _ = writeln!(
            main,
            "  {{ const u8* w = (const u8*)W + {off};\n    blockIdx.x = 0;\n    \
             dq_dequant_{name}_f32(w, wf, ROWS, K);\n    \
             for (unsigned r = 0; r < ROWS; ++r) {{ blockIdx.x = r; dq_split_in_f32_f16(wf, ho, io, ROWS, K, 2, 0); }}\n    \
             for (unsigned r = 0; r < ROWS; ++r) {{ blockIdx.x = r; dq_split_w_{name}(w, hn, in, ROWS, K); }}\n    \
             wr(\"old{i}.bin\", ho, 2 * ROWS * K * 2); wr(\"new{i}.bin\", hn, 2 * ROWS * K * 2);\n    \
             wr(\"iold{i}.bin\", io, ROWS * 4); wr(\"inew{i}.bin\", in, ROWS * 4);\n    \
             wr(\"dq{i}.bin\", wf, ROWS * K * 4); }}",
            off = bytes.len()
        );
        bytes.extend_from_slice(&w);
        bytes.resize(bytes.len().next_multiple_of(256), 0);
        // The same rows in the planar layout: the same decoded values and split parts.
        let rb = k / s.block_len() * s.block_bytes();
        if crate::planar::eligible(s, rb) {
            let _ = writeln!(
                main,
                "  {{ const u8* w = (const u8*)W + {off};\n    blockIdx.x = 0;\n    \
                 dq_dequant_{name}p_f32(w, wp, ROWS, K);\n    \
                 for (unsigned r = 0; r < ROWS; ++r) {{ blockIdx.x = r; dq_split_w_{name}p(w, hn, in, ROWS, K); }}\n    \
                 wr(\"pdq{i}.bin\", wp, ROWS * K * 4); wr(\"pnew{i}.bin\", hn, 2 * ROWS * K * 2);\n    \
                 wr(\"pinew{i}.bin\", in, ROWS * 4); }}",
                off = bytes.len()
            );
            bytes.extend_from_slice(&crate::planar::pack(s, &w, rb));
            bytes.resize(bytes.len().next_multiple_of(256), 0);
            planar.push(i);
        }
    }
    main.push_str("  return 0;\n}\n");
    let text = format!(
        "{PRELUDE}{PRELUDE_BITS}{}\n{WHOLE_FILE}{}\n#define ROWS {rows}\n#define K {k}\n{IO}{main}",
        crate::kernels::COMMON,
        super::Lib::Quant.source()
    );
    std::fs::write(dir.join("w.bin"), &bytes).unwrap();
    hostemu::build_and_run(&dir, &inc, "split", &text);
    let read = |f: String| std::fs::read(dir.join(f)).unwrap();
    let halves = |b: &[u8]| -> Vec<f64> {
        b.chunks_exact(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
            .collect()
    };
    for (i, s) in schemes.iter().enumerate() {
        let (old, new) = (read(format!("old{i}.bin")), read(format!("new{i}.bin")));
        let (iold, inew) = (read(format!("iold{i}.bin")), read(format!("inew{i}.bin")));
        assert!(old == new, "{s:?}: the fused split's parts differ");
        assert!(iold == inew, "{s:?}: the fused split's row scales differ");
        let parts = halves(&new);
        let mut worst = 0.0f64;
        for r in 0..rows {
            let inv = f32::from_le_bytes(inew[4 * r..4 * r + 4].try_into().unwrap()) as f64;
            let row = &want[i][r * k..(r + 1) * k];
            let big = row.iter().fold(0f64, |a, &v| a.max((v as f64).abs()));
            for c in 0..k {
                let back = (parts[r * k + c] + parts[(rows + r) * k + c]) * inv;
                let err = (back - row[c] as f64).abs() / big.max(1e-30);
                assert!(
                    err <= 1e-6,
                    "{s:?} row {r} col {c}: parts give {back}, the value is {}",
                    row[c]
                );
                worst = worst.max(err);
            }
        }
        println!("{s:?}: fused split = dequant + split, bit for bit; worst part error {worst:.1e} of the row's largest");
        if planar.contains(&i) {
            assert!(
                read(format!("pdq{i}.bin")) == read(format!("dq{i}.bin")),
                "{s:?}: the planar rows decode to other values"
            );
            assert!(
                read(format!("pnew{i}.bin")) == new && read(format!("pinew{i}.bin")) == inew,
                "{s:?}: the planar rows split differently"
            );
            println!("{s:?} planar: the same decoded values and split parts, bit for bit");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The split that computes the down projection's SwiGLU itself (`dq_split_in` with glu 1 / 2)
/// writes the bytes of `dq_swiglu` followed by the plain split, for f32 and f16 activations
/// and both half orders, and its parts times the row scale give back silu(gate)·up (f64) to
/// the split's 22 bits. One emulated thread a block, blocks in turn.
#[test]
fn swiglu_split_equals_swiglu_then_split() {
    let Some((dir, inc)) = hostemu::workdir("glusplit") else {
        return;
    };
    let mut rng = Rng::new("swiglu_split_equals_swiglu_then_split");
    let (rows, k) = (4usize, 300usize);
    let x: Vec<f32> = (0..rows * 2 * k)
        .map(|_| rng.range(-6.0, 6.0) as f32)
        .collect();
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("x.bin"), &bytes).unwrap();
    let mut main = String::from(
        "int main() {\n  const float* X = (const float*)rd(\"x.bin\");\n  \
         __half* xh = (__half*)calloc(ROWS * 2 * K, 2);\n  \
         for (int i = 0; i < ROWS * 2 * K; ++i) xh[i] = __float2half_rn(X[i]);\n  \
         float* hf = (float*)calloc(ROWS * K, 4);\n  __half* hh = (__half*)calloc(ROWS * K, 2);\n  \
         __half* po = (__half*)calloc(2 * ROWS * K, 2);\n  __half* pn = (__half*)calloc(2 * ROWS * K, 2);\n  \
         float* io = (float*)calloc(ROWS, 4);\n  float* in = (float*)calloc(ROWS, 4);\n  \
         blockDim.x = 1;\n  gridDim.x = 1;\n",
    );
    for glu in [1, 2] {
        for (sfx, src, h) in [("f32", "X", "hf"), ("f16", "xh", "hh")] {
            let _ = writeln!(
                main,
                "  {{ blockIdx.x = 0; dq_swiglu_{sfx}({src}, {h}, ROWS, K, {glu});\n    \
                 for (unsigned r = 0; r < ROWS; ++r) {{ blockIdx.x = r; dq_split_in_{sfx}_f16({h}, po, io, ROWS, K, 2, 0); }}\n    \
                 for (unsigned r = 0; r < ROWS; ++r) {{ blockIdx.x = r; dq_split_in_{sfx}_f16({src}, pn, in, ROWS, K, 2, {glu}); }}\n    \
                 wr(\"o_{sfx}{glu}.bin\", po, 2 * ROWS * K * 2); wr(\"n_{sfx}{glu}.bin\", pn, 2 * ROWS * K * 2);\n    \
                 wr(\"io_{sfx}{glu}.bin\", io, ROWS * 4); wr(\"in_{sfx}{glu}.bin\", in, ROWS * 4); }}"
            );
        }
    }
    main.push_str("  return 0;\n}\n");
    let text = format!(
        "{PRELUDE}{PRELUDE_BITS}{}\n{WHOLE_FILE}{}\n#define ROWS {rows}\n#define K {k}\n{IO}{main}",
        crate::kernels::COMMON,
        super::Lib::Quant.source()
    );
    hostemu::build_and_run(&dir, &inc, "glusplit", &text);
    let read = |f: String| std::fs::read(dir.join(f)).unwrap();
    for glu in [1usize, 2] {
        for sfx in ["f32", "f16"] {
            let (old, new) = (
                read(format!("o_{sfx}{glu}.bin")),
                read(format!("n_{sfx}{glu}.bin")),
            );
            let (iold, inew) = (
                read(format!("io_{sfx}{glu}.bin")),
                read(format!("in_{sfx}{glu}.bin")),
            );
            assert!(
                old == new,
                "{sfx} glu {glu}: the fused split's parts differ"
            );
            assert!(
                iold == inew,
                "{sfx} glu {glu}: the fused split's row scales differ"
            );
            let parts: Vec<f64> = (new.chunks_exact(2))
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64())
                .collect();
            let mut worst = 0.0f64;
            for r in 0..rows {
                let inv = f32::from_le_bytes(inew[4 * r..4 * r + 4].try_into().unwrap()) as f64;
                let at = |c: usize| {
                    let v = x[r * 2 * k + c];
                    if sfx == "f16" {
                        half::f16::from_f32(v).to_f64()
                    } else {
                        v as f64
                    }
                };
                let want: Vec<f64> = (0..k)
                    .map(|c| {
                        let (g, u) = if glu == 1 {
                            (at(c), at(k + c))
                        } else {
                            (at(k + c), at(c))
                        };
                        u * g / (1.0 + (-g).exp())
                    })
                    .collect();
                let big = want.iter().fold(0f64, |a, v| a.max(v.abs()));
                // f16 activations: dq_swiglu rounds each value to f16 first (2^-11 relative).
                let tol = if sfx == "f16" { 1e-3 } else { 1e-6 };
                for c in 0..k {
                    let back = (parts[r * k + c] + parts[(rows + r) * k + c]) * inv;
                    let err = (back - want[c]).abs() / big.max(1e-30);
                    assert!(
                        err <= tol,
                        "{sfx} glu {glu} row {r} col {c}: {back} vs {}",
                        want[c]
                    );
                    worst = worst.max(err);
                }
            }
            println!("{sfx} glu {glu}: fused = swiglu + split, bit for bit; worst error {worst:.1e} of the row's largest");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The split products' sums (`dq_split_out`, `dq_split2_out`) give the bits of their formulas
/// summed in order, on rows whose length is a multiple of 4 (four columns a thread, 16-byte
/// loads) and on rows that are not, with and without a residual, from grids sized for
/// columns or for quads (emulated with 3 threads in one block).
#[test]
fn split_sums_are_their_formulas_bit_for_bit() {
    let Some((dir, inc)) = hostemu::workdir("splitsum") else {
        return;
    };
    let mut rng = Rng::new("split_sums_are_their_formulas_bit_for_bit");
    let (m, parts) = (3usize, 2usize);
    let cases = [8usize, 6];
    let mut vals: Vec<f32> = Vec::new();
    let mut main = String::from(
        "int main() {\n  const float* V = (const float*)rd(\"v.bin\");\n  float* out = (float*)calloc(4096, 4);\n  \
         gridDim.x = 1;\n  blockDim.x = 3;\n",
    );
    let mut want: Vec<(String, Vec<f32>)> = Vec::new();
    let fill = |vals: &mut Vec<f32>, n: usize, rng: &mut Rng| -> usize {
        let at = vals.len().next_multiple_of(4);
        vals.resize(at, 0.0);
        vals.extend((0..n).map(|_| rng.range(-3.0, 3.0) as f32));
        at
    };
    for &n in &cases {
        for with_res in [false, true] {
            let y = fill(&mut vals, parts * m * n, &mut rng);
            let inv_at = vals.len();
            vals.extend((0..m).map(|r| [0.25f32, 2.0, 0.0078125][r]));
            let res = fill(&mut vals, m * n, &mut rng);
            let mut w = Vec::new();
            for r in 0..m {
                for c in 0..n {
                    let mut t = 0f32;
                    for p in (0..parts).rev() {
                        t += vals[y + p * m * n + r * n + c];
                    }
                    let rv = if with_res { vals[res + r * n + c] } else { 0.0 };
                    w.push(t * vals[inv_at + r] + rv);
                }
            }
            let tag = format!("s{n}{with_res}");
            let resp = if with_res {
                format!("V + {res}")
            } else {
                "nullptr".into()
            };
            let _ = writeln!(
                main,
                "  memset(out, 0, 4096 * 4);\n  for (unsigned t = 0; t < 3; ++t) {{ threadIdx.x = t; \
                 dq_split_out_f32(V + {y}, V + {inv_at}, out, {resp}, {m}, {n}, {parts}); }}\n  \
                 wr(\"{tag}.bin\", out, {} * 4);",
                m * n
            );
            want.push((tag, w));
            // dq_split2_out: a chunk of `n` weight rows at column n0 of an output 2n wide.
            let (rows, ldo, n0) = (n, 2 * n, n);
            let y2 = fill(&mut vals, 2 * m * 2 * rows, &mut rng);
            let ix = vals.len();
            vals.extend((0..m).map(|r| [0.5f32, 4.0, 0.125][r]));
            let iw = fill(&mut vals, rows, &mut rng);
            for c in 0..rows {
                vals[iw + c] = [0.25f32, 1.0, 8.0, 0.5][c % 4];
            }
            let res2 = fill(&mut vals, m * ldo, &mut rng);
            let mut w = vec![0f32; m * ldo];
            for r in 0..m {
                for c in 0..rows {
                    let (hi, lo) = (y2 + r * 2 * rows, y2 + (m + r) * 2 * rows);
                    let t =
                        ((vals[lo + rows + c] + vals[lo + c]) + vals[hi + rows + c]) + vals[hi + c];
                    let o = r * ldo + n0 + c;
                    let rv = if with_res { vals[res2 + o] } else { 0.0 };
                    w[o] = t * vals[ix + r] * vals[iw + c] + rv;
                }
            }
            let tag = format!("q{n}{with_res}");
            let resp = if with_res {
                format!("V + {res2}")
            } else {
                "nullptr".into()
            };
            let _ = writeln!(
                main,
                "  memset(out, 0, 4096 * 4);\n  for (unsigned t = 0; t < 3; ++t) {{ threadIdx.x = t; \
                 dq_split2_out_f32(V + {y2}, V + {ix}, V + {iw}, out, {resp}, {m}, {rows}, {ldo}, {n0}); }}\n  \
                 wr(\"{tag}.bin\", out, {} * 4);",
                m * ldo
            );
            want.push((tag, w));
        }
    }
    main.push_str("  return 0;\n}\n");
    let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("v.bin"), &bytes).unwrap();
    let text = format!(
        "{PRELUDE}{PRELUDE_BITS}{}\n{WHOLE_FILE}{}\n{IO}{main}",
        crate::kernels::COMMON,
        super::Lib::Quant.source()
    );
    hostemu::build_and_run(&dir, &inc, "splitsum", &text);
    for (tag, w) in want {
        let got: Vec<f32> = std::fs::read(dir.join(format!("{tag}.bin")))
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let same = got.iter().zip(&w).all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{tag}: got {got:?}\nwant {w:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
