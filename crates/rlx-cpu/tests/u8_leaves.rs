//! U8 params and constants are held as their bytes (a packed weight costs its file size):
//! they round-trip through set_param, a run and param_value; every op reading them sees
//! the same values as before (views, Cast, Gather, arithmetic, Concat, a region); a
//! write-back of computed U8 values stores bytes again.
use rlx_cpu::CpuExecutable;
use rlx_ir::{DType, Graph, HostTensor, Shape};
use rlx_testutil::Rng;

fn bytes(rng: &mut Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.below(256) as u8).collect()
}

fn u8_tensor(shape: &[usize], data: Vec<u8>) -> HostTensor {
    HostTensor::new(shape, DType::U8, data).unwrap()
}

#[test]
fn u8_param_round_trips_and_is_its_bytes() {
    let mut rng = Rng::new("u8_param_round_trips_and_is_its_bytes");
    let (r, c) = (6, 10);
    let pv = bytes(&mut rng, r * c);
    let cv = bytes(&mut rng, r * c);
    let mut g = Graph::new("u8");
    let p = g.param("p", Shape::new(&[r, c], DType::U8)).unwrap();
    let k = g.constant(u8_tensor(&[r, c], cv.clone())).unwrap();
    let idx = g.input("idx", Shape::new(&[3], DType::I64)).unwrap();
    let flat = g.reshape(p, &[(r * c) as i64]).unwrap();
    let as_f = g.cast(p, DType::F32).unwrap();
    let rows = g.gather(p, idx, 0).unwrap();
    let tail = g.narrow(p, 0, 2, 3).unwrap();
    let sum = g.add(p, k).unwrap();
    let both = g.concat(&[p, k], 1).unwrap();
    let scaled = g.mul(as_f, as_f).unwrap();
    g.set_outputs(vec![p, flat, as_f, rows, tail, sum, both, scaled]);
    let mut exe = CpuExecutable::new(g).unwrap();
    exe.set_param("p", &u8_tensor(&[r, c], pv.clone())).unwrap();
    assert_eq!(
        exe.leaf_bytes(),
        2 * r * c,
        "param + constant, one byte a value"
    );
    let picks = [4i64, 0, -1];
    let out = exe
        .run(&[("idx", HostTensor::from_i64(&[3], &picks))])
        .unwrap();
    assert_eq!(out[0].data, pv, "the param itself");
    assert_eq!(out[1].data, pv, "a reshape view of it");
    assert_eq!(out[1].shape, vec![r * c]);
    let pf: Vec<f64> = pv.iter().map(|&b| b as f64).collect();
    assert_eq!(out[2].to_f64_vec(), pf, "cast to f32");
    let want_rows: Vec<u8> = [4, 0, r - 1]
        .iter()
        .flat_map(|&i| pv[i * c..(i + 1) * c].to_vec())
        .collect();
    assert_eq!(out[3].data, want_rows, "gathered rows");
    assert_eq!(out[4].data, pv[2 * c..5 * c].to_vec(), "narrowed rows");
    let want_sum: Vec<u8> = pv
        .iter()
        .zip(&cv)
        .map(|(a, b)| a.wrapping_add(*b))
        .collect();
    assert_eq!(out[5].data, want_sum, "u8 add wraps");
    let mut want_cat = vec![];
    for i in 0..r {
        want_cat.extend_from_slice(&pv[i * c..(i + 1) * c]);
        want_cat.extend_from_slice(&cv[i * c..(i + 1) * c]);
    }
    assert_eq!(out[6].data, want_cat, "concat with a constant");
    let sq: Vec<f64> = pf.iter().map(|v| v * v).collect();
    assert_eq!(out[7].to_f64_vec(), sq);
    let back = exe.param_value("p").unwrap();
    assert_eq!((back.dtype, back.data), (DType::U8, pv));
}

/// `p ← p + k` (u8, wrapping) over a few write-back runs: the param stays bytes.
#[test]
fn u8_param_write_back_stays_bytes() {
    let mut rng = Rng::new("u8_param_write_back_stays_bytes");
    let n = 37;
    let pv = bytes(&mut rng, n);
    let kv = bytes(&mut rng, n);
    let mut g = Graph::new("u8wb");
    let p = g.param("p", Shape::new(&[n], DType::U8)).unwrap();
    let k = g.constant(u8_tensor(&[n], kv.clone())).unwrap();
    let next = g.add(p, k).unwrap();
    let f = g.cast(p, DType::F32).unwrap();
    g.set_outputs(vec![next, f]);
    let mut exe = CpuExecutable::new(g).unwrap();
    exe.set_param("p", &u8_tensor(&[n], pv.clone())).unwrap();
    let mut want = pv;
    let none: [(&str, HostTensor); 0] = [];
    for step in 0..3 {
        let out = exe.run_writeback(&none, &[(0, "p")], false).unwrap();
        let seen: Vec<f64> = want.iter().map(|&b| b as f64).collect();
        assert_eq!(
            out[0].to_f64_vec(),
            seen,
            "step {step}: the run read the old p"
        );
        want = want
            .iter()
            .zip(&kv)
            .map(|(a, b)| a.wrapping_add(*b))
            .collect();
        assert_eq!(exe.param_value("p").unwrap().data, want, "step {step}");
        assert_eq!(
            exe.leaf_bytes(),
            2 * n,
            "step {step}: still one byte a value"
        );
    }
}

/// A U8 input (fed per run, held as bytes too) reads the same as before.
#[test]
fn u8_input_feeds_cast_and_gather() {
    let mut rng = Rng::new("u8_input_feeds_cast_and_gather");
    let xv = bytes(&mut rng, 12);
    let mut g = Graph::new("u8in");
    let x = g.input("x", Shape::new(&[4, 3], DType::U8)).unwrap();
    let idx = g.constant(HostTensor::from_i64(&[2], &[3, 1])).unwrap();
    let rows = g.gather(x, idx, 0).unwrap();
    let f = g.cast(rows, DType::F64).unwrap();
    g.set_outputs(vec![f, x]);
    let mut exe = CpuExecutable::new(g).unwrap();
    let out = exe.run(&[("x", u8_tensor(&[4, 3], xv.clone()))]).unwrap();
    let want: Vec<f64> = [&xv[9..12], &xv[3..6]]
        .concat()
        .iter()
        .map(|&b| b as f64)
        .collect();
    assert_eq!(out[0].to_f64_vec(), want);
    assert_eq!(out[1].data, xv);
}
