//! The text dump of a graph (`{graph}`) and its one-line summary.
use crate::{
    AttentionLayout, ChainOperand, ChainStep, DType, DimsFmt, Graph, HostTensor, MaskKind, Node,
    Op, OpKind, RegionPrologue, Shape, TransformStep,
};
use std::fmt::{self, Write};

/// How many values of a constant the dump shows.
const CONST_PREVIEW: usize = 4;

/// Floats as a reader wants them: `1e-5` rather than `0.00001`, `0.5` rather than `5e-1`.
/// Generic so an f32 prints its own shortest form, not its f64 widening's.
fn num<T: Into<f64> + Copy + fmt::Display + fmt::LowerExp>(v: T) -> String {
    let a = v.into().abs();
    if a != 0.0 && a.is_finite() && !(1e-3..1e6).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

fn pair(p: [usize; 2]) -> String {
    format!("[{}, {}]", p[0], p[1])
}

fn operand(o: &ChainOperand) -> String {
    match o {
        ChainOperand::Input(i) => format!("in{i}"),
        ChainOperand::Step(j) => format!("s{j}"),
    }
}

fn chain(steps: &[ChainStep]) -> String {
    let parts: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(j, s)| {
            let rhs = match s {
                ChainStep::Activation(a, x) => format!("{a:?}({})", operand(x)),
                ChainStep::Binary(b, x, y) => format!("{b:?}({}, {})", operand(x), operand(y)),
                ChainStep::Cast(t, x) => format!("Cast<{t}>({})", operand(x)),
                ChainStep::Compare(c, x, y) => format!("{c:?}({}, {})", operand(x), operand(y)),
                ChainStep::Where(c, x, y) => {
                    format!("Where({}, {}, {})", operand(c), operand(x), operand(y))
                }
            };
            format!("s{j} = {rhs}")
        })
        .collect();
    format!("[{}]", parts.join("; "))
}

fn prologue(p: &RegionPrologue) -> &'static str {
    match p {
        RegionPrologue::None => "",
        RegionPrologue::ResizeNearest2x => "prologue=ResizeNearest2x, ",
    }
}

fn transform(s: &TransformStep) -> String {
    match s {
        TransformStep::Reshape(d) => format!("Reshape{}", list(d)),
        TransformStep::Transpose(p) => format!("Transpose{}", list(p)),
        TransformStep::Narrow { axis, start, len } => {
            format!(
                "Narrow(axis={axis}, {start}..{})",
                start.saturating_add(*len)
            )
        }
        TransformStep::Expand(d) => format!("Expand{}", DimsFmt(d)),
    }
}

/// The first few values of a constant, decoded from whole elements only (a constant
/// whose byte length is wrong still prints).
fn constant_preview(data: &[u8], shape: &Shape) -> String {
    let size = shape.dtype.size_bytes();
    let total = data.len() / size;
    let take = total.min(CONST_PREVIEW);
    let head = HostTensor {
        shape: vec![take],
        dtype: shape.dtype,
        data: data[..take * size].to_vec(),
    };
    let vals: Vec<String> = match shape.dtype {
        DType::Bool => head
            .to_i64_vec()
            .iter()
            .map(|&v| (v != 0).to_string())
            .collect(),
        DType::F64 => head.to_f64_vec().into_iter().map(num).collect(),
        d if d.is_float() => head.to_f32_vec().into_iter().map(num).collect(),
        _ => head.to_i64_vec().iter().map(|v| v.to_string()).collect(),
    };
    let more = if total > take { ", …" } else { "" };
    let stray = data.len() - total * size;
    let bad = if stray > 0 {
        format!(" +{stray} stray bytes")
    } else {
        String::new()
    };
    format!("[{}{more}] ({total} values{bad})", vals.join(", "))
}

