//! Host emulation of `qkv_rope_cache_*` (kernels/shape_ops.cu), the prefill's q/k/v out of
//! the fused product in one launch: its q scratch and both caches hold exactly the bytes that
//! the narrows' copies followed by `rope` (q), `rope_cache_write` (k) and `cache_write` (v)
//! leave, with the cos/sin views [`plan`] computes. Cases: f32 and f16 activations, both
//! rotation styles, a partial rotation, two batch rows with their own cache blocks, a product
//! wider than q + k + v, and a position past the caches' end (no cache row written, q still
//! rotated).
use super::{plan, DevTensor, Dims8};
use crate::hostemu::{self, FILE_IO, PRELUDE, PRELUDE_BITS};
use rlx_ir::{DType, RopeStyle};
use rlx_testutil::Rng;
use std::fmt::Write;

struct Case {
    f16: bool,
    b: usize,
    s: usize,
    heads: usize,
    kv_heads: usize,
    hd: usize,
    n_rot: usize,
    style: RopeStyle,
    /// Extra columns of the product after v.
    pad: usize,
    cap: usize,
    pos: i64,
}

const CASES: [Case; 4] = [
    Case {
        f16: false,
        b: 1,
        s: 5,
        heads: 4,
        kv_heads: 2,
        hd: 8,
        n_rot: 8,
        style: RopeStyle::Half,
        pad: 0,
        cap: 12,
        pos: 3,
    },
    Case {
        f16: true,
        b: 2,
        s: 3,
        heads: 2,
        kv_heads: 1,
        hd: 8,
        n_rot: 4,
        style: RopeStyle::Interleaved,
        pad: 4,
        cap: 7,
        pos: 2,
    },
    Case {
        f16: false,
        b: 1,
        s: 4,
        heads: 3,
        kv_heads: 3,
        hd: 4,
        n_rot: 4,
        style: RopeStyle::Interleaved,
        pad: 2,
        cap: 9,
        pos: 5,
    },
    Case {
        f16: true,
        b: 1,
        s: 4,
        heads: 2,
        kv_heads: 1,
        hd: 8,
        n_rot: 8,
        style: RopeStyle::Half,
        pad: 0,
        cap: 6,
        pos: 4,
    },
];

