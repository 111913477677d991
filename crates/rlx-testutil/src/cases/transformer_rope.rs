//! Case table of the transformer group, part two: Rope (both pairings, partial rotation,
//! every x layout, per-batch angles, storage dtypes of x and of the tables) and FusedSwiGLU
//! (both orders, output casts). Cos and sin are independent uniforms in [-1, 1], so a
//! swapped or mis-paired table cannot pass (the op is linear in x whatever they are, so
//! gradchecks need no real angles).
use super::elementwise::{graph, tol_dtype};
use super::transformer::GPU_FLOATS;
use super::transformer_oracle::{swiglu_ref, CosForm, RopeCase, XLayout, STYLES, XLAYOUTS};
use super::Dims;
use crate::case::{Case, Draw, Input};
use rlx_ir::DType;

/// The case of one Rope problem in `dtypes`; the tables take the case dtype unless
/// `cos_dt` fixes theirs. Every check; callers narrow it.
pub fn rope_case(r: RopeCase, dtypes: &[DType], cos_dt: Option<DType>) -> Case {
    let (xd, cd) = (r.x_dims(), r.cos_dims());
    let table = |name| {
        let i = Input::new(name, &cd, Draw::Uniform(-1.0, 1.0));
        match cos_dt {
            Some(t) => i.of(t),
            None => i,
        }
    };
    let inputs = vec![
        Input::new("x", &xd, Draw::Normal(1.0)),
        table("cos"),
        table("sin"),
    ];
    let name = format!(
        "rope {:?} {:?} x {xd:?} cos {cd:?} ({:?}) head_dim {} n_rot {} tables {cos_dt:?}",
        r.style, r.layout, r.cos, r.d, r.n_rot
    );
    let c = Case::new(name, inputs, move |dt| r.graph(dt, cos_dt.unwrap_or(dt)))
        .dtypes(dtypes)
        .out(&xd)
        .oracle(move |v, _| r.oracle(&v[0], &v[1], &v[2]))
        .wrt(&["x"]);
    // The CUDA kernels have no f64.
    if dtypes.contains(&DType::F64) || cos_dt == Some(DType::F64) {
        c.no_parity()
    } else {
        c
    }
}

/// An old CPU oracle case in f32: parity too, no gradcheck.
fn cpu32(r: RopeCase) -> Case {
    rope_case(r, &[DType::F32], None).no_grad()
}

fn each(shapes: &[(usize, usize, usize, usize, usize)], form: CosForm) -> Vec<Case> {
    let mut cases = vec![];
    for l in XLAYOUTS {
        for st in STYLES {
            for &(b, s, h, d, n_rot) in shapes {
                cases.push(cpu32(RopeCase::new(l, (b, s, h, d), n_rot, st).cos(form)));
            }
        }
    }
    cases
}

/// Every dim rotated, each layout and pairing.
pub fn rope_full() -> Vec<Case> {
    each(
        &[(2, 7, 3, 8, 8), (1, 5, 4, 6, 6), (3, 1, 2, 2, 2)],
        CosForm::Seq,
    )
}

/// Only the first n_rot dims rotate; the rest pass through.
pub fn rope_partial() -> Vec<Case> {
    each(
        &[(2, 7, 3, 10, 4), (2, 5, 2, 7, 6), (1, 3, 5, 9, 2)],
        CosForm::Seq,
    )
}

/// Tables with a batch axis (per-sequence positions, e.g. left padding).
pub fn rope_per_batch() -> Vec<Case> {
    each(&[(3, 6, 2, 8, 6)], CosForm::PerBatch)
}

/// Big enough that the CPU splits the work across threads.
pub fn rope_large() -> Vec<Case> {
    each(&[(2, 129, 8, 64, 32)], CosForm::Seq)
}

/// Half and double storage of x and of the tables.
pub fn rope_storage() -> Vec<Case> {
    let mut cases = vec![];
    for l in XLAYOUTS {
        for st in STYLES {
            for (dt, cdt) in [
                (DType::F16, None),
                (DType::F16, Some(DType::F32)),
                (DType::BF16, None),
                (DType::F64, None),
                (DType::F64, Some(DType::F32)),
                (DType::F32, Some(DType::F64)),
            ] {
                let r = RopeCase::new(l, (2, 5, 3, 12), 8, st);
                cases.push(rope_case(r, &[dt], cdt).no_grad());
            }
        }
    }
    cases
}

/// One head in packed `[B, S, D]` form: tables `[S, 1, n_rot/2]` and `[S, n_rot/2]` both
/// index positions, even when B == S makes `[S, 1, ..]` look like a batch axis.
pub fn rope_single_head() -> Vec<Case> {
    let mut cases = vec![];
    for st in STYLES {
        for b in [2, 5] {
            for form in [CosForm::Seq, CosForm::Seq2d] {
                cases.push(cpu32(
                    RopeCase::new(XLayout::Packed, (b, 5, 1, 8), 6, st).cos(form),
                ));
            }
        }
    }
    cases
}

