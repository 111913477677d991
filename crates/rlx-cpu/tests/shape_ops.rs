//! Oracle tests: Reshape, Expand, Transpose, Narrow, Concat, Gather, Pad, Slice,
//! TransformRegion, and a graph with a dynamic batch dim.
mod common;
use common::*;
use rlx_ir::{DType, Dim, Graph, HostTensor, Shape, TransformStep};

const DTYPES: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::F64,
    DType::I32,
    DType::I64,
];

fn unravel(mut k: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = k % shape[d];
        k /= shape[d];
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &n)| acc * n + i)
}

/// Random values that every dtype holds: integers for int dtypes, normals otherwise.
fn values(rng: &mut Rng, n: usize, dt: DType) -> Vec<f64> {
    if dt.is_float() {
        through(dt, &rng.normals(n))
    } else {
        (0..n).map(|_| rng.below(2001) as f64 - 1000.0).collect()
    }
}

/// Build a one-input graph with `f`, run it on `x` and return the single output.
fn run_one(
    shape: &[usize],
    dt: DType,
    x: &[f64],
    f: impl FnOnce(&mut Graph, rlx_ir::NodeId) -> rlx_ir::NodeId,
) -> HostTensor {
    let mut g = Graph::new("t");
    let i = g.input("x", Shape::new(shape, dt)).unwrap();
    let o = f(&mut g, i);
    g.set_outputs(vec![o]);
    let mut out = run(&g, &[("x", HostTensor::from_f64_as(shape, x, dt))], &[]);
    out.remove(0)
}

fn check(what: &str, got: &HostTensor, shape: &[usize], want: &[f64], dt: DType) {
    assert_eq!(got.shape, shape, "{what}: shape");
    assert_eq!(got.dtype, dt, "{what}: dtype");
    // Data movement must be exact whatever the dtype.
    assert_eq!(got.to_f64_vec(), want, "{what} ({dt})");
}

#[test]
fn reshape_infers_copies_and_broadcasts() {
    let mut rng = Rng::new("reshape_infers_copies_and_broadcasts");
    for dt in DTYPES {
        let x = values(&mut rng, 60, dt);
        let cases: [(&[i64], &[usize]); 4] = [
            (&[-1, 4], &[15, 4]),
            (&[0, -1], &[3, 20]),
            (&[5, 0, -1], &[5, 4, 3]),
            (&[60], &[60]),
        ];
        for (target, want_shape) in cases {
            let out = run_one(&[3, 4, 5], dt, &x, |g, i| g.reshape(i, target).unwrap());
            check(&format!("reshape {target:?}"), &out, want_shape, &x, dt);
        }
        let out = run_one(&[3, 4, 5], dt, &x, |g, i| {
            g.reshape(i, &[2usize, 6, 5]).unwrap()
        });
        check("reshape usize", &out, &[2, 6, 5], &x, dt);
        // A 1-element tensor broadcasts into a larger target.
        let one = values(&mut rng, 1, dt);
        let out = run_one(&[1], dt, &one, |g, i| g.reshape(i, &[2, 3]).unwrap());
        check("reshape [1]->[2,3]", &out, &[2, 3], &[one[0]; 6], dt);
        let out = run_one(&[1, 1], dt, &one, |g, i| g.reshape(i, &[3, 1, 2]).unwrap());
        check("reshape [1,1]->[3,1,2]", &out, &[3, 1, 2], &[one[0]; 6], dt);
    }
}

#[test]
fn expand_broadcasts_against_index_oracle() {
    let mut rng = Rng::new("expand_broadcasts_against_index_oracle");
    let cases: [(&[usize], &[usize]); 3] = [
        (&[3, 1, 5], &[2, 3, 4, 5]),
        (&[1], &[7]),
        (&[4, 1], &[4, 9]),
    ];
    for dt in DTYPES {
        for (ins, outs) in cases {
            let n: usize = ins.iter().product();
            let x = values(&mut rng, n, dt);
            let out = run_one(ins, dt, &x, |g, i| g.expand_to(i, outs).unwrap());
            let m: usize = outs.iter().product();
            let off = outs.len() - ins.len();
            let want: Vec<f64> = (0..m)
                .map(|k| {
                    let o = unravel(k, outs);
                    let src: Vec<usize> = (0..ins.len())
                        .map(|d| if ins[d] == 1 { 0 } else { o[d + off] })
                        .collect();
                    x[ravel(&src, ins)]
                })
                .collect();
            check(&format!("expand {ins:?}->{outs:?}"), &out, outs, &want, dt);
        }
    }
}

