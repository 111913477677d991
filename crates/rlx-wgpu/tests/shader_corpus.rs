//! Without any adapter: a corpus of generated shaders (every activation, binary and compare
//! op, casts between every pair of storable dtypes, where, broadcasts, the resize prologue,
//! word-packed outputs) must validate with naga and translate to MSL (Metal), SPIR-V
//! (Vulkan) and HLSL (DX12). The hand-written kernels are translated the same way whenever a
//! debug build compiles them (every parity test run).
use rlx_ir::{Activation, BinaryOp, ChainOperand::Input as I, ChainStep as S, CompareOp, DType};
use rlx_ir::{ChainOperand, RegionPrologue};
use rlx_wgpu::lower::elementwise::chain_kernel;
use rlx_wgpu::shader::{translate_all, WTensor};
use rlx_wgpu::Caps;

fn t(slab: usize, dims: &[usize], dtype: DType) -> WTensor {
    WTensor {
        slab,
        off: 64,
        dims: dims.to_vec(),
        dtype,
    }
}

const STORABLE: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::U8,
    DType::Bool,
];

#[test]
fn generated_shaders_translate_to_every_backend() {
    let caps = Caps::portable();
    let mut n = 0;
    let mut check = |chain: &[S], ins: &[&WTensor], out: &WTensor, pro: RegionPrologue| {
        let k = chain_kernel(chain, pro, ins, out, &caps)
            .unwrap_or_else(|e| panic!("{chain:?}: {e:?}"));
        translate_all(&k.label, &k.src).unwrap_or_else(|e| panic!("{e}"));
        n += 1;
    };
    let x = t(0, &[3, 5, 7], DType::F32);
    let y = t(1, &[3, 5, 7], DType::F32);
    for a in Activation::ALL {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let xi = t(0, &[3, 5, 7], dt);
            check(
                &[S::Activation(a, I(0))],
                &[&xi],
                &t(1, &[3, 5, 7], dt),
                RegionPrologue::None,
            );
        }
    }
    let bias = t(2, &[7], DType::F32);
    let col = t(2, &[5, 1], DType::F32);
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Pow,
    ];
    for b in ops {
        check(
            &[S::Binary(b, I(0), I(1))],
            &[&x, &bias],
            &y,
            RegionPrologue::None,
        );
        check(
            &[S::Binary(b, I(0), I(1))],
            &[&x, &col],
            &y,
            RegionPrologue::None,
        );
        let xi = t(0, &[3, 5, 7], DType::I32);
        let ci = t(2, &[5, 1], DType::I32);
        check(
            &[S::Binary(b, I(0), I(1))],
            &[&xi, &ci],
            &t(1, &[3, 5, 7], DType::I32),
            RegionPrologue::None,
        );
    }
    for c in [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ] {
        check(
            &[S::Compare(c, I(0), I(1))],
            &[&x, &bias],
            &t(1, &[3, 5, 7], DType::Bool),
            RegionPrologue::None,
        );
    }
    for from in STORABLE {
        for to in STORABLE {
            let xi = t(0, &[4, 9], from);
            check(
                &[S::Cast(to, I(0))],
                &[&xi],
                &t(1, &[4, 9], to),
                RegionPrologue::None,
            );
        }
    }
    let cond = t(3, &[3, 1, 7], DType::Bool);
    check(
        &[S::Where(I(0), I(1), I(2))],
        &[&cond, &x, &bias],
        &y,
        RegionPrologue::None,
    );
    // A chain over several inputs, then the resize prologue on a rank-4 input.
    let chain = [
        S::Binary(BinaryOp::Mul, I(0), I(1)),
        S::Activation(Activation::Gelu, ChainOperand::Step(0)),
        S::Cast(DType::F16, ChainOperand::Step(1)),
    ];
    check(
        &chain,
        &[&x, &bias],
        &t(1, &[3, 5, 7], DType::F16),
        RegionPrologue::None,
    );
    let img = t(0, &[2, 3, 4, 5], DType::F32);
    let big = t(2, &[2, 3, 8, 10], DType::F32);
    check(
        &[S::Binary(BinaryOp::Add, I(0), I(1))],
        &[&img, &big],
        &t(1, &[2, 3, 8, 10], DType::F32),
        RegionPrologue::ResizeNearest2x,
    );
    println!("{n} generated shaders translated to MSL, SPIR-V and HLSL");
    assert!(n >= 120, "the corpus shrank: {n}");
}
