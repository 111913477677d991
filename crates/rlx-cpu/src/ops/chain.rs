//! The chain engine: runs a list of `ChainStep`s over broadcast inputs. The elementwise
//! thunks (one-step chains) and the region thunks both run on it, so a fused region and the
//! unfused ops compute with exactly the same math (`scalar.rs`).
//!
//! The output is walked in blocks of `BLOCK` elements: each used input is gathered into a
//! block buffer (broadcast and prologue resolved by index arithmetic, no per-element
//! allocation), then every step runs over the whole block. After each step its values are
//! made to obey the step's dtype (f16/bf16 rounding, i32/u8 wrap, bool 0/1: `scalar::wrap_int`), as the
//! executor does after each unfused op; so a region equals the graph it was fused from.
use super::scalar::{
    activation, binary_f, binary_i, compare, float_to_int, gelu_f32_in_place, round_to_f32_storage,
    wrap_int,
};
use crate::error::op_err;
use crate::{Buf, BufMut, CpuError, Elem, Storage, TensorView};
use half::{bf16, f16};
use rayon::prelude::*;
use rlx_ir::ops::region::chain_dtypes;
use rlx_ir::{Activation, ChainOperand, ChainStep, ComputeClass, DType, RegionPrologue};

const BLOCK: usize = 512;
/// Work split across threads in chunks of this many elements (a multiple of BLOCK)…
const PAR_CHUNK: usize = 32 * BLOCK;
/// …once the output has at least this many.
const PAR_MIN: usize = 4 * PAR_CHUNK;

/// How one input is read at each output position.
enum ReadKind {
    /// Same shape as the output: element k is element k.
    Contiguous,
    /// One element, read everywhere.
    Scalar,
    /// Offset = Σ_d (idx_d / div_d) · stride_d over the output's dims (div 2 undoes the
    /// nearest-2x prologue, stride 0 broadcasts).
    Strided {
        strides: Vec<usize>,
        divs: Vec<usize>,
    },
}

struct Reader<'a> {
    data: Buf<'a>,
    kind: ReadKind,
}

fn reader<'a>(t: &TensorView<'a>, resize: bool, out: &[usize]) -> Result<Reader<'a>, CpuError> {
    let src = t.shape;
    if t.data.len() != t.numel() {
        return Err(op_err(format!(
            "input of shape {src:?} holds {} values",
            t.data.len()
        )));
    }
    let (eff, src_divs) = if resize {
        if src.len() != 4 {
            return Err(op_err(format!(
                "the ResizeNearest2x prologue needs a rank-4 input 0, got {src:?}"
            )));
        }
        (
            vec![src[0], src[1], 2 * src[2], 2 * src[3]],
            vec![1, 1, 2, 2],
        )
    } else {
        (src.to_vec(), vec![1; src.len()])
    };
    let off = out.len().checked_sub(eff.len()).ok_or_else(|| {
        op_err(format!(
            "input {src:?} has a higher rank than the output {out:?}"
        ))
    })?;
    if eff.iter().zip(&out[off..]).any(|(&e, &o)| e != o && e != 1) {
        return Err(op_err(format!(
            "input {src:?} does not broadcast to the output {out:?}"
        )));
    }
    let kind = if !resize && eff == out {
        ReadKind::Contiguous
    } else if t.numel() == 1 {
        ReadKind::Scalar
    } else {
        let src_strides = rlx_ir::strides(src);
        let mut strides = vec![0; out.len()];
        let mut divs = vec![1; out.len()];
        for i in 0..eff.len() {
            strides[i + off] = if eff[i] == 1 { 0 } else { src_strides[i] };
            divs[i + off] = src_divs[i];
        }
        ReadKind::Strided { strides, divs }
    };
    Ok(Reader { data: t.data, kind })
}

