//! Host emulation of the fused decode attention (`attn_split_cw_f32` in kernels/attention.cu,
//! what a CachedAttention step runs): whole blocks of fibers (`hostemu::THREADED`) with the
//! grid the lowering plans — one block per (query row, chunk of keys), the chunks' partials
//! merged by the last block of a row to take its ticket — against an f64 reference: q and
//! this call's k rotated, keys before the position read from the caches and the new ones from
//! the staged rows, causal and sliding-window ranges, grouped KV heads, one and several
//! chunks, head sizes 64 and 128 (8 and 16 lanes a key). Also checks the new rows landed in
//! the caches and every ticket is back to zero for the next replay.
use crate::hostemu::{self, FILE_IO, PRELUDE_BITS, THREADED};
use rlx_testutil::Rng;
use std::fmt::Write;

/// The lowering's block size and chunk planning (lower/transformer_attention.rs).
const THREADS: usize = 128;
const SPLIT_TARGET_BLOCKS: usize = 1024;

struct Case {
    heads: usize,
    kv_heads: usize,
    d: usize,
    sq: usize,
    cap: usize,
    p0: usize,
    /// 0: causal, else a sliding window of this many keys.
    window: usize,
}

/// Offsets (floats) of one case's arrays in the input blob.
struct Layout {
    q: usize,
    kn: usize,
    vn: usize,
    kc: usize,
    vc: usize,
    cs: usize,
    sn: usize,
}

const CASES: [Case; 4] = [
    Case {
        heads: 4,
        kv_heads: 2,
        d: 64,
        sq: 1,
        cap: 600,
        p0: 37,
        window: 0,
    },
    Case {
        heads: 4,
        kv_heads: 2,
        d: 64,
        sq: 1,
        cap: 600,
        p0: 530,
        window: 0,
    },
    Case {
        heads: 2,
        kv_heads: 1,
        d: 128,
        sq: 2,
        cap: 700,
        p0: 300,
        window: 0,
    },
    Case {
        heads: 4,
        kv_heads: 4,
        d: 64,
        sq: 1,
        cap: 600,
        p0: 420,
        window: 50,
    },
];

fn rope(x: &[f64], cs: &[f64], sn: &[f64]) -> Vec<f64> {
    let half = x.len() / 2;
    (0..x.len())
        .map(|e| {
            let i = e % half;
            if e < half {
                x[e] * cs[i] - x[e + half] * sn[i]
            } else {
                x[e] * cs[i] + x[e - half] * sn[i]
            }
        })
        .collect()
}

