//! Oracle tests: Rope (both pairings, partial rotation, every x layout, per-batch angles,
//! storage dtypes) and its builder errors.
mod common;
use common::*;
use rlx_cpu::CpuExecutable;
use rlx_ir::{DType, Dim, Graph, HostTensor, RopeStyle, Shape};

#[derive(Clone, Copy, Debug, PartialEq)]
enum XLayout {
    /// `[B, H, S, D]`, cos `[S, n_rot/2]` (or `[B, 1, S, n_rot/2]` per batch)
    Bhsd,
    /// `[B, S, H, D]`, cos `[S, 1, n_rot/2]` (or `[B, S, 1, n_rot/2]`)
    Bshd,
    /// `[B, S, H*D]`, cos `[S, 1, n_rot/2]` (or `[B, S, 1, n_rot/2]`)
    Packed,
}

const XLAYOUTS: [XLayout; 3] = [XLayout::Bhsd, XLayout::Bshd, XLayout::Packed];
const STYLES: [RopeStyle; 2] = [RopeStyle::Half, RopeStyle::Interleaved];

#[derive(Clone, Copy, Debug)]
struct Case {
    layout: XLayout,
    b: usize,
    s: usize,
    h: usize,
    d: usize,
    n_rot: usize,
    style: RopeStyle,
    /// cos/sin carry a batch axis (per-sequence positions, e.g. left padding).
    per_batch: bool,
    dtype: DType,
    cos_dtype: DType,
}

impl Case {
    fn new(
        layout: XLayout,
        b: usize,
        s: usize,
        h: usize,
        d: usize,
        n_rot: usize,
        style: RopeStyle,
    ) -> Case {
        Case {
            layout,
            b,
            s,
            h,
            d,
            n_rot,
            style,
            per_batch: false,
            dtype: DType::F32,
            cos_dtype: DType::F32,
        }
    }
    fn x_dims(&self) -> Vec<usize> {
        match self.layout {
            XLayout::Bhsd => vec![self.b, self.h, self.s, self.d],
            XLayout::Bshd => vec![self.b, self.s, self.h, self.d],
            XLayout::Packed => vec![self.b, self.s, self.h * self.d],
        }
    }
    fn cos_dims(&self) -> Vec<usize> {
        let half = self.n_rot / 2;
        match (self.layout, self.per_batch) {
            (XLayout::Bhsd, false) => vec![self.s, half],
            (XLayout::Bhsd, true) => vec![self.b, 1, self.s, half],
            (_, false) => vec![self.s, 1, half],
            (_, true) => vec![self.b, self.s, 1, half],
        }
    }
    fn x_index(&self, b: usize, s: usize, h: usize, e: usize) -> usize {
        let (hh, ss, dd) = (self.h, self.s, self.d);
        match self.layout {
            XLayout::Bhsd => ((b * hh + h) * ss + s) * dd + e,
            XLayout::Bshd => ((b * ss + s) * hh + h) * dd + e,
            XLayout::Packed => (b * ss + s) * (hh * dd) + h * dd + e,
        }
    }
    /// Index into cos/sin of angle i at (b, s); the broadcast axes are all size 1.
    fn angle_index(&self, b: usize, s: usize, i: usize) -> usize {
        let half = self.n_rot / 2;
        if self.per_batch {
            (b * self.s + s) * half + i
        } else {
            s * half + i
        }
    }
}