fn dims8(d: &Dims8) -> String {
    let list = |v: &[i64]| {
        v.iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("{{{}, 0, {{{}}}, {{{}}}}}", d.rank, list(&d.d), list(&d.s))
}

#[test]
fn qkv_rope_cache_writes_the_bytes_of_narrows_rope_and_cache_writes() {
    let Some((dir, inc)) = hostemu::workdir("qkv_rope") else {
        return;
    };
    let mut rng = Rng::new("qkv_rope_cache_writes_the_bytes_of_narrows_rope_and_cache_writes");
    let mut main = String::from("int main() {\n  char* D = (char*)rd(\"in.bin\");\n");
    let mut blob: Vec<u8> = Vec::new();
    for (ci, c) in CASES.iter().enumerate() {
        let (t, es, xs) = if c.f16 {
            ("__half", 2, "f16")
        } else {
            ("float", 4, "f32")
        };
        let (nq, nk) = (c.heads * c.hd, c.kv_heads * c.hd);
        let w = nq + 2 * nk + c.pad;
        let rows = c.b * c.s;
        let half = c.n_rot / 2;
        let x = hostemu::storage_bytes(&rng.normals(rows * w), c.f16);
        let ox = hostemu::put_aligned(&mut blob, x);
        let ang = rng.uniforms(c.s * half, -3.0, 3.0);
        let table: Vec<f32> = (ang.iter().map(|a| a.cos() as f32))
            .chain(ang.iter().map(|a| a.sin() as f32))
            .collect();
        let otab = hostemu::put_aligned(&mut blob, table.iter().flat_map(|v| v.to_le_bytes()));
        // Stale cache contents the kernels must leave outside the written rows.
        let stale = (0..2 * c.b * c.cap * nk * es).map(|_| rng.next_u64() as u8);
        let ocache = hostemu::put_aligned(&mut blob, stale.collect::<Vec<_>>());

        let dt = if c.f16 { DType::F16 } else { DType::F32 };
        let tensor = |dims: Vec<usize>, dtype| DevTensor {
            ptr: 0,
            dims,
            dtype,
        };
        let q = tensor(vec![c.b, c.s, nq], dt);
        let k = tensor(vec![c.b, c.s, nk], dt);
        let cos = tensor(vec![c.s, 1, half], DType::F32);
        let cfg = (c.hd, c.n_rot, c.style);
        let pq = plan(&q, &cos, &cos, &q, cfg).unwrap();
        let pk = plan(&k, &cos, &cos, &k, cfg).unwrap();
        let (cvq, cvk) = (dims8(&pq.cv), dims8(&pk.cv));
        let _ = write!(
            main,
            "  {{ const {t}* x = (const {t}*)(D + {ox});\n    \
             const float* cs = (const float*)(D + {otab}); const float* sn = cs + {tn};\n    \
             long long pos = {pos};\n    size_t cb = {cn} * sizeof({t});\n    \
             {t}* kc0 = ({t}*)malloc(cb); {t}* vc0 = ({t}*)malloc(cb); {t}* kc1 = ({t}*)malloc(cb); {t}* vc1 = ({t}*)malloc(cb);\n    \
             memcpy(kc0, D + {ocache}, cb); memcpy(vc0, D + {ocache} + cb, cb); memcpy(kc1, kc0, cb); memcpy(vc1, vc0, cb);\n    \
             {t}* q0 = ({t}*)calloc({qn}, sizeof({t})); {t}* q1 = ({t}*)calloc({qn}, sizeof({t}));\n    \
             {t}* qn_ = ({t}*)malloc({qn} * sizeof({t})); {t}* kn_ = ({t}*)malloc({kn} * sizeof({t})); {t}* vn_ = ({t}*)malloc({kn} * sizeof({t}));\n    \
             for (int r = 0; r < {rows}; ++r) {{ memcpy(qn_ + r * {nq}, x + r * {w}, {nq} * sizeof({t}));\n      \
             memcpy(kn_ + r * {nk}, x + r * {w} + {nq}, {nk} * sizeof({t})); memcpy(vn_ + r * {nk}, x + r * {w} + {nq} + {nk}, {nk} * sizeof({t})); }}\n    \
             Dims8 cvq = {cvq}, cvk = {cvk};\n    \
             rope_{xs}_f32(qn_, cs, sn, q0, cvq, {qr}, {hd}, {nrot}, {style});\n    \
             rope_cache_write_{xs}_f32(kc0, kn_, &pos, cs, sn, cvk, {b}, {cap}, {s}, {nk}, {hd}, {nrot}, {style});\n    \
             cache_write_b{es}(({u}*)vc0, (const {u}*)vn_, &pos, {b}, {cap}, {s}, {nk});\n    \
             QkvArgs a = {{{rows}, {s}, {cap}, {w}, 0, {nq}, {nq}, {nk}, {ok2}, {nk}, {hd}, {nrot}, {style}, 0}};\n    \
             qkv_rope_cache_{xs}_f32(x, q1, kc1, vc1, &pos, cs, sn, cvq, cvk, a);\n    \
             wr(\"q0_{ci}.bin\", q0, {qn} * sizeof({t})); wr(\"q1_{ci}.bin\", q1, {qn} * sizeof({t}));\n    \
             wr(\"k0_{ci}.bin\", kc0, cb); wr(\"k1_{ci}.bin\", kc1, cb); wr(\"v0_{ci}.bin\", vc0, cb); wr(\"v1_{ci}.bin\", vc1, cb); }}\n",
            tn = c.s * half,
            pos = c.pos,
            cn = c.b * c.cap * nk,
            qn = rows * nq,
            kn = rows * nk,
            rows = rows,
            qr = rows * c.heads,
            hd = c.hd,
            nrot = c.n_rot,
            style = pq.style,
            b = c.b,
            cap = c.cap,
            s = c.s,
            ok2 = nq + nk,
            u = if c.f16 { "u16" } else { "u32" },
        );
    }
    main.push_str("  return 0;\n}\n");
    // The unit types and macros, then CacheWrite through the RoPE kernels (the rest of the library
    // uses shared memory and is not needed here).
    let lib = crate::kernels::Lib::ShapeOps.source();
    let head = lib
        .find("// Offset of row-major")
        .expect("shape_ops.cu's unit types");
    let units = &lib[..head];
    let from = lib
        .find("// ---- CacheWrite")
        .expect("shape_ops.cu's CacheWrite");
    let to = lib
        .find("RLX_FLOAT_TYPES(RLX_ROPE_COS)")
        .expect("shape_ops.cu's RoPE kernels");
    let src = format!("{units}{}RLX_FLOAT_TYPES(RLX_ROPE_COS)\n", &lib[from..to]);
    let text = format!(
        "{PRELUDE}{PRELUDE_BITS}{}\n{src}\n{FILE_IO}{main}",
        crate::kernels::COMMON
    );
    std::fs::write(dir.join("in.bin"), &blob).unwrap();
    hostemu::build_and_run(&dir, &inc, "qkv_rope", &text);
    let read = |name: String| std::fs::read(dir.join(name)).unwrap();
    for (ci, c) in CASES.iter().enumerate() {
        for part in ["q", "k", "v"] {
            let (want, got) = (
                read(format!("{part}0_{ci}.bin")),
                read(format!("{part}1_{ci}.bin")),
            );
            let bad = want.iter().zip(&got).position(|(a, b)| a != b);
            assert!(
                bad.is_none(),
                "case {ci} ({} activations, pos {}): {part} differs at byte {bad:?}",
                if c.f16 { "f16" } else { "f32" },
                c.pos
            );
        }
        println!(
            "case {ci}: b {} s {} heads {}/{} hd {} n_rot {} {:?} pos {} (cap {}): q, k and v caches equal",
            c.b, c.s, c.heads, c.kv_heads, c.hd, c.n_rot, c.style, c.pos, c.cap
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
