//! Case table of the linalg group: MatMul, FusedMatMulBiasAct, DequantMatMul, with plain-loop
//! f64 oracles (`linalg_oracle`). Each op holds the union of the three old suites: the CPU
//! oracle suite's shapes and dtypes, the parity suite's (every float dtype, operands scaled
//! so outputs stay O(1)), and the gradcheck suite's. Sums of products are compared against
//! the sums over |terms| (`Case::sums`). Big-shape launch tests stay in the CUDA test files.
use super::elementwise::{act_ref, graph};
pub use super::linalg_oracle::*;
use super::numel;
use crate::case::{Case, Draw, Input};
use crate::Rng;
use rlx_ir::{Activation, DType, OpKind, OpKindSet, QuantScheme};

/// Every float dtype (cuBLASLt runs f64 in double).
pub const ALL: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
/// The float dtypes of the DequantMatMul kernels.
pub const HALVES_AND_F32: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

/// Normals divided by √K, K the last dim of the input (keeps matmul outputs O(1)).
fn scaled_normals(k: usize) -> Draw {
    Draw::Normal(1.0 / (k as f64).sqrt())
}

/// Gradchecks on small operands only (finite differences cost four runs per element).
fn small(c: &Case) -> bool {
    c.inputs.iter().map(|i| numel(&i.dims)).sum::<usize>() <= 300
}

// ---- matmul ----

/// `a @ b` in NumPy semantics, the graph's inferred shape checked against the oracle's.
fn matmul_case(ash: &'static [usize], bsh: &'static [usize], parity_suite: bool) -> Case {
    let k = ash[ash.len() - 1];
    // The oracle suite drew plain normals; the parity suite scaled a by 1/√K.
    let a = Input::new(
        "a",
        ash,
        if parity_suite {
            scaled_normals(k)
        } else {
            Draw::Normal(1.0)
        },
    )
    .gpu(scaled_normals(k))
    .grad(Draw::Normal(1.0));
    let b = Input::new("b", bsh, Draw::Normal(1.0));
    let dims = matmul_dims(ash, bsh);
    let out = dims.clone();
    let c = Case::new(format!("matmul {ash:?} @ {bsh:?}"), vec![a, b], move |dt| {
        graph(&[("a", ash, dt), ("b", bsh, dt)], |g, x| {
            let z = g.matmul(x[0], x[1]).unwrap();
            assert_eq!(g.shape(z).unwrap().static_dims().unwrap(), dims);
            z
        })
    })
    .out(&out)
    .oracle(move |v, _| ref_matmul(&v[0], ash, &v[1], bsh).0)
    .sums(move |v, _| ref_matmul(&abs(&v[0]), ash, &abs(&v[1]), bsh).0)
    .wrt(&["a", "b"]);
    if small(&c) {
        c
    } else {
        c.no_grad()
    }
}

type Pair = (&'static [usize], &'static [usize]);