/// Plain f64 RoPE with the pairing of each style written out.
fn oracle(c: &Case, x: &[f64], cos: &[f64], sin: &[f64]) -> Vec<f64> {
    let half = c.n_rot / 2;
    let mut out = vec![f64::NAN; x.len()];
    for b in 0..c.b {
        for s in 0..c.s {
            for h in 0..c.h {
                let xv = |e: usize| x[c.x_index(b, s, h, e)];
                for e in 0..c.d {
                    let val = if e >= c.n_rot {
                        xv(e)
                    } else {
                        match c.style {
                            RopeStyle::Half => {
                                let i = e % half;
                                let (co, si) =
                                    (cos[c.angle_index(b, s, i)], sin[c.angle_index(b, s, i)]);
                                if e < half {
                                    xv(e) * co - xv(e + half) * si
                                } else {
                                    xv(e) * co + xv(e - half) * si
                                }
                            }
                            RopeStyle::Interleaved => {
                                let i = e / 2;
                                let (co, si) =
                                    (cos[c.angle_index(b, s, i)], sin[c.angle_index(b, s, i)]);
                                if e % 2 == 0 {
                                    xv(e) * co - xv(e + 1) * si
                                } else {
                                    xv(e) * co + xv(e - 1) * si
                                }
                            }
                        }
                    };
                    out[c.x_index(b, s, h, e)] = val;
                }
            }
        }
    }
    out
}

fn check(c: &Case, rng: &mut Rng) {
    let (xd, cd) = (c.x_dims(), c.cos_dims());
    let x = through(c.dtype, &rng.normals(xd.iter().product()));
    let nc: usize = cd.iter().product();
    // Independent cos and sin values: a swapped or mis-paired table cannot pass.
    let cos = through(c.cos_dtype, &rng.uniforms(nc, -1.0, 1.0));
    let sin = through(c.cos_dtype, &rng.uniforms(nc, -1.0, 1.0));
    let mut g = Graph::new("rope");
    let xi = g.input("x", Shape::new(&xd, c.dtype)).unwrap();
    let ci = g.input("cos", Shape::new(&cd, c.cos_dtype)).unwrap();
    let si = g.input("sin", Shape::new(&cd, c.cos_dtype)).unwrap();
    let o = g.rope(xi, ci, si, c.d, c.n_rot, c.style).unwrap();
    g.set_outputs(vec![o]);
    let out = run(
        &g,
        &[
            ("x", HostTensor::from_f64_as(&xd, &x, c.dtype)),
            ("cos", HostTensor::from_f64_as(&cd, &cos, c.cos_dtype)),
            ("sin", HostTensor::from_f64_as(&cd, &sin, c.cos_dtype)),
        ],
        &[],
    );
    assert_eq!(out[0].shape, xd);
    assert_eq!(out[0].dtype, c.dtype);
    assert_close(
        &format!("{c:?}"),
        &out[0],
        &oracle(c, &x, &cos, &sin),
        c.dtype,
    );
}

#[test]
fn rope_full_rotation_each_layout_and_style() {
    let mut rng = Rng::new("rope_full_rotation_each_layout_and_style");
    for l in XLAYOUTS {
        for st in STYLES {
            check(&Case::new(l, 2, 7, 3, 8, 8, st), &mut rng);
            check(&Case::new(l, 1, 5, 4, 6, 6, st), &mut rng);
            check(&Case::new(l, 3, 1, 2, 2, 2, st), &mut rng);
        }
    }
}

#[test]
fn rope_partial_rotation_passes_the_rest_through() {
    let mut rng = Rng::new("rope_partial_rotation");
    for l in XLAYOUTS {
        for st in STYLES {
            check(&Case::new(l, 2, 7, 3, 10, 4, st), &mut rng);
            check(&Case::new(l, 2, 5, 2, 7, 6, st), &mut rng);
            check(&Case::new(l, 1, 3, 5, 9, 2, st), &mut rng);
        }
    }
}

#[test]
fn rope_per_batch_angles() {
    let mut rng = Rng::new("rope_per_batch_angles");
    for l in XLAYOUTS {
        for st in STYLES {
            let mut c = Case::new(l, 3, 6, 2, 8, 6, st);
            c.per_batch = true;
            check(&c, &mut rng);
        }
    }
}