/// Fill `dst` with the input's values at output positions `start..start + dst.len()`.
fn gather_t<T: Copy>(
    src: &[T],
    kind: &ReadKind,
    dims: &[usize],
    start: usize,
    dst: &mut [T],
    idx: &mut [usize],
) {
    match kind {
        ReadKind::Contiguous => dst.copy_from_slice(&src[start..start + dst.len()]),
        ReadKind::Scalar => dst.fill(src[0]),
        ReadKind::Strided { strides, divs } => {
            // Strided inputs only arise for rank >= 1 outputs.
            let last = dims.len() - 1;
            let mut rem = start;
            for d in (0..dims.len()).rev() {
                idx[d] = rem % dims[d];
                rem /= dims[d];
            }
            let (sl, dl) = (strides[last], divs[last]);
            let mut k = 0;
            while k < dst.len() {
                let base: usize = (0..last).map(|d| (idx[d] / divs[d]) * strides[d]).sum();
                let w0 = idx[last];
                let run = (dims[last] - w0).min(dst.len() - k);
                for (t, v) in dst[k..k + run].iter_mut().enumerate() {
                    *v = src[base + ((w0 + t) / dl) * sl];
                }
                k += run;
                idx[last] += run;
                let mut d = last;
                while idx[d] == dims[d] && d > 0 {
                    idx[d] = 0;
                    d -= 1;
                    idx[d] += 1;
                }
            }
        }
    }
}

fn gather(
    r: &Reader,
    dims: &[usize],
    start: usize,
    n: usize,
    dst: &mut Storage,
    idx: &mut [usize],
) -> Result<(), CpuError> {
    match (r.data, dst) {
        (Buf::F32(s), Storage::F32(d)) => gather_t(s, &r.kind, dims, start, &mut d[..n], idx),
        (Buf::F64(s), Storage::F64(d)) => gather_t(s, &r.kind, dims, start, &mut d[..n], idx),
        (Buf::I64(s), Storage::I64(d)) => gather_t(s, &r.kind, dims, start, &mut d[..n], idx),
        _ => return Err(op_err("an input is not held in its dtype's compute class")),
    }
    Ok(())
}

/// A validated chain ready to run over one output.
struct Plan<'a> {
    chain: &'a [ChainStep],
    step_dtypes: Vec<DType>,
    readers: Vec<Reader<'a>>,
    in_classes: Vec<ComputeClass>,
    used: Vec<bool>,
    dims: Vec<usize>,
}

fn empty(class: ComputeClass, n: usize) -> Storage {
    match class {
        ComputeClass::F32 => Storage::F32(vec![0.0; n]),
        ComputeClass::F64 => Storage::F64(vec![0.0; n]),
        ComputeClass::I64 => Storage::I64(vec![0; n]),
    }
}

/// Per-worker block buffers: one slot per input, then one per step.
struct Scratch {
    slots: Vec<Storage>,
    idx: Vec<usize>,
}

impl Scratch {
    fn new(p: &Plan) -> Scratch {
        let mut slots: Vec<Storage> = p
            .in_classes
            .iter()
            .zip(&p.used)
            .map(|(&c, &u)| empty(c, if u { BLOCK } else { 0 }))
            .collect();
        slots.extend(
            p.step_dtypes
                .iter()
                .map(|d| empty(d.compute_class(), BLOCK)),
        );
        Scratch {
            slots,
            idx: vec![0; p.dims.len()],
        }
    }
}

fn mismatch() -> CpuError {
    op_err("a chain operand is not held in the compute class its dtype implies")
}

fn map1<A: Copy, O>(a: &[A], o: &mut [O], f: impl Fn(A) -> O) {
    o.iter_mut().zip(a).for_each(|(o, &a)| *o = f(a));
}

fn map2<A: Copy, O>(a: &[A], b: &[A], o: &mut [O], f: impl Fn(A, A) -> O) {
    o.iter_mut()
        .zip(a.iter().zip(b))
        .for_each(|(o, (&a, &b))| *o = f(a, b));
}

