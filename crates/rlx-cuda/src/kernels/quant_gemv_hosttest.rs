//! Host emulation of whole decode GEMV kernels (`dq_gemv_st_*` in kernels/quant.cu): every
//! thread of every block runs as a fiber with real barriers and shuffles (`hostemu::THREADED`),
//! over the launch shapes the lowering tunes among (lanes per column, warps a block, full and
//! row-striding grids, whole-block rows), the fused norm / SwiGLU / residual, M = 1 and M > 1,
//! f32 and half activations, against an f64 product of rlx-cpu's dequantised rows. This checks
//! the kernels' indexing, staging, reductions and grid stride on any machine, before a GPU
//! runs them (the GPU parity suite then checks the compiled code against the CPU).
use super::hosttest::packed;
use super::scheme_name;
use crate::hostemu::{self, FILE_IO as IO, PRELUDE_BITS, THREADED};
use crate::kernels::Sfx;
use rlx_ir::QuantScheme;
use rlx_testutil::Rng;
use std::fmt::Write;

/// One kernel launch of the emulation and what it must produce.
struct Case {
    what: String,
    /// The C++ statement that launches it.
    call: String,
    /// y's offset (bytes) in the output blob, and its element count and dtype.
    y: usize,
    want: Vec<f64>,
    /// Per output: Σ_k |h_k·w_k| + |res|, the scale of its f32 rounding.
    mag: Vec<f64>,
    sfx: Sfx,
}

/// The fused prologue / epilogue of one case.
#[derive(Clone, Copy)]
struct Fusion {
    norm: bool,
    /// 1: x's rows are [gate | up], 2: [up | gate].
    glu: i32,
    residual: bool,
}

const FUSIONS: [Fusion; 5] = [
    Fusion {
        norm: false,
        glu: 0,
        residual: false,
    },
    Fusion {
        norm: true,
        glu: 0,
        residual: false,
    },
    Fusion {
        norm: true,
        glu: 0,
        residual: true,
    },
    Fusion {
        norm: false,
        glu: 1,
        residual: true,
    },
    Fusion {
        norm: false,
        glu: 2,
        residual: false,
    },
];

/// Values as the activation dtype stores them (what the kernel reads), and their bytes.
fn stored(vals: &[f64], sfx: Sfx) -> (Vec<f64>, Vec<u8>) {
    let mut bytes = Vec::new();
    let mut back = Vec::with_capacity(vals.len());
    for &v in vals {
        match sfx {
            Sfx::F16 => {
                let h = half::f16::from_f64(v);
                back.push(h.to_f64());
                bytes.extend_from_slice(&h.to_le_bytes());
            }
            Sfx::BF16 => {
                let h = half::bf16::from_f64(v);
                back.push(h.to_f64());
                bytes.extend_from_slice(&h.to_le_bytes());
            }
            _ => {
                let f = v as f32;
                back.push(f as f64);
                bytes.extend_from_slice(&f.to_le_bytes());
            }
        }
    }
    (back, bytes)
}

fn ctype(sfx: Sfx) -> &'static str {
    match sfx {
        Sfx::F16 => "__half",
        Sfx::BF16 => "__nv_bfloat16",
        _ => "float",
    }
}

/// Inputs in one blob (each array 256-byte aligned, as device allocations are).
#[derive(Default)]
struct Blob(Vec<u8>);

impl Blob {
    fn put(&mut self, b: &[u8]) -> usize {
        let off = self.0.len();
        self.0.extend_from_slice(b);
        self.0.resize(self.0.len().next_multiple_of(256), 0);
        off
    }
}

/// The data of one product: weight, x, gamma, residual, and the f64 reference.
struct Product {
    scheme: QuantScheme,
    /// The weight stored in the planar row layout (crate::planar), read by the `..p` kernels.
    planar: bool,
    sfx: Sfx,
    f: Fusion,
    m: usize,
    n: usize,
    k: usize,
    off: [usize; 4],
    want: Vec<f64>,
    mag: Vec<f64>,
}

const EPS: f64 = 1e-5;

