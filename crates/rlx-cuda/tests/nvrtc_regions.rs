//! Generated elementwise kernels compile with NVRTC for sm_90: every activation, binary op,
//! compare, where, casts between all dtype pairs, multi-step chains with broadcast inputs,
//! the resize prologue, batch regions and SwiGLU, in each dtype they take. Needs only libnvrtc
//! and the CUDA headers, no GPU; skips when libnvrtc is absent unless `RLX_REQUIRE_NVRTC=1`.
//!
//! Each generated source is the helper library followed by one kernel. To keep NVRTC runs
//! few, the kernels of a family are compiled together behind one copy of the helpers (a few
//! are also compiled alone, exactly as the backend hands them to NVRTC).
use rlx_cuda::lower::elementwise::{batch_region_source, region_source, swiglu_source};
use rlx_cuda::nvrtc;
use rlx_ir::ChainOperand::{Input, Step};
use rlx_ir::ChainStep as S;
use rlx_ir::{Activation, BinaryOp, ChainStep, CompareOp, DType, RegionPrologue};
use std::collections::BTreeMap;

pub fn nvrtc_or_skip() -> bool {
    if nvrtc::nvrtc_available() {
        return true;
    }
    if rlx_ir::env::flag(rlx_ir::env::Switch::RequireNvrtc) {
        panic!("RLX_REQUIRE_NVRTC=1 but libnvrtc was not found on the loader path");
    }
    eprintln!("skipping: libnvrtc not found (set LD_LIBRARY_PATH to CUDA 13's lib folder)");
    false
}

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
const INTS: [DType; 4] = [DType::I32, DType::I64, DType::U8, DType::Bool];
const NONE: RegionPrologue = RegionPrologue::None;

/// A shape written inline in a case table.
type D = &'static [usize];

fn compile(name: &str, body: &str) {
    let full = format!("{}\n{}", rlx_cuda::kernels::COMMON, body);
    match nvrtc::compile_uncached(name, &full, "sm_90") {
        Ok(cubin) => assert!(!cubin.is_empty(), "{name}: empty CUBIN"),
        Err(e) => panic!("{name} failed to compile:\n{e}"),
    }
}

/// Sources of one family, compiled as one program: the shared helper prefix once, then
/// every distinct kernel.
#[derive(Default)]
struct Family {
    helpers: Option<String>,
    kernels: BTreeMap<String, String>,
}

impl Family {
    fn add(&mut self, (src, name): (String, String)) {
        let at = src
            .find("extern \"C\"")
            .expect("a generated source holds a kernel");
        // Back up to the comment line describing the kernel.
        let at = src[..at].rfind("\n//").map_or(at, |p| p + 1);
        let (helpers, kernel) = src.split_at(at);
        match &self.helpers {
            Some(h) => assert_eq!(h, helpers, "{name}: generated sources share one prefix"),
            None => self.helpers = Some(helpers.to_string()),
        }
        assert!(
            kernel.contains(&name),
            "{name} is not defined in its source"
        );
        self.kernels.insert(name, kernel.to_string());
    }

    fn compile(&self, family: &str) {
        let mut body = self.helpers.clone().expect("an empty family");
        for k in self.kernels.values() {
            body.push_str(k);
        }
        compile(family, &body);
        println!("{family}: {} kernels", self.kernels.len());
    }
}

fn one(
    chain: Vec<ChainStep>,
    ins: &[(DType, &[usize])],
    out: (DType, &[usize]),
) -> (String, String) {
    region_source(&chain, NONE, ins, out).unwrap_or_else(|e| panic!("{chain:?}: {e:?}"))
}

#[test]
fn activations_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let mut f = Family::default();
    let d: &[usize] = &[7, 33];
    for dt in FLOATS {
        for a in Activation::ALL {
            f.add(one(vec![S::Activation(a, Input(0))], &[(dt, d)], (dt, d)));
        }
    }
    assert_eq!(f.kernels.len(), 18 * 4);
    f.compile("activations");
}