#[test]
fn transpose_all_dtypes_odd_sizes() {
    let mut rng = Rng::new("transpose_all_dtypes_odd_sizes");
    let cases: [(&[usize], &[usize]); 4] = [
        (&[3, 5], &[1, 0]),
        (&[2, 3, 5, 7], &[2, 0, 3, 1]),
        (&[4, 1, 3], &[2, 1, 0]),
        (&[9], &[0]),
    ];
    for dt in DTYPES {
        for (shape, perm) in cases {
            let n: usize = shape.iter().product();
            let x = values(&mut rng, n, dt);
            let out = run_one(shape, dt, &x, |g, i| g.transpose(i, perm).unwrap());
            let oshape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
            let want: Vec<f64> = (0..n)
                .map(|k| {
                    let o = unravel(k, &oshape);
                    let mut src = vec![0; shape.len()];
                    for (d, &p) in perm.iter().enumerate() {
                        src[p] = o[d];
                    }
                    x[ravel(&src, shape)]
                })
                .collect();
            check(
                &format!("transpose {shape:?} {perm:?}"),
                &out,
                &oshape,
                &want,
                dt,
            );
        }
    }
}

#[test]
fn narrow_and_concat() {
    let mut rng = Rng::new("narrow_and_concat");
    let shape = [3usize, 7, 5];
    for dt in DTYPES {
        let x = values(&mut rng, 105, dt);
        for (axis, start, len) in [(1i64, 2usize, 4usize), (-1, 1, 3), (0, 2, 1), (-2, 0, 7)] {
            let out = run_one(&shape, dt, &x, |g, i| {
                g.narrow(i, axis, start, len).unwrap()
            });
            let a = if axis < 0 { axis + 3 } else { axis } as usize;
            let mut os = shape;
            os[a] = len;
            let want: Vec<f64> = (0..os.iter().product())
                .map(|k| {
                    let mut o = unravel(k, &os);
                    o[a] += start;
                    x[ravel(&o, &shape)]
                })
                .collect();
            check(
                &format!("narrow {axis} {start} {len}"),
                &out,
                &os,
                &want,
                dt,
            );
        }
        // Concat three inputs of different widths, on a middle and the last axis.
        for axis in [1i64, -1, -3] {
            let a = if axis < 0 { axis + 3 } else { axis } as usize;
            let widths = [2usize, 5, 1];
            let shapes: Vec<Vec<usize>> = widths
                .iter()
                .map(|&w| {
                    let mut s = vec![3, 4, 6];
                    s[a] = w;
                    s
                })
                .collect();
            let datas: Vec<Vec<f64>> = shapes
                .iter()
                .map(|s| values(&mut rng, s.iter().product(), dt))
                .collect();
            let mut g = Graph::new("cat");
            let ids: Vec<_> = shapes
                .iter()
                .enumerate()
                .map(|(k, s)| g.input(format!("x{k}"), Shape::new(s, dt)).unwrap())
                .collect();
            let c = g.concat(&ids, axis).unwrap();
            g.set_outputs(vec![c]);
            let names = ["x0", "x1", "x2"];
            let ins: Vec<(&str, HostTensor)> = (0..3)
                .map(|k| (names[k], HostTensor::from_f64_as(&shapes[k], &datas[k], dt)))
                .collect();
            let out = run(&g, &ins, &[]);
            let mut os = vec![3, 4, 6];
            os[a] = 8;
            let want: Vec<f64> = (0..os.iter().product())
                .map(|k| {
                    let mut o = unravel(k, &os);
                    let mut which = 0;
                    while o[a] >= widths[which] {
                        o[a] -= widths[which];
                        which += 1;
                    }
                    datas[which][ravel(&o, &shapes[which])]
                })
                .collect();
            check(&format!("concat axis {axis}"), &out[0], &os, &want, dt);
        }
        let out = run_one(&shape, dt, &x, |g, i| g.concat(&[i], 0).unwrap());
        check("concat of one", &out, &shape, &x, dt);
    }
}