fn select<C: Copy + PartialEq + Default, T: Copy>(c: &[C], a: &[T], b: &[T], o: &mut [T]) {
    let zero = C::default();
    for (k, o) in o.iter_mut().enumerate() {
        *o = if c[k] != zero { a[k] } else { b[k] };
    }
}

fn select_any<T: Copy>(c: &Storage, a: &[T], b: &[T], o: &mut [T]) {
    let n = o.len();
    match c {
        Storage::F32(c) => select(&c[..n], a, b, o),
        Storage::F64(c) => select(&c[..n], a, b, o),
        Storage::I64(c) => select(&c[..n], a, b, o),
        Storage::U8(c) => select(&c[..n], a, b, o),
    }
}

/// Values as `to` sees them right after a cast (`scalar::float_to_int` for float to
/// integer), before the step's dtype is settled.
fn cast_step(to: DType, x: &Storage, dst: &mut Storage, n: usize) {
    // Straight from f64 so a half target is rounded once.
    let narrow = |v: f64| round_to_f32_storage(v, to);
    match (x, dst) {
        (Storage::F32(a), Storage::F32(o)) => o[..n].copy_from_slice(&a[..n]),
        (Storage::F64(a), Storage::F32(o)) => map1(&a[..n], &mut o[..n], narrow),
        // To f32 in one rounding; to a half type through f64 (exact below 2^53), so it too
        // is rounded once rather than first to f32.
        (Storage::I64(a), Storage::F32(o)) => match to {
            DType::F16 | DType::BF16 => map1(&a[..n], &mut o[..n], |v| narrow(v as f64)),
            _ => map1(&a[..n], &mut o[..n], |v| v as f32),
        },
        (Storage::F32(a), Storage::F64(o)) => map1(&a[..n], &mut o[..n], |v| v as f64),
        (Storage::F64(a), Storage::F64(o)) => o[..n].copy_from_slice(&a[..n]),
        (Storage::I64(a), Storage::F64(o)) => map1(&a[..n], &mut o[..n], |v| v as f64),
        (Storage::F32(a), Storage::I64(o)) => {
            map1(&a[..n], &mut o[..n], |v| float_to_int(v as f64, to))
        }
        (Storage::F64(a), Storage::I64(o)) => map1(&a[..n], &mut o[..n], |v| float_to_int(v, to)),
        (Storage::I64(a), Storage::I64(o)) => o[..n].copy_from_slice(&a[..n]),
        // Block scratch is only ever made in the three compute classes (`empty`); bytes
        // are widened like i64 for completeness.
        (Storage::U8(a), Storage::F32(o)) => map1(&a[..n], &mut o[..n], |v| v as f32),
        (Storage::U8(a), Storage::F64(o)) => map1(&a[..n], &mut o[..n], |v| v as f64),
        (Storage::U8(a), Storage::I64(o)) => map1(&a[..n], &mut o[..n], |v| v as i64),
        (Storage::F32(a), Storage::U8(o)) => {
            map1(&a[..n], &mut o[..n], |v| float_to_int(v as f64, to) as u8)
        }
        (Storage::F64(a), Storage::U8(o)) => {
            map1(&a[..n], &mut o[..n], |v| float_to_int(v, to) as u8)
        }
        (Storage::I64(a), Storage::U8(o)) => map1(&a[..n], &mut o[..n], |v| v as u8),
        (Storage::U8(a), Storage::U8(o)) => o[..n].copy_from_slice(&a[..n]),
    }
}

/// Make a block obey its dtype, as the executor does to every op's output.
fn settle(dst: &mut Storage, dt: DType, n: usize) {
    match (dst, dt) {
        (Storage::F32(s), DType::F16) => s[..n]
            .iter_mut()
            .for_each(|v| *v = f16::from_f32(*v).to_f32()),
        (Storage::F32(s), DType::BF16) => s[..n]
            .iter_mut()
            .for_each(|v| *v = bf16::from_f32(*v).to_f32()),
        (Storage::I64(s), dt) => s[..n].iter_mut().for_each(|v| *v = wrap_int(*v, dt)),
        _ => {}
    }
}

