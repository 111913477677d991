//! GPU parity: MatMul (NumPy semantics: rank-1 operands, broadcast batch dims) and
//! FusedMatMulBiasAct (every activation) against the CPU reference and the f64 oracle.
mod common;
use common::*;
use rlx_cuda::CudaOptions;
use rlx_ir::{Activation, DType, Graph, Shape};

/// Float dtypes plus f64 (cuBLASLt runs it in double).
const ALL: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

fn mm_graph(ash: &[usize], bsh: &[usize], dt: DType) -> Graph {
    let mut g = Graph::new("matmul");
    let a = g.input("a", Shape::new(ash, dt)).unwrap();
    let b = g.input("b", Shape::new(bsh, dt)).unwrap();
    let z = g.matmul(a, b).unwrap();
    g.set_outputs(vec![z]);
    g
}

/// A's entries scaled by 1/sqrt(K) keep outputs O(1) in every dtype.
fn mm_feeds(rng: &mut Rng, ash: &[usize], bsh: &[usize]) -> Vec<Feed> {
    let k = ash[ash.len() - 1] as f64;
    let n: usize = ash.iter().product();
    vec![
        feed(
            "a",
            ash,
            rng.normals(n).iter().map(|v| v / k.sqrt()).collect(),
        ),
        normal(rng, "b", bsh),
    ]
}

fn run_cases(test: &str, cases: &[(&[usize], &[usize])]) {
    let mut rng = Rng::new(test);
    for &(ash, bsh) in cases {
        for dt in ALL {
            let feeds = mm_feeds(&mut rng, ash, bsh);
            parity(
                &format!("{test} {ash:?}@{bsh:?}"),
                &|d| mm_graph(ash, bsh, d),
                &feeds,
                dt,
            );
        }
    }
}

#[test]
fn matmul_2d_odd_sizes() {
    if !common::gpu() {
        return;
    }
    run_cases(
        "matmul_2d_odd_sizes",
        &[
            (&[1, 1], &[1, 1]),
            (&[7, 33], &[33, 129]),
            (&[1000, 7], &[7, 33]),
            (&[33, 1000], &[1000, 1]),
            (&[1, 129], &[129, 1000]),
            (&[129, 129], &[129, 7]),
        ],
    );
}

#[test]
fn matmul_rank1_operands() {
    if !common::gpu() {
        return;
    }
    run_cases(
        "matmul_rank1_operands",
        &[
            (&[33], &[33, 7]),
            (&[7, 33], &[33]),
            (&[129], &[129]),
            (&[5], &[2, 3, 5, 7]),
            (&[2, 3, 7, 5], &[5]),
        ],
    );
}

#[test]
fn matmul_batched_and_broadcast() {
    if !common::gpu() {
        return;
    }
    run_cases(
        "matmul_batched_and_broadcast",
        &[
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
        ],
    );
}

#[test]
fn matmul_through_transpose_and_narrow() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("matmul_through_transpose_and_narrow");
    // aᵀ · bᵀ with a [33, 7], b [5, 33].
    let build_t = |dt: DType| {
        let mut g = Graph::new("mm_t");
        let a = g.input("a", Shape::new(&[33, 7], dt)).unwrap();
        let b = g.input("b", Shape::new(&[5, 33], dt)).unwrap();
        let at = g.transpose(a, &[1, 0]).unwrap();
        let bt = g.transpose(b, &[1, 0]).unwrap();
        let z = g.matmul(at, bt).unwrap();
        g.set_outputs(vec![z]);
        g
    };
    // Rows 1.. of a [8, 33]: an operand that may start off the 16-byte grid.
    let build_n = |dt: DType| {
        let mut g = Graph::new("mm_n");
        let a = g.input("a", Shape::new(&[8, 33], dt)).unwrap();
        let b = g.input("b", Shape::new(&[33, 5], dt)).unwrap();
        let an = g.narrow(a, 0, 1, 7).unwrap();
        let z = g.matmul(an, b).unwrap();
        g.set_outputs(vec![z]);
        g
    };
    for dt in ALL {
        let feeds = vec![
            normal(&mut rng, "a", &[33, 7]),
            normal(&mut rng, "b", &[5, 33]),
        ];
        parity_with(
            "matmul via transpose",
            &build_t,
            &feeds,
            dt,
            CudaOptions::strict(),
            OpKindSet::of(&[OpKind::Transpose]),
        );
        let feeds = vec![
            normal(&mut rng, "a", &[8, 33]),
            normal(&mut rng, "b", &[33, 5]),
        ];
        parity_with(
            "matmul of a narrowed operand",
            &build_n,
            &feeds,
            dt,
            CudaOptions::strict(),
            OpKindSet::of(&[OpKind::Narrow]),
        );
    }
}