#[test]
fn gather_negative_and_float_indices() {
    let mut rng = Rng::new("gather_negative_and_float_indices");
    let shape = [4usize, 7, 3];
    for dt in DTYPES {
        let x = values(&mut rng, 84, dt);
        for (axis, idx_shape) in [(1i64, vec![2usize, 3]), (-1, vec![5]), (0, vec![])] {
            let a = if axis < 0 { axis + 3 } else { axis } as usize;
            let n = shape[a] as i64;
            let ni: usize = idx_shape.iter().product();
            let idx: Vec<f64> = (0..ni)
                .map(|_| rng.below(2 * n as usize) as f64 - n as f64)
                .collect();
            for idt in [DType::I64, DType::I32, DType::F32] {
                let mut g = Graph::new("gather");
                let d = g.input("x", Shape::new(&shape, dt)).unwrap();
                let i = g.input("i", Shape::new(&idx_shape, idt)).unwrap();
                let o = g.gather(d, i, axis).unwrap();
                g.set_outputs(vec![o]);
                let ins = [
                    ("x", HostTensor::from_f64_as(&shape, &x, dt)),
                    ("i", HostTensor::from_f64_as(&idx_shape, &idx, idt)),
                ];
                let out = run(&g, &ins, &[]);
                let mut os: Vec<usize> = shape[..a].to_vec();
                os.extend(&idx_shape);
                os.extend(&shape[a + 1..]);
                let want: Vec<f64> = (0..os.iter().product())
                    .map(|k| {
                        let o = unravel(k, &os);
                        let r = idx_shape.len();
                        let pos = ravel(&o[a..a + r], &idx_shape);
                        let mut v = idx[pos] as i64;
                        if v < 0 {
                            v += n;
                        }
                        let mut src = o[..a].to_vec();
                        src.push(v as usize);
                        src.extend(&o[a + r..]);
                        x[ravel(&src, &shape)]
                    })
                    .collect();
                check(
                    &format!("gather axis {axis} {idt}"),
                    &out[0],
                    &os,
                    &want,
                    dt,
                );
            }
        }
    }
}

#[test]
fn gather_index_out_of_range_is_a_run_error() {
    let mut g = Graph::new("gather");
    let d = g.input("x", Shape::new(&[3, 4], DType::F32)).unwrap();
    let i = g.input("i", Shape::new(&[2], DType::I64)).unwrap();
    let o = g.gather(d, i, 1).unwrap();
    g.set_outputs(vec![o]);
    for bad in [4i64, -5] {
        let ins = [
            ("x", HostTensor::from_f32(&[3, 4], &[0.5; 12])),
            ("i", HostTensor::from_i64(&[2], &[1, bad])),
        ];
        let err = rlx_cpu::run_graph(&g, &[], &ins).expect_err("out-of-range index");
        assert!(
            err.to_string().contains(&format!("index {bad}")),
            "message should name the index: {err}"
        );
    }
}

#[test]
fn pad_constant() {
    let mut rng = Rng::new("pad_constant");
    let shape = [3usize, 4, 2];
    let pads = [[1usize, 2], [0, 3], [2, 0]];
    for dt in DTYPES {
        let x = values(&mut rng, 24, dt);
        let value = through(dt, &[rng.range(-5.0, 5.0).round() + 0.5])[0];
        let out = run_one(&shape, dt, &x, |g, i| g.pad(i, pads, value).unwrap());
        let os: Vec<usize> = (0..3).map(|d| shape[d] + pads[d][0] + pads[d][1]).collect();
        let fill = if dt.is_float() { value } else { value.trunc() };
        let want: Vec<f64> = (0..os.iter().product())
            .map(|k| {
                let o = unravel(k, &os);
                let inside = (0..3).all(|d| o[d] >= pads[d][0] && o[d] < pads[d][0] + shape[d]);
                if inside {
                    let src: Vec<usize> = (0..3).map(|d| o[d] - pads[d][0]).collect();
                    x[ravel(&src, &shape)]
                } else {
                    fill
                }
            })
            .collect();
        check("pad", &out, &os, &want, dt);
    }
}