#[test]
fn rope_half_and_double_storage() {
    let mut rng = Rng::new("rope_half_and_double_storage");
    for l in XLAYOUTS {
        for st in STYLES {
            for (dt, cdt) in [
                (DType::F16, DType::F16),
                (DType::F16, DType::F32),
                (DType::BF16, DType::BF16),
                (DType::F64, DType::F64),
                (DType::F64, DType::F32),
                (DType::F32, DType::F64),
            ] {
                let mut c = Case::new(l, 2, 5, 3, 12, 8, st);
                c.dtype = dt;
                c.cos_dtype = cdt;
                check(&c, &mut rng);
            }
        }
    }
}

/// One head in packed `[B, S, D]` form: cos `[S, n_rot/2]` and `[S, 1, n_rot/2]` both index
/// positions, even when B == S makes `[S, 1, ..]` look like a batch axis.
#[test]
fn rope_single_packed_head() {
    let mut rng = Rng::new("rope_single_packed_head");
    for st in STYLES {
        for b in [2, 5] {
            let c = Case::new(XLayout::Packed, b, 5, 1, 8, 6, st);
            check(&c, &mut rng);
            // Same data, cos given as [S, n_rot/2].
            let (xd, half) = (c.x_dims(), c.n_rot / 2);
            let x = through(DType::F32, &rng.normals(xd.iter().product()));
            let cos = through(DType::F32, &rng.uniforms(c.s * half, -1.0, 1.0));
            let sin = through(DType::F32, &rng.uniforms(c.s * half, -1.0, 1.0));
            let mut g = Graph::new("rope2d");
            let xi = g.input("x", Shape::new(&xd, DType::F32)).unwrap();
            let ci = g
                .input("cos", Shape::new(&[c.s, half], DType::F32))
                .unwrap();
            let si = g
                .input("sin", Shape::new(&[c.s, half], DType::F32))
                .unwrap();
            let o = g.rope(xi, ci, si, c.d, c.n_rot, st).unwrap();
            g.set_outputs(vec![o]);
            let out = run(
                &g,
                &[
                    ("x", HostTensor::from_f64_as(&xd, &x, DType::F32)),
                    (
                        "cos",
                        HostTensor::from_f64_as(&[c.s, half], &cos, DType::F32),
                    ),
                    (
                        "sin",
                        HostTensor::from_f64_as(&[c.s, half], &sin, DType::F32),
                    ),
                ],
                &[],
            );
            assert_close(
                &format!("{c:?} cos [S, h]"),
                &out[0],
                &oracle(&c, &x, &cos, &sin),
                DType::F32,
            );
        }
    }
}

/// Big enough that the work is split across threads.
#[test]
fn rope_larger_problem() {
    let mut rng = Rng::new("rope_larger_problem");
    for l in XLAYOUTS {
        for st in STYLES {
            check(&Case::new(l, 2, 129, 8, 64, 32, st), &mut rng);
        }
    }
}

