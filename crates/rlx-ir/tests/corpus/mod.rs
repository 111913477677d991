//! Graphs for the serialization tests: one holding every op variant with non-default
//! params (built with `push_node`, so it does not depend on the shape rules), and small
//! graphs that verify.
#![allow(dead_code)]
use rlx_ir::*;
use std::collections::BTreeSet;

fn dims(d: &[Dim], dtype: DType) -> Shape {
    Shape::with_dims(d.to_vec(), dtype)
}

/// Every `Op` variant, every value of every parameter enum, dynamic dims, names, a
/// constant. Shapes are plausible but not checked: compare it without verifying.
pub fn every_op() -> Graph {
    let b = Dim::dynamic("B");
    let s = Dim::dynamic("S");
    let bs512 = dims(&[b.clone(), s.clone(), 512.into()], DType::F32);
    let mut g = Graph::new("every op \"quoted\" ünïcode");
    let x = g.input("x", bs512.clone()).unwrap();
    let w = g.param("w", Shape::new(&[512, 512], DType::F16)).unwrap();
    let c = g
        .constant(HostTensor::from_f32(
            &[2, 3],
            &[1.5, -2.0, 0.25, 3.0e-7, f32::MAX, -0.0],
        ))
        .unwrap();
    let ids = g
        .input("ids", dims(&[b.clone(), s.clone()], DType::I64))
        .unwrap();
    let push = |g: &mut Graph, op: Op, ins: &[NodeId], shape: &Shape| {
        g.push_node(op, ins.to_vec(), shape.clone())
    };
    for a in Activation::ALL {
        push(&mut g, Op::Activation(a), &[x], &bs512);
    }
    for op in [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Pow,
        BinaryOp::Mod { fmod: false },
        BinaryOp::Mod { fmod: true },
        BinaryOp::BitAnd,
        BinaryOp::BitOr,
        BinaryOp::BitXor,
        BinaryOp::ShiftLeft,
        BinaryOp::ShiftRight,
    ] {
        push(&mut g, Op::Binary(op), &[x, x], &bs512);
    }
    let boolean = bs512.with_dtype(DType::Bool);
    for op in [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ] {
        push(&mut g, Op::Compare(op), &[x, x], &boolean);
    }
    let cond = NodeId(g.len() - 1);
    push(&mut g, Op::Where, &[cond, x, x], &bs512);
    for to in DType::ALL {
        push(&mut g, Op::Cast { to }, &[x], &bs512.with_dtype(to));
    }
    for (k, format) in MiniFloat::ALL.into_iter().enumerate() {
        let op = Op::FloatRound {
            format,
            saturate: k % 2 == 0,
        };
        push(&mut g, op, &[x], &bs512.with_dtype(DType::F32));
    }
    push(&mut g, Op::StopGradient, &[x], &bs512);
    let mm = push(&mut g, Op::MatMul, &[x, w], &bs512);
    g.set_name(mm, "proj").unwrap();
    for activation in [Some(Activation::Gelu), None] {
        push(
            &mut g,
            Op::FusedMatMulBiasAct { activation },
            &[x, w, c],
            &bs512,
        );
    }
    for scheme in QuantScheme::ALL {
        push(&mut g, Op::DequantMatMul { scheme }, &[x, w], &bs512);
        push(&mut g, Op::Dequantize { scheme }, &[w], &bs512);
    }
    let fused = Op::FusedDequantMatMul {
        scheme: QuantScheme::Q4_K,
        norm_eps: Some(1e-6),
        residual: true,
        glu: None,
    };
    push(&mut g, fused, &[x, w, c, x], &bs512);
    push(&mut g, Op::CacheWrite { axis: 1 }, &[x, x, ids], &bs512);
    let rcw = Op::RopeCacheWrite {
        axis: 1,
        head_dim: 64,
        n_rot: 32,
        style: RopeStyle::Interleaved,
    };
    push(&mut g, rcw, &[x, x, ids, c, c], &bs512);
    push(
        &mut g,
        Op::LayerNorm {
            axis: -1,
            eps: 1e-5,
        },
        &[x, c, c],
        &bs512,
    );
    push(
        &mut g,
        Op::RmsNorm {
            axis: -2,
            eps: 1e-6,
        },
        &[x, c],
        &bs512,
    );
    push(
        &mut g,
        Op::FusedResidualLN {
            has_bias: true,
            eps: 2.5e-5,
        },
        &[x, x, c, c, c],
        &bs512,
    );
    push(
        &mut g,
        Op::FusedResidualRmsNorm {
            has_bias: false,
            eps: 1e-6,
        },
        &[x, x, c],
        &bs512,
    );
    for (op, keep_dim) in [
        (ReduceOp::Sum, true),
        (ReduceOp::Mean, false),
        (ReduceOp::Max, true),
        (ReduceOp::Min, false),
        (ReduceOp::Prod, true),
    ] {
        push(
            &mut g,
            Op::Reduce {
                op,
                axes: vec![0, -1],
                keep_dim,
            },
            &[x],
            &dims(std::slice::from_ref(&s), DType::F32),
        );
    }
    push(&mut g, Op::Softmax { axis: -1 }, &[x], &bs512);
    push(
        &mut g,
        Op::ArgMax {
            axis: 1,
            keep_dim: true,
        },
        &[x],
        &dims(&[b.clone(), 1.into(), 512.into()], DType::I64),
    );
    let cum = Op::CumSum {
        axis: -1,
        exclusive: true,
        reverse: false,
    };
    push(&mut g, cum, &[x], &bs512);
    let top = Op::TopK {
        k: 4,
        axis: 2,
        largest: false,
        sorted: true,
    };
    push(&mut g, top, &[x], &bs512.with_dtype(DType::I64));
    let n = Shape::new(&[7], DType::F32);
    push(&mut g, Op::SoftmaxCrossEntropy, &[c, c], &n);
    push(&mut g, Op::SoftmaxCrossEntropyWithLogits, &[c, ids], &n);
    push(&mut g, Op::SoftmaxCrossEntropyBackward, &[c, ids, c], &n);
    push(
        &mut g,
        Op::Reshape {
            shape: vec![0, -1, 8],
        },
        &[x],
        &dims(&[b.clone(), s.clone(), 64.into(), 8.into()], DType::F32),
    );
    push(
        &mut g,
        Op::Expand {
            shape: vec![b.clone(), 4.into(), Dim::dynamic("S")],
        },
        &[c],
        &bs512,
    );
    push(
        &mut g,
        Op::Transpose {
            perm: vec![0, 2, 1],
        },
        &[x],
        &bs512,
    );
    push(
        &mut g,
        Op::Narrow {
            axis: -1,
            start: 3,
            len: 5,
        },
        &[x],
        &bs512,
    );
    push(&mut g, Op::Concat { axis: 1 }, &[x, x, x], &bs512);
    push(&mut g, Op::Gather { axis: -2 }, &[x, ids], &bs512);
    push(
        &mut g,
        Op::Tile {
            repeats: vec![1, 2, 3],
        },
        &[x],
        &bs512,
    );
    push(&mut g, Op::GatherElements { axis: -1 }, &[x, ids], &bs512);
    push(&mut g, Op::GatherND { batch_dims: 1 }, &[x, ids], &bs512);
    for reduction in [
        ScatterReduction::None,
        ScatterReduction::Add,
        ScatterReduction::Mul,
        ScatterReduction::Max,
        ScatterReduction::Min,
    ] {
        let op = Op::ScatterElements {
            axis: -2,
            reduction,
        };
        push(&mut g, op, &[x, ids, x], &bs512);
        push(&mut g, Op::ScatterND { reduction }, &[x, ids, x], &bs512);
    }
    push(&mut g, Op::OneHot { axis: -1, depth: 7 }, &[ids, c], &bs512);
    push(&mut g, Op::Range { len: 9 }, &[c, c, c], &bs512);
    for reduce in CollectiveReduce::ALL {
        push(&mut g, Op::AllReduce { reduce }, &[x], &bs512);
        let rs = Op::ReduceScatter {
            reduce,
            axis: 2,
            ranks: 4,
        };
        push(&mut g, rs, &[x], &bs512);
    }
    push(&mut g, Op::AllGather { axis: 2, ranks: 3 }, &[x], &bs512);
    push(
        &mut g,
        Op::Pad {
            pads: vec![[0, 1], [2, 3], [4, 0]],
            value: f64::NEG_INFINITY,
        },
        &[x],
        &bs512,
    );
    push(
        &mut g,
        Op::Slice {
            axes: vec![0, -1],
            starts: vec![1, -3],
            ends: vec![i64::MAX, i64::MIN],
            steps: vec![1, -2],
        },
        &[x],
        &bs512,
    );
    let layouts = [
        AttentionLayout::Packed,
        AttentionLayout::Bshd,
        AttentionLayout::Bhsd,
        AttentionLayout::Packed,
    ];
    let masks = [
        MaskKind::None,
        MaskKind::Causal,
        MaskKind::SlidingWindow(128),
        MaskKind::Custom,
    ];
    for (i, (mask, layout)) in masks.into_iter().zip(layouts).enumerate() {
        let mut spec = AttentionSpec::new(8, 64).mask(mask).layout(layout);
        if i % 2 == 1 {
            spec = spec.v_head_dim(32).scale(0.125).softcap(30.0);
        }
        let ins: &[NodeId] = if mask == MaskKind::Custom {
            &[x, x, x, ids]
        } else {
            &[x, x, x]
        };
        let a = push(&mut g, Op::Attention(spec), ins, &bs512);
        g.set_name(a, format!("attn{i}")).unwrap();
    }
    let cached = AttentionSpec::new(8, 64).causal().with_past();
    push(
        &mut g,
        Op::Attention(cached.clone()),
        &[x, x, x, ids],
        &bs512,
    );
    let fused = Op::CachedAttention {
        spec: cached,
        rope: Some(CachedRope {
            n_rot: 32,
            style: RopeStyle::Half,
        }),
    };
    push(&mut g, fused, &[x, x, x, x, x, ids, c, c], &bs512);
    for style in [RopeStyle::Half, RopeStyle::Interleaved] {
        push(
            &mut g,
            Op::Rope {
                head_dim: 64,
                n_rot: 32,
                style,
            },
            &[x, c, c],
            &bs512,
        );
    }
    push(
        &mut g,
        Op::FusedSwiGLU {
            cast_to: Some(DType::BF16),
            gate_first: true,
        },
        &[x],
        &bs512,
    );
    push(
        &mut g,
        Op::FusedSwiGLU {
            cast_to: None,
            gate_first: false,
        },
        &[x],
        &bs512,
    );
    let img = Shape::with_dims(
        vec![b.clone(), 3.into(), Dim::dynamic("H"), 17.into()],
        DType::F32,
    );
    let conv = ConvSpec::new([3, 5])
        .stride([2, 1])
        .padding([1, 2])
        .dilation([1, 3])
        .groups(3);
    push(&mut g, Op::Conv(conv), &[x, w, c], &img);
    let pools = [
        PoolSpec {
            kind: PoolKind::Max,
            kernel_size: [3, 3],
            stride: [2, 2],
            padding: [1, 1],
        },
        PoolSpec {
            kind: PoolKind::Avg,
            kernel_size: [2, 4],
            stride: [1, 2],
            padding: [0, 1],
        },
    ];
    for p in pools {
        push(&mut g, Op::Pool(p), &[x], &img);
    }
    push(&mut g, Op::ResizeNearest2x, &[x], &img);
    push(
        &mut g,
        Op::Conv2dBackwardInput {
            spec: conv,
            input_hw: [33, 17],
        },
        &[x, w],
        &img,
    );
    push(&mut g, Op::Conv2dBackwardWeight(conv), &[x, x], &img);
    push(&mut g, Op::MaxPool2dBackward(pools[0]), &[x, x], &img);
    use ChainOperand::{Input as In, Step};
    let chain = vec![
        ChainStep::Activation(Activation::Silu, In(0)),
        ChainStep::Binary(BinaryOp::Mul, Step(0), In(1)),
        ChainStep::Cast(DType::F16, Step(1)),
        ChainStep::Compare(CompareOp::Gt, Step(1), In(2)),
        ChainStep::Where(Step(3), Step(1), In(0)),
    ];
    push(
        &mut g,
        Op::ElementwiseRegion {
            chain: chain.clone(),
            prologue: RegionPrologue::ResizeNearest2x,
        },
        &[x, x, x],
        &bs512,
    );
    push(
        &mut g,
        Op::ElementwiseRegion {
            chain: chain[..2].to_vec(),
            prologue: RegionPrologue::None,
        },
        &[x, x],
        &bs512,
    );
    push(
        &mut g,
        Op::BatchElementwiseRegion {
            chain,
            num_batch_inputs: 2,
            prologue: RegionPrologue::ResizeNearest2x,
        },
        &[x, x, x, x],
        &bs512,
    );
    push(
        &mut g,
        Op::TransformRegion {
            steps: vec![
                TransformStep::Reshape(vec![-1, 0, 2]),
                TransformStep::Transpose(vec![2, 0, 1]),
                TransformStep::Narrow {
                    axis: -2,
                    start: 1,
                    len: 9,
                },
                TransformStep::Expand(vec![Dim::dynamic("B"), 1.into(), 9.into()]),
            ],
        },
        &[x],
        &bs512,
    );
    for (inverse, norm) in [
        (true, FftNorm::Ortho),
        (false, FftNorm::Forward),
        (true, FftNorm::Backward),
    ] {
        push(&mut g, Op::Fft { inverse, norm }, &[x], &bs512);
    }
    push(&mut g, Op::LogMel, &[x, c], &bs512);
    let last = push(&mut g, Op::LogMelBackward, &[x, c, x], &bs512);
    g.set_name(last, "dspec").unwrap();
    g.set_outputs(vec![mm, last, x]);
    g
}