pub fn matmul() -> Vec<Case> {
    let mut cases = vec![];
    let mut add = |pairs: &[Pair], dtypes: &[DType], parity_suite: bool| {
        for &(a, b) in pairs {
            cases.push(matmul_case(a, b, parity_suite).dtypes(dtypes));
        }
    };
    let f32 = &[DType::F32];
    let f64 = &[DType::F64];
    // The oracle suite's: odd sizes, batched and broadcast, rank-1 operands, storage dtypes.
    let odd: [Pair; 5] = [
        (&[1, 1], &[1, 1]),
        (&[7, 13], &[13, 5]),
        (&[33, 65], &[65, 17]),
        (&[1, 40], &[40, 3]),
        (&[9, 1], &[1, 11]),
    ];
    add(&odd, f32, false);
    let batched: [Pair; 6] = [
        (&[3, 1, 6, 7], &[4, 7, 5]),
        (&[5, 3, 4], &[4, 2]),
        (&[3, 4], &[2, 3, 4, 5]),
        (&[2, 1, 3, 9], &[1, 3, 9, 4]),
        // Many items (parallel over batches) and a few large ones (gemm's own threads).
        (&[37, 19, 23], &[37, 23, 21]),
        (&[2, 130, 70], &[70, 90]),
    ];
    add(&batched, f32, false);
    add(&[(&[1, 201, 129], &[129, 67])], f64, false);
    let rank1: [Pair; 4] = [
        (&[13], &[13]),
        (&[13], &[13, 6]),
        (&[7, 13], &[13]),
        (&[5], &[3, 5, 4]),
    ];
    add(&rank1, f32, false);
    add(&[(&[2, 3, 6, 5], &[5])], f64, false);
    let storage: [Pair; 3] = [
        (&[7, 13], &[13, 5]),
        (&[2, 1, 9, 33], &[3, 33, 17]),
        (&[33], &[33, 4]),
    ];
    add(&storage, &[DType::F16, DType::BF16, DType::F64], false);
    // The parity suite's, in every float dtype.
    let parity: [Pair; 20] = [
        (&[1, 1], &[1, 1]),
        (&[7, 33], &[33, 129]),
        (&[1000, 7], &[7, 33]),
        (&[33, 1000], &[1000, 1]),
        (&[1, 129], &[129, 1000]),
        (&[129, 129], &[129, 7]),
        (&[33], &[33, 7]),
        (&[7, 33], &[33]),
        (&[129], &[129]),
        (&[5], &[2, 3, 5, 7]),
        (&[2, 3, 7, 5], &[5]),
        // [B, S, K]·[K, N]: batch folded into m.
        (&[4, 33, 129], &[129, 7]),
        (&[2, 3, 7, 33], &[33, 5]),
        // [B, H, S, D]·[B, H, D, S]: strided batch.
        (&[2, 3, 7, 33], &[2, 3, 33, 7]),
        // Broadcast operands: stride-0 batches.
        (&[1, 3, 7, 9], &[2, 3, 9, 4]),
        (&[7, 9], &[4, 9, 5]),
        (&[3, 7, 9], &[2, 1, 9, 5]),
        // Batch strides no single stride expresses: gathered.
        (&[2, 1, 7, 9], &[1, 3, 9, 4]),
        (&[2, 2, 3, 4], &[2, 1, 4, 5]),
        (&[1, 1, 7, 9], &[1, 1, 9, 4]),
    ];
    add(&parity, &ALL, true);
    // The gradcheck suite's.
    let grad: [Pair; 7] = [
        (&[3, 5], &[5, 2]),
        (&[2, 3, 4], &[2, 4, 3]),
        (&[2, 3, 4], &[4, 5]),
        (&[3, 1, 2, 3], &[2, 3, 2]),
        (&[5], &[5, 3]),
        (&[2, 3, 4], &[4]),
        (&[4], &[4]),
    ];
    add(&grad, f32, false);
    cases.extend(matmul_of_views());
    cases
}

/// Operands reached through a view (parity only, as before): `aᵀ · bᵀ`, and rows 1.. of
/// a `[8, 33]` (an operand that may start off the 16-byte grid). The view may fall back.
fn matmul_of_views() -> Vec<Case> {
    let t = Case::new(
        "matmul via transpose",
        vec![
            Input::new("a", &[33, 7], Draw::Normal(1.0)),
            Input::new("b", &[5, 33], Draw::Normal(1.0)),
        ],
        |dt| {
            graph(&[("a", &[33, 7], dt), ("b", &[5, 33], dt)], |g, x| {
                let at = g.transpose(x[0], &[1, 0]).unwrap();
                let bt = g.transpose(x[1], &[1, 0]).unwrap();
                g.matmul(at, bt).unwrap()
            })
        },
    )
    .fallback(OpKindSet::of(&[OpKind::Transpose]));
    let n = Case::new(
        "matmul of a narrowed operand",
        vec![
            Input::new("a", &[8, 33], Draw::Normal(1.0)),
            Input::new("b", &[33, 5], Draw::Normal(1.0)),
        ],
        |dt| {
            graph(&[("a", &[8, 33], dt), ("b", &[33, 5], dt)], |g, x| {
                let an = g.narrow(x[0], 0, 1, 7).unwrap();
                g.matmul(an, x[1]).unwrap()
            })
        },
    )
    .fallback(OpKindSet::of(&[OpKind::Narrow]));
    vec![t, n]
        .into_iter()
        .map(|c| c.dtypes(&ALL).only_parity())
        .collect()
}

// ---- fused matmul + bias + activation ----

/// Activations defined only for positive inputs: their cases draw all-positive operands.
fn positive(act: Option<Activation>) -> bool {
    matches!(
        act,
        Some(Activation::Log | Activation::Sqrt | Activation::Rsqrt | Activation::Recip)
    )
}

