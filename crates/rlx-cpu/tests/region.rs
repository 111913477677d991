//! Oracle tests: ElementwiseRegion, BatchElementwiseRegion (chains, casts, compare+where,
//! prologues, shared batch operands) and the builder's errors.
mod common;
use common::*;
use rlx_ir::ChainOperand::{Input, Step};
use rlx_ir::ChainStep as S;
use rlx_ir::{
    Activation, BinaryOp, CompareOp, DType, Dim, Graph, HostTensor, NodeId, RegionPrologue, Shape,
};

const FLOATS: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// A shape written inline in a case table.
type Dims = &'static [usize];

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// Flat index into an input of `ins` broadcast to `out`, for output element `k`.
fn src_index(ins: &[usize], out: &[usize], k: usize) -> usize {
    let mut idx = vec![0; out.len()];
    let mut rem = k;
    for d in (0..out.len()).rev() {
        idx[d] = rem % out[d];
        rem /= out[d];
    }
    let off = out.len() - ins.len();
    let mut s = 0;
    for i in 0..ins.len() {
        let j = if ins[i] == 1 { 0 } else { idx[i + off] };
        s = s * ins[i] + j;
    }
    s
}

/// A value as a step of dtype `dt` holds it (half steps are computed in f32, then rounded).
fn r(dt: DType, v: f64) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f32(v as f32).to_f64(),
        DType::BF16 => half::bf16::from_f32(v as f32).to_f64(),
        _ => v,
    }
}

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

fn exact(what: &str, got: &HostTensor, want: &[f64]) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: length");
    for (k, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(a == b, "{what}: element {k} got {a} want {b}");
    }
}

struct Feeds {
    graph: Graph,
    feeds: Vec<(String, HostTensor)>,
}

impl Feeds {
    fn new(name: &str) -> Feeds {
        Feeds {
            graph: Graph::new(name),
            feeds: vec![],
        }
    }
    /// An input holding `v` (already rounded into `dt`).
    fn input(&mut self, shape: &[usize], v: &[f64], dt: DType) -> NodeId {
        let name = format!("in{}", self.feeds.len());
        let id = self.graph.input(&name, Shape::new(shape, dt)).unwrap();
        self.feeds
            .push((name, HostTensor::from_f64_as(shape, v, dt)));
        id
    }
    fn run(mut self, outs: Vec<NodeId>) -> Vec<HostTensor> {
        self.graph.set_outputs(outs);
        let feeds: Vec<(&str, HostTensor)> = self
            .feeds
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect();
        run(&self.graph, &feeds, &[])
    }
}

#[test]
fn chain_with_broadcast_operands() {
    let mut rng = Rng::new("region_chain_broadcast");
    let cases: [(Dims, Dims, Dims, Dims); 3] = [
        (&[2, 3, 5], &[5], &[], &[2, 3, 5]),
        (&[1, 9], &[4, 1], &[1], &[4, 9]),
        (&[7], &[7], &[1, 1], &[1, 7]),
    ];
    let chain = vec![
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Binary(BinaryOp::Add, Step(0), Input(2)),
        S::Activation(Activation::Silu, Step(1)),
        S::Binary(BinaryOp::Max, Step(2), Input(0)),
        S::Activation(Activation::Tanh, Step(3)),
        S::Binary(BinaryOp::Sub, Input(2), Step(4)),
    ];
    for dt in FLOATS {
        for (sx, sb, ss, so) in cases {
            let x = through(dt, &rng.normals(numel(sx)));
            let b = through(dt, &rng.normals(numel(sb)));
            let s = through(dt, &rng.normals(numel(ss)));
            let mut f = Feeds::new("chain");
            let ins = [
                f.input(sx, &x, dt),
                f.input(sb, &b, dt),
                f.input(ss, &s, dt),
            ];
            let y = f
                .graph
                .elementwise_region(&ins, chain.clone(), RegionPrologue::None)
                .unwrap();
            let out = f.run(vec![y]);
            assert_eq!(out[0].shape, so);
            assert_eq!(out[0].dtype, dt);
            let want: Vec<f64> = (0..numel(so))
                .map(|k| {
                    let xv = x[src_index(sx, so, k)];
                    let bv = b[src_index(sb, so, k)];
                    let sv = s[src_index(ss, so, k)];
                    let t0 = r(dt, xv * bv);
                    let t1 = r(dt, t0 + sv);
                    let t2 = r(dt, silu(t1));
                    let t3 = t2.max(xv);
                    let t4 = r(dt, t3.tanh());
                    r(dt, sv - t4)
                })
                .collect();
            assert_close(&format!("chain {dt} {sx:?}"), &out[0], &want, dt);
        }
    }
}

