//! Cases of the ONNX builders that expand into core ops (`rlx_ir::ops::composite`):
//! DepthToSpace / SpaceToDepth, InstanceNormalization, GroupNormalization and Einsum, with
//! oracles written from the ONNX definitions (index formulas, per-group statistics, and
//! Einsum as a brute-force sum over every label assignment). Re-exported by `index.rs`.
use super::elementwise::graph;
use super::shape_oracle::ravel;
use super::{numel, unravel};
use crate::case::{Case, Draw, Input};
use rlx_ir::{Activation, DType};
use std::collections::BTreeMap;

const FLOATS: [DType; 3] = [DType::F32, DType::F64, DType::F16];

/// DepthToSpace: out[n, c, h·b + i, w·b + j] reads channel (i·b + j)·C' + c (DCR) or
/// c·b² + i·b + j (CRD).
pub fn depth_to_space_ref(x: &[f64], d: &[usize], b: usize, crd: bool) -> Vec<f64> {
    let (n, c, h, w) = (d[0], d[1], d[2], d[3]);
    let cb = c / (b * b);
    let os = [n, cb, h * b, w * b];
    (0..numel(&os))
        .map(|k| {
            let o = unravel(k, &os);
            let (i, j) = (o[2] % b, o[3] % b);
            let ch = if crd {
                o[1] * b * b + i * b + j
            } else {
                (i * b + j) * cb + o[1]
            };
            x[ravel(&[o[0], ch, o[2] / b, o[3] / b], d)]
        })
        .collect()
}

/// SpaceToDepth: out[n, (i·b + j)·C + c, h, w] = x[n, c, h·b + i, w·b + j].
pub fn space_to_depth_ref(x: &[f64], d: &[usize], b: usize) -> Vec<f64> {
    let (n, c, h, w) = (d[0], d[1], d[2], d[3]);
    let os = [n, c * b * b, h / b, w / b];
    (0..numel(&os))
        .map(|k| {
            let o = unravel(k, &os);
            let (blk, ch) = (o[1] / c, o[1] % c);
            let (i, j) = (blk / b, blk % b);
            x[ravel(&[o[0], ch, o[2] * b + i, o[3] * b + j], d)]
        })
        .collect()
}

/// Group normalisation with per-channel scale and bias; instance norm is `groups = C`.
pub fn group_norm_ref(
    x: &[f64],
    d: &[usize],
    s: &[f64],
    bias: &[f64],
    groups: usize,
    eps: f64,
) -> Vec<f64> {
    let c = d[1];
    let per_c = c / groups;
    let group_of = |k: usize| {
        let o = unravel(k, d);
        (o[0], o[1] / per_c, o[1])
    };
    let mut sums: BTreeMap<(usize, usize), (f64, f64, f64)> = BTreeMap::new();
    for (k, &v) in x.iter().enumerate() {
        let (n, g, _) = group_of(k);
        let e = sums.entry((n, g)).or_insert((0.0, 0.0, 0.0));
        e.0 += v;
        e.1 += v * v;
        e.2 += 1.0;
    }
    x.iter()
        .enumerate()
        .map(|(k, &v)| {
            let (n, g, ch) = group_of(k);
            let (s1, s2, m) = sums[&(n, g)];
            let mean = s1 / m;
            let var = s2 / m - mean * mean;
            (v - mean) / (var + eps).sqrt() * s[ch] + bias[ch]
        })
        .collect()
}

/// Einsum by definition: every output element sums, over every assignment of the labels
/// not in the output, the product of the operands' entries.
pub fn einsum_ref(eq: &str, xs: &[&[f64]], dims: &[&[usize]]) -> Vec<f64> {
    let (lhs, out) = eq.split_once("->").expect("explicit equation");
    let terms: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
    let out: Vec<char> = out.chars().collect();
    let mut size = BTreeMap::new();
    for (t, d) in terms.iter().zip(dims) {
        for (l, &n) in t.iter().zip(d.iter()) {
            size.insert(*l, n);
        }
    }
    let free: Vec<char> = size.keys().copied().filter(|l| !out.contains(l)).collect();
    let od: Vec<usize> = out.iter().map(|l| size[l]).collect();
    let fd: Vec<usize> = free.iter().map(|l| size[l]).collect();
    (0..numel(&od))
        .map(|k| {
            let oi = unravel(k, &od);
            (0..numel(&fd))
                .map(|f| {
                    let fi = unravel(f, &fd);
                    let val = |l: &char| match out.iter().position(|m| m == l) {
                        Some(p) => oi[p],
                        None => fi[free.iter().position(|m| m == l).expect("free label")],
                    };
                    terms
                        .iter()
                        .zip(xs)
                        .zip(dims)
                        .map(|((t, x), d)| {
                            let idx: Vec<usize> = t.iter().map(val).collect();
                            x[ravel(&idx, d)]
                        })
                        .product::<f64>()
                })
                .sum()
        })
        .collect()
}