fn product(
    rng: &mut Rng,
    blob: &mut Blob,
    (scheme, planar): (QuantScheme, bool),
    sfx: Sfx,
    f: Fusion,
    mnk: [usize; 3],
) -> Product {
    let [m, n, k] = mnk;
    let w = packed(rng, scheme, n, k);
    let wv = rlx_cpu::quant::dequantize(scheme, &w, n, k).unwrap();
    let xk = if f.glu != 0 { 2 * k } else { k };
    let (x, xb) = stored(&rng.normals(m * xk), sfx);
    let g0: Vec<f64> = rng.normals(k).iter().map(|v| 1.0 + 0.3 * v).collect();
    let (gamma, gb) = stored(&g0, sfx);
    let (res, rb) = stored(&rng.normals(m * n), sfx);
    let stored_w = if planar {
        crate::planar::pack(scheme, &w, k / 32 * scheme.block_bytes())
    } else {
        w.clone()
    };
    let off = [
        blob.put(&stored_w),
        blob.put(&xb),
        blob.put(&gb),
        blob.put(&rb),
    ];
    let (mut want, mut mag) = (Vec::new(), Vec::new());
    for r in 0..m {
        let xr = &x[r * xk..(r + 1) * xk];
        let h: Vec<f64> = if f.glu != 0 {
            let (gate, up) = if f.glu == 1 {
                (&xr[..k], &xr[k..])
            } else {
                (&xr[k..], &xr[..k])
            };
            (0..k)
                .map(|i| up[i] * gate[i] / (1.0 + (-gate[i]).exp()))
                .collect()
        } else if f.norm {
            let ms = xr.iter().map(|v| v * v).sum::<f64>() / k as f64;
            let s = 1.0 / (ms + EPS).sqrt();
            (0..k).map(|i| xr[i] * s * gamma[i]).collect()
        } else {
            xr.to_vec()
        };
        for c in 0..n {
            let row = &wv[c * k..(c + 1) * k];
            let (mut d, mut a) = (0.0, 0.0);
            for i in 0..k {
                let p = h[i] * row[i] as f64;
                d += p;
                a += p.abs();
            }
            let rr = if f.residual { res[r * n + c] } else { 0.0 };
            want.push(d + rr);
            mag.push(a + rr.abs());
        }
    }
    Product {
        scheme,
        planar,
        sfx,
        f,
        m,
        n,
        k,
        off,
        want,
        mag,
    }
}

/// Lanes a column, warps a block, blocks (0: one per `cols` rows, as the lowering's first
/// grid), units a lane holds.
type Shape = (usize, usize, usize, u32);

/// The launch statement of `p` in `shape`, y at `y`.
fn launch(p: &Product, (lpr, warps, grid, depth): Shape, y: usize) -> (String, String) {
    let t = ctype(p.sfx);
    let tag = match (p.m, depth) {
        (1, 2) => "m1".to_string(),
        (1, d) => format!("m1d{d}"),
        _ => "m8".to_string(),
    };
    let wname = format!(
        "{}{}",
        scheme_name(p.scheme),
        if p.planar { "p" } else { "" }
    );
    // lpr 0: the warp-per-column kernel, `warps` columns a block.
    let name = if lpr == 0 {
        format!("dq_gemv_{wname}_{}", p.sfx.name())
    } else {
        format!("dq_gemv_st_{wname}_{tag}_{}", p.sfx.name())
    };
    let cols = (32 * warps).checked_div(lpr).map_or(warps, |c| c.max(1));
    let blocks = if grid == 0 { p.n.div_ceil(cols) } else { grid };
    let smem = if lpr == 0 {
        0
    } else {
        (p.m * (p.k / 32) * 36 + 32) * 4
    };
    let [w, x, g, r] = p.off;
    let gamma = if p.f.norm {
        format!("(const {t}*)(D + {g})")
    } else {
        "nullptr".into()
    };
    let res = if p.f.residual {
        format!("(const {t}*)(D + {r})")
    } else {
        "nullptr".into()
    };
    let tail = if lpr == 0 {
        String::new()
    } else {
        format!(", {}, {lpr}", p.f.glu)
    };
    let call = format!(
        "  emu_launch({blocks}, {}, {smem}, [&] {{ {name}((const {t}*)(D + {x}), (const u8*)(D + {w}), \
         ({t}*)(Y + {y}), {gamma}, {res}, {}, {}, {}, {EPS:e}f{tail}); }});\n",
        32 * warps,
        p.m,
        p.n,
        p.k,
    );
    let what = format!(
        "{name} m={} n={} k={} norm={} glu={} residual={} lpr={lpr} warps={warps} grid={blocks} \
         depth={depth}",
        p.m, p.n, p.k, p.f.norm, p.f.glu, p.f.residual
    );
    (what, call)
}