/// Run step `k` over the first `n` values of the block.
fn run_step(p: &Plan, k: usize, slots: &mut [Storage], n: usize) -> Result<(), CpuError> {
    let n_in = p.readers.len();
    let (done, rest) = slots.split_at_mut(n_in + k);
    let dst = &mut rest[0];
    let get = |o: &ChainOperand| -> &Storage {
        match *o {
            ChainOperand::Input(i) => &done[i],
            ChainOperand::Step(j) => &done[n_in + j],
        }
    };
    match &p.chain[k] {
        ChainStep::Activation(act, x) => match (get(x), &mut *dst) {
            // A constant Gelu lets the loop vectorise (the erf has no branches).
            (Storage::F32(a), Storage::F32(o)) if *act == Activation::Gelu => {
                o[..n].copy_from_slice(&a[..n]);
                gelu_f32_in_place(&mut o[..n])
            }
            (Storage::F32(a), Storage::F32(o)) => {
                map1(&a[..n], &mut o[..n], |v| activation(*act, v))
            }
            (Storage::F64(a), Storage::F64(o)) => {
                map1(&a[..n], &mut o[..n], |v| activation(*act, v))
            }
            // Neg / Abs of integers wrap (the dtype's own wrap follows, as for Binary).
            (Storage::I64(a), Storage::I64(o)) if *act == Activation::Neg => {
                map1(&a[..n], &mut o[..n], i64::wrapping_neg)
            }
            (Storage::I64(a), Storage::I64(o)) if *act == Activation::Abs => {
                map1(&a[..n], &mut o[..n], i64::wrapping_abs)
            }
            _ => return Err(mismatch()),
        },
        ChainStep::Binary(op, a, b) => match (get(a), get(b), &mut *dst) {
            (Storage::F32(a), Storage::F32(b), Storage::F32(o)) => {
                map2(&a[..n], &b[..n], &mut o[..n], |x, y| binary_f(*op, x, y))
            }
            (Storage::F64(a), Storage::F64(b), Storage::F64(o)) => {
                map2(&a[..n], &b[..n], &mut o[..n], |x, y| binary_f(*op, x, y))
            }
            (Storage::I64(a), Storage::I64(b), Storage::I64(o)) => {
                map2(&a[..n], &b[..n], &mut o[..n], |x, y| binary_i(*op, x, y))
            }
            _ => return Err(mismatch()),
        },
        ChainStep::Compare(op, a, b) => match (get(a), get(b), &mut *dst) {
            (Storage::F32(a), Storage::F32(b), Storage::I64(o)) => {
                map2(&a[..n], &b[..n], &mut o[..n], |x, y| {
                    compare(*op, x, y) as i64
                })
            }
            (Storage::F64(a), Storage::F64(b), Storage::I64(o)) => {
                map2(&a[..n], &b[..n], &mut o[..n], |x, y| {
                    compare(*op, x, y) as i64
                })
            }
            (Storage::I64(a), Storage::I64(b), Storage::I64(o)) => {
                map2(&a[..n], &b[..n], &mut o[..n], |x, y| {
                    compare(*op, x, y) as i64
                })
            }
            _ => return Err(mismatch()),
        },
        ChainStep::Cast(to, x) => cast_step(*to, get(x), dst, n),
        ChainStep::Where(c, a, b) => {
            let c = get(c);
            match (get(a), get(b), &mut *dst) {
                (Storage::F32(a), Storage::F32(b), Storage::F32(o)) => {
                    select_any(c, &a[..n], &b[..n], &mut o[..n])
                }
                (Storage::F64(a), Storage::F64(b), Storage::F64(o)) => {
                    select_any(c, &a[..n], &b[..n], &mut o[..n])
                }
                (Storage::I64(a), Storage::I64(b), Storage::I64(o)) => {
                    select_any(c, &a[..n], &b[..n], &mut o[..n])
                }
                _ => return Err(mismatch()),
            }
        }
    }
    settle(dst, p.step_dtypes[k], n);
    Ok(())
}