pub fn depth_to_space() -> Vec<Case> {
    let mut cases = vec![];
    let d: &'static [usize] = &[2, 8, 3, 2];
    for crd in [false, true] {
        let c = Case::new(
            format!("depth_to_space {d:?} b 2 crd {crd}"),
            vec![Input::new("x", d, Draw::Normal(1.0))],
            move |dt| {
                graph(&[("x", d, dt)], |g, x| {
                    g.depth_to_space(x[0], 2, crd).unwrap()
                })
            },
        );
        cases.push(
            c.dtypes(&FLOATS)
                .exact()
                .out(&[2, 2, 6, 4])
                .wrt(&["x"])
                .oracle(move |v, _| depth_to_space_ref(&v[0], d, 2, crd)),
        );
    }
    let s: &'static [usize] = &[1, 3, 4, 6];
    let c = Case::new(
        format!("space_to_depth {s:?} b 2"),
        vec![Input::new("x", s, Draw::Normal(1.0))],
        move |dt| graph(&[("x", s, dt)], |g, x| g.space_to_depth(x[0], 2).unwrap()),
    );
    cases.push(
        c.dtypes(&FLOATS)
            .exact()
            .out(&[1, 12, 2, 3])
            .wrt(&["x"])
            .oracle(move |v, _| space_to_depth_ref(&v[0], s, 2)),
    );
    cases
}

pub fn group_norms() -> Vec<Case> {
    let mut cases = vec![];
    type N = (&'static [usize], Option<usize>);
    let table: [N; 4] = [
        (&[2, 3, 5], None),
        (&[2, 4, 3, 2], None),
        (&[2, 6, 4], Some(3)),
        (&[1, 4, 2, 3], Some(2)),
    ];
    for (d, groups) in table {
        let c: &'static [usize] = &d[1..2];
        let ins = vec![
            Input::new("x", d, Draw::Normal(2.0)),
            Input::new("s", c, Draw::Normal(1.0)),
            Input::new("b", c, Draw::Normal(1.0)),
        ];
        let name = match groups {
            None => format!("instance_norm {d:?}"),
            Some(g) => format!("group_norm {d:?} groups {g}"),
        };
        let eps = 1e-5;
        let case = Case::new(name, ins, move |dt| {
            graph(&[("x", d, dt), ("s", c, dt), ("b", c, dt)], |g, x| {
                let y = match groups {
                    None => g.instance_norm(x[0], x[1], x[2], eps).unwrap(),
                    Some(k) => g.group_norm(x[0], x[1], x[2], k, eps).unwrap(),
                };
                g.activation(Activation::Sin, y).unwrap()
            })
        });
        let k = groups.unwrap_or(d[1]);
        cases.push(
            // The GPU has no f64 norm kernels: its parity is checked in f32.
            case.dtypes(&[DType::F32, DType::F64])
                .parity_dtypes(&[DType::F32])
                .out(d)
                .wrt(&["x", "s", "b"])
                .oracle(move |v, _| {
                    group_norm_ref(&v[0], d, &v[1], &v[2], k, eps as f64)
                        .iter()
                        .map(|y| y.sin())
                        .collect()
                }),
        );
    }
    cases
}

pub fn einsum() -> Vec<Case> {
    type E = (&'static str, &'static [usize], Option<&'static [usize]>);
    let table: [E; 8] = [
        ("ij,jk->ik", &[3, 4], Some(&[4, 5])),
        ("bij,bjk->bik", &[2, 3, 4], Some(&[2, 4, 2])),
        ("ij,kj->ik", &[3, 4], Some(&[2, 4])),
        ("bhid,bhjd->bhij", &[1, 2, 3, 4], Some(&[1, 2, 5, 4])),
        ("i,i->", &[6], Some(&[6])),
        ("ij,k->ikj", &[2, 3], Some(&[4])),
        ("ijk->ki", &[2, 3, 4], None),
        ("abc,cd->db", &[2, 3, 4], Some(&[4, 2])),
    ];
    let mut cases = vec![];
    for (eq, da, db) in table {
        let mut ins = vec![Input::new("a", da, Draw::Normal(1.0))];
        if let Some(db) = db {
            ins.push(Input::new("b", db, Draw::Normal(1.0)));
        }
        let c = Case::new(format!("einsum {eq}"), ins, move |dt| {
            let leaves: Vec<(&str, &[usize], DType)> = match db {
                Some(db) => vec![("a", da, dt), ("b", db, dt)],
                None => vec![("a", da, dt)],
            };
            graph(&leaves, |g, x| g.einsum(eq, x).unwrap())
        });
        let wrt: &[&'static str] = if db.is_some() { &["a", "b"] } else { &["a"] };
        cases.push(
            // The GPU has no f64 reductions: its parity is checked in f32.
            c.dtypes(&[DType::F32, DType::F64])
                .parity_dtypes(&[DType::F32])
                .wrt(wrt)
                .oracle(move |v, _| {
                    let xs: Vec<&[f64]> = v.iter().map(|x| x.as_slice()).collect();
                    let dims: Vec<&[usize]> = match db {
                        Some(db) => vec![da, db],
                        None => vec![da],
                    };
                    einsum_ref(eq, &xs, &dims)
                })
                // A contraction's rounding is a fraction of its Σ|terms| (a dot product that
                // cancels to near zero keeps the digits of its terms, not of its result).
                .sums(move |v, _| {
                    let abs: Vec<Vec<f64>> = v
                        .iter()
                        .map(|x| x.iter().map(|t| t.abs()).collect())
                        .collect();
                    let xs: Vec<&[f64]> = abs.iter().map(|x| x.as_slice()).collect();
                    let dims: Vec<&[usize]> = match db {
                        Some(db) => vec![da, db],
                        None => vec![da],
                    };
                    einsum_ref(eq, &xs, &dims)
                }),
        );
    }
    cases
}