#[test]
fn casts_inside_a_chain_round_through_their_dtype() {
    let mut rng = Rng::new("region_casts");
    let shape = [3usize, 17];
    let n = numel(&shape);
    let x = through(
        DType::F32,
        &(0..n).map(|_| 40.0 * rng.normal()).collect::<Vec<_>>(),
    );
    let z = through(
        DType::F32,
        &(0..n)
            .map(|_| if rng.below(3) == 0 { 0.0 } else { rng.normal() })
            .collect::<Vec<_>>(),
    );
    let i: Vec<f64> = (0..n).map(|_| rng.range(-1000.0, 1000.0).trunc()).collect();
    let mut f = Feeds::new("casts");
    let xi = f.input(&shape, &x, DType::F32);
    let zi = f.input(&shape, &z, DType::F32);
    let ii = f.input(&shape, &i, DType::I64);
    let residual = |to: DType| {
        vec![
            S::Cast(to, Input(0)),
            S::Cast(DType::F32, Step(0)),
            S::Binary(BinaryOp::Sub, Input(0), Step(1)),
        ]
    };
    let g = &mut f.graph;
    let half_res = g
        .elementwise_region(&[xi], residual(DType::F16), RegionPrologue::None)
        .unwrap();
    let bf_res = g
        .elementwise_region(&[xi], residual(DType::BF16), RegionPrologue::None)
        .unwrap();
    let frac = g
        .elementwise_region(&[xi], residual(DType::I32), RegionPrologue::None)
        .unwrap();
    let to_f64 = g
        .elementwise_region(
            &[xi],
            vec![S::Cast(DType::BF16, Input(0)), S::Cast(DType::F64, Step(0))],
            RegionPrologue::None,
        )
        .unwrap();
    let wrap = g
        .elementwise_region(
            &[ii],
            vec![S::Cast(DType::U8, Input(0)), S::Cast(DType::I64, Step(0))],
            RegionPrologue::None,
        )
        .unwrap();
    let truth = g
        .elementwise_region(
            &[zi],
            vec![S::Cast(DType::Bool, Input(0)), S::Cast(DType::F32, Step(0))],
            RegionPrologue::None,
        )
        .unwrap();
    let out = f.run(vec![half_res, bf_res, frac, to_f64, wrap, truth]);
    let f16r = |v: f64| half::f16::from_f32(v as f32).to_f64();
    let bf16r = |v: f64| half::bf16::from_f32(v as f32).to_f64();
    // Differences of nearby f32 values are exact, so these compare exactly.
    let want: Vec<f64> = x.iter().map(|&v| v - f16r(v)).collect();
    assert!(want.iter().any(|&v| v != 0.0), "f16 rounding must show");
    exact("x - f16(x)", &out[0], &want);
    let want: Vec<f64> = x.iter().map(|&v| v - bf16r(v)).collect();
    exact("x - bf16(x)", &out[1], &want);
    let want: Vec<f64> = x.iter().map(|&v| v - v.trunc()).collect();
    exact("x - i32(x)", &out[2], &want);
    assert_eq!(out[3].dtype, DType::F64);
    let want: Vec<f64> = x.iter().map(|&v| bf16r(v)).collect();
    exact("f64(bf16(x))", &out[3], &want);
    let want: Vec<f64> = i
        .iter()
        .map(|&v| (v as i64).rem_euclid(256) as f64)
        .collect();
    exact("i64(u8(i))", &out[4], &want);
    let want: Vec<f64> = z.iter().map(|&v| (v != 0.0) as u8 as f64).collect();
    exact("f32(bool(z))", &out[5], &want);
}