/// Compute output positions `start..start + out.len()`.
fn process<T: Elem>(
    p: &Plan,
    start: usize,
    out: &mut [T],
    s: &mut Scratch,
) -> Result<(), CpuError> {
    let n_in = p.readers.len();
    let last = n_in + p.chain.len() - 1;
    for (b, o) in out.chunks_mut(BLOCK).enumerate() {
        let at = start + b * BLOCK;
        let n = o.len();
        for (i, r) in p.readers.iter().enumerate() {
            if p.used[i] {
                gather(r, &p.dims, at, n, &mut s.slots[i], &mut s.idx)?;
            }
        }
        for k in 0..p.chain.len() {
            run_step(p, k, &mut s.slots, n)?;
        }
        let res = T::slice(&s.slots[last].as_buf()).ok_or_else(mismatch)?;
        o.copy_from_slice(&res[..n]);
    }
    Ok(())
}

fn drive<T: Elem>(p: &Plan, out: &mut [T]) -> Result<(), CpuError> {
    if out.len() >= PAR_MIN {
        out.par_chunks_mut(PAR_CHUNK).enumerate().try_for_each_init(
            || Scratch::new(p),
            |s, (c, chunk)| process(p, c * PAR_CHUNK, chunk, s),
        )
    } else {
        process(p, 0, out, &mut Scratch::new(p))
    }
}

/// Evaluate `chain` over `ins` broadcast to `dims`, writing every element of `out`.
/// `out_dtype` must be the chain's result dtype.
pub(crate) fn run_chain(
    chain: &[ChainStep],
    ins: &[TensorView],
    prologue: RegionPrologue,
    dims: &[usize],
    out_dtype: DType,
    out: BufMut,
) -> Result<(), CpuError> {
    let in_dtypes: Vec<DType> = ins.iter().map(|t| t.dtype).collect();
    let step_dtypes = chain_dtypes(chain, &in_dtypes).map_err(op_err)?;
    let result = step_dtypes[step_dtypes.len() - 1];
    if result != out_dtype {
        return Err(op_err(format!(
            "the chain yields {result} but the output is {out_dtype}"
        )));
    }
    let resize = prologue == RegionPrologue::ResizeNearest2x;
    let readers = ins
        .iter()
        .enumerate()
        .map(|(i, t)| reader(t, resize && i == 0, dims))
        .collect::<Result<Vec<_>, _>>()?;
    let mut used = vec![false; ins.len()];
    for step in chain {
        let ops: &[&ChainOperand] = match step {
            ChainStep::Activation(_, x) | ChainStep::Cast(_, x) => &[x],
            ChainStep::Binary(_, a, b) | ChainStep::Compare(_, a, b) => &[a, b],
            ChainStep::Where(c, a, b) => &[c, a, b],
        };
        for o in ops {
            if let ChainOperand::Input(i) = o {
                used[*i] = true;
            }
        }
    }
    let plan = Plan {
        chain,
        step_dtypes,
        readers,
        in_classes: in_dtypes.iter().map(|d| d.compute_class()).collect(),
        used,
        dims: dims.to_vec(),
    };
    let n: usize = dims.iter().product();
    match out {
        BufMut::F32(o) if o.len() == n => drive(&plan, o),
        BufMut::F64(o) if o.len() == n => drive(&plan, o),
        BufMut::I64(o) if o.len() == n => drive(&plan, o),
        _ => Err(op_err(format!(
            "output buffer does not hold {n} values of {out_dtype}"
        ))),
    }
}