/// The ONNX Slice indices of one axis, written out as the spec's loop.
fn slice_indices(n: i64, start: i64, end: i64, step: i64) -> Vec<usize> {
    let fix = |v: i64| if v < 0 { v + n } else { v };
    let (mut s, mut e) = (fix(start), fix(end));
    if step > 0 {
        s = s.max(0).min(n);
        e = e.max(0).min(n);
    } else {
        s = s.max(0).min(n - 1);
        e = e.max(-1).min(n - 1);
    }
    let mut out = vec![];
    let mut i = s;
    while (step > 0 && i < e) || (step < 0 && i > e) {
        out.push(i as usize);
        i += step;
    }
    out
}

#[test]
fn slice_with_negative_steps_and_clamping() {
    let mut rng = Rng::new("slice_with_negative_steps_and_clamping");
    let shape = [7usize, 9, 4];
    type Case = (
        &'static [i64],
        &'static [i64],
        &'static [i64],
        &'static [i64],
    );
    let cases: [Case; 7] = [
        (&[1], &[-1], &[i64::MIN], &[i64::MIN]),
        (&[0], &[0], &[7], &[i64::MAX]),
        (&[0, 1], &[-1, 1], &[-8, 100], &[-2, 3]),
        (&[-1], &[10], &[-100], &[-1]),
        (&[1], &[2], &[-2], &[]),
        (&[2, 0], &[0, 5], &[i64::MAX, 2], &[1, 1]),
        (&[], &[1, -3], &[6, 0], &[2, -2]),
    ];
    for dt in DTYPES {
        let x = values(&mut rng, 252, dt);
        for (axes, starts, ends, steps) in cases {
            let out = run_one(&shape, dt, &x, |g, i| {
                g.slice(i, axes, starts, ends, steps).unwrap()
            });
            let mut picks: Vec<Vec<usize>> = shape.iter().map(|&n| (0..n).collect()).collect();
            for k in 0..starts.len() {
                let a = axes.get(k).copied().unwrap_or(k as i64);
                let a = if a < 0 { a + 3 } else { a } as usize;
                let step = steps.get(k).copied().unwrap_or(1);
                picks[a] = slice_indices(shape[a] as i64, starts[k], ends[k], step);
            }
            let os: Vec<usize> = picks.iter().map(|p| p.len()).collect();
            let want: Vec<f64> = (0..os.iter().product())
                .map(|k| {
                    let o = unravel(k, &os);
                    let src: Vec<usize> = (0..3).map(|d| picks[d][o[d]]).collect();
                    x[ravel(&src, &shape)]
                })
                .collect();
            let what = format!("slice {axes:?} {starts:?} {ends:?} {steps:?}");
            check(&what, &out, &os, &want, dt);
        }
    }
}

#[test]
fn transform_region_chain_matches_separate_ops() {
    let mut rng = Rng::new("transform_region_chain_matches_separate_ops");
    let shape = [2usize, 6, 5];
    let steps = vec![
        TransformStep::Reshape(vec![0, 3, -1]),
        TransformStep::Transpose(vec![2, 0, 1]),
        TransformStep::Narrow {
            axis: 0,
            start: 1,
            len: 7,
        },
        TransformStep::Reshape(vec![7, 1, 2, 3]),
        TransformStep::Expand(vec![Dim::Static(7), Dim::Static(4), 2.into(), 3.into()]),
    ];
    for dt in DTYPES {
        let x = values(&mut rng, 60, dt);
        let out = run_one(&shape, dt, &x, |g, i| {
            g.transform_region(i, steps.clone()).unwrap()
        });
        // Oracle: [2,6,5] -> [2,3,10] -> [10,2,3] -> rows 1..8 -> [7,1,2,3] -> [7,4,2,3].
        let os = [7usize, 4, 2, 3];
        let want: Vec<f64> = (0..os.iter().product())
            .map(|k| {
                let o = unravel(k, &os);
                let (t0, t1, t2) = (o[0] + 1, o[2], o[3]);
                // Element [t0, t1, t2] of the transposed [10,2,3] is [t1, t2, t0] of [2,3,10].
                x[ravel(&[t1, t2, t0], &[2, 3, 10])]
            })
            .collect();
        check("transform chain", &out, &os, &want, dt);
    }
    let mut g = Graph::new("bad");
    let i = g.input("x", Shape::new(&shape, DType::F32)).unwrap();
    let bad = vec![
        TransformStep::Reshape(vec![-1]),
        TransformStep::Transpose(vec![1, 0]),
    ];
    assert!(
        g.transform_region(i, bad).is_err(),
        "a bad step is a build error"
    );
}