#[test]
fn compare_and_where_with_broadcast() {
    let mut rng = Rng::new("region_compare_where");
    let (sa, sb, sc, si, so) = (
        [4usize, 1, 6],
        [5usize, 1],
        [0usize; 0],
        [1usize, 5, 6],
        [4usize, 5, 6],
    );
    let chain = vec![
        S::Compare(CompareOp::Gt, Input(0), Input(1)),
        S::Activation(Activation::Exp, Input(0)),
        S::Where(Step(0), Step(1), Input(2)),
        S::Cast(DType::F32, Input(3)),
        S::Cast(DType::F16, Step(3)),
        S::Where(Input(3), Step(2), Input(1)),
        S::Binary(BinaryOp::Mul, Step(5), Input(1)),
    ];
    for dt in [DType::F32, DType::F16, DType::F64] {
        let a = through(dt, &rng.normals(numel(&sa)));
        let b = through(dt, &rng.normals(numel(&sb)));
        let c = through(dt, &rng.normals(1));
        let i: Vec<f64> = (0..numel(&si)).map(|_| rng.below(3) as f64).collect();
        let mut f = Feeds::new("cw");
        let ins = [
            f.input(&sa, &a, dt),
            f.input(&sb, &b, dt),
            f.input(&sc, &c, dt),
            f.input(&si, &i, DType::I32),
        ];
        let y = f
            .graph
            .elementwise_region(&ins, chain.clone(), RegionPrologue::None)
            .unwrap();
        let out = f.run(vec![y]);
        assert_eq!(out[0].shape, so);
        let want: Vec<f64> = (0..numel(&so))
            .map(|k| {
                let av = a[src_index(&sa, &so, k)];
                let bv = b[src_index(&sb, &so, k)];
                let iv = i[src_index(&si, &so, k)];
                let t2 = if av > bv { r(dt, av.exp()) } else { c[0] };
                let t5 = if iv != 0.0 { t2 } else { bv };
                r(dt, t5 * bv)
            })
            .collect();
        assert_close(&format!("compare/where {dt}"), &out[0], &want, dt);
    }
}

#[test]
fn integer_chain_with_wraps_and_compare() {
    let mut rng = Rng::new("region_integer_chain");
    let (sp, sq, so) = ([3usize, 7], [7usize], [3usize, 7]);
    let p: Vec<f64> = (0..21)
        .map(|_| rng.range(-60000.0, 60000.0).trunc())
        .collect();
    let q: Vec<f64> = (0..7)
        .map(|_| rng.range(-60000.0, 60000.0).trunc())
        .collect();
    let chain = vec![
        S::Cast(DType::I64, Input(1)),
        S::Binary(BinaryOp::Mul, Input(0), Step(0)),
        S::Binary(BinaryOp::Add, Step(1), Input(0)),
        // Products reach ~3.6e9: the i32 step must wrap.
        S::Cast(DType::I32, Step(2)),
        S::Compare(CompareOp::Ge, Step(3), Input(1)),
        S::Cast(DType::F64, Step(3)),
        S::Activation(Activation::Abs, Step(5)),
        S::Activation(Activation::Neg, Step(6)),
        S::Where(Step(4), Step(6), Step(7)),
    ];
    let mut f = Feeds::new("ints");
    let ins = [f.input(&sp, &p, DType::I64), f.input(&sq, &q, DType::I32)];
    let y = f
        .graph
        .elementwise_region(&ins, chain, RegionPrologue::None)
        .unwrap();
    let out = f.run(vec![y]);
    assert_eq!(out[0].dtype, DType::F64);
    let want: Vec<f64> = (0..numel(&so))
        .map(|k| {
            let pv = p[k] as i64;
            let qv = q[src_index(&sq, &so, k)] as i64;
            let m = (pv * qv + pv).rem_euclid(1 << 32);
            let w = if m >= 1 << 31 { m - (1 << 32) } else { m };
            let ab = (w as f64).abs();
            if w >= qv {
                ab
            } else {
                -ab
            }
        })
        .collect();
    exact("integer chain", &out[0], &want);
}

/// Nearest-2x upsampling of an NCHW tensor, plainly.
fn upsample(x: &[f64], s: [usize; 4]) -> Vec<f64> {
    let [n, c, h, w] = s;
    let mut out = vec![];
    for ni in 0..n {
        for ci in 0..c {
            for hi in 0..2 * h {
                for wi in 0..2 * w {
                    out.push(x[((ni * c + ci) * h + hi / 2) * w + wi / 2]);
                }
            }
        }
    }
    out
}