/// The op with its parameters, compact: `Attention{heads=8, head_dim=64, mask=Causal}`.
fn op_text(node: &Node) -> String {
    let k = node.op.kind();
    let p = match &node.op {
        Op::Input { name } | Op::Param { name } => {
            if node.name.as_deref() == Some(name.as_str()) {
                String::new()
            } else {
                format!("{name:?}")
            }
        }
        Op::Constant { data } => constant_preview(data, &node.shape),
        Op::Activation(a) => format!("{a:?}"),
        Op::Binary(b) => format!("{b:?}"),
        Op::Compare(c) => format!("{c:?}"),
        Op::Cast { to } => format!("to={to}"),
        Op::FloatRound { format, saturate } => format!("{format:?} saturate={saturate}"),
        Op::FusedMatMulBiasAct { activation } => match activation {
            Some(a) => format!("act={a:?}"),
            None => "act=none".into(),
        },
        Op::DequantMatMul { scheme } | Op::Dequantize { scheme } => format!("{scheme:?}"),
        Op::FusedDequantMatMul {
            scheme,
            norm_eps,
            residual,
            glu,
        } => {
            let norm = norm_eps.map_or(String::new(), |e| format!(", rms_norm eps={e}"));
            let glu = glu.map_or(String::new(), |g| format!(", swiglu gate_first={g}"));
            let res = if *residual { ", +residual" } else { "" };
            format!("{scheme:?}{norm}{glu}{res}")
        }
        Op::CacheWrite { axis } => format!("axis={axis}"),
        Op::RopeCacheWrite {
            axis,
            head_dim,
            n_rot,
            style,
        } => format!("axis={axis}, head_dim={head_dim}, n_rot={n_rot}, style={style:?}"),
        Op::LayerNorm { axis, eps } | Op::RmsNorm { axis, eps } => {
            format!("axis={axis}, eps={}", num(*eps))
        }
        Op::FusedResidualLN { has_bias, eps } | Op::FusedResidualRmsNorm { has_bias, eps } => {
            format!("has_bias={has_bias}, eps={}", num(*eps))
        }
        Op::Reduce { op, axes, keep_dim } => {
            format!("{op:?}, axes={}, keep_dim={keep_dim}", list(axes))
        }
        Op::Softmax { axis } | Op::Concat { axis } | Op::Gather { axis } => format!("axis={axis}"),
        Op::ArgMax { axis, keep_dim } => format!("axis={axis}, keep_dim={keep_dim}"),
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => format!("axis={axis}, exclusive={exclusive}, reverse={reverse}"),
        Op::TopK {
            k,
            axis,
            largest,
            sorted,
        } => format!("k={k}, axis={axis}, largest={largest}, sorted={sorted}"),
        Op::Tile { repeats } => format!("repeats={}", list(repeats)),
        Op::GatherElements { axis } => format!("axis={axis}"),
        Op::GatherND { batch_dims } => format!("batch_dims={batch_dims}"),
        Op::ScatterElements { axis, reduction } => format!("axis={axis}, reduction={reduction:?}"),
        Op::ScatterND { reduction } => format!("reduction={reduction:?}"),
        Op::OneHot { axis, depth } => format!("axis={axis}, depth={depth}"),
        Op::Range { len } => format!("len={len}"),
        Op::AllReduce { reduce } => format!("reduce={reduce:?}"),
        Op::AllGather { axis, ranks } => format!("axis={axis}, ranks={ranks}"),
        Op::ReduceScatter {
            reduce,
            axis,
            ranks,
        } => format!("reduce={reduce:?}, axis={axis}, ranks={ranks}"),
        Op::Reshape { shape } => list(shape),
        Op::Expand { shape } => DimsFmt(shape).to_string(),
        Op::Transpose { perm } => format!("perm={}", list(perm)),
        Op::Narrow { axis, start, len } => format!("axis={axis}, start={start}, len={len}"),
        Op::Pad { pads, value } => {
            let pads: Vec<String> = pads.iter().map(|&p| pair(p)).collect();
            format!("pads=[{}], value={}", pads.join(", "), num(*value))
        }
        Op::Slice {
            axes,
            starts,
            ends,
            steps,
        } => format!(
            "axes={}, starts={}, ends={}, steps={}",
            list(axes),
            list(starts),
            list(ends),
            list(steps)
        ),
        Op::Attention(s) => attention_attrs(s),
        Op::CachedAttention { spec, rope } => {
            let mut t = attention_attrs(spec);
            if let Some(r) = rope {
                let _ = write!(t, ", rope(n_rot={}, style={:?})", r.n_rot, r.style);
            }
            t
        }
        Op::Rope {
            head_dim,
            n_rot,
            style,
        } => format!("head_dim={head_dim}, n_rot={n_rot}, style={style:?}"),
        Op::FusedSwiGLU {
            cast_to,
            gate_first,
        } => {
            let mut t = format!("gate_first={gate_first}");
            if let Some(c) = cast_to {
                let _ = write!(t, ", cast_to={c}");
            }
            t
        }
        Op::Conv(c) | Op::Conv2dBackwardWeight(c) => conv(c),
        Op::Conv2dBackwardInput { spec, input_hw } => {
            format!("{}, input_hw={}", conv(spec), pair(*input_hw))
        }
        Op::Pool(p) | Op::MaxPool2dBackward(p) => format!(
            "{:?}, k={}, stride={}, pad={}",
            p.kind,
            pair(p.kernel_size),
            pair(p.stride),
            pair(p.padding)
        ),
        Op::ElementwiseRegion {
            chain: c,
            prologue: pr,
        } => {
            format!("{}{}", prologue(pr), chain(c))
        }
        Op::BatchElementwiseRegion {
            chain: c,
            num_batch_inputs,
            prologue: pr,
        } => format!(
            "batch_inputs={num_batch_inputs}, {}{}",
            prologue(pr),
            chain(c)
        ),
        Op::TransformRegion { steps } => {
            let parts: Vec<String> = steps.iter().map(transform).collect();
            parts.join(" -> ")
        }
        Op::Fft { inverse, norm } => format!("inverse={inverse}, norm={norm:?}"),
        Op::Where
        | Op::StopGradient
        | Op::MatMul
        | Op::SoftmaxCrossEntropy
        | Op::SoftmaxCrossEntropyWithLogits
        | Op::SoftmaxCrossEntropyBackward
        | Op::ResizeNearest2x
        | Op::LogMel
        | Op::LogMelBackward => String::new(),
    };
    if p.is_empty() {
        k.to_string()
    } else {
        format!("{k}{{{p}}}")
    }
}

