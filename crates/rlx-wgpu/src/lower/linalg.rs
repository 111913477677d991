//! MatMul and FusedMatMulBiasAct (NumPy `a @ b`: batch dims broadcast, rank-1 operands
//! promoted as the CPU does), and the tiled GEMM that the quantized products share
//! (`linalg_quant`).
//!
//! Two kernels: the register-blocked GEMM of `linalg_gemm` (f32 accumulation) and, for M = 1 (a decode
//! step's GEMV), a kernel where each invocation walks a strided slice of K for one output
//! column (adjacent invocations read adjacent columns of b, so loads coalesce) and the
//! slices meet in a workgroup tree reduction (where the adapter has subgroups: shuffles
//! within each subgroup, then one barrier over a small array). Batch items are the grid's z; each item's
//! operand offsets are baked index arithmetic (stride 0 along broadcast dims), so broadcast
//! operands are read in place.
use super::elementwise::activation;
use super::linalg_gemm::{load_b_dense, split_sum, splits, tiled, Tile};
use super::LowerError;
use super::{Lowered, NodeCtx};
use crate::shader::Shader;
use crate::unsupported;
use rlx_ir::{Activation, DType, Op};

pub fn lower(ctx: &mut NodeCtx, op: &Op) -> Lowered {
    let act = match op {
        Op::MatMul => None,
        Op::FusedMatMulBiasAct { activation } => Some(*activation),
        _ => unreachable!("routed here by lower_node"),
    };
    let (a, b) = (ctx.ins[0].clone(), ctx.ins[1].clone());
    if !a.dtype.is_float() || !b.dtype.is_float() || !ctx.out.dtype.is_float() {
        unsupported!("a matmul of {} @ {} -> {}", a.dtype, b.dtype, ctx.out.dtype);
    }
    if a.dims.is_empty() || b.dims.is_empty() {
        unsupported!("matmul operands must have rank >= 1");
    }
    // Rank-1 operands promoted: [K] is a row of a, [K] a column of b.
    let ash = if a.dims.len() == 1 {
        vec![1, a.dims[0]]
    } else {
        a.dims.clone()
    };
    let bsh = if b.dims.len() == 1 {
        vec![b.dims[0], 1]
    } else {
        b.dims.clone()
    };
    let (ar, br) = (ash.len(), bsh.len());
    let (m, k, n) = (ash[ar - 2], ash[ar - 1], bsh[br - 1]);
    if bsh[br - 2] != k {
        unsupported!("inner dims differ: {:?} @ {:?}", a.dims, b.dims);
    }
    let (ab, bb) = (&ash[..ar - 2], &bsh[..br - 2]);
    let Ok(ob) = rlx_ir::broadcast_static(ab, bb) else {
        unsupported!("batch dims {ab:?} and {bb:?} do not broadcast");
    };
    let nb: usize = ob.iter().product();
    if nb * m * n != ctx.out.numel() {
        unsupported!("output {:?} is not the product's shape", ctx.out.dims);
    }
    let bias = match act {
        Some(_) => {
            let bias = ctx.ins[2].clone();
            if bias.numel() != n || !bias.dtype.is_float() {
                unsupported!("bias {:?} for {n} output columns", bias.dims);
            }
            Some(bias)
        }
        None => None,
    };
    let y = ctx.word_out();
    let caps_max = ctx.caps.max_groups_per_dim as usize;
    let label = format!(
        "matmul {:?} @ {:?}{}",
        a.dims,
        b.dims,
        if act.is_some() { " + bias" } else { "" }
    );
    // The epilogue (bias, activation) and the store, for whichever kernel finishes.
    let finish = |sh: &mut Shader| -> Result<(), LowerError> {
        let epi = match (&bias, act.flatten()) {
            (Some(t), a) => {
                sh.input("bias", t)?;
                epilogue("v + ld_bias(gn)", a)
            }
            (None, _) => "v".to_string(),
        };
        sh.output("y", &y)?;
        sh.text(&format!(
            "fn epi(v: f32, gm: u32, gn: u32) -> f32 {{\n    return {epi};\n}}"
        ));
        Ok(())
    };
    let mut sh = Shader::new(label.clone());
    sh.input("a", &a)?;
    sh.input("b", &b)?;
    let aoff = batch_offset(&ob, ab, m * k);
    let boff = batch_offset(&ob, bb, k * n);
    if nb > caps_max {
        unsupported!("{nb} batch items exceed the grid's z limit {caps_max}");
    }
    if m == 1 {
        finish(&mut sh)?;
        let kernel = gemv_dense(
            sh,
            (n, k),
            nb,
            (&aoff, &boff),
            caps_max,
            subgroup_min(ctx.caps),
        );
        ctx.push(kernel);
        return ctx.finish_out(&y);
    }
    let t = Tile::pick(m, n, nb);
    let (gx, gy) = t.groups(m, n);
    let mut s = splits(t, (m, n, k), nb);
    if nb * s > caps_max {
        s = 1;
    }
    if gx > caps_max || gy > caps_max {
        unsupported!("a {m}×{n} product needs more tiles than the grid holds");
    }
    let load_b = load_b_dense(t, (n, k));
    if s == 1 {
        finish(&mut sh)?;
        ctx.push(tiled(sh, t, (m, n, k), nb, (&aoff, &boff), &load_b, 1));
        return ctx.finish_out(&y);
    }
    let total = nb * m * n;
    let p = ctx.scratch(&[s * total], DType::F32);
    sh.output("p", &p)?;
    ctx.push(tiled(sh, t, (m, n, k), nb, (&aoff, &boff), &load_b, s));
    let mut sum = Shader::new(format!("{label}, sum of {s} K splits"));
    sum.input("p", &p)?;
    finish(&mut sum)?;
    ctx.push(split_sum(
        sum,
        (m, n),
        total,
        s,
        ctx.caps.max_groups_per_dim,
    ));
    ctx.finish_out(&y)
}