#[test]
fn binaries_compile() {
    if !nvrtc_or_skip() {
        return;
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
    // same shape, bias (i % m), column (i / d), middle block, general strided, scalar
    let shapes: [(D, D, D); 6] = [
        (&[7, 33], &[7, 33], &[7, 33]),
        (&[7, 33], &[33], &[7, 33]),
        (&[7, 1], &[7, 33], &[7, 33]),
        (&[5, 1, 1], &[2, 5, 3, 4], &[2, 5, 3, 4]),
        (&[4, 1, 5], &[3, 1], &[4, 3, 5]),
        (&[], &[9], &[9]),
    ];
    let mut f = Family::default();
    for dt in FLOATS.into_iter().chain(INTS) {
        for op in ops {
            let (a, b, o) = shapes[1];
            f.add(one(
                vec![S::Binary(op, Input(0), Input(1))],
                &[(dt, a), (dt, b)],
                (dt, o),
            ));
        }
    }
    for dt in [DType::F32, DType::BF16, DType::I32] {
        for (a, b, o) in shapes {
            f.add(one(
                vec![S::Binary(BinaryOp::Mul, Input(0), Input(1))],
                &[(dt, a), (dt, b)],
                (dt, o),
            ));
        }
    }
    f.compile("binaries");
}

#[test]
fn compares_and_where_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let ops = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ];
    let mut f = Family::default();
    let (a, b, o): (&[usize], &[usize], &[usize]) = (&[3, 1, 8], &[5, 8], &[3, 5, 8]);
    for dt in FLOATS.into_iter().chain(INTS) {
        for op in ops {
            f.add(one(
                vec![S::Compare(op, Input(0), Input(1))],
                &[(dt, a), (dt, b)],
                (DType::Bool, o),
            ));
        }
        for cond in FLOATS.into_iter().chain(INTS) {
            f.add(one(
                vec![S::Where(Input(0), Input(1), Input(2))],
                &[(cond, &[3, 1, 1]), (dt, a), (dt, b)],
                (dt, o),
            ));
        }
    }
    f.compile("compares_where");
}

#[test]
fn casts_between_all_dtypes_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let mut f = Family::default();
    let d: &[usize] = &[129];
    for from in DType::ALL {
        for to in DType::ALL {
            f.add(one(vec![S::Cast(to, Input(0))], &[(from, d)], (to, d)));
        }
    }
    assert_eq!(f.kernels.len(), 64);
    f.compile("casts");
}

fn chains() -> Vec<(Vec<ChainStep>, Vec<DType>, DType)> {
    let mut v = Vec::new();
    for dt in FLOATS {
        v.push((
            vec![
                S::Binary(BinaryOp::Mul, Input(0), Input(1)),
                S::Binary(BinaryOp::Add, Step(0), Input(2)),
                S::Activation(Activation::Silu, Step(1)),
                S::Binary(BinaryOp::Max, Step(2), Input(0)),
                S::Activation(Activation::Tanh, Step(3)),
                S::Binary(BinaryOp::Sub, Input(2), Step(4)),
            ],
            vec![dt, dt, dt],
            dt,
        ));
        // Mixed classes: compare -> where -> f64 -> back, with an integer input.
        v.push((
            vec![
                S::Compare(CompareOp::Lt, Input(0), Input(1)),
                S::Cast(dt, Input(2)),
                S::Where(Step(0), Step(1), Input(0)),
                S::Cast(DType::F64, Step(2)),
                S::Binary(BinaryOp::Mul, Step(3), Step(3)),
                S::Cast(dt, Step(4)),
            ],
            vec![dt, dt, DType::I32],
            dt,
        ));
        // Integer output.
        v.push((
            vec![
                S::Cast(DType::I32, Input(0)),
                S::Binary(BinaryOp::Mul, Step(0), Input(2)),
                S::Compare(CompareOp::Ge, Step(1), Input(2)),
                S::Cast(DType::U8, Step(2)),
            ],
            vec![dt, dt, DType::I32],
            DType::U8,
        ));
    }
    v
}