fn fused_graph(ash: &[usize], wsh: &[usize], act: Option<Activation>, dt: DType) -> Graph {
    let n = wsh[wsh.len() - 1];
    let mut g = Graph::new("fused");
    let a = g.input("a", Shape::new(ash, dt)).unwrap();
    let w = g.input("w", Shape::new(wsh, dt)).unwrap();
    let b = g.input("bias", Shape::new(&[n], dt)).unwrap();
    let z = g.matmul_bias_act(a, w, b, act).unwrap();
    g.set_outputs(vec![z]);
    g
}

#[test]
fn fused_matmul_bias_every_activation() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("fused_matmul_bias_every_activation");
    let shapes: [(&[usize], &[usize]); 3] = [
        (&[7, 33], &[33, 129]),
        (&[2, 5, 64], &[64, 48]),
        (&[2, 3, 7, 9], &[2, 3, 9, 5]),
    ];
    let mut acts: Vec<Option<Activation>> = vec![None];
    acts.extend(Activation::ALL.iter().map(|&a| Some(a)));
    for act in acts {
        // Log, Sqrt, Rsqrt and Recip need positive, non-tiny inputs: all-positive operands.
        let positive = matches!(
            act,
            Some(Activation::Log | Activation::Sqrt | Activation::Rsqrt | Activation::Recip)
        );
        for &(ash, wsh) in &shapes {
            let n = wsh[wsh.len() - 1];
            let k = ash[ash.len() - 1] as f64;
            let draw = |rng: &mut Rng, name: &str, dims: &[usize], s: f64| {
                let len = dims.iter().product();
                let v = if positive {
                    rng.uniforms(len, 0.1, 1.0)
                } else {
                    rng.normals(len).iter().map(|x| x * s).collect()
                };
                feed(name, dims, v)
            };
            for dt in ALL {
                let feeds = vec![
                    draw(&mut rng, "a", ash, 1.0 / k.sqrt()),
                    draw(&mut rng, "w", wsh, 1.0),
                    draw(&mut rng, "bias", &[n], 0.5),
                ];
                parity(
                    &format!("fused {act:?} {ash:?}@{wsh:?}"),
                    &|d| fused_graph(ash, wsh, act, d),
                    &feeds,
                    dt,
                );
            }
        }
    }
}

#[test]
fn matmul_big_f16_and_f32() {
    if !common::gpu() {
        return;
    }
    let mut rng = Rng::new("matmul_big_f16_and_f32");
    let s: &[usize] = &[2048, 2048];
    let feeds = mm_feeds(&mut rng, s, s);
    parity("matmul 2048³", &|d| mm_graph(s, s, d), &feeds, DType::F16);
    let (ash, bsh): (&[usize], &[usize]) = (&[8, 512, 1024], &[1024, 4099]);
    let feeds = mm_feeds(&mut rng, ash, bsh);
    parity(
        "matmul [8,512,1024]@[1024,4099]",
        &|d| mm_graph(ash, bsh, d),
        &feeds,
        DType::F32,
    );
    let (ash, wsh): (&[usize], &[usize]) = (&[4, 257, 1024], &[1024, 3000]);
    let feeds = vec![
        feed(
            "a",
            ash,
            rng.normals(4 * 257 * 1024)
                .iter()
                .map(|v| v / 32.0)
                .collect(),
        ),
        normal(&mut rng, "w", wsh),
        normal(&mut rng, "bias", &[3000]),
    ];
    for act in [Some(Activation::GeluApprox), Some(Activation::Gelu)] {
        parity(
            &format!("fused big {act:?}"),
            &|d| fused_graph(ash, wsh, act, d),
            &feeds,
            DType::BF16,
        );
    }
}