/// The smallest subgroup size to size a kernel's arrays for (at least 4), where the adapter
/// has subgroup operations.
pub fn subgroup_min(caps: &crate::Caps) -> Option<usize> {
    caps.subgroups
        .then(|| (caps.subgroup_min as usize).clamp(4, 256))
}

/// `act(v)` around the expression `v` (the bias already in it).
pub fn epilogue(v: &str, act: Option<Activation>) -> String {
    match act {
        Some(a) => activation(a, &format!("({v})")),
        None => v.to_string(),
    }
}

/// The element offset of batch item `bi` of an operand with batch dims `ib` (right-aligned
/// against the broadcast batch dims `ob`, stride 0 where it broadcasts), `item` elements an
/// item.
fn batch_offset(ob: &[usize], ib: &[usize], item: usize) -> String {
    let lead = ob.len() - ib.len();
    let mut terms = Vec::new();
    let (mut below, mut stride) = (1usize, item);
    for j in (0..ob.len()).rev() {
        let d = if j >= lead { ib[j - lead] } else { 1 };
        if d != 1 {
            terms.push(format!("((bi / {below}u) % {}u) * {stride}u", ob[j]));
            stride *= d;
        }
        below *= ob[j];
    }
    if terms.is_empty() {
        "0u".into()
    } else {
        terms.join(" + ")
    }
}

/// `y[bi, 0, :] = epi(a[bi] · B[bi])` for a single row of a (`[k]`) and B `[k, n]`: `C`
/// columns a workgroup, `256 / C` invocations splitting K per column, a tree reduction (or,
/// given the adapter's smallest subgroup size, subgroup shuffles and one barrier).
fn gemv_dense(
    mut sh: Shader,
    (n, k): (usize, usize),
    nb: usize,
    (aoff, boff): (&str, &str),
    max: usize,
    subgroup_min: Option<usize>,
) -> crate::shader::Kernel {
    // Narrow outputs give the workgroup's invocations to K instead of idle columns.
    let c = n.next_power_of_two().clamp(1, 64);
    let s = 256 / c;
    let gx = n.div_ceil(c);
    let (x, y) = (gx.min(max), gx.div_ceil(gx.min(max)));
    let (head, reduce) = if let Some(sg_min) = subgroup_min {
        // Subgroups are runs of consecutive `lid` (as every backend lays out a 1-D
        // workgroup), so the lanes of one column in a subgroup are `lid ^ (c·2^j)`: a
        // butterfly of shuffles sums them (subgroupAdd would mix the columns, and putting a
        // column's K split in one subgroup would stride b's reads by n). One lane a column
        // and subgroup (all of them when c >= the subgroup size) then leaves its sum in a
        // small array; one barrier, and lane `col` adds the 256 / max(c, size) sums.
        let g = 256 / c.max(sg_min);
        sh.enable_subgroups();
        sh.text(&format!("var<workgroup> red: array<f32, {}>;", g * c));
        (
            ", @builtin(subgroup_size) sgs: u32",
            format!(
                "    for (var o = {c}u; o < sgs; o = o << 1u) {{ acc += subgroupShuffleXor(acc, o); }}
    let span = max({c}u, sgs);
    if (lid % span < {c}u) {{ red[(lid / span) * {c}u + lid % {c}u] = acc; }}
    workgroupBarrier();
    if (lid < {c}u && gn < {n}u) {{
        var v = 0.0;
        for (var j = 0u; j < 256u / span; j++) {{ v += red[j * {c}u + lid]; }}
        st_y(bi * {n}u + gn, epi(v, 0u, gn));
    }}
"
            ),
        )
    } else {
        sh.text("var<workgroup> red: array<f32, 256>;");
        (
            "",
            format!(
                "    red[lid] = acc;
    workgroupBarrier();
    for (var h = {half}u; h > 0u; h = h >> 1u) {{
        if (sl < h) {{ red[lid] += red[lid + h * {c}u]; }}
        workgroupBarrier();
    }}
    if (sl == 0u && gn < {n}u) {{ st_y(bi * {n}u + gn, epi(red[lid], 0u, gn)); }}
",
                half = s / 2
            ),
        )
    };
    let main = format!(
        "@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{head}) {{
    let bi = wid.z;
    let aoff = {aoff};
    let boff = {boff};
    let gn = (wid.y * {x}u + wid.x) * {c}u + lid % {c}u;
    let sl = lid / {c}u;
    var acc = 0.0;
    if (gn < {n}u) {{
        for (var kk = sl; kk < {k}u; kk += {s}u) {{
            acc += ld_a(aoff + kk) * ld_b(boff + kk * {n}u + gn);
        }}
    }}
{reduce}}}
"
    );
    sh.finish(&main, [x as u32, y as u32, nb as u32])
}
