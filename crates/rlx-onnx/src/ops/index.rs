//! The gather / scatter family and the index generators, each one IR op: GatherElements,
//! GatherND, ScatterElements (and opset 9's Scatter), ScatterND, TopK, CumSum, OneHot,
//! Range, Tile; CumProd composes (a masked product over a square of the axis). Inputs that size the output (TopK's K, OneHot's depth, Range's bounds,
//! Tile's repeats) and CumSum's axis must be known at import time: the IR's shapes are fixed
//! when the graph is built.
use super::{one, Registry, Translated};
use crate::attrs::Attrs;
use crate::proto::NodeProto;
use crate::{ImportCtx, OnnxError};
use rlx_ir::{Dim, HostTensor, Op, ReduceOp, ScatterReduction};

pub(super) fn register(r: &mut Registry) {
    r.insert("GatherElements", gather_elements);
    r.insert("GatherND", gather_nd);
    r.insert("ScatterElements", scatter_elements);
    r.insert("Scatter", scatter_elements);
    r.insert("ScatterND", scatter_nd);
    r.insert("TopK", top_k);
    r.insert("CumSum", cumsum);
    r.insert("CumProd", cumprod);
    r.insert("OneHot", one_hot);
    r.insert("Range", range);
    r.insert("Tile", tile);
}

fn gather_elements(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, i) = (c.input(n, 0)?, c.input(n, 1)?);
    let axis = Attrs(n).i_or("axis", 0);
    one(c.add(Op::GatherElements { axis }, &[x, i])?)
}

fn gather_nd(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, i) = (c.input(n, 0)?, c.input(n, 1)?);
    let b = Attrs(n).i_or("batch_dims", 0);
    let batch_dims = usize::try_from(b).map_err(|_| c.err(format!("batch_dims {b} < 0")))?;
    one(c.add(Op::GatherND { batch_dims }, &[x, i])?)
}

/// The `reduction` attribute (opset 16+; absent means plain assignment).
fn reduction(c: &ImportCtx, n: &NodeProto) -> Result<ScatterReduction, OnnxError> {
    Ok(match Attrs(n).s("reduction").as_deref() {
        None | Some("none") => ScatterReduction::None,
        Some("add") => ScatterReduction::Add,
        Some("mul") => ScatterReduction::Mul,
        Some("max") => ScatterReduction::Max,
        Some("min") => ScatterReduction::Min,
        Some(o) => return Err(c.unsupported(format!("reduction \"{o}\""))),
    })
}

fn scatter_elements(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, i, u) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    let axis = Attrs(n).i_or("axis", 0);
    let reduction = reduction(c, n)?;
    one(c.add(Op::ScatterElements { axis, reduction }, &[x, i, u])?)
}

fn scatter_nd(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (x, i, u) = (c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?);
    let reduction = reduction(c, n)?;
    one(c.add(Op::ScatterND { reduction }, &[x, i, u])?)
}

/// One import-time integer: a 1-element input (a scalar or `[1]`).
fn scalar_int(c: &mut ImportCtx, n: &NodeProto, i: usize, what: &str) -> Result<i64, OnnxError> {
    let v = c
        .const_input(n, i)?
        .ok_or_else(|| c.err(format!("needs input {i} ({what})")))?;
    match v.to_f64_vec()[..] {
        [x] if x.is_finite() => Ok(x as i64),
        _ => Err(c.err(format!(
            "{what} must be one finite number, got {:?}",
            v.shape
        ))),
    }
}

fn top_k(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let a = Attrs(n);
    let k = if c.opset < 10 {
        a.i("k").ok_or_else(|| c.err("needs attribute `k`"))?
    } else {
        scalar_int(c, n, 1, "K")?
    };
    let k = usize::try_from(k).map_err(|_| c.err(format!("K = {k} < 0")))?;
    let axis = a.i_or("axis", -1);
    let (largest, sorted) = (a.i_or("largest", 1) != 0, a.i_or("sorted", 1) != 0);
    let op = Op::TopK {
        k,
        axis,
        largest,
        sorted,
    };
    let idx = c.add(op, &[x])?;
    let values = c.add(Op::GatherElements { axis }, &[x, idx])?;
    Ok(Some(vec![values, idx]))
}

