//! wgpu parity of FloatRound (every float8 / float4 format, E8M0 in each rounding mode,
//! saturating or not), bit for bit against the CPU: grid points, exact midpoints (ties to
//! even) and their f32 neighbours, values past max, ±inf, NaN, ±0, f32 subnormals and
//! seeded values across magnitudes, from f32, f16 and bf16 inputs. The results hold NaN
//! and inf, which rel-L2 cannot measure, so the comparison is exact here (NaN to NaN, every
//! other value by its bits, the sign of zero included); the finite saturating results also
//! go through the common harness (CPU and f64 oracle).
mod common;
use common::*;
use rlx_ir::{DType, E8M0Round, Graph, MiniFloat, Shape};

const FORMATS: [MiniFloat; 8] = [
    MiniFloat::E4M3FN,
    MiniFloat::E4M3FNUZ,
    MiniFloat::E5M2,
    MiniFloat::E5M2FNUZ,
    MiniFloat::E2M1,
    MiniFloat::E8M0 {
        round: E8M0Round::Up,
    },
    MiniFloat::E8M0 {
        round: E8M0Round::Down,
    },
    MiniFloat::E8M0 {
        round: E8M0Round::Nearest,
    },
];

fn build(n: usize, f: MiniFloat, sat: bool) -> impl Fn(DType) -> Graph {
    move |t: DType| {
        let mut g = Graph::new("float_round");
        let x = g.input("x", Shape::new(&[n], t)).unwrap();
        let y = g.float_round(x, f, sat).unwrap();
        g.set_outputs(vec![y]);
        g
    }
}

/// The inputs for format `f`: its finite grid values (both signs), the midpoints of
/// neighbours and the f32 values one ulp either side, the specials, seeded magnitudes.
fn inputs(f: MiniFloat, rng: &mut Rng) -> Vec<f64> {
    let codes = if f == MiniFloat::E2M1 { 16 } else { 256 };
    let mut grid: Vec<f32> = (0..codes)
        .map(|c| f.decode(c as u8))
        .filter(|v| v.is_finite() && *v >= 0.0)
        .collect();
    grid.sort_by(f32::total_cmp);
    grid.dedup();
    let mut v: Vec<f32> = Vec::new();
    let near = |x: f32| {
        [
            x,
            f32::from_bits(x.to_bits() + 1),
            f32::from_bits(x.to_bits().max(1) - 1),
        ]
    };
    for w in grid.windows(2) {
        v.push(w[0]);
        v.extend(near((w[0] + w[1]) / 2.0));
    }
    let max = *grid.last().unwrap();
    v.push(max);
    let step = max - grid[grid.len() - 2];
    for x in [
        max + step / 2.0,
        max + step / 4.0,
        max + step,
        max * 1.5,
        max * 4.0,
    ] {
        v.extend(near(x));
    }
    v.extend([
        0.0,
        f32::INFINITY,
        f32::NAN,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-40,
        f32::from_bits(1),
        f32::from_bits(0x0060_0000),
        f32::from_bits(0x0040_0000),
        f32::from_bits(0x0030_0000),
        grid[1] / 2.0,
        grid[1] / 4.0,
        grid[1] * 0.75,
    ]);
    for _ in 0..200 {
        let e = (rng.uniform() * 60.0).floor() as i32 - 30;
        v.push((rng.uniform() * 2f64.powi(e)) as f32);
    }
    // Both signs of everything.
    let neg: Vec<f32> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v.into_iter().map(|x| x as f64).collect()
}

/// Bits of `x` with every NaN one NaN.
fn canon(x: f32) -> u32 {
    if x.is_nan() {
        0x7fc0_0000
    } else {
        x.to_bits()
    }
}

#[test]
fn float_round_bits() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("float_round_bits");
    let mut checked = 0;
    for f in FORMATS {
        let data = inputs(f, &mut rng);
        let n = data.len();
        for sat in [true, false] {
            for dt in FLOATS {
                let g = build(n, f, sat)(dt);
                let feeds = [feed("x", &[n], data.clone())];
                let mut exe =
                    rlx_wgpu::WgpuExecutable::new(g.clone(), 0, rlx_wgpu::WgpuOptions::default())
                        .expect("wgpu compile");
                let got = run_gpu_exe(&mut exe, &g, &feeds);
                for (id, kind, reason) in exe.dispatch() {
                    assert!(
                        reason.is_none(),
                        "{f:?} [{dt}]: node {id} ({kind}) fell back: {reason:?}"
                    );
                }
                let want = run_cpu(&g, &feeds);
                let (a, b) = (got[0].to_f32_vec(), want[0].to_f32_vec());
                for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                    assert_eq!(
                        canon(*x),
                        canon(*y),
                        "{f:?} sat {sat} [{dt}]: x = {:e} (bits {:#x}) gave {x:e}, the CPU {y:e}",
                        data[i] as f32,
                        (data[i] as f32).to_bits()
                    );
                }
                checked += 1;
            }
        }
    }
    println!("float_round_bits: {checked} runs");
}

/// Finite data, saturating: the common harness (CPU in the dtype and the f64 oracle).
#[test]
fn float_round_harness() {
    if !gpu() {
        return;
    }
    let mut rng = Rng::new("float_round_harness");
    for f in FORMATS {
        let n = 300;
        let data: Vec<f64> = rng.normals(n).into_iter().map(|v| v * 4.0).collect();
        for dt in FLOATS {
            parity(
                &format!("float_round {f:?}"),
                &build(n, f, true),
                &[feed("x", &[n], data.clone())],
                dt,
            );
        }
    }
}