#[test]
fn dynamic_batch_replans_with_new_bindings() {
    let mut rng = Rng::new("dynamic_batch_replans_with_new_bindings");
    let mut g = Graph::new("dyn");
    let b = Dim::dynamic("B");
    let x = g
        .input("x", Shape::with_dims(vec![b.clone(), 6.into()], DType::F32))
        .unwrap();
    let r = g.reshape(x, &[0, 2, 3]).unwrap();
    assert_eq!(
        g.shape(r).unwrap().dims,
        vec![b.clone(), 2.into(), 3.into()]
    );
    let t = g.transpose(r, &[0, 2, 1]).unwrap();
    let f = g.reshape(t, &[0, -1]).unwrap();
    assert_eq!(g.shape(f).unwrap().dims, vec![b.clone(), 6.into()]);
    let flat = g.reshape(t, &[-1]).unwrap();
    assert!(g.shape(flat).unwrap().dims[0].as_static().is_none());
    let s = g.slice(f, &[0], &[-1], &[i64::MIN], &[-1]).unwrap();
    g.set_outputs(vec![s, flat]);
    let mut exe = rlx_cpu::CpuExecutable::new(g).unwrap();
    for batch in [2usize, 5, 2] {
        let v = rng.normals(batch * 6);
        let out = exe
            .run(&[("x", HostTensor::from_f64_as(&[batch, 6], &v, DType::F32))])
            .unwrap();
        let v = through(DType::F32, &v);
        // Row r of the result is input row (batch-1-r) read as [2,3] transposed.
        let mut want = vec![];
        for r in 0..batch {
            let row = batch - 1 - r;
            for j in 0..3 {
                for i in 0..2 {
                    want.push(v[row * 6 + i * 3 + j]);
                }
            }
        }
        assert_eq!(out[0].shape, vec![batch, 6]);
        assert_eq!(out[1].shape, vec![batch * 6]);
        assert_close(&format!("batch {batch}"), &out[0], &want, DType::F32);
    }
}

#[test]
fn shape_builders_reject_bad_params() {
    let mut g = Graph::new("bad");
    let x = g.input("x", Shape::new(&[3, 4], DType::F32)).unwrap();
    let y = g.input("y", Shape::new(&[3, 5], DType::F32)).unwrap();
    let yi = g.input("yi", Shape::new(&[3, 4], DType::I64)).unwrap();
    assert!(g.transpose(x, &[0, 0]).is_err(), "repeated perm");
    assert!(g.transpose(x, &[1]).is_err(), "short perm");
    assert!(g.transpose(x, &[0, 2]).is_err(), "perm out of range");
    assert!(g.reshape(x, &[5, 3]).is_err(), "size mismatch");
    assert!(g.reshape(x, &[-1, -1]).is_err(), "two -1");
    assert!(g.reshape(x, &[-1, 5]).is_err(), "-1 does not divide");
    assert!(g.reshape(x, &[0, 0, 0]).is_err(), "0 past the input rank");
    assert!(g.concat(&[x, y], 0).is_err(), "concat dim mismatch");
    assert!(g.concat(&[x, yi], 0).is_err(), "concat dtype mismatch");
    assert!(g.concat(&[], 0).is_err(), "concat of nothing");
    assert!(g.concat(&[x, y], 2).is_err(), "concat axis out of range");
    assert!(g.narrow(x, 2, 0, 1).is_err(), "narrow axis out of range");
    assert!(g.narrow(x, 1, 2, 3).is_err(), "narrow past the end");
    assert!(g.gather(x, yi, -3).is_err(), "gather axis out of range");
    assert!(g.expand_to(x, &[2, 5, 4]).is_err(), "expand 3 to 5");
    assert!(g.pad(x, vec![[1, 1]], 0.0).is_err(), "pad rank mismatch");
    assert!(g.slice(x, &[0], &[0], &[2], &[0]).is_err(), "zero step");
    assert!(
        g.slice(x, &[0, 0], &[0, 1], &[2, 3], &[]).is_err(),
        "repeated axis"
    );
    assert!(
        g.slice(x, &[2], &[0], &[1], &[]).is_err(),
        "slice axis out of range"
    );
    assert!(g.concat(&[x, y], 1).is_ok());
}