fn cumsum(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let axis = scalar_int(c, n, 1, "axis")?;
    let a = Attrs(n);
    let op = Op::CumSum {
        axis,
        exclusive: a.i_or("exclusive", 0) != 0,
        reverse: a.i_or("reverse", 0) != 0,
    };
    one(c.add(op, &[x])?)
}

fn one_hot(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let (idx, values) = (c.input(n, 0)?, c.input(n, 2)?);
    let d = scalar_int(c, n, 1, "depth")?;
    let depth = usize::try_from(d).map_err(|_| c.err(format!("depth {d} < 1")))?;
    if depth == 0 {
        return Err(c.err("depth must be ≥ 1"));
    }
    let axis = Attrs(n).i_or("axis", -1);
    one(c.add(Op::OneHot { axis, depth }, &[idx, values])?)
}

fn range(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let mut b = [0.0f64; 3];
    for (i, (v, what)) in b.iter_mut().zip(["start", "limit", "delta"]).enumerate() {
        let t = c
            .const_input(n, i)?
            .ok_or_else(|| c.err(format!("needs input {i} ({what})")))?;
        *v = match t.to_f64_vec()[..] {
            [x] => x,
            _ => return Err(c.err(format!("{what} must hold one element"))),
        };
    }
    let len = rlx_ir::ops::index::range_len(b[0], b[1], b[2]);
    c.limit("a Range", len)?;
    let xs = [c.input(n, 0)?, c.input(n, 1)?, c.input(n, 2)?];
    one(c.add(Op::Range { len }, &xs)?)
}

fn tile(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let reps = c
        .const_ints(n, 1)?
        .ok_or_else(|| c.err("needs input 1 (repeats)"))?;
    let mut repeats = vec![];
    for r in reps {
        repeats.push(usize::try_from(r).map_err(|_| c.err(format!("repeat {r} < 0")))?);
    }
    one(c.add(Op::Tile { repeats }, &[x])?)
}

/// CumProd along an axis of static length L: x is repeated into an `[L(i), L(j)]` square at
/// the axis, entries that do not belong to output i (by `exclusive` / `reverse`) become 1,
/// and a product over j gives the result. No division, so zeros and signs are exact.
fn cumprod(c: &mut ImportCtx, n: &NodeProto) -> Translated {
    let x = c.input(n, 0)?;
    let axis = scalar_int(c, n, 1, "axis")?;
    let a = Attrs(n);
    let (exclusive, reverse) = (a.i_or("exclusive", 0) != 0, a.i_or("reverse", 0) != 0);
    let dims = c.static_dims(x)?;
    let ax = rlx_ir::normalize_axis(axis, dims.len()).map_err(|e| c.err(e))?;
    let l = dims[ax];
    c.limit(
        "a CumProd square",
        l * l * dims.iter().product::<usize>().max(1),
    )?;
    let mut keep = vec![false; l * l];
    for i in 0..l {
        for j in 0..l {
            keep[i * l + j] = match (exclusive, reverse) {
                (false, false) => j <= i,
                (true, false) => j < i,
                (false, true) => j >= i,
                (true, true) => j > i,
            };
        }
    }
    // The mask broadcasts against `[.., L(i), L(j), ..]`: trailing dims of 1 after j.
    let mut mdims = vec![l, l];
    mdims.extend(std::iter::repeat_n(1, dims.len() - ax - 1));
    let mask = c.constant(HostTensor::from_bool(&mdims, &keep))?;
    let mut sq: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    sq.insert(ax, 1);
    let xr = c.add(Op::Reshape { shape: sq }, &[x])?;
    let mut full: Vec<Dim> = dims.iter().map(|&d| Dim::Static(d)).collect();
    full.insert(ax, Dim::Static(l));
    let xe = c.add(Op::Expand { shape: full }, &[xr])?;
    let one_ = c.scalar(1.0, c.dtype(x)?)?;
    let picked = c.add(Op::Where, &[mask, xe, one_])?;
    let op = Op::Reduce {
        op: ReduceOp::Prod,
        axes: vec![ax as i64 + 1],
        keep_dim: false,
    };
    one(c.add(op, &[picked])?)
}