#[test]
fn chains_with_broadcast_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let shapes: [(D, D, D, D); 3] = [
        (&[2, 3, 5], &[5], &[], &[2, 3, 5]),
        (&[1, 9], &[4, 1], &[1], &[4, 9]),
        (&[7, 1, 33], &[5, 33], &[7, 5, 1], &[7, 5, 33]),
    ];
    let mut f = Family::default();
    for (chain, dts, out) in chains() {
        for (a, b, c, o) in shapes {
            f.add(one(
                chain.clone(),
                &[(dts[0], a), (dts[1], b), (dts[2], c)],
                (out, o),
            ));
        }
    }
    f.compile("chains");
}

#[test]
fn prologue_batch_and_swiglu_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let mut f = Family::default();
    let chain = vec![
        S::Binary(BinaryOp::Add, Input(0), Input(1)),
        S::Activation(Activation::Relu, Step(0)),
    ];
    let scale = vec![
        S::Binary(BinaryOp::Sub, Input(0), Input(1)),
        S::Binary(BinaryOp::Mul, Step(0), Input(2)),
    ];
    for dt in FLOATS {
        let x: &[usize] = &[2, 3, 5, 7];
        let o: &[usize] = &[2, 3, 10, 14];
        for b in [&[3usize, 1, 1][..], &[14], &[1, 2, 3, 10, 14]] {
            let out: &[usize] = if b.len() == 5 { &[1, 2, 3, 10, 14] } else { o };
            f.add(
                region_source(
                    &chain,
                    RegionPrologue::ResizeNearest2x,
                    &[(dt, x), (dt, b)],
                    (dt, out),
                )
                .unwrap(),
            );
        }
        f.add(
            region_source(
                &[S::Activation(Activation::Sigmoid, Input(0))],
                RegionPrologue::ResizeNearest2x,
                &[(dt, x)],
                (dt, o),
            )
            .unwrap(),
        );
        let s: &[usize] = &[1, 4, 6, 5];
        let (m, k): (&[usize], &[usize]) = (&[4, 1, 1], &[1]);
        f.add(
            batch_region_source(
                &scale,
                3,
                NONE,
                &[(dt, s), (dt, s), (dt, s), (dt, m), (dt, k)],
                (dt, &[3, 4, 6, 5]),
            )
            .unwrap(),
        );
        f.add(
            batch_region_source(
                &scale,
                2,
                RegionPrologue::ResizeNearest2x,
                &[(dt, s), (dt, s), (dt, m), (dt, k)],
                (dt, &[2, 4, 12, 10]),
            )
            .unwrap(),
        );
        for to in FLOATS {
            for gate_first in [false, true] {
                f.add(swiglu_source(dt, to, gate_first).unwrap());
            }
        }
    }
    f.compile("prologue_batch_swiglu");
}

/// A few sources exactly as the backend compiles them (helpers + one kernel).
#[test]
fn single_sources_compile() {
    if !nvrtc_or_skip() {
        return;
    }
    let (src, name) = one(
        vec![S::Activation(Activation::Gelu, Input(0))],
        &[(DType::BF16, &[4096])],
        (DType::BF16, &[4096]),
    );
    compile(&name, &src);
    let c = &chains()[1];
    let (src, name) = one(
        c.0.clone(),
        &[
            (c.1[0], &[7, 1, 33]),
            (c.1[1], &[5, 33]),
            (c.1[2], &[7, 5, 1]),
        ],
        (c.2, &[7, 5, 33]),
    );
    compile(&name, &src);
    let (src, name) = swiglu_source(DType::F16, DType::F32, true).unwrap();
    compile(&name, &src);
}

