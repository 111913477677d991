//! Host emulation of the f32 tensor-core forward (`attn_x3_*` in kernels/attention_x3.cu):
//! whole blocks of fibers (`hostemu::THREADED`) with `mma.sync.m16n8k8` TF32 written out for
//! the host — each lane's fragments published, a warp barrier, every lane's four outputs
//! from the 16 × 8 × 8 product of the values the fragment layout places there — and
//! `cvt.rna.tf32` as round-to-nearest (ties away) to 10 mantissa bits. Against an f64
//! reference: causal, sliding-window, custom keep mask and no mask, grouped KV heads, a KV
//! cache with a run-time `past` and stale rows behind it, a logit cap, partial query and key
//! tiles, every head size, warp count and key tile. The bound (2e-5 of 1 + |value|) is far
//! below what one TF32 product a product would give (about 5e-4): it shows the three-term
//! split at work.
use crate::hostemu::{self, FILE_IO, PRELUDE_BITS, THREADED};
use rlx_testutil::Rng;
use std::fmt::Write;

/// The emulated helpers the kernel's body uses in place of inline PTX and cp.async.
const X3_EMU: &str = r#"
#define __expf expf
static unsigned att_tf32(float x) {
    unsigned u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x1000u;
    return u & 0xffffe000u;
}
static unsigned emu_ma[1024][4], emu_mb[1024][2];
static float emu_tf(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
// A[r][c] sits in lane (r % 8) * 4 + c % 4, register (r >= 8) + 2 (c >= 4); B[c][n] in lane
// n * 4 + c % 4, register (c >= 4); C[r][n] in lane (r % 8) * 4 + n / 2, register
// 2 (r >= 8) + n % 2.
static void att_mma_tf32(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    const unsigned t = threadIdx.x, w = t & ~31u, lane = t & 31u, g = lane >> 2, t4 = lane & 3u;
    for (int i = 0; i < 4; ++i) emu_ma[t][i] = a[i];
    emu_mb[t][0] = b0;
    emu_mb[t][1] = b1;
    __syncwarp();
    float r[4];
    for (int e = 0; e < 4; ++e) {
        const unsigned row = g + (e >= 2 ? 8 : 0), n = 2 * t4 + (e & 1);
        double acc = c[e];
        for (unsigned kk = 0; kk < 8; ++kk) {
            const float av = emu_tf(emu_ma[w + (row % 8) * 4 + kk % 4][(row >= 8) + 2 * (kk >= 4)]);
            const float bv = emu_tf(emu_mb[w + n * 4 + kk % 4][kk >= 4]);
            acc += (double)av * (double)bv;
        }
        r[e] = (float)acc;
    }
    __syncwarp();
    for (int e = 0; e < 4; ++e) c[e] = r[e];
}
template <typename T, int D, int DS>
static void att_cp_tile(T* dst, const T* src, i64 sstride, int nrows, int nvalid) {
    for (int idx = threadIdx.x; idx < nrows * D; idx += blockDim.x) {
        const int r = idx / D, c = idx - r * D;
        dst[r * DS + c] = r < nvalid ? src[(i64)r * sstride + c] : (T)0;
    }
}
static inline void att_cp_commit() {}
template <int N> static inline void att_cp_wait() {}
"#;

struct Case {
    heads: usize,
    kv_heads: usize,
    d: usize,
    sq: usize,
    /// Keys in the buffers; with `past` only `past + sq` of them are valid.
    sk: usize,
    past: Option<usize>,
    /// 0 none, 1 causal, 2 sliding (window), 3 custom keep mask.
    mask: i32,
    window: usize,
    cap: f32,
    warps: usize,
    bk: usize,
    /// The warps split the keys of one 16-row tile (`attn_x3s_*`).
    split: bool,
}

const CASES: [Case; 10] = [
    Case {
        heads: 2,
        kv_heads: 1,
        d: 64,
        sq: 40,
        sk: 40,
        past: None,
        mask: 1,
        window: 0,
        cap: 0.0,
        warps: 2,
        bk: 32,
        split: false,
    },
    Case {
        heads: 2,
        kv_heads: 2,
        d: 32,
        sq: 20,
        sk: 80,
        past: Some(50),
        mask: 1,
        window: 0,
        cap: 0.0,
        warps: 1,
        bk: 64,
        split: false,
    },
    Case {
        heads: 1,
        kv_heads: 1,
        d: 128,
        sq: 33,
        sk: 33,
        past: None,
        mask: 2,
        window: 9,
        cap: 0.0,
        warps: 4,
        bk: 32,
        split: false,
    },
    Case {
        heads: 4,
        kv_heads: 2,
        d: 64,
        sq: 17,
        sk: 45,
        past: None,
        mask: 3,
        window: 0,
        cap: 3.0,
        warps: 1,
        bk: 32,
        split: false,
    },
    Case {
        heads: 1,
        kv_heads: 1,
        d: 64,
        sq: 16,
        sk: 100,
        past: None,
        mask: 0,
        window: 0,
        cap: 0.0,
        warps: 4,
        bk: 64,
        split: false,
    },
    Case {
        heads: 3,
        kv_heads: 1,
        d: 128,
        sq: 70,
        sk: 70,
        past: None,
        mask: 1,
        window: 0,
        cap: 0.0,
        warps: 2,
        bk: 64,
        split: false,
    },
    Case {
        heads: 2,
        kv_heads: 1,
        d: 64,
        sq: 40,
        sk: 40,
        past: None,
        mask: 1,
        window: 0,
        cap: 0.0,
        warps: 4,
        bk: 32,
        split: true,
    },
    Case {
        heads: 2,
        kv_heads: 2,
        d: 32,
        sq: 20,
        sk: 80,
        past: Some(50),
        mask: 1,
        window: 0,
        cap: 0.0,
        warps: 2,
        bk: 64,
        split: true,
    },
    Case {
        heads: 4,
        kv_heads: 2,
        d: 64,
        sq: 17,
        sk: 45,
        past: None,
        mask: 3,
        window: 0,
        cap: 3.0,
        warps: 4,
        bk: 64,
        split: true,
    },
    Case {
        heads: 1,
        kv_heads: 1,
        d: 128,
        sq: 33,
        sk: 33,
        past: None,
        mask: 2,
        window: 9,
        cap: 0.0,
        warps: 2,
        bk: 32,
        split: true,
    },
];

/// The f64 reference (Bshd layout, batch 1): logits scaled, capped, masked; a row with no
/// key is zeros.
fn reference(c: &Case, q: &[f64], k: &[f64], v: &[f64], keep: &[bool]) -> Vec<f64> {
    let (h, hk, d) = (c.heads, c.kv_heads, c.d);
    let valid = c.past.map_or(c.sk, |p| p + c.sq);
    let scale = (1.0 / (d as f64).sqrt()) as f32 as f64;
    let mut out = vec![0.0; c.sq * h * d];
    for i in 0..c.sq {
        let pos = valid - c.sq + i;
        for hh in 0..h {
            let kh = hh / (h / hk);
            let seen: Vec<usize> = (0..valid)
                .filter(|&j| match c.mask {
                    1 => j <= pos,
                    2 => j <= pos && j + c.window > pos,
                    3 => keep[j],
                    _ => true,
                })
                .collect();
            if seen.is_empty() {
                continue;
            }
            let logit = |j: usize| {
                let dot: f64 = (0..d)
                    .map(|e| q[(i * h + hh) * d + e] * k[(j * hk + kh) * d + e])
                    .sum();
                let s = dot * scale;
                if c.cap > 0.0 {
                    c.cap as f64 * (s / c.cap as f64).tanh()
                } else {
                    s
                }
            };
            let l: Vec<f64> = seen.iter().map(|&j| logit(j)).collect();
            let mx = l.iter().cloned().fold(f64::MIN, f64::max);
            let p: Vec<f64> = l.iter().map(|s| (s - mx).exp()).collect();
            let z: f64 = p.iter().sum();
            for (t, &j) in seen.iter().enumerate() {
                for e in 0..d {
                    out[(i * h + hh) * d + e] += p[t] / z * v[(j * hk + kh) * d + e];
                }
            }
        }
    }
    out
}

#[test]
fn x3_attention_matches_f64_on_the_host() {
    let Some((dir, inc)) = hostemu::workdir("attn_x3") else {
        return;
    };
    let mut rng = Rng::new("x3_attention_matches_f64_on_the_host");
    let mut blob: Vec<u8> = Vec::new();
    let put = |v: &[f64], blob: &mut Vec<u8>| {
        hostemu::put_aligned(blob, hostemu::storage_bytes(v, false))
    };
    let mut main = String::from(
        "int main() {\n  char* D = (char*)rd(\"in.bin\");\n  long long* P = (long long*)calloc(8, 8);\n",
    );
    let mut wants = Vec::new();
    for (ci, c) in CASES.iter().enumerate() {
        let (h, hk, d, sq, sk) = (c.heads, c.kv_heads, c.d, c.sq, c.sk);
        let r32 = |v: Vec<f64>| -> Vec<f64> { v.iter().map(|&x| x as f32 as f64).collect() };
        // Logits of a few units: the softmax weighs many keys, none dominates.
        let q = r32(rng.normals(sq * h * d).iter().map(|x| 2.0 * x).collect());
        let k = r32(rng.normals(sk * hk * d));
        let v = r32(rng.normals(sk * hk * d));
        let keep: Vec<bool> = rng
            .uniforms(sk, 0.0, 1.0)
            .iter()
            .map(|&u| u < 0.6)
            .collect();
        let (oq, ok, ov) = (put(&q, &mut blob), put(&k, &mut blob), put(&v, &mut blob));
        let okeep = hostemu::put_aligned(&mut blob, keep.iter().map(|&b| b as u8));
        wants.push(reference(c, &q, &k, &v, &keep));
        let rows = if c.split { 16 } else { 16 * c.warps };
        let smem = (rows + 4 * c.bk) * (d + 4) * 4 + 2 * c.bk * 4;
        let tiles = sq.div_ceil(rows);
        let past = match c.past {
            Some(p) => format!("P[{ci}] = {p}; a.past = (unsigned long long)(P + {ci});"),
            None => String::new(),
        };
        let keep_ptr = if c.mask == 3 {
            format!("(const u8*)(D + {okeep})")
        } else {
            "nullptr".into()
        };
        let _ = write!(
            main,
            "  {{ float* out = (float*)calloc({n}, 4);\n    AttnArgs a = {{}};\n    \
             a.q_b = {n}; a.q_h = {d}; a.q_s = {qs};\n    a.k_b = {kn}; a.k_h = {d}; a.k_s = {ks};\n    \
             a.v_b = {kn}; a.v_h = {d}; a.v_s = {ks};\n    a.o_b = {n}; a.o_h = {d}; a.o_s = {qs};\n    \
             a.heads = {h}; a.group = {grp}; a.sq = {sq}; a.sk = {sk}; a.d = {d}; a.dv = {d};\n    \
             a.mask = {mask}; a.window = {win}; a.scale = {scale:e}f; a.cap = {cap:e}f; a.vec = 7; {past}\n    \
             emu_launch2({h}, {tiles}, {threads}, {smem}, [&] {{ {kind}_d{d}_w{w}_k{bk}_f32(\
             (const float*)(D + {oq}), (const float*)(D + {ok}), (const float*)(D + {ov}), {keep_ptr}, out, a); }});\n    \
             wr(\"out{ci}.bin\", out, {n} * 4); }}\n",
            n = sq * h * d,
            qs = h * d,
            kn = sk * hk * d,
            ks = hk * d,
            grp = h / hk,
            mask = c.mask,
            win = c.window,
            scale = (1.0 / (d as f64).sqrt()) as f32,
            cap = c.cap,
            threads = 32 * c.warps,
            w = c.warps,
            bk = c.bk,
            kind = if c.split { "attn_x3s" } else { "attn_x3" },
        );
    }
    main.push_str("  return 0;\n}\n");
    let src = super::Lib::Attention.source();
    let mma = src
        .find("// ---- tensor-core forward")
        .expect("attention.cu's mma part");
    let body = src.find("// ---- x3 body").expect("attention_x3.cu's body");
    let split = src
        .find("// ---- decode: split over keys")
        .expect("attention_decode.cu");
    let src = hostemu::dynamic_shared(&format!("{}{}", &src[..mma], &src[body..split]));
    let text = format!(
        "{THREADED}{PRELUDE_BITS}{}\n{X3_EMU}\n{src}\n{FILE_IO}{main}",
        crate::kernels::COMMON
    );
    std::fs::write(dir.join("in.bin"), &blob).unwrap();
    hostemu::build_and_run(&dir, &inc, "attn_x3", &text);
    for (ci, want) in wants.iter().enumerate() {
        let got = hostemu::read_f32s(&dir, &format!("out{ci}.bin"));
        let worst = hostemu::worst_error(&got, want);
        let c = &CASES[ci];
        println!(
            "case {ci} (heads {}/{}, D {}, sq {}, keys {}, past {:?}, mask {} window {}, cap {}, \
             {} warps, key tile {}, keys split {}): worst output error {worst:.2e}",
            c.heads,
            c.kv_heads,
            c.d,
            c.sq,
            c.sk,
            c.past,
            c.mask,
            c.window,
            c.cap,
            c.warps,
            c.bk,
            c.split
        );
        assert!(
            worst < 2e-5,
            "case {ci}: attention output differs ({worst:.2e})"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
