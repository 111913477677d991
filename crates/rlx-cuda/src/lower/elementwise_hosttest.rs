//! Host emulation of the generated kernels, checked against the CPU reference without a GPU.
//!
//! Every case is lowered with `plan` over fake device pointers; the generated sources are
//! compiled as host C++ (g++ with the CUDA headers' host paths: `__half` rounding etc. are
//! the real ones) and every launch runs as one sequential "thread" of its grid-stride loop,
//! with its exact argument list. The outputs must equal the CPU thunks (integers exactly,
//! floats up to libm differences). This checks the read specialisation, the chain text, the
//! cast/settle semantics, batch chunking and the argument lists before any GPU sees them.
//! Skips without g++ or the CUDA headers (`RLX_CUDA_INCLUDE`).
use super::codegen::HELPERS;
use super::{plan_chain, plan_stop_gradient, plan_swiglu, Planned, Val};
use crate::lower::DevTensor;
use crate::lower::LowerError;
use rlx_cpu::CpuExecutable;
use rlx_ir::ChainOperand::{Input, Step};
use rlx_ir::ChainStep as S;
use rlx_ir::{
    Activation, BinaryOp, ChainStep, CompareOp, DType, Graph, HostTensor, Op, RegionPrologue, Shape,
};
use rlx_testutil::{rel_l2, Rng};
use std::collections::BTreeMap;

/// The planner `lower_node` reaches for each op these cases use (the generator's entry points).
fn plan(op: &Op, ins: &[DevTensor], out: &DevTensor) -> Result<Vec<Planned>, LowerError> {
    use Input as I;
    let none = RegionPrologue::None;
    let one = |s: ChainStep| plan_chain(&[s], none, None, ins, out);
    match op {
        Op::Activation(a) => one(S::Activation(*a, I(0))),
        Op::Binary(b) => one(S::Binary(*b, I(0), I(1))),
        Op::Compare(c) => one(S::Compare(*c, I(0), I(1))),
        Op::Where => one(S::Where(I(0), I(1), I(2))),
        Op::Cast { to } => one(S::Cast(*to, I(0))),
        Op::StopGradient => plan_stop_gradient(ins, out),
        Op::FusedSwiGLU { gate_first, .. } => plan_swiglu(ins, out, *gate_first),
        Op::ElementwiseRegion { chain, prologue } => plan_chain(chain, *prologue, None, ins, out),
        Op::BatchElementwiseRegion {
            chain,
            num_batch_inputs,
            prologue,
        } => plan_chain(chain, *prologue, Some(*num_batch_inputs), ins, out),
        op => panic!("no elementwise-generator case for {}", op.kind()),
    }
}
use crate::hostemu::{self, PRELUDE};
use std::fmt::Write;