/// `act(a @ w + bias)`, bias `[N]`; draws `(a, w, bias)`.
fn fused_case(
    ash: &'static [usize],
    wsh: &'static [usize],
    act: Option<Activation>,
    draws: [Draw; 3],
) -> Case {
    let n = wsh[wsh.len() - 1];
    let [da, dw, db] = draws;
    let inputs = vec![
        Input::new("a", ash, da),
        Input::new("w", wsh, dw),
        Input::new("bias", &[n], db),
    ];
    let dims = matmul_dims(ash, wsh);
    Case::new(
        format!("fused {act:?} {ash:?} @ {wsh:?}"),
        inputs,
        move |dt| {
            graph(
                &[("a", ash, dt), ("w", wsh, dt), ("bias", &[n], dt)],
                |g, x| g.matmul_bias_act(x[0], x[1], x[2], act).unwrap(),
            )
        },
    )
    .out(&dims)
    .oracle(move |v, _| {
        let (mm, _) = ref_matmul(&v[0], ash, &v[1], wsh);
        mm.iter()
            .enumerate()
            .map(|(i, &s)| {
                let s = s + v[2][i % n];
                act.map_or(s, |a| act_ref(a, s))
            })
            .collect()
    })
    .wrt(&["a", "w", "bias"])
}

/// No activation, then every activation.
fn epilogues() -> Vec<Option<Activation>> {
    std::iter::once(None)
        .chain(Activation::ALL.iter().map(|&a| Some(a)))
        .collect()
}

pub fn fused_matmul_bias_act() -> Vec<Case> {
    let mut cases = vec![];
    let pos = || Draw::Uniform(0.1, 1.0);
    // The oracle suite's: each epilogue once, shapes and dtypes taking turns.
    for (i, act) in epilogues().into_iter().enumerate() {
        let dt = [DType::F32, DType::F64, DType::F32][i % 3];
        let (ash, wsh): Pair = if i % 2 == 0 {
            (&[2, 7, 13], &[13, 9])
        } else {
            (&[5, 33], &[33, 17])
        };
        let d = if positive(act) {
            pos()
        } else {
            Draw::Normal(0.4)
        };
        let c = fused_case(ash, wsh, act, [d.clone(), d.clone(), d]);
        cases.push(c.dtypes(&[dt]).no_grad());
    }
    // The parity suite's: every epilogue on three shapes in every float dtype.
    let shapes: [Pair; 3] = [
        (&[7, 33], &[33, 129]),
        (&[2, 5, 64], &[64, 48]),
        (&[2, 3, 7, 9], &[2, 3, 9, 5]),
    ];
    for act in epilogues() {
        for (ash, wsh) in shapes {
            let k = ash[ash.len() - 1];
            let draws = if positive(act) {
                [pos(), pos(), pos()]
            } else {
                [scaled_normals(k), Draw::Normal(1.0), Draw::Normal(0.5)]
            };
            cases.push(fused_case(ash, wsh, act, draws).dtypes(&ALL).no_grad());
        }
    }
    // The gradcheck suite's.
    let acts = [
        None,
        Some(Activation::Relu),
        Some(Activation::Gelu),
        Some(Activation::Silu),
        Some(Activation::Tanh),
    ];
    for act in acts {
        for (ash, wsh) in [(&[3usize, 4][..], &[4usize, 5][..]), (&[2, 3, 4], &[4, 3])] {
            let n = || Draw::Normal(1.0);
            cases.push(fused_case(ash, wsh, act, [n(), n(), n()]));
        }
    }
    cases
}

// ---- dequant matmul ----

/// `x [.., K]` times the packed `[n, K]` weight `w` (u8 blocks), transposed.
fn dequant_case(scheme: QuantScheme, xsh: &'static [usize], n: usize) -> Case {
    let k = xsh[xsh.len() - 1];
    let rb = k / scheme.block_len() * scheme.block_bytes();
    let packed = Draw::custom(move |rng: &mut Rng, _, _| {
        random_packed(rng, scheme, n, k)
            .into_iter()
            .map(f64::from)
            .collect()
    });
    let inputs = vec![
        Input::new("x", xsh, Draw::Normal(1.0)),
        Input::new("w", &[n, rb], packed).of(DType::U8),
    ];
    let mut dims = xsh[..xsh.len() - 1].to_vec();
    dims.push(n);
    Case::new(format!("{scheme:?} x{xsh:?} n={n}"), inputs, move |dt| {
        graph(&[("x", xsh, dt), ("w", &[n, rb], DType::U8)], |g, x| {
            g.dequant_matmul(x[0], x[1], scheme).unwrap()
        })
    })
    .out(&dims)
    .oracle(move |v, _| dequant_ref(scheme, &v[0], k, &v[1], n).0)
    .sums(move |v, _| dequant_ref(scheme, &v[0], k, &v[1], n).1)
}