#[test]
fn resize_prologue_doubles_input_zero() {
    let mut rng = Rng::new("region_resize_prologue");
    let chain = vec![
        S::Binary(BinaryOp::Add, Input(0), Input(1)),
        S::Binary(BinaryOp::Mul, Step(0), Input(2)),
        S::Activation(Activation::Tanh, Step(1)),
        S::Binary(BinaryOp::Sub, Step(2), Input(3)),
    ];
    // (input 0, bias, full, output): spatial broadcast, and a batch of 1 widened by input 2.
    let cases: [([usize; 4], Dims, Dims, Dims); 3] = [
        ([2, 3, 3, 5], &[1, 3, 1, 1], &[2, 3, 6, 10], &[2, 3, 6, 10]),
        ([1, 2, 1, 3], &[2, 1, 1], &[4, 1, 1, 6], &[4, 2, 2, 6]),
        ([1, 1, 5, 1], &[1], &[10, 1], &[1, 1, 10, 2]),
    ];
    for dt in [DType::F32, DType::F16, DType::F64] {
        for (sx, sb, sf, so) in cases {
            let x = through(dt, &rng.normals(numel(&sx)));
            let b = through(dt, &rng.normals(numel(sb)));
            let full = through(dt, &rng.normals(numel(sf)));
            let s = through(dt, &rng.normals(1));
            let mut f = Feeds::new("resize");
            let ins = [
                f.input(&sx, &x, dt),
                f.input(sb, &b, dt),
                f.input(sf, &full, dt),
                f.input(&[], &s, dt),
            ];
            let y = f
                .graph
                .elementwise_region(&ins, chain.clone(), RegionPrologue::ResizeNearest2x)
                .unwrap();
            let out = f.run(vec![y]);
            assert_eq!(out[0].shape, so);
            let up = upsample(&x, sx);
            let su = [sx[0], sx[1], 2 * sx[2], 2 * sx[3]];
            let want: Vec<f64> = (0..numel(so))
                .map(|k| {
                    let t0 = r(dt, up[src_index(&su, so, k)] + b[src_index(sb, so, k)]);
                    let t1 = r(dt, t0 * full[src_index(sf, so, k)]);
                    let t2 = r(dt, t1.tanh());
                    r(dt, t2 - s[0])
                })
                .collect();
            assert_close(&format!("resize {dt} {sx:?}"), &out[0], &want, dt);
        }
    }
}

#[test]
fn batch_region_with_shared_operands() {
    let mut rng = Rng::new("batch_region_shared");
    let chain = vec![
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Binary(BinaryOp::Add, Step(0), Input(2)),
        S::Activation(Activation::Sigmoid, Step(1)),
        S::Binary(BinaryOp::Sub, Step(2), Input(0)),
    ];
    let (ss, s1, so) = ([1usize, 4, 5], [4usize, 1], [3usize, 4, 5]);
    for dt in [DType::F32, DType::BF16, DType::F64] {
        let samples: Vec<Vec<f64>> = (0..3).map(|_| through(dt, &rng.normals(20))).collect();
        let sh1 = through(dt, &rng.normals(4));
        let sh2 = through(dt, &rng.normals(1));
        let mut f = Feeds::new("batch");
        let mut ins: Vec<NodeId> = samples.iter().map(|v| f.input(&ss, v, dt)).collect();
        ins.push(f.input(&s1, &sh1, dt));
        ins.push(f.input(&[], &sh2, dt));
        let y = f
            .graph
            .batch_elementwise_region(&ins, chain.clone(), 3, RegionPrologue::None)
            .unwrap();
        let out = f.run(vec![y]);
        assert_eq!(out[0].shape, so);
        let mut want = vec![];
        for sample in &samples {
            for i in 0..4 {
                for j in 0..5 {
                    let x = sample[i * 5 + j];
                    let t0 = r(dt, x * sh1[i]);
                    let t1 = r(dt, t0 + sh2[0]);
                    let t2 = r(dt, 1.0 / (1.0 + (-t1).exp()));
                    want.push(r(dt, t2 - x));
                }
            }
        }
        assert_close(&format!("batch {dt}"), &out[0], &want, dt);
    }
}