#[test]
fn rope_builder_errors() {
    let f = DType::F32;
    let mut g = Graph::new("errors");
    let inp = |g: &mut Graph, dims: &[usize], dt: DType| {
        let n = g.len();
        g.input(format!("x{n}"), Shape::new(dims, dt)).unwrap()
    };
    let x = inp(&mut g, &[2, 4, 7, 8], f); // [B, H, S, D]
    let packed = inp(&mut g, &[2, 7, 32], f); // 4 heads of 8
    let c = inp(&mut g, &[7, 4], f);
    let c3 = inp(&mut g, &[7, 3], f);
    let c_s1 = inp(&mut g, &[7, 1, 4], f);
    let c_long = inp(&mut g, &[8, 4], f);
    let c_grow = inp(&mut g, &[3, 7, 4], f);
    let c_f16 = inp(&mut g, &[7, 4], DType::F16);
    let c_int = inp(&mut g, &[7, 4], DType::I64);
    let x_int = inp(&mut g, &[2, 4, 7, 8], DType::I32);
    let half = RopeStyle::Half;

    let bad: Vec<(&str, Result<_, _>)> = vec![
        ("odd n_rot", g.rope(x, c, c, 8, 7, half)),
        ("n_rot > head_dim", g.rope(x, c, c, 8, 10, half)),
        ("n_rot 0", g.rope(x, c, c, 8, 0, half)),
        ("head_dim 0", g.rope(x, c, c, 0, 8, half)),
        (
            "last dim not a multiple of head_dim",
            g.rope(packed, c_s1, c_s1, 5, 4, half),
        ),
        ("cos last dim != n_rot/2", g.rope(x, c3, c3, 8, 8, half)),
        ("cos and sin shapes differ", g.rope(x, c3, c, 8, 6, half)),
        ("cos too long", g.rope(x, c_long, c_long, 8, 8, half)),
        (
            "cos would grow the output",
            g.rope(x, c_grow, c_grow, 8, 8, half),
        ),
        ("packed x with [S, h] cos", g.rope(packed, c, c, 8, 8, half)),
        ("integer cos", g.rope(x, c_int, c_int, 8, 8, half)),
        ("integer x", g.rope(x_int, c, c, 8, 8, half)),
        (
            "two inputs",
            g.add_node(
                rlx_ir::Op::Rope {
                    head_dim: 8,
                    n_rot: 8,
                    style: half,
                },
                &[x, c],
            ),
        ),
    ];
    for (what, r) in bad {
        match r {
            Ok(id) => panic!("{what}: expected an error, got node {id}"),
            Err(e) => println!("{what}: {e}"),
        }
    }
    g.rope(x, c, c, 8, 8, half).unwrap();
    g.rope(packed, c_s1, c_s1, 8, 8, RopeStyle::Interleaved)
        .unwrap();
    g.rope(x, c_f16, c_f16, 8, 8, half).unwrap();
}

/// A symbolic sequence length in x and cos/sin: one compiled graph serves every length.
#[test]
fn rope_dynamic_sequence_length() {
    let mut rng = Rng::new("rope_dynamic_sequence_length");
    let (b, h, d, n_rot) = (2, 3, 8, 6);
    let half = n_rot / 2;
    let mut g = Graph::new("rope_dyn");
    let xs = Shape::with_dims(
        vec![b.into(), Dim::dynamic("S"), (h * d).into()],
        DType::F32,
    );
    let cs = Shape::with_dims(vec![Dim::dynamic("S"), 1.into(), half.into()], DType::F32);
    let xi = g.input("x", xs).unwrap();
    let ci = g.input("cos", cs.clone()).unwrap();
    let si = g.input("sin", cs).unwrap();
    let o = g.rope(xi, ci, si, d, n_rot, RopeStyle::Half).unwrap();
    g.set_outputs(vec![o]);
    let mut exe = CpuExecutable::new(g).unwrap();
    for s in [7, 1, 4] {
        let c = Case::new(XLayout::Packed, b, s, h, d, n_rot, RopeStyle::Half);
        let (xd, cd) = (c.x_dims(), c.cos_dims());
        let x = through(DType::F32, &rng.normals(xd.iter().product()));
        let cos = through(DType::F32, &rng.uniforms(s * half, -1.0, 1.0));
        let sin = through(DType::F32, &rng.uniforms(s * half, -1.0, 1.0));
        let out = exe
            .run(&[
                ("x", HostTensor::from_f64_as(&xd, &x, DType::F32)),
                ("cos", HostTensor::from_f64_as(&cd, &cos, DType::F32)),
                ("sin", HostTensor::from_f64_as(&cd, &sin, DType::F32)),
            ])
            .unwrap();
        assert_eq!(out[0].shape, xd);
        assert_close(
            &format!("{c:?}"),
            &out[0],
            &oracle(&c, &x, &cos, &sin),
            DType::F32,
        );
    }
}