#[test]
fn symbolic_shape_rules() {
    let (b, s) = (Dim::dynamic("B"), Dim::dynamic("S"));
    let mut g = Graph::new("sym");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![b.clone(), s.clone(), 4.into()], DType::F32),
        )
        .unwrap();
    let dims = |g: &Graph, id| g.shape(id).unwrap().dims.clone();
    // -1 resolves to a symbol when the remaining factor is exactly one symbol.
    let r = g.reshape(x, &[0, 4, -1]).unwrap();
    assert_eq!(dims(&g, r), vec![b.clone(), 4.into(), s.clone()]);
    let r = g.reshape(x, &[-1, 0, 4]).unwrap();
    assert_eq!(dims(&g, r), vec![b.clone(), s.clone(), 4.into()]);
    // Otherwise it is a new symbol, and it still runs once B and S are bound.
    let r = g.reshape(x, &[0, -1]).unwrap();
    assert_eq!(dims(&g, r)[0], b);
    assert!(dims(&g, r)[1].as_static().is_none());
    let c = g.concat(&[x, x], 1).unwrap();
    assert!(dims(&g, c)[1].as_static().is_none());
    assert_eq!(dims(&g, c)[2], Dim::Static(4));
    let p = g.pad(x, vec![[0, 0], [1, 1], [0, 2]], 0.0).unwrap();
    assert_eq!(dims(&g, p)[2], Dim::Static(6));
    let e = g
        .expand(x, vec![2.into(), b.clone(), 1.into(), 4.into()])
        .unwrap();
    assert_eq!(dims(&g, e), vec![2.into(), b.clone(), s.clone(), 4.into()]);
    let steps = vec![
        TransformStep::Reshape(vec![0, 0, 1, 4]),
        TransformStep::Expand(vec![b.clone(), s.clone(), 3.into(), 4.into()]),
    ];
    let tr = g.transform_region(x, steps).unwrap();
    assert_eq!(dims(&g, tr), vec![b.clone(), s.clone(), 3.into(), 4.into()]);
    g.set_outputs(vec![r, c, p, e, tr]);
    let mut rng = Rng::new("symbolic_shape_rules");
    let mut exe = rlx_cpu::CpuExecutable::new(g).unwrap();
    for (bb, ss) in [(2usize, 3usize), (1, 5)] {
        let v = rng.normals(bb * ss * 4);
        let out = exe
            .run(&[("x", HostTensor::from_f64_as(&[bb, ss, 4], &v, DType::F32))])
            .unwrap();
        let v = through(DType::F32, &v);
        assert_eq!(out[0].shape, vec![bb, ss * 4]);
        assert_close("reshape [0,-1]", &out[0], &v, DType::F32);
        assert_eq!(out[1].shape, vec![bb, 2 * ss, 4]);
        assert_eq!(out[2].shape, vec![bb, ss + 2, 6]);
        // Symbols inside Expand targets are bound per run too.
        assert_eq!(out[3].shape, vec![2, bb, ss, 4]);
        let twice: Vec<f64> = v.iter().chain(&v).cloned().collect();
        assert_close("expand [2,B,1,4]", &out[3], &twice, DType::F32);
        assert_eq!(out[4].shape, vec![bb, ss, 3, 4]);
        let want: Vec<f64> = (0..bb * ss * 12).map(|k| v[(k / 12) * 4 + k % 4]).collect();
        assert_close("region expand [B,S,3,4]", &out[4], &want, DType::F32);
    }
}