#[test]
fn batch_region_with_resize_prologue() {
    let mut rng = Rng::new("batch_region_resize");
    let (ss, sb) = ([1usize, 3, 2, 3], [1usize, 3, 1, 1]);
    let chain = vec![
        S::Binary(BinaryOp::Add, Input(0), Input(1)),
        S::Activation(Activation::Silu, Step(0)),
    ];
    let samples: Vec<Vec<f64>> = (0..2)
        .map(|_| through(DType::F32, &rng.normals(18)))
        .collect();
    let bias = through(DType::F32, &rng.normals(3));
    let mut f = Feeds::new("batch_resize");
    let mut ins: Vec<NodeId> = samples
        .iter()
        .map(|v| f.input(&ss, v, DType::F32))
        .collect();
    ins.push(f.input(&sb, &bias, DType::F32));
    let y = f
        .graph
        .batch_elementwise_region(&ins, chain, 2, RegionPrologue::ResizeNearest2x)
        .unwrap();
    let out = f.run(vec![y]);
    assert_eq!(out[0].shape, [2, 3, 4, 6]);
    let mut want = vec![];
    for sample in &samples {
        let up = upsample(sample, ss);
        for (k, v) in up.iter().enumerate() {
            want.push(silu(v + bias[k / 24]));
        }
    }
    assert_close("batch resize", &out[0], &want, DType::F32);
}

#[test]
fn large_regions_split_across_threads() {
    let mut rng = Rng::new("region_large");
    let (sx, sb) = ([129usize, 1031], [1031usize]);
    let x = through(DType::F32, &rng.normals(numel(&sx)));
    let b = through(DType::F32, &rng.normals(numel(&sb)));
    let img = [1usize, 8, 64, 65];
    let p = through(DType::F32, &rng.normals(numel(&img)));
    let mut f = Feeds::new("large");
    let xi = f.input(&sx, &x, DType::F32);
    let bi = f.input(&sb, &b, DType::F32);
    let pi = f.input(&img, &p, DType::F32);
    let chain = vec![
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Binary(BinaryOp::Add, Step(0), Input(0)),
        S::Activation(Activation::GeluApprox, Step(1)),
    ];
    let y = f
        .graph
        .elementwise_region(&[xi, bi], chain, RegionPrologue::None)
        .unwrap();
    let z = f
        .graph
        .elementwise_region(
            &[pi],
            vec![S::Activation(Activation::Square, Input(0))],
            RegionPrologue::ResizeNearest2x,
        )
        .unwrap();
    let out = f.run(vec![y, z]);
    let gelu_tanh = |v: f64| {
        0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
    };
    let want: Vec<f64> = (0..numel(&sx))
        .map(|k| gelu_tanh(x[k] * b[k % 1031] + x[k]))
        .collect();
    assert_close("large chain", &out[0], &want, DType::F32);
    let want: Vec<f64> = upsample(&p, img).iter().map(|v| v * v).collect();
    assert_eq!(out[1].shape, [1, 8, 128, 130]);
    assert_close("large resize", &out[1], &want, DType::F32);
}

#[test]
fn dynamic_dims_infer_and_run() {
    let mut rng = Rng::new("region_dynamic");
    let mut g = Graph::new("dyn");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 6.into()], DType::F32),
        )
        .unwrap();
    let b = g.input("b", Shape::new(&[6], DType::F32)).unwrap();
    let y = g
        .elementwise_region(
            &[x, b],
            vec![S::Binary(BinaryOp::Add, Input(0), Input(1))],
            RegionPrologue::None,
        )
        .unwrap();
    assert_eq!(g.shape(y).unwrap().dims, vec![Dim::dynamic("B"), 6.into()]);
    let img = g
        .input(
            "img",
            Shape::with_dims(
                vec![1.into(), 2.into(), Dim::dynamic("H"), 3.into()],
                DType::F32,
            ),
        )
        .unwrap();
    let up = g
        .elementwise_region(
            &[img],
            vec![S::Activation(Activation::Neg, Input(0))],
            RegionPrologue::ResizeNearest2x,
        )
        .unwrap();
    assert_eq!(
        g.shape(up).unwrap().dims,
        vec![1.into(), 2.into(), Dim::dynamic("2*H"), 6.into()]
    );
    g.set_outputs(vec![y, up]);
    let xv = through(DType::F32, &rng.normals(30));
    let bv = through(DType::F32, &rng.normals(6));
    let iv = through(DType::F32, &rng.normals(18));
    let out = run(
        &g,
        &[
            ("x", HostTensor::from_f64_as(&[5, 6], &xv, DType::F32)),
            ("b", HostTensor::from_f64_as(&[6], &bv, DType::F32)),
            (
                "img",
                HostTensor::from_f64_as(&[1, 2, 3, 3], &iv, DType::F32),
            ),
        ],
        &[],
    );
    assert_eq!(out[0].shape, [5, 6]);
    let want: Vec<f64> = (0..30).map(|k| xv[k] + bv[k % 6]).collect();
    assert_close("dynamic add", &out[0], &want, DType::F32);
    assert_eq!(out[1].shape, [1, 2, 6, 6]);
    let want: Vec<f64> = upsample(&iv, [1, 2, 3, 3]).iter().map(|v| -v).collect();
    assert_close("dynamic resize", &out[1], &want, DType::F32);
}