/// The text specialises reads: same-shape inputs index directly, and the name changes with
/// the dtypes (so the disk cache keeps them apart).
#[test]
fn generated_text_specialises_reads_and_dtypes() {
    let add = vec![S::Binary(BinaryOp::Add, Input(0), Input(1))];
    let d: &[usize] = &[8, 16];
    let (src, name) = region_source(
        &add,
        NONE,
        &[(DType::F32, d), (DType::F32, d)],
        (DType::F32, d),
    )
    .unwrap();
    assert!(
        src.contains("ew_ld(in0, i)") && src.contains("ew_ld(in1, i)"),
        "{src}"
    );
    assert!(!src.contains("dims_offset(in"), "{src}");
    let (src_b, _) = region_source(
        &add,
        NONE,
        &[(DType::F32, d), (DType::F32, &[16])],
        (DType::F32, d),
    )
    .unwrap();
    assert!(src_b.contains("ew_ld(in1, i % in1_m)"), "{src_b}");
    let (src_s, _) = region_source(
        &add,
        NONE,
        &[(DType::F32, &[4, 1, 16]), (DType::F32, &[3, 1])],
        (DType::F32, &[4, 3, 16]),
    )
    .unwrap();
    assert!(src_s.contains("dims_offset(in0_v, i)"), "{src_s}");
    let (src_c, _) = region_source(
        &add,
        NONE,
        &[(DType::F32, &[1]), (DType::F32, &[5, 1, 7])],
        (DType::F32, &[2, 5, 3, 7]),
    )
    .unwrap();
    assert!(src_c.contains("ew_ld(in0, 0)"), "{src_c}");
    assert!(
        src_c.contains("ew_ld(in1, dims_offset(in1_v, i))"),
        "{src_c}"
    );
    let (src_d, _) = region_source(
        &add,
        NONE,
        &[(DType::F32, &[3, 1, 1, 1]), (DType::F32, &[2, 1, 6, 1, 1])],
        (DType::F32, &[2, 3, 6, 5, 4]),
    )
    .unwrap();
    assert!(src_d.contains("ew_ld(in0, (i / in0_d) % in0_m)"), "{src_d}");
    assert!(
        src_d.contains("ew_ld(in1, dims_offset(in1_v, i))"),
        "{src_d}"
    );
    let (_, name_h) = region_source(
        &add,
        NONE,
        &[(DType::F16, d), (DType::F16, d)],
        (DType::F16, d),
    )
    .unwrap();
    assert_ne!(name, name_h);
    // Dims are arguments, not text: another same-shape size reuses the kernel.
    let e: &[usize] = &[1000];
    let (_, name_e) = region_source(
        &add,
        NONE,
        &[(DType::F32, e), (DType::F32, e)],
        (DType::F32, e),
    )
    .unwrap();
    assert_eq!(name, name_e);
    // A chain whose dtypes do not fit is refused.
    assert!(region_source(
        &add,
        NONE,
        &[(DType::F32, d), (DType::F16, d)],
        (DType::F32, d)
    )
    .is_err());
}

/// Prints a few generated kernels (`-- --ignored --nocapture`), for reading the text.
#[test]
#[ignore]
fn print_sample_sources() {
    let c = &chains()[1];
    let (src, _) = one(
        c.0.clone(),
        &[
            (c.1[0], &[7, 1, 33]),
            (c.1[1], &[5, 33]),
            (c.1[2], &[7, 5, 1]),
        ],
        (c.2, &[7, 5, 33]),
    );
    println!("{}", &src[src.find("// in [").unwrap()..]);
    let (src, _) = batch_region_source(
        &[
            S::Binary(BinaryOp::Sub, Input(0), Input(1)),
            S::Binary(BinaryOp::Mul, Step(0), Input(2)),
        ],
        2,
        RegionPrologue::ResizeNearest2x,
        &[
            (DType::F16, &[1, 4, 6, 5]),
            (DType::F16, &[1, 4, 6, 5]),
            (DType::F16, &[4, 1, 1]),
            (DType::F16, &[1]),
        ],
        (DType::F16, &[2, 4, 12, 10]),
    )
    .unwrap();
    println!("{}", &src[src.find("// in [").unwrap()..]);
    let (src, _) = swiglu_source(DType::F64, DType::BF16, false).unwrap();
    println!("{}", &src[src.find("// swiglu").unwrap()..]);
}