pub fn dequant_matmul() -> Vec<Case> {
    let mut cases = vec![];
    for scheme in SCHEMES {
        // K in units of the scheme's block (32 values, or 256 for the K-quants), so each
        // shape holds the same number of blocks whatever the scheme.
        let b = scheme.block_len();
        let big = b == 256;
        // The oracle suite's (parity never ran DequantMatMul in f64: that one stays off it).
        let oracle: [(Vec<usize>, usize, DType); 5] = [
            (vec![1, b], 1, DType::F32),
            (vec![3, 5, 2 * b], 7, DType::F32),
            (vec![4, 3 * b], 33, DType::F64),
            (vec![2, 5 * b], 9, DType::F16),
            (vec![3 * b], 5, DType::BF16),
        ];
        // The parity suite's: the decode GEMV path (M ≤ 8) and dequantise-then-GEMM. The
        // K-quants' K is 8× longer, so their widest shapes are trimmed.
        let parity: [(Vec<usize>, usize); 9] = [
            (vec![1, b * 7], 33),
            (vec![3, b * if big { 5 } else { 33 }], 129),
            (vec![b * 7], 5),
            (vec![2, 4, b * if big { 5 } else { 33 }], 1),
            (vec![1, b], if big { 257 } else { 1001 }),
            (vec![64, b * 7], 33),
            (vec![64, b * if big { 5 } else { 33 }], 129),
            (vec![3, 5, b * if big { 3 } else { 33 }], 7),
            (vec![9, b], 1),
        ];
        for (xsh, n, dt) in oracle {
            let c = dequant_case(scheme, leak(xsh), n).dtypes(&[dt]);
            cases.push(if dt == DType::F64 { c.no_parity() } else { c });
        }
        for (xsh, n) in parity {
            cases.push(dequant_case(scheme, leak(xsh), n).dtypes(&HALVES_AND_F32));
        }
    }
    cases
}

/// Dequantize of `rows` packed rows of `k` values (a gathered embedding slice): f32 out
/// whatever the case dtype, so one dtype runs.
fn dequantize_case(scheme: QuantScheme, lead: &'static [usize], k: usize) -> Case {
    let rows: usize = lead.iter().product();
    let rb = k / scheme.block_len() * scheme.block_bytes();
    let packed = Draw::custom(move |rng: &mut Rng, _, _| {
        random_packed(rng, scheme, rows, k)
            .into_iter()
            .map(f64::from)
            .collect()
    });
    let mut in_dims = lead.to_vec();
    in_dims.push(rb);
    let mut out_dims = lead.to_vec();
    out_dims.push(k);
    let ind = leak(in_dims.clone());
    Case::new(
        format!("dequantize {scheme:?} {lead:?}×{k}"),
        vec![Input::new("w", &in_dims, packed).of(DType::U8)],
        move |_| {
            graph(&[("w", ind, DType::U8)], |g, x| {
                g.dequantize(x[0], scheme).unwrap()
            })
        },
    )
    .out(&out_dims)
    .oracle(move |v, _| {
        let bytes: Vec<u8> = v[0].iter().map(|&b| b as u8).collect();
        unpack(scheme, &bytes, rows, k)
    })
    .dtypes(&[DType::F32])
}

pub fn dequantize() -> Vec<Case> {
    let mut cases = vec![];
    for scheme in SCHEMES {
        let b = scheme.block_len();
        for (lead, blocks) in [(&[1usize][..], 1), (&[1, 7][..], 3), (&[2, 3][..], 2)] {
            cases.push(dequantize_case(scheme, lead, blocks * b));
        }
    }
    cases
}

/// A case's shapes are `'static` (the graph closures outlive the table); the table is built
/// once per test binary, so the few leaked shapes are bounded.
fn leak(v: Vec<usize>) -> &'static [usize] {
    Vec::leak(v)
}