fn err_of(r: Result<NodeId, rlx_ir::IrError>) -> String {
    match r {
        Ok(id) => panic!("expected an error, got node {id}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_regions_are_errors() {
    let mut g = Graph::new("bad");
    let f = g.input("f", Shape::new(&[2, 3], DType::F32)).unwrap();
    let h = g.input("h", Shape::new(&[2, 3], DType::F16)).unwrap();
    let i = g.input("i", Shape::new(&[2, 3], DType::I64)).unwrap();
    let w = g.input("w", Shape::new(&[4], DType::F32)).unwrap();
    let img3 = g.input("img3", Shape::new(&[2, 3, 4], DType::F32)).unwrap();
    let none = RegionPrologue::None;
    let exp = |o| S::Activation(Activation::Exp, o);

    let e = err_of(g.elementwise_region(&[f, h], vec![exp(Input(2))], none));
    assert!(e.contains("Input(2)"), "{e}");
    let e = err_of(g.elementwise_region(&[f], vec![exp(Step(0))], none));
    assert!(e.contains("not an earlier step"), "{e}");
    let e = err_of(g.elementwise_region(
        &[f],
        vec![S::Binary(BinaryOp::Add, Input(0), Step(1)), exp(Input(0))],
        none,
    ));
    assert!(e.contains("not an earlier step"), "{e}");
    let e = err_of(g.elementwise_region(&[f], vec![], none));
    assert!(e.contains("empty"), "{e}");
    // dtype mismatches
    assert!(g
        .elementwise_region(
            &[f, i],
            vec![S::Binary(BinaryOp::Mul, Input(0), Input(1))],
            none
        )
        .is_err());
    assert!(g
        .elementwise_region(
            &[f, h],
            vec![S::Compare(CompareOp::Lt, Input(0), Input(1))],
            none
        )
        .is_err());
    assert!(g
        .elementwise_region(
            &[i, f, h],
            vec![S::Where(Input(0), Input(1), Input(2))],
            none
        )
        .is_err());
    assert!(g
        .elementwise_region(&[i], vec![exp(Input(0))], none)
        .is_err());
    assert!(g
        .elementwise_region(
            &[f],
            vec![S::Cast(DType::I32, Input(0)), exp(Step(0))],
            none
        )
        .is_err());
    // shapes
    assert!(g
        .elementwise_region(&[f, w], vec![exp(Input(0))], none)
        .is_err());
    assert!(g
        .elementwise_region(&[], vec![exp(Input(0))], none)
        .is_err());
    assert!(g
        .elementwise_region(
            &[img3],
            vec![exp(Input(0))],
            RegionPrologue::ResizeNearest2x
        )
        .is_err());
    assert!(g
        .elementwise_region(&[f, NodeId(999)], vec![exp(Input(0))], none)
        .is_err());

    // batch regions
    let s1 = g.input("s1", Shape::new(&[1, 3], DType::F32)).unwrap();
    let s2 = g.input("s2", Shape::new(&[1, 3], DType::F32)).unwrap();
    let s4 = g.input("s4", Shape::new(&[1, 4], DType::F32)).unwrap();
    let s1h = g.input("s1h", Shape::new(&[1, 3], DType::F16)).unwrap();
    let wide = g.input("wide", Shape::new(&[5, 3], DType::F32)).unwrap();
    let add01 = vec![S::Binary(BinaryOp::Add, Input(0), Input(1))];
    assert!(g
        .batch_elementwise_region(&[s1, s2], vec![exp(Input(0))], 0, none)
        .is_err());
    assert!(g
        .batch_elementwise_region(&[s1, s2], vec![exp(Input(0))], 3, none)
        .is_err());
    assert!(
        g.batch_elementwise_region(&[f, f], vec![exp(Input(0))], 2, none)
            .is_err(),
        "samples must be [1, ..]"
    );
    assert!(
        g.batch_elementwise_region(&[s1, s4], vec![exp(Input(0))], 2, none)
            .is_err(),
        "samples of different shapes"
    );
    assert!(
        g.batch_elementwise_region(&[s1, s1h], vec![exp(Input(0))], 2, none)
            .is_err(),
        "samples of different dtypes"
    );
    // Input(1) is the first shared input; with none shared it does not exist.
    let e = err_of(g.batch_elementwise_region(&[s1, s2], add01.clone(), 2, none));
    assert!(e.contains("Input(1)"), "{e}");
    assert!(
        g.batch_elementwise_region(&[s1, s2, wide], add01.clone(), 2, none)
            .is_err(),
        "a shared input may not widen axis 0"
    );
    assert!(g
        .batch_elementwise_region(&[s1, s2], vec![], 2, none)
        .is_err());
    // The well-formed versions build.
    let ok = g
        .batch_elementwise_region(&[s1, s2, w], vec![exp(Input(0))], 2, none)
        .map(|id| g.shape(id).unwrap().clone());
    assert!(ok.is_err(), "shared [4] does not broadcast with [1, 3]");
    let good = g
        .batch_elementwise_region(&[s1, s2, s1], add01, 2, none)
        .unwrap();
    assert_eq!(g.shape(good).unwrap(), &Shape::new(&[2, 3], DType::F32));
}

/// Fusion relies on this: a region gives bit for bit what its unfused ops give (each step
/// settles into its dtype exactly as the executor settles each op's output). The values
/// themselves are checked against f64 oracles above.
#[test]
fn region_matches_its_unfused_graph_exactly() {
    let mut rng = Rng::new("region_equals_unfused");
    let chain = vec![
        S::Binary(BinaryOp::Mul, Input(0), Input(1)),
        S::Activation(Activation::Gelu, Step(0)),
        S::Cast(DType::BF16, Step(1)),
        S::Cast(DType::F16, Step(2)),
        S::Compare(CompareOp::Lt, Step(3), Input(0)),
        S::Where(Step(4), Step(3), Input(1)),
        S::Cast(DType::I32, Step(5)),
        S::Cast(DType::F16, Step(6)),
        S::Binary(BinaryOp::Add, Step(7), Step(5)),
    ];
    let (sa, sb) = ([3usize, 1, 11], [5usize, 1]);
    let a = through(
        DType::F16,
        &(0..33).map(|_| 3.0 * rng.normal()).collect::<Vec<_>>(),
    );
    let b = through(
        DType::F16,
        &(0..5).map(|_| 3.0 * rng.normal()).collect::<Vec<_>>(),
    );
    let mut f = Feeds::new("fused_vs_unfused");
    let ai = f.input(&sa, &a, DType::F16);
    let bi = f.input(&sb, &b, DType::F16);
    let fused = f
        .graph
        .elementwise_region(&[ai, bi], chain.clone(), RegionPrologue::None)
        .unwrap();
    let g = &mut f.graph;
    let mut steps: Vec<NodeId> = vec![];
    for step in &chain {
        let node = |o: &rlx_ir::ChainOperand| match *o {
            Input(0) => ai,
            Input(_) => bi,
            Step(j) => steps[j],
        };
        let id = match step {
            S::Activation(act, x) => g.activation(*act, node(x)),
            S::Binary(op, x, y) => g.binary(*op, node(x), node(y)),
            S::Cast(to, x) => g.cast(node(x), *to),
            S::Compare(op, x, y) => g.add_node(rlx_ir::Op::Compare(*op), &[node(x), node(y)]),
            S::Where(c, x, y) => g.add_node(rlx_ir::Op::Where, &[node(c), node(x), node(y)]),
        }
        .unwrap();
        steps.push(id);
    }
    let last = steps[steps.len() - 1];
    let out = f.run(vec![fused, last]);
    assert_eq!(out[0].shape, [3, 5, 11]);
    assert_eq!(out[0], out[1]);
}