/// The launch statement of the tile-staged kernel (`dq_gemv_ts`, one f32 row) for `p`, with
/// `ch` 16-byte words a thread and `lpr` lanes a row, as the lowering sizes its tiles.
fn launch_ts(p: &Product, lpr: usize, ch: u32, y: usize) -> Option<(String, String)> {
    let rb = p.k / p.scheme.block_len() * p.scheme.block_bytes();
    let bytes = ch as usize * 256 * 16;
    let tile = bytes.saturating_sub(30) / rb;
    if tile == 0 {
        return None;
    }
    let blocks = p.n.div_ceil(tile);
    let smem = (p.k / 32) * 36 * 4 + 32 * 4 + bytes;
    let [w, x, g, r] = p.off;
    let gamma = if p.f.norm {
        format!("(const float*)(D + {g})")
    } else {
        "nullptr".into()
    };
    let res = if p.f.residual {
        format!("(const float*)(D + {r})")
    } else {
        "nullptr".into()
    };
    let name = format!("dq_gemv_ts_{}_c{ch}_f32", scheme_name(p.scheme));
    let call = format!(
        "  emu_launch({blocks}, 256, {smem}, [&] {{ {name}((const float*)(D + {x}), (const u8*)(D + {w}), \
         (float*)(Y + {y}), {gamma}, {res}, {}, {}, {EPS:e}f, {}, {lpr}, {tile}, {}); }});\n",
        p.n,
        p.k,
        p.f.glu,
        p.n * rb,
    );
    let what = format!(
        "{name} n={} k={} norm={} glu={} residual={} lpr={lpr} tile={tile} grid={blocks}",
        p.n, p.k, p.f.norm, p.f.glu, p.f.residual
    );
    Some((what, call))
}