const IO: &str = "
struct EwAny { char* p; template <class T> operator T*() const { return (T*)p; } };
static char* ew_load(const char* path, size_t bytes) {
    char* p = (char*)calloc(bytes + 8, 1);
    FILE* f = fopen(path, \"rb\");
    if (!f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, \"cannot read %s\\n\", path); exit(1); }
    fclose(f);
    return p;
}
static void ew_save(const char* path, const char* p, size_t bytes) {
    FILE* f = fopen(path, \"wb\");
    if (!f || fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, \"cannot write %s\\n\", path); exit(1); }
    fclose(f);
}
";

struct Case {
    name: String,
    op: Op,
    ins: Vec<HostTensor>,
}

const BUF: u32 = 40;

fn fake_ptr(buf: usize) -> u64 {
    ((buf + 1) as u64) << BUF
}

fn ptr_expr(p: u64) -> String {
    let buf = (p >> BUF) - 1;
    let off = p & ((1u64 << BUF) - 1);
    format!("EwAny{{B[{buf}] + {off}}}")
}

fn cpu(case: &Case) -> (Shape, HostTensor) {
    let mut g = Graph::new(&case.name);
    let ids: Vec<_> = case
        .ins
        .iter()
        .enumerate()
        .map(|(k, t)| {
            g.input(format!("i{k}"), Shape::new(&t.shape, t.dtype))
                .unwrap()
        })
        .collect();
    let y = g
        .add_node(case.op.clone(), &ids)
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    g.set_outputs(vec![y]);
    let shape = g.shape(y).unwrap().clone();
    let feeds: Vec<(String, HostTensor)> = case
        .ins
        .iter()
        .enumerate()
        .map(|(k, t)| (format!("i{k}"), t.clone()))
        .collect();
    let refs: Vec<(&str, HostTensor)> =
        feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let mut exe = CpuExecutable::new(g).unwrap();
    let out = exe.run(&refs).unwrap().remove(0);
    (shape, out)
}

/// Lower every case, emit one C++ program running them all, run it, compare with the CPU.
fn check(cases: &[Case]) {
    let Some((dir, inc)) = hostemu::workdir("ew") else {
        return;
    };

    let mut kernels: BTreeMap<String, String> = BTreeMap::new();
    let mut main = String::from("int main() {\n");
    let mut want = Vec::new();
    for (c, case) in cases.iter().enumerate() {
        let (shape, reference) = cpu(case);
        let ins: Vec<DevTensor> = case
            .ins
            .iter()
            .enumerate()
            .map(|(k, t)| DevTensor {
                ptr: fake_ptr(k),
                dims: t.shape.clone(),
                dtype: t.dtype,
            })
            .collect();
        let out = DevTensor {
            ptr: fake_ptr(ins.len()),
            dims: shape.static_dims().unwrap(),
            dtype: shape.dtype,
        };
        let steps = plan(&case.op, &ins, &out).unwrap_or_else(|e| panic!("{}: {e:?}", case.name));
        let _ = writeln!(
            main,
            "  {{ // {}\n    char* B[{}];",
            case.name,
            ins.len() + 1
        );
        for (k, t) in case.ins.iter().enumerate() {
            let f = format!("c{c}_b{k}.bin");
            std::fs::write(dir.join(&f), &t.data).unwrap();
            let _ = writeln!(main, "    B[{k}] = ew_load(\"{f}\", {});", t.data.len());
        }
        let _ = writeln!(
            main,
            "    B[{}] = (char*)calloc({} + 8, 1);",
            ins.len(),
            out.bytes()
        );
        for s in steps {
            match s {
                Planned::Copy { dst, src, bytes } => {
                    let _ = writeln!(
                        main,
                        "    memcpy((char*){}, (const char*){}, {bytes});",
                        ptr_expr(dst),
                        ptr_expr(src)
                    );
                }
                Planned::Launch {
                    src, name, args, ..
                } => {
                    let body = src
                        .strip_prefix(HELPERS)
                        .expect("sources start with the helpers");
                    kernels.insert(name.clone(), body.to_string());
                    let mut a = Vec::new();
                    let _ = writeln!(main, "    {{ EwPtrs64 tab{{}};");
                    for v in args {
                        a.push(match v {
                            Val::Ptr(p) => ptr_expr(p),
                            Val::I64(v) => format!("(i64){v}LL"),
                            Val::Dims(d) => format!(
                                "Dims8{{{}, 0, {{{}}}, {{{}}}}}",
                                d.rank,
                                d.d.map(|x| format!("{x}LL")).join(", "),
                                d.s.map(|x| format!("{x}LL")).join(", ")
                            ),
                            Val::Table(t) => {
                                for (k, p) in t.iter().enumerate().filter(|(_, p)| **p != 0) {
                                    let _ = writeln!(main, "      tab.p[{k}] = {};", ptr_expr(*p));
                                }
                                "tab".to_string()
                            }
                        });
                    }
                    let _ = writeln!(main, "      {name}({}); }}", a.join(", "));
                }
            }
        }
        let _ = writeln!(
            main,
            "    ew_save(\"c{c}_out.bin\", B[{}], {});\n  }}",
            ins.len(),
            out.bytes()
        );
        want.push(reference);
    }
    main.push_str("  return 0;\n}\n");
    let mut text = format!("{PRELUDE}{}\n{HELPERS}\n{IO}", crate::kernels::COMMON);
    for k in kernels.values() {
        text.push_str(k);
    }
    text.push_str(&main);
    hostemu::build_and_run(&dir, &inc, "ew", &text);
    let mut failed = Vec::new();
    for (c, (case, w)) in cases.iter().zip(&want).enumerate() {
        let bytes = std::fs::read(dir.join(format!("c{c}_out.bin"))).unwrap();
        let got = HostTensor::new(&w.shape, w.dtype, bytes).unwrap();
        if let Err(e) = same(&got, w) {
            failed.push(format!("{}: {e}", case.name));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failed.is_empty(),
        "{} of {} cases differ:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    println!(
        "{} cases, {} kernels agree with the CPU",
        cases.len(),
        kernels.len()
    );
}

fn same(got: &HostTensor, want: &HostTensor) -> Result<(), String> {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    if !want.dtype.is_float() {
        return match g.iter().zip(&w).position(|(a, b)| a != b) {
            None => Ok(()),
            Some(k) => Err(format!("element {k}: got {} want {}", g[k], w[k])),
        };
    }
    // NaN and infinities must sit at the same places (and infinities agree in sign).
    let odd = |v: &[f64]| {
        v.iter()
            .map(|x| {
                (
                    x.is_nan(),
                    x.is_infinite() && *x > 0.0,
                    x.is_infinite() && *x < 0.0,
                )
            })
            .collect::<Vec<_>>()
    };
    if odd(&g) != odd(&w) {
        return Err("NaN / infinity positions differ".into());
    }
    let keep = |v: &[f64]| {
        v.iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect::<Vec<_>>()
    };
    let tol = match want.dtype {
        DType::F16 | DType::BF16 => 2e-3,
        _ => 1e-6,
    };
    let e = rel_l2(&keep(&g), &keep(&w));
    if e <= tol {
        Ok(())
    } else {
        Err(format!("rel-L2 {e:.3e} > {tol:.0e}"))
    }
}

fn t(dims: &[usize], data: Vec<f64>, dtype: DType) -> HostTensor {
    HostTensor::from_f64_as(dims, &data, dtype)
}

fn n(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// Values that suit `dtype` as a general input.
fn values(rng: &mut Rng, dims: &[usize], dtype: DType) -> HostTensor {
    let k = n(dims);
    let v = match dtype {
        DType::U8 => (0..k).map(|_| rng.below(256) as f64).collect(),
        DType::Bool => (0..k).map(|_| rng.below(2) as f64).collect(),
        DType::I32 | DType::I64 => (0..k).map(|_| rng.below(41) as f64 - 20.0).collect(),
        _ => rng.normals(k),
    };
    t(dims, v, dtype)
}

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
const NONE: RegionPrologue = RegionPrologue::None;

fn region(chain: Vec<ChainStep>) -> Op {
    Op::ElementwiseRegion {
        chain,
        prologue: NONE,
    }
}

fn single_op_cases(rng: &mut Rng) -> Vec<Case> {
    let mut v = Vec::new();
    let d: &[usize] = &[7, 33];
    for dt in FLOATS {
        for a in Activation::ALL {
            let x = match a {
                Activation::Log | Activation::Sqrt | Activation::Rsqrt | Activation::Recip => {
                    t(d, rng.uniforms(n(d), 0.1, 3.0), dt)
                }
                _ => t(d, rng.normals(n(d)).iter().map(|x| 2.0 * x).collect(), dt),
            };
            v.push(Case {
                name: format!("{a:?} {dt}"),
                op: Op::Activation(a),
                ins: vec![x],
            });
        }
    }
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Pow,
    ];
    let shapes: [(&[usize], &[usize]); 6] = [
        (&[7, 1, 33], &[5, 33]),
        (&[5, 33], &[5, 33]),
        (&[33], &[5, 33]),
        (&[5, 1], &[5, 33]),
        (&[3, 1, 1], &[2, 3, 4, 5]),
        (&[], &[17]),
    ];
    for dt in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
    ] {
        for op in ops {
            for (sa, sb) in shapes {
                let (a, b) = match (op, dt.is_float()) {
                    (BinaryOp::Pow, true) => (
                        t(sa, rng.uniforms(n(sa), 0.5, 2.0), dt),
                        t(sb, rng.uniforms(n(sb), -1.5, 1.5), dt),
                    ),
                    (BinaryOp::Div, true) => (
                        values(rng, sa, dt),
                        t(sb, rng.uniforms(n(sb), 0.5, 2.0), dt),
                    ),
                    (BinaryOp::Pow, false) => (
                        t(
                            sa,
                            (0..n(sa)).map(|_| rng.below(9) as f64 - 4.0).collect(),
                            dt,
                        ),
                        t(
                            sb,
                            (0..n(sb)).map(|_| rng.below(45) as f64 - 3.0).collect(),
                            dt,
                        ),
                    ),
                    // Integer division by zero is defined (0): keep some zeros.
                    _ => (values(rng, sa, dt), values(rng, sb, dt)),
                };
                v.push(Case {
                    name: format!("{op:?} {dt} {sa:?} {sb:?}"),
                    op: Op::Binary(op),
                    ins: vec![a, b],
                });
            }
        }
    }
    let cmps = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ];
    for dt in [
        DType::F32,
        DType::F16,
        DType::F64,
        DType::I32,
        DType::U8,
        DType::Bool,
    ] {
        for op in cmps {
            // b shares about a third of a's values: ties.
            let a = values(rng, &[9, 40], dt);
            let av = a.to_f64_vec();
            let bv: Vec<f64> = av
                .iter()
                .map(|&x| {
                    if rng.chance(0.3) {
                        x
                    } else {
                        values(rng, &[1], dt).to_f64_vec()[0]
                    }
                })
                .collect();
            v.push(Case {
                name: format!("{op:?} {dt}"),
                op: Op::Compare(op),
                ins: vec![a, t(&[9, 40], bv, dt)],
            });
            v.push(Case {
                name: format!("{op:?} {dt} broadcast"),
                op: Op::Compare(op),
                ins: vec![values(rng, &[9, 1, 4], dt), values(rng, &[5, 4], dt)],
            });
        }
    }
    for cond in [DType::Bool, DType::F32, DType::I32, DType::F16] {
        for dt in [DType::F32, DType::BF16, DType::F64, DType::I64, DType::U8] {
            let c = match cond {
                DType::Bool => values(rng, &[7, 1], cond),
                _ => t(
                    &[7, 1],
                    (0..7).map(|_| rng.below(3) as f64 - 1.0).collect(),
                    cond,
                ),
            };
            v.push(Case {
                name: format!("Where {cond} {dt}"),
                op: Op::Where,
                ins: vec![c, values(rng, &[1, 33], dt), values(rng, &[33], dt)],
            });
        }
    }
    v
}

fn cast_cases(rng: &mut Rng) -> Vec<Case> {
    let mut v = Vec::new();
    let d: &[usize] = &[300];
    for from in DType::ALL {
        for to in DType::ALL {
            let x = match from {
                // Zeros (bool), halves (rounding ties), |x| up to ~1000 (u8 wrap, no f16 overflow).
                f if f.is_float() => {
                    let vals = (0..n(d))
                        .map(|_| match rng.below(5) {
                            0 => 0.0,
                            1 => (rng.below(2001) as f64 - 1000.0) + 0.5,
                            _ => 300.0 * rng.normal(),
                        })
                        .collect();
                    t(d, vals, f)
                }
                DType::I32 | DType::I64 => t(
                    d,
                    (0..n(d))
                        .map(|_| rng.below(120001) as f64 - 60000.0)
                        .collect(),
                    from,
                ),
                _ => values(rng, d, from),
            };
            v.push(Case {
                name: format!("Cast {from} -> {to}"),
                op: Op::Cast { to },
                ins: vec![x],
            });
        }
    }
    // Saturation, NaN and wrap of float -> integer casts; big integers -> floats.
    let special = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        1e30,
        -1e30,
        5e9 + 0.7,
        -5e9 - 0.7,
        4294967295.0,
        -2.5,
        255.9,
        256.0,
        -0.0,
    ];
    for from in [DType::F32, DType::F64] {
        for to in [DType::I32, DType::I64, DType::U8, DType::Bool] {
            v.push(Case {
                name: format!("Cast special {from} -> {to}"),
                op: Op::Cast { to },
                ins: vec![t(&[special.len()], special.clone(), from)],
            });
        }
    }
    let big: Vec<f64> = (0..64)
        .map(|_| (rng.below(1 << 30) as f64) * 8191.0 + rng.below(3) as f64)
        .collect();
    for to in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I32,
        DType::U8,
    ] {
        v.push(Case {
            name: format!("Cast big i64 -> {to}"),
            op: Op::Cast { to },
            ins: vec![t(&[64], big.clone(), DType::I64)],
        });
    }
    v
}

fn region_cases(rng: &mut Rng) -> Vec<Case> {
    let mut v = Vec::new();
    let float_chain = vec![
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Binary(BinaryOp::Add, Step(0), Input(2)),
        S::Activation(Activation::Silu, Step(1)),
        S::Binary(BinaryOp::Max, Step(2), Input(0)),
        S::Activation(Activation::Tanh, Step(3)),
        S::Binary(BinaryOp::Sub, Input(2), Step(4)),
    ];
    let shapes: [(&[usize], &[usize], &[usize]); 4] = [
        (&[2, 3, 5], &[5], &[]),
        (&[1, 9], &[4, 1], &[1]),
        (&[7, 1, 33], &[5, 33], &[7, 5, 1]),
        (&[2, 1, 4, 1, 3], &[4, 1, 1], &[2, 3, 1, 5, 1]),
    ];
    for dt in FLOATS {
        for (a, b, c) in shapes {
            v.push(Case {
                name: format!("float chain {dt} {a:?} {b:?} {c:?}"),
                op: region(float_chain.clone()),
                ins: vec![values(rng, a, dt), values(rng, b, dt), values(rng, c, dt)],
            });
            let mixed = vec![
                S::Compare(CompareOp::Lt, Input(0), Input(1)),
                S::Cast(dt, Input(2)),
                S::Where(Step(0), Step(1), Input(0)),
                S::Cast(DType::F64, Step(2)),
                S::Binary(BinaryOp::Mul, Step(3), Step(3)),
                S::Cast(dt, Step(4)),
                S::Activation(Activation::Sqrt, Step(5)),
            ];
            v.push(Case {
                name: format!("mixed chain {dt} {a:?} {b:?} {c:?}"),
                op: region(mixed),
                ins: vec![
                    values(rng, a, dt),
                    values(rng, b, dt),
                    values(rng, c, DType::I32),
                ],
            });
            let to_int = vec![
                S::Cast(DType::I32, Input(0)),
                S::Binary(BinaryOp::Mul, Step(0), Input(2)),
                S::Compare(CompareOp::Ge, Step(1), Input(2)),
                S::Cast(DType::U8, Step(1)),
                S::Binary(BinaryOp::Add, Step(3), Step(3)),
                S::Where(Step(2), Step(4), Step(3)),
            ];
            let scaled = |x: HostTensor| {
                let s: Vec<f64> = x.to_f64_vec().iter().map(|v| v * 40.0).collect();
                t(&x.shape, s, x.dtype)
            };
            v.push(Case {
                name: format!("int chain {dt} {a:?} {b:?} {c:?}"),
                op: region(to_int),
                ins: vec![
                    scaled(values(rng, a, dt)),
                    values(rng, b, dt),
                    values(rng, c, DType::I32),
                ],
            });
        }
        // Resize prologue: broadcast partners of several kinds, and a higher-rank output.
        let x: &[usize] = &[2, 3, 5, 7];
        let add_relu = vec![
            S::Binary(BinaryOp::Add, Input(0), Input(1)),
            S::Activation(Activation::Relu, Step(0)),
        ];
        for b in [
            &[3usize, 1, 1][..],
            &[14],
            &[2, 3, 10, 14],
            &[2, 1, 1, 1, 1],
        ] {
            v.push(Case {
                name: format!("resize {dt} {b:?}"),
                op: Op::ElementwiseRegion {
                    chain: add_relu.clone(),
                    prologue: RegionPrologue::ResizeNearest2x,
                },
                ins: vec![values(rng, x, dt), values(rng, b, dt)],
            });
        }
        v.push(Case {
            name: format!("resize alone {dt}"),
            op: Op::ElementwiseRegion {
                chain: vec![S::Activation(Activation::Sigmoid, Input(0))],
                prologue: RegionPrologue::ResizeNearest2x,
            },
            ins: vec![values(rng, &[1, 2, 3, 4], dt)],
        });
        // Batch regions: a few samples, and more than one launch's table holds.
        let scale = vec![
            S::Binary(BinaryOp::Sub, Input(0), Input(1)),
            S::Binary(BinaryOp::Mul, Step(0), Input(2)),
        ];
        let batches: [(usize, &[usize], &[usize], RegionPrologue); 3] = [
            (3, &[1, 4, 6, 5], &[4, 1, 1], NONE),
            (
                2,
                &[1, 4, 3, 5],
                &[4, 1, 1],
                RegionPrologue::ResizeNearest2x,
            ),
            (70, &[1, 4, 3], &[4, 1], NONE),
        ];
        for (nb, s, m, prologue) in batches {
            let mut ins: Vec<HostTensor> = (0..nb).map(|_| values(rng, s, dt)).collect();
            ins.push(values(rng, m, dt));
            ins.push(values(rng, &[1], dt));
            v.push(Case {
                name: format!("batch {dt} x{nb} {s:?} {prologue:?}"),
                op: Op::BatchElementwiseRegion {
                    chain: scale.clone(),
                    num_batch_inputs: nb,
                    prologue,
                },
                ins,
            });
        }
        // Batch region whose chain ignores the samples' input 0 slot after the first step.
        v.push(Case {
            name: format!("batch shared-only {dt}"),
            op: Op::BatchElementwiseRegion {
                chain: vec![S::Activation(Activation::Neg, Input(1))],
                num_batch_inputs: 2,
                prologue: NONE,
            },
            ins: vec![
                values(rng, &[1, 5], dt),
                values(rng, &[1, 5], dt),
                values(rng, &[5], dt),
            ],
        });
        for to in FLOATS {
            for gate_first in [false, true] {
                v.push(Case {
                    name: format!("swiglu {dt} -> {to} gate_first {gate_first}"),
                    op: Op::FusedSwiGLU {
                        cast_to: Some(to),
                        gate_first,
                    },
                    ins: vec![values(rng, &[3, 5, 22], dt)],
                });
            }
        }
        v.push(Case {
            name: format!("stop_gradient {dt}"),
            op: Op::StopGradient,
            ins: vec![values(rng, &[3, 5], dt)],
        });
    }
    v
}

#[test]
fn generated_kernels_match_the_cpu_on_the_host() {
    let mut rng = Rng::new("generated_kernels_match_the_cpu_on_the_host");
    let mut cases = single_op_cases(&mut rng);
    cases.extend(cast_cases(&mut rng));
    cases.extend(region_cases(&mut rng));
    check(&cases);
}

/// The ONNX-only Binary ops have no device function yet: planning one (alone or inside a
/// region) answers `Unsupported`, so the node falls back to the CPU with the reason in the
/// dispatch report instead of failing the compile.
#[test]
fn binary_ops_without_a_kernel_fall_back() {
    let ops = [
        BinaryOp::Mod { fmod: false },
        BinaryOp::Mod { fmod: true },
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::ShiftLeft,
        BinaryOp::ShiftRight,
    ];
    let dev = |buf, dtype| DevTensor {
        ptr: fake_ptr(buf),
        dims: vec![4, 3],
        dtype,
    };
    for op in ops {
        let ins = [dev(0, DType::I64), dev(1, DType::I64)];
        let single = plan(&Op::Binary(op), &ins, &dev(2, DType::I64));
        assert!(
            matches!(single, Err(LowerError::Unsupported(ref m)) if m.contains(&format!("{op:?}"))),
            "{op:?}: {:?}",
            single.err()
        );
        let chain = region(vec![
            S::Binary(BinaryOp::Add, Input(0), Input(1)),
            S::Binary(op, Step(0), Input(1)),
        ]);
        let fused = plan(&chain, &ins, &dev(2, DType::I64));
        assert!(
            matches!(fused, Err(LowerError::Unsupported(_))),
            "{op:?} in a region"
        );
    }
}