fn conv(c: &crate::ConvSpec) -> String {
    format!(
        "k={}, stride={}, pad={}, dil={}, groups={}",
        pair(c.kernel_size),
        pair(c.stride),
        pair(c.padding),
        pair(c.dilation),
        c.groups
    )
}

fn ids(v: &[crate::NodeId]) -> String {
    let parts: Vec<String> = v.iter().map(|i| i.to_string()).collect();
    parts.join(", ")
}

impl fmt::Display for Node {
    /// `%5 = Attention{heads=8, head_dim=64, mask=Causal} (%2, %3, %4) : f32[2, S, 512]  "attn"`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {}", self.id, op_text(self))?;
        if !self.inputs.is_empty() {
            write!(f, " ({})", ids(&self.inputs))?;
        }
        write!(f, " : {}", self.shape)?;
        match &self.name {
            Some(n) => write!(f, "  {n:?}"),
            None => Ok(()),
        }
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ins: Vec<String> = self.inputs().map(|(n, s)| format!("{n}: {s}")).collect();
        let params = self.params().count();
        writeln!(
            f,
            "graph {:?} ({} nodes; inputs: {}; params: {params})",
            self.name,
            self.nodes.len(),
            if ins.is_empty() {
                "none".to_string()
            } else {
                ins.join(", ")
            }
        )?;
        for n in &self.nodes {
            writeln!(f, "  {n}")?;
        }
        write!(f, "  outputs: ({})", ids(&self.outputs))
    }
}

impl Graph {
    /// One line: name, node counts per op kind, inputs, params and their element count.
    pub fn summary(&self) -> String {
        let mut counts = [0usize; OpKind::COUNT];
        for n in &self.nodes {
            counts[n.op.kind() as usize] += 1;
        }
        let kinds: Vec<String> = OpKind::ALL
            .iter()
            .zip(counts)
            .filter(|(_, c)| *c > 0)
            .map(|(k, c)| format!("{k}×{c}"))
            .collect();
        let ins: Vec<String> = self.inputs().map(|(n, s)| format!("{n}: {s}")).collect();
        let mut elems: u128 = 0;
        let mut dynamic = 0;
        let mut nparams = 0;
        for (_, s) in self.params() {
            nparams += 1;
            match s.static_dims() {
                Some(d) => {
                    let n = d.iter().fold(1u128, |a, &x| a.saturating_mul(x as u128));
                    elems = elems.saturating_add(n);
                }
                None => dynamic += 1,
            }
        }
        let dyn_note = if dynamic > 0 {
            format!(" + {dynamic} of dynamic size")
        } else {
            String::new()
        };
        format!(
            "graph {:?}: {} nodes [{}]; inputs [{}]; params {nparams} ({elems} elements{dyn_note}); outputs {}",
            self.name,
            self.nodes.len(),
            kinds.join(", "),
            ins.join(", "),
            self.outputs.len()
        )
    }
}

/// The attributes of an attention spec, as `Attention` and `CachedAttention` print them.
fn attention_attrs(s: &crate::AttentionSpec) -> String {
    let mut t = format!("heads={}, head_dim={}", s.num_heads, s.head_dim);
    if let Some(v) = s.v_head_dim {
        let _ = write!(t, ", v_head_dim={v}");
    }
    let mask = match s.mask_kind {
        MaskKind::SlidingWindow(w) => format!("SlidingWindow({w})"),
        m => format!("{m:?}"),
    };
    let _ = write!(t, ", mask={mask}");
    if s.past {
        t.push_str(", past");
    }
    if let Some(sc) = s.score_scale {
        let _ = write!(t, ", scale={}", num(sc));
    }
    if let Some(c) = s.attn_logit_softcap {
        let _ = write!(t, ", softcap={}", num(c));
    }
    if s.layout != AttentionLayout::Packed {
        let _ = write!(t, ", layout={:?}", s.layout);
    }
    t
}
