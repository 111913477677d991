//! wgpu parity of TopK: the index group's `top_k` cases (ties on a coarse grid) with no
//! fallback allowed for TopK itself, plus the paths those small cases do not reach: lines
//! up to the bitonic limit, the selection path of long lines, strided axes, NaN and ±0,
//! i64 keys beyond the i32 range, halves.
mod common;
use common::*;
use rlx_ir::{DType, Graph, Shape};

/// The index group's table lets TopK fall back; its lowering is here, so its cases run
/// with no fallback allowed (the values are a GatherElements, lowered too).
#[test]
fn top_k_lowered() {
    let mut cases = rlx_testutil::cases::index::top_k();
    for c in &mut cases {
        c.fallback = OpKindSet::empty();
    }
    wgpu::check("index::top_k", &cases);
}

/// The indices of TopK of x `dims` (dtype `t`), and its values where they are finite (the
/// rel-L2 of a NaN or an inf is no measure).
fn build(
    dims: &[usize],
    k: usize,
    axis: i64,
    largest: bool,
    values: bool,
) -> impl Fn(DType) -> Graph {
    let d = dims.to_vec();
    move |t: DType| {
        let mut g = Graph::new("top_k");
        let x = g.input("x", Shape::new(&d, t)).unwrap();
        let (v, i) = g.top_k(x, k, axis, largest, true).unwrap();
        g.set_outputs(if values { vec![i, v] } else { vec![i] });
        g
    }
}

/// Values on a grid of `levels` steps, so that long lines tie a lot.
fn grid(rng: &mut Rng, n: usize, levels: usize) -> Vec<f64> {
    (0..n)
        .map(|_| (rng.uniform() * levels as f64).floor() - (levels / 2) as f64)
        .collect()
}

fn run(name: &str, dims: &[usize], k: usize, axis: i64, largest: bool, data: Vec<f64>, dt: DType) {
    let values = data.iter().all(|v| v.is_finite());
    let name = format!("{name} {dims:?} k {k} axis {axis} largest {largest}");
    let b = build(dims, k, axis, largest, values);
    parity(&name, &b, &[feed("x", dims, data)], dt);
}

#[test]
fn top_k_long_lines() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("top_k_long_lines");
    // bitonic: up to 2048 (a non-power of two, the limit itself, a strided axis); then the
    // selection path past it.
    let shapes: [(&[usize], usize, i64); 5] = [
        (&[3, 1000], 17, 1),
        (&[2, 2048], 2048, -1),
        (&[300, 3], 5, 0),
        (&[2, 5000], 7, 1),
        (&[3000, 2], 3, 0),
    ];
    for (dims, k, axis) in shapes {
        let n: usize = dims.iter().product();
        for largest in [true, false] {
            for dt in [DType::F32, DType::I32] {
                run("long", dims, k, axis, largest, grid(&mut rng, n, 41), dt);
            }
            run(
                "long normal",
                dims,
                k,
                axis,
                largest,
                rng.normals(n),
                DType::F32,
            );
        }
    }
}

/// NaN ranks above every number (the first NaN first among NaNs), -0 ties with +0, infs
/// in order; in f32 and the halves.
#[test]
fn top_k_nan_and_zeros() {
    if !gpu() {
        return;
    }
    let row = [
        1.0,
        f64::NAN,
        -0.0,
        0.0,
        f64::INFINITY,
        -f64::INFINITY,
        f64::NAN,
        -1.5,
        0.0,
        -0.0,
        2.0,
    ];
    let dims = [2, row.len()];
    let mut data = row.to_vec();
    data.extend(row.iter().rev());
    for dt in [DType::F32, DType::F16, DType::BF16] {
        for largest in [true, false] {
            run("nan", &dims, row.len(), 1, largest, data.clone(), dt);
            run("nan", &dims, 3, 1, largest, data.clone(), dt);
        }
    }
    // The selection path sees the same ranks.
    let n = 4000;
    let long: Vec<f64> = (0..n).map(|i| row[i % row.len()]).collect();
    for largest in [true, false] {
        run("nan long", &[1, n], 9, 1, largest, long.clone(), DType::F32);
    }
}

/// i64 keys compare all 64 bits (values far outside i32, equal low words), and u8 / i32.
#[test]
fn top_k_integers() {
    if !gpu() {
        return;
    }
    let big = (1i64 << 40) as f64;
    let row = [
        big,
        -big,
        big + 1.0,
        3.0,
        -3.0,
        big,
        (1i64 << 32) as f64,
        0.0,
        -(1i64 << 32) as f64,
        3.0,
    ];
    let mut data = row.to_vec();
    data.extend(row.iter().map(|v| -v));
    for largest in [true, false] {
        run(
            "i64",
            &[2, row.len()],
            6,
            1,
            largest,
            data.clone(),
            DType::I64,
        );
        run(
            "i64",
            &[row.len(), 2],
            4,
            0,
            largest,
            data.clone(),
            DType::I64,
        );
    }
    let mut rng = Rng::new("top_k_integers");
    for dt in [DType::U8, DType::I32] {
        let n = 4 * 37;
        let d: Vec<f64> = match dt {
            DType::U8 => (0..n).map(|_| (rng.uniform() * 256.0).floor()).collect(),
            _ => grid(&mut rng, n, 9),
        };
        for largest in [true, false] {
            run("int", &[4, 37], 11, 1, largest, d.clone(), dt);
        }
    }
}