/// Names of the parameter-enum values a graph uses (exhaustive matches, as above), e.g.
/// `"mask:Causal"`, `"step:Where"`, `"transform:Narrow"`.
pub fn param_values(g: &Graph) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for n in &g.nodes {
        match &n.op {
            Op::Attention(s) => {
                let m = match s.mask_kind {
                    MaskKind::None => "None",
                    MaskKind::Causal => "Causal",
                    MaskKind::SlidingWindow(_) => "SlidingWindow",
                    MaskKind::Custom => "Custom",
                };
                out.insert(format!("mask:{m}"));
                out.insert(format!("layout:{:?}", s.layout));
            }
            Op::ElementwiseRegion { chain, prologue }
            | Op::BatchElementwiseRegion {
                chain, prologue, ..
            } => {
                let p = match prologue {
                    RegionPrologue::None => "None",
                    RegionPrologue::ResizeNearest2x => "ResizeNearest2x",
                };
                out.insert(format!("prologue:{p}"));
                for st in chain {
                    let k = match st {
                        ChainStep::Activation(..) => "Activation",
                        ChainStep::Binary(..) => "Binary",
                        ChainStep::Cast(..) => "Cast",
                        ChainStep::Compare(..) => "Compare",
                        ChainStep::Where(..) => "Where",
                    };
                    out.insert(format!("step:{k}"));
                }
            }
            Op::TransformRegion { steps } => {
                for st in steps {
                    let k = match st {
                        TransformStep::Reshape(_) => "Reshape",
                        TransformStep::Transpose(_) => "Transpose",
                        TransformStep::Narrow { .. } => "Narrow",
                        TransformStep::Expand(_) => "Expand",
                    };
                    out.insert(format!("transform:{k}"));
                }
            }
            Op::DequantMatMul { scheme } => {
                // Exhaustive, so a new scheme must be named here (and in the expected set).
                let k = match scheme {
                    QuantScheme::Q8_0 => "Q8_0",
                    QuantScheme::Q4_0 => "Q4_0",
                    QuantScheme::Q4_1 => "Q4_1",
                    QuantScheme::Q5_0 => "Q5_0",
                    QuantScheme::Q5_1 => "Q5_1",
                    QuantScheme::Q4_K => "Q4_K",
                    QuantScheme::Q5_K => "Q5_K",
                    QuantScheme::Q6_K => "Q6_K",
                    QuantScheme::F16 => "F16",
                    QuantScheme::BF16 => "BF16",
                };
                out.insert(format!("quant:{k}"));
            }
            Op::Activation(a) => {
                out.insert(format!("act:{a:?}"));
            }
            Op::Cast { to } => {
                out.insert(format!("cast:{to}"));
            }
            Op::Pool(p) => {
                let k = match p.kind {
                    PoolKind::Max => "Max",
                    PoolKind::Avg => "Avg",
                };
                out.insert(format!("pool:{k}"));
            }
            Op::Fft { norm, .. } => {
                let k = match norm {
                    FftNorm::Backward => "Backward",
                    FftNorm::Ortho => "Ortho",
                    FftNorm::Forward => "Forward",
                };
                out.insert(format!("fft:{k}"));
            }
            Op::ScatterElements { reduction, .. } | Op::ScatterND { reduction } => {
                let k = match reduction {
                    ScatterReduction::None => "None",
                    ScatterReduction::Add => "Add",
                    ScatterReduction::Mul => "Mul",
                    ScatterReduction::Max => "Max",
                    ScatterReduction::Min => "Min",
                };
                out.insert(format!("scatter:{k}"));
            }
            Op::AllReduce { reduce } | Op::ReduceScatter { reduce, .. } => {
                let k = match reduce {
                    CollectiveReduce::Sum => "Sum",
                    CollectiveReduce::Mean => "Mean",
                    CollectiveReduce::Max => "Max",
                };
                out.insert(format!("collective:{k}"));
            }
            Op::Rope { style, .. } => {
                let k = match style {
                    RopeStyle::Half => "Half",
                    RopeStyle::Interleaved => "Interleaved",
                };
                out.insert(format!("rope:{k}"));
            }
            _ => {}
        }
    }
    out
}

/// A small graph whose every node has a shape rule today (elementwise ops), so it
/// verifies: dynamic batch dim, a constant, names, every elementwise op kind.
pub fn elementwise() -> Graph {
    let mut g = Graph::new("ew");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 3.into()], DType::F32),
        )
        .unwrap();
    let w = g.param("w", Shape::new(&[3], DType::F32)).unwrap();
    let c = g.constant_f32(&[1, 3], &[0.5, -1.25, 2.0]).unwrap();
    let s = g.add(x, w).unwrap();
    let m = g.mul(s, c).unwrap();
    let a = g.activation(Activation::Gelu, m).unwrap();
    let cmp = g.add_node(Op::Compare(CompareOp::Gt), &[a, x]).unwrap();
    let sel = g.add_node(Op::Where, &[cmp, a, c]).unwrap();
    let h = g.cast(sel, DType::F16).unwrap();
    let sg = g.add_node(Op::StopGradient, &[h]).unwrap();
    g.set_name(sel, "select").unwrap();
    g.set_outputs(vec![sg, a]);
    g
}