#[test]
fn fused_decode_attention_matches_f64_on_the_host() {
    let Some((dir, inc)) = hostemu::workdir("attn") else {
        return;
    };
    let mut rng = Rng::new("fused_decode_attention_matches_f64_on_the_host");
    let mut blob: Vec<f32> = Vec::new();
    // Each array 256-byte aligned, as device allocations are.
    let put = |v: &[f64], blob: &mut Vec<f32>| {
        let off = blob.len();
        blob.extend(v.iter().map(|&x| x as f32));
        blob.resize(blob.len().next_multiple_of(64), 0.0);
        off
    };
    let mut main = String::from(
        "int main() {\n  float* D = (float*)rd(\"in.bin\");\n  long long* P = (long long*)calloc(8, 8);\n",
    );
    let mut wants = Vec::new();
    for (ci, c) in CASES.iter().enumerate() {
        let (h, hk, d, sq, cap, p0) = (c.heads, c.kv_heads, c.d, c.sq, c.cap, c.p0);
        // The values as the kernel reads them (f32), in f64.
        let r32 = |v: Vec<f64>| -> Vec<f64> { v.iter().map(|&x| x as f32 as f64).collect() };
        let q = r32(rng.normals(sq * h * d));
        let kn = r32(rng.normals(sq * hk * d));
        let vn = r32(rng.normals(sq * hk * d));
        // Rows at and past p0 hold stale values the kernel must not read.
        let kc = r32(rng.normals(cap * hk * d));
        let vc = r32(rng.normals(cap * hk * d));
        let ang = rng.uniforms(sq * d / 2, -3.0, 3.0);
        let cs = r32(ang.iter().map(|a| a.cos()).collect());
        let sn = r32(ang.iter().map(|a| a.sin()).collect());
        let l = Layout {
            q: put(&q, &mut blob),
            kn: put(&kn, &mut blob),
            vn: put(&vn, &mut blob),
            kc: put(&kc, &mut blob),
            vc: put(&vc, &mut blob),
            cs: put(&cs, &mut blob),
            sn: put(&sn, &mut blob),
        };
        let half = d / 2;
        let tab = |r: usize| (&cs[r * half..(r + 1) * half], &sn[r * half..(r + 1) * half]);
        // Rotated new keys, per (row, kv head); the keys a query sees.
        let knr: Vec<Vec<f64>> = (0..sq * hk)
            .map(|x| {
                let (r, kh) = (x / hk, x % hk);
                let (c0, s0) = tab(r);
                r32(rope(&kn[(r * hk + kh) * d..][..d], c0, s0))
            })
            .collect();
        let key = |j: usize, kh: usize| -> (&[f64], &[f64]) {
            if j < p0 {
                (&kc[(j * hk + kh) * d..][..d], &vc[(j * hk + kh) * d..][..d])
            } else {
                let r = j - p0;
                (&knr[r * hk + kh], &vn[(r * hk + kh) * d..][..d])
            }
        };
        let mut out = vec![0.0; sq * h * d];
        for i in 0..sq {
            let pos = p0 + i;
            let lo = if c.window > 0 {
                (pos + 1).saturating_sub(c.window)
            } else {
                0
            };
            for hh in 0..h {
                let kh = hh / (h / hk);
                let (c0, s0) = tab(i);
                let qr = r32(rope(&q[(i * h + hh) * d..][..d], c0, s0));
                let logits: Vec<f64> = (lo..=pos)
                    .map(|j| qr.iter().zip(key(j, kh).0).map(|(a, b)| a * b).sum::<f64>())
                    .map(|s| s / (d as f64).sqrt())
                    .collect();
                let mx = logits.iter().cloned().fold(f64::MIN, f64::max);
                let p: Vec<f64> = logits.iter().map(|s| (s - mx).exp()).collect();
                let z: f64 = p.iter().sum();
                for (t, j) in (lo..=pos).enumerate() {
                    let v = key(j, kh).1;
                    for e in 0..d {
                        out[(i * h + hh) * d + e] += p[t] / z * v[e];
                    }
                }
            }
        }
        // The lowering's plan for this shape.
        let rows = sq * h;
        let want_blocks = SPLIT_TARGET_BLOCKS.div_ceil(rows).max(1);
        let chunk = cap.div_ceil(want_blocks).clamp(256, 4096).div_ceil(32) * 32;
        let nsplit = cap.div_ceil(chunk).max(1);
        let groups = THREADS / (d / 8);
        let body =
            (4 * (d.div_ceil(4) * 4 + chunk + 32 + 4 * THREADS)).max(4 * groups * (d + 2)) / 4;
        let stage = body.div_ceil(4) * 4;
        let smem = 4 * (stage + d.div_ceil(4) * 4 + sq * 2 * d);
        let mask = if c.window > 0 { 2 } else { 1 };
        let _ = write!(
            main,
            "  {{ P[{ci}] = {p0};\n    float* out = (float*)calloc({n}, 4);\n    \
             float* part = (float*)calloc({pn}, 4);\n    unsigned* ticket = (unsigned*)calloc({rows}, 4);\n    \
             AttnArgs a = {{}};\n    a.q_b = {qb}; a.q_h = {d}; a.q_s = {qs};\n    \
             a.k_b = {kb}; a.k_h = {d}; a.k_s = {ks};\n    a.v_b = {kb}; a.v_h = {d}; a.v_s = {ks};\n    \
             a.o_b = {qb}; a.o_h = {d}; a.o_s = {qs};\n    a.heads = {h}; a.group = {g}; a.sq = {sq}; a.sk = {cap};\n    \
             a.d = {d}; a.dv = {d}; a.mask = {mask}; a.window = {win};\n    a.scale = {scale:e}f; a.cap = 0.f;\n    \
             a.vec = 15; a.chunk = {chunk}; a.nsplit = {nsplit}; a.past = (unsigned long long)(P + {ci});\n    \
             AttnCw c = {{}};\n    c.kn = (unsigned long long)(D + {okn}); c.vn = (unsigned long long)(D + {ovn});\n    \
             c.cs = (unsigned long long)(D + {ocs}); c.sn = (unsigned long long)(D + {osn});\n    \
             c.kn_b = {nb}; c.kn_h = {d}; c.kn_s = {ks}; c.vn_b = {nb}; c.vn_h = {d}; c.vn_s = {ks};\n    \
             c.n_rot = {d}; c.style = 0; c.stage = {stage};\n    \
             emu_launch2({rows}, {nsplit}, {THREADS}, {smem}, [&] {{ attn_split_cw_f32(D + {oq}, D + {okc}, D + {ovc}, \
             nullptr, out, part, ticket, a, c); }});\n    \
             wr(\"out{ci}.bin\", out, {n} * 4);\n    wr(\"kc{ci}.bin\", D + {okc}, {cn} * 4);\n    \
             wr(\"vc{ci}.bin\", D + {ovc}, {cn} * 4);\n    wr(\"t{ci}.bin\", ticket, {rows} * 4); }}\n",
            n = sq * h * d,
            pn = rows * nsplit * (d + 2),
            qb = sq * h * d,
            qs = h * d,
            kb = cap * hk * d,
            ks = hk * d,
            nb = sq * hk * d,
            g = h / hk,
            win = c.window,
            scale = 1.0 / (d as f64).sqrt(),
            okn = l.kn,
            ovn = l.vn,
            ocs = l.cs,
            osn = l.sn,
            oq = l.q,
            okc = l.kc,
            ovc = l.vc,
            cn = cap * hk * d,
        );
        // The caches afterwards: the new rows (k rotated) at p0.
        let mut kc2 = kc.clone();
        let mut vc2 = vc.clone();
        for r in 0..sq {
            for kh in 0..hk {
                let at = ((p0 + r) * hk + kh) * d;
                kc2[at..at + d].copy_from_slice(&knr[r * hk + kh]);
                vc2[at..at + d].copy_from_slice(&vn[(r * hk + kh) * d..][..d]);
            }
        }
        wants.push((out, kc2, vc2, nsplit));
    }
    main.push_str("  return 0;\n}\n");
    let src = super::Lib::Attention.source();
    let mma = src
        .find("// ---- tensor-core forward")
        .expect("attention.cu's mma part");
    let split = src
        .find("// ---- decode: split over keys")
        .expect("attention.cu's split part");
    // The tensor-core part is inline PTX; the decode kernels do not use it.
    let src = hostemu::dynamic_shared(&format!("{}{}", &src[..mma], &src[split..]));
    let text = format!(
        "{THREADED}{PRELUDE_BITS}{}\n{src}\n{FILE_IO}{main}",
        crate::kernels::COMMON
    );
    let bytes: Vec<u8> = blob.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(dir.join("in.bin"), bytes).unwrap();
    hostemu::build_and_run(&dir, &inc, "attn", &text);
    let floats = |name: String| hostemu::read_f32s(&dir, &name);
    for (ci, (out, kc, vc, nsplit)) in wants.iter().enumerate() {
        let got = floats(format!("out{ci}.bin"));
        let worst = hostemu::worst_error(&got, out);
        let c = &CASES[ci];
        println!(
            "case {ci} (heads {}/{}, D {}, sq {}, position {}, window {}, {nsplit} chunk(s) planned): \
             worst output error {worst:.2e}",
            c.heads, c.kv_heads, c.d, c.sq, c.p0, c.window
        );
        assert!(
            worst < 2e-5,
            "case {ci}: attention output differs ({worst:.2e})"
        );
        for (name, want) in [("kc", kc), ("vc", vc)] {
            let got = floats(format!("{name}{ci}.bin"));
            let bad = got
                .iter()
                .zip(want)
                .position(|(g, w)| (g - w).abs() > 1e-5 * (1.0 + w.abs()));
            assert!(bad.is_none(), "case {ci}: {name} differs at {bad:?}");
        }
        let t = std::fs::read(dir.join(format!("t{ci}.bin"))).unwrap();
        assert!(
            t.iter().all(|&b| b == 0),
            "case {ci}: a ticket was left set"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