#[test]
fn staged_gemv_kernels_match_f64_on_the_host() {
    let Some((dir, inc)) = hostemu::workdir("gsk") else {
        return;
    };
    let mut rng = Rng::new("staged_gemv_kernels_match_f64_on_the_host");
    let mut blob = Blob::default();
    let mut cases: Vec<Case> = Vec::new();
    // y's next free offset (a Cell: both adders below advance it).
    let ybytes = std::cell::Cell::new(0usize);
    let push = |p: &Product, (what, call): (String, String), cases: &mut Vec<Case>| {
        cases.push(Case {
            what,
            call,
            y: ybytes.get(),
            want: p.want.clone(),
            mag: p.mag.clone(),
            sfx: p.sfx,
        });
        ybytes.set((ybytes.get() + p.want.len() * 4).next_multiple_of(256));
    };
    let add = |p: &Product, shape: Shape, cases: &mut Vec<Case>| {
        push(p, launch(p, shape, ybytes.get()), cases)
    };
    // Every launch shape the lowering tries, on rows long enough for whole-block rows (64
    // units), more rows than one pass of the small grid covers.
    let narrow = [(4, 8), (8, 8), (16, 8), (32, 8), (16, 4), (32, 4)];
    let wide = [(64, 2), (128, 4), (256, 8)];
    for scheme in [QuantScheme::Q5_0, QuantScheme::Q4_K] {
        for f in [FUSIONS[2], FUSIONS[3]] {
            let p = product(
                &mut rng,
                &mut blob,
                (scheme, false),
                Sfx::F32,
                f,
                [1, 150, 2048],
            );
            for &d in super::gemv_depths(scheme, Sfx::F32, 1) {
                for &(lpr, warps) in &narrow {
                    add(&p, (lpr, warps, 0, d), &mut cases);
                    add(&p, (lpr, warps, 1, d), &mut cases);
                }
                for &(lpr, warps) in &wide {
                    add(&p, (lpr, warps, 3, d), &mut cases);
                }
            }
        }
    }
    // Every scheme with every fusion and register depth, one row and several.
    for scheme in QuantScheme::ALL {
        for f in FUSIONS {
            for m in [1, 5] {
                let p = product(
                    &mut rng,
                    &mut blob,
                    (scheme, false),
                    Sfx::F32,
                    f,
                    [m, 70, 512],
                );
                for &d in super::gemv_depths(scheme, Sfx::F32, m) {
                    add(&p, (8, 4, 0, d), &mut cases);
                }
            }
        }
    }
    // The planar layout's kernels (f32 activations), and the warp-per-column kernel in both
    // layouts (no SwiGLU there).
    for scheme in QuantScheme::ALL {
        if !crate::planar::eligible(scheme, 16 * scheme.block_bytes()) {
            continue;
        }
        for planar in [false, true] {
            for f in [FUSIONS[0], FUSIONS[2], FUSIONS[3]] {
                for m in [1, 5] {
                    let wq = (scheme, planar);
                    let p = product(&mut rng, &mut blob, wq, Sfx::F32, f, [m, 70, 512]);
                    if planar {
                        for &d in super::gemv_depths(scheme, Sfx::F32, m) {
                            add(&p, (8, 4, 0, d), &mut cases);
                            add(&p, (32, 8, 1, d), &mut cases);
                        }
                    }
                    if f.glu == 0 {
                        add(&p, (0, 4, 0, 2), &mut cases);
                    }
                }
            }
        }
    }
    // The tile-staged kernel: every scheme and fusion, the smallest and largest tile, 4 and
    // 32 lanes a row; rows of 3 units (66 bytes of Q5_0) put tile starts off 16-byte
    // boundaries and leave a tail of under 16 bytes at the weight's end.
    for scheme in QuantScheme::ALL {
        let ks: &[usize] = if scheme.block_len() == 256 {
            &[512]
        } else {
            &[96, 896]
        };
        for &k in ks {
            for f in FUSIONS {
                let p = product(
                    &mut rng,
                    &mut blob,
                    (scheme, false),
                    Sfx::F32,
                    f,
                    [1, 70, k],
                );
                for (ch, lpr) in [(1, 4), (1, 32), (6, 8)] {
                    if let Some(l) = launch_ts(&p, lpr, ch, ybytes.get()) {
                        push(&p, l, &mut cases);
                    }
                }
            }
        }
    }
    // Half activations (x, gamma, residual and y in f16 / bf16).
    for sfx in [Sfx::F16, Sfx::BF16] {
        for scheme in [QuantScheme::Q4_1, QuantScheme::Q6_K, QuantScheme::BF16] {
            for (f, m) in [(FUSIONS[2], 1), (FUSIONS[3], 3)] {
                let p = product(&mut rng, &mut blob, (scheme, false), sfx, f, [m, 40, 512]);
                add(&p, (16, 8, 1, 2), &mut cases);
            }
        }
    }
    let ybytes = ybytes.get();
    let mut main = format!(
        "int main() {{\n  const char* D = rd(\"data.bin\");\n  char* Y = (char*)malloc({ybytes});\n  \
         memset(Y, 0xff, {ybytes});\n"
    );
    for c in &cases {
        main.push_str(&c.call);
    }
    let _ = write!(main, "  wr(\"y.bin\", Y, {ybytes});\n  return 0;\n}}\n");
    let src = hostemu::dynamic_shared(super::Lib::Quant.source());
    let text = format!(
        "{THREADED}{PRELUDE_BITS}{}\n{src}\n{IO}{main}",
        crate::kernels::COMMON
    );
    std::fs::write(dir.join("data.bin"), &blob.0).unwrap();
    hostemu::build_and_run(&dir, &inc, "gsk", &text);
    let y = std::fs::read(dir.join("y.bin")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let mut failed = Vec::new();
    let mut worst = 0.0f64;
    for c in &cases {
        // The output's own rounding (half activations), and f32 sums over K products.
        let ulp = match c.sfx {
            Sfx::F16 => 1.0 / 2048.0,
            Sfx::BF16 => 1.0 / 256.0,
            _ => 0.0,
        };
        let size = if ulp > 0.0 { 2 } else { 4 };
        for (i, (&want, &mag)) in c.want.iter().zip(&c.mag).enumerate() {
            let b = &y[c.y + i * size..c.y + (i + 1) * size];
            let got = match c.sfx {
                Sfx::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
                Sfx::BF16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f64(),
                _ => f32::from_le_bytes(b.try_into().unwrap()) as f64,
            };
            let err = (got - want).abs();
            let bound = 1e-5 * mag + ulp * want.abs();
            if err.is_nan() || err > bound {
                failed.push(format!(
                    "{} output {i}: got {got}, f64 {want} (bound {bound:.2e})",
                    c.what
                ));
            }
            if ulp == 0.0 {
                worst = worst.max(err / mag.max(1e-30));
            }
        }
    }
    println!(
        "{} launches emulated; worst f32 error {worst:.2e} of Σ|h·w| + |res|",
        cases.len()
    );
    hostemu::assert_none_failed(&failed, "outputs");
}