/// Gradchecks (every check): packed heads, `[B, H, S, D]` with a partial rotation, a single
/// packed head with `[S, n_rot/2]` tables.
pub fn rope_grad() -> Vec<Case> {
    let mut cases = vec![];
    for st in STYLES {
        for r in [
            RopeCase::new(XLayout::Packed, (2, 3, 2, 4), 4, st),
            RopeCase::new(XLayout::Bhsd, (1, 3, 2, 6), 4, st),
            RopeCase::new(XLayout::Packed, (2, 5, 1, 6), 6, st).cos(CosForm::Seq2d),
        ] {
            cases.push(rope_case(r, &[DType::F32], None));
        }
    }
    cases
}

/// The parity test's shapes (head sizes of the models, odd head counts, `[S, D]` rows) and
/// f32 tables for bf16 x, against the oracle. Their GPU parity stays in rlx-cuda's
/// `parity_shape_ops::rope_styles`, which also demands bit-equal results, so this set is
/// `noparity` in `case_tests!`.
pub fn rope_styles() -> Vec<Case> {
    let mut cases = vec![];
    for st in STYLES {
        for r in [
            RopeCase::new(XLayout::Bshd, (2, 7, 3, 64), 64, st),
            RopeCase::new(XLayout::Packed, (2, 7, 3, 16), 8, st),
            RopeCase::new(XLayout::Bhsd, (2, 9, 3, 32), 32, st),
            RopeCase::new(XLayout::Bshd, (3, 5, 7, 24), 12, st).cos(CosForm::PerBatch),
            RopeCase::new(XLayout::Rows, (1, 33, 1, 10), 10, st).cos(CosForm::Seq2d),
        ] {
            cases.push(rope_case(r, &GPU_FLOATS, None).no_grad());
        }
        let r = RopeCase::new(XLayout::Bshd, (2, 7, 3, 64), 48, st);
        cases.push(rope_case(r, &[DType::BF16], Some(DType::F32)).no_grad());
    }
    cases
}

// ---- FusedSwiGLU ----

/// SwiGLU of `[.., 2n]` in `dt`, cast to `cast_to`: the graph is frozen at `dt` (the
/// output dtype is part of the op), checked at the tolerance of the less precise of the
/// input and output storage. Every check; callers narrow it.
pub fn swiglu_case(dims: Dims, gate_first: bool, dt: DType, cast_to: Option<DType>) -> Case {
    let odt = cast_to.unwrap_or(dt);
    let two_n = *dims.last().unwrap();
    let mut out = dims.to_vec();
    *out.last_mut().unwrap() = two_n / 2;
    let t = tol_dtype(dt, odt);
    Case::new(
        format!("swiglu {dims:?} gate_first {gate_first} {dt} -> {odt}"),
        vec![Input::new("x", dims, Draw::Normal(1.0))],
        move |d| {
            graph(&[("x", dims, d)], |g, x| {
                g.swiglu(x[0], gate_first, cast_to).unwrap()
            })
        },
    )
    .dtypes(&[dt])
    .out(&out)
    .out_dtype(move |_| odt)
    .tol(t)
    .frozen(t)
    .oracle(move |v, _| swiglu_ref(&v[0], two_n, gate_first))
    .wrt(&["x"])
}

/// Both orders: the old CPU cases (with casts), the old parity cases (every float dtype
/// to every float output) and the old gradchecks (no cast; every check).
pub fn swiglu() -> Vec<Case> {
    let (f16, f32, f64, bf16) = (DType::F16, DType::F32, DType::F64, DType::BF16);
    let mut cases = vec![];
    for gate_first in [false, true] {
        let cpu: [(Dims, DType, Option<DType>); 8] = [
            (&[3, 14], f32, None),
            (&[2, 3, 66], f32, None),
            (&[2], f64, None),
            (&[5, 34], f32, Some(f16)),
            (&[5, 34], f32, Some(f64)),
            (&[5, 34], f64, Some(f32)),
            (&[4, 18], bf16, Some(f32)),
            (&[300, 222], f32, None),
        ];
        for (d, dt, to) in cpu {
            cases.push(swiglu_case(d, gate_first, dt, to).no_grad());
        }
        let gpu: [Dims; 3] = [&[7, 66], &[1, 2], &[3, 5, 258]];
        for d in gpu {
            for dt in [f32, f16, bf16, f64] {
                for to in [None, Some(f32), Some(f16), Some(f64)] {
                    cases.push(swiglu_case(d, gate_first, dt, to).no_grad());
                }
            }
        }
        let grad: [Dims; 2] = [&[3, 8], &[2, 2, 6]];
        for d in grad {
            cases.push(swiglu_case(d, gate_first, f64, None));
        }
    }
    // A big one on the device's gridded launch path.
    for dt in [f32, f16] {
        cases.push(swiglu_case(&[1024, 8192], false, dt, None).only_parity());
    }
    cases
}
