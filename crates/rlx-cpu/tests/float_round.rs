//! FloatRound against an independent oracle written from the format definitions: every
//! code of each format (256, or 16 for float4) decoded here from sign / exponent / mantissa
//! and the special-code rules, and each input rounded by searching that table for its two
//! neighbours (ties to the even code), then the overflow / saturation / NaN / −0 rules.
//! Inputs are seeded random f32s across magnitudes plus exact grid points, exact midpoints
//! (ties), out-of-range values, infinities, NaN, zeros and f32 subnormals.
use rlx_cpu::run_graph;
use rlx_ir::{DType, E8M0Round, Graph, HostTensor, MiniFloat, Shape};
use rlx_testutil::Rng;

/// The value of code `c`: (sign, exponent bits, mantissa bits, bias) decoded by hand.
/// None for NaN codes; infinities as f64 infinities.
fn code_value(f: MiniFloat, c: u32) -> Option<f64> {
    let (e_bits, m_bits, bias) = match f {
        MiniFloat::E4M3FN => (4, 3, 7),
        MiniFloat::E4M3FNUZ => (4, 3, 8),
        MiniFloat::E5M2 => (5, 2, 15),
        MiniFloat::E5M2FNUZ => (5, 2, 16),
        MiniFloat::E2M1 => (2, 1, 1),
        MiniFloat::E8M0 { .. } => {
            return (c != 255).then(|| 2f64.powi(c as i32 - 127));
        }
    };
    let width = 1 + e_bits + m_bits;
    let s = (c >> (width - 1)) & 1;
    let e = (c >> m_bits) & ((1 << e_bits) - 1);
    let m = c & ((1 << m_bits) - 1);
    let all_e = (1 << e_bits) - 1;
    let all_m = (1 << m_bits) - 1;
    match f {
        // FNUZ: the "negative zero" code is the only NaN; no infinities.
        MiniFloat::E4M3FNUZ | MiniFloat::E5M2FNUZ if s == 1 && e == 0 && m == 0 => return None,
        // E4M3FN: only S.1111.111 is NaN; no infinities.
        MiniFloat::E4M3FN if e == all_e && m == all_m => return None,
        // E5M2 is IEEE-like.
        MiniFloat::E5M2 if e == all_e && m != 0 => return None,
        MiniFloat::E5M2 if e == all_e => {
            return Some(if s == 1 {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        _ => {}
    }
    let frac = m as f64 / (1 << m_bits) as f64;
    let mag = if e == 0 {
        frac * 2f64.powi(1 - bias)
    } else {
        (1.0 + frac) * 2f64.powi(e as i32 - bias)
    };
    Some(if s == 1 { -mag } else { mag })
}

/// Finite non-negative grid values with their codes, ascending.
fn grid(f: MiniFloat) -> Vec<(f64, u32)> {
    let n = if f == MiniFloat::E2M1 { 16 } else { 256 };
    let mut v: Vec<(f64, u32)> = (0..n)
        .filter_map(|c| code_value(f, c).map(|v| (v, c)))
        .filter(|(v, _)| v.is_finite() && *v >= 0.0 && !(*v == 0.0 && v.is_sign_negative()))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.dedup_by(|a, b| a.0 == b.0);
    v
}

fn oracle(f: MiniFloat, saturate: bool, x: f64, g: &[(f64, u32)]) -> f64 {
    let max = g.last().unwrap().0;
    if let MiniFloat::E8M0 { round } = f {
        return oracle_e8m0(round, saturate, x, g);
    }
    let saturate = saturate || f == MiniFloat::E2M1;
    let fnuz = matches!(f, MiniFloat::E4M3FNUZ | MiniFloat::E5M2FNUZ);
    if x.is_nan() {
        return if f == MiniFloat::E2M1 { 0.0 } else { f64::NAN };
    }
    let over = if saturate {
        max
    } else if f == MiniFloat::E5M2 {
        f64::INFINITY
    } else {
        f64::NAN
    };
    let a = x.abs();
    // The grid extended by one step past max: rounding there is overflow.
    let step = max - g[g.len() - 2].0;
    let past = (max + step, g.last().unwrap().1 + 1);
    let mag = if a.is_infinite() || a > past.0 {
        over
    } else {
        let mut ext = g.to_vec();
        ext.push(past);
        let hi = ext.iter().position(|&(v, _)| v >= a).unwrap();
        let pick = if ext[hi].0 == a || hi == 0 {
            ext[hi]
        } else {
            let (lo, up) = (ext[hi - 1], ext[hi]);
            let (dl, du) = (a - lo.0, up.0 - a);
            if dl < du || (dl == du && lo.1 % 2 == 0) {
                lo
            } else {
                up
            }
        };
        if pick.0 > max {
            over
        } else {
            pick.0
        }
    };
    if mag.is_nan() {
        return f64::NAN;
    }
    if x.is_sign_negative() && !(fnuz && mag == 0.0) {
        -mag
    } else {
        mag
    }
}

fn oracle_e8m0(round: E8M0Round, saturate: bool, x: f64, g: &[(f64, u32)]) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let a = x.abs();
    let (min, max) = (g[0].0, g.last().unwrap().0);
    if a.is_infinite() {
        return if saturate { max } else { f64::NAN };
    }
    // The powers of two just outside the range stand for "out of range".
    let below = min / 2.0;
    let above = f64::INFINITY;
    let up = g.iter().map(|p| p.0).find(|&p| p >= a).unwrap_or(above);
    let down = g
        .iter()
        .rev()
        .map(|p| p.0)
        .find(|&p| p <= a)
        .unwrap_or(below);
    let r = match round {
        E8M0Round::Up => up,
        E8M0Round::Down => down,
        E8M0Round::Nearest if up == above => {
            if a < max * 1.5 {
                max
            } else {
                above
            }
        }
        E8M0Round::Nearest => {
            if a - down < up - a {
                down
            } else {
                up
            }
        }
    };
    if (min..=max).contains(&r) {
        r
    } else if saturate {
        if r > max {
            max
        } else {
            min
        }
    } else {
        f64::NAN
    }
}

fn inputs(rng: &mut Rng, f: MiniFloat, g: &[(f64, u32)]) -> Vec<f32> {
    let mut v: Vec<f32> = vec![
        0.0,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        -f32::MAX,
        1e-45,
        -1e-45,
        f32::MIN_POSITIVE,
    ];
    // Every grid point, every midpoint (a tie) and a hair either side, both signs.
    for w in g.windows(2) {
        let (a, b) = (w[0].0, w[1].0);
        let m = (a + b) / 2.0;
        for p in [a, m, m * (1.0 + 1e-6), m * (1.0 - 1e-6)] {
            v.push(p as f32);
            v.push(-p as f32);
        }
    }
    let max = g.last().unwrap().0;
    for _ in 0..2000 {
        let lg = rng.range(-150.0, (max.log2() + 3.0).min(127.0));
        let s = if rng.below(2) == 0 { -1.0 } else { 1.0 };
        v.push((s * 2f64.powf(lg)) as f32);
    }
    if matches!(f, MiniFloat::E8M0 { .. }) {
        v.retain(|x| !x.is_sign_negative() || x.is_nan());
    }
    v
}

fn run(f: MiniFloat, saturate: bool, xs: &[f32]) -> Vec<f32> {
    let mut g = Graph::new("float_round");
    let x = g.input("x", Shape::new(&[xs.len()], DType::F32)).unwrap();
    let y = g.float_round(x, f, saturate).unwrap();
    g.set_outputs(vec![y]);
    let t = HostTensor::from_f32_as(&[xs.len()], xs, DType::F32);
    let out = run_graph(&g, &[], &[("x", t)]).unwrap().remove(0);
    assert_eq!(out.dtype, DType::F32);
    out.to_f32_vec()
}

fn formats() -> Vec<MiniFloat> {
    let mut v = MiniFloat::ALL[..5].to_vec();
    for round in [E8M0Round::Up, E8M0Round::Down, E8M0Round::Nearest] {
        v.push(MiniFloat::E8M0 { round });
    }
    v
}

#[test]
fn decode_matches_the_format_definition_for_every_code() {
    for f in formats() {
        let n = if f == MiniFloat::E2M1 { 16 } else { 256 };
        for c in 0..n {
            let got = f.decode(c as u8) as f64;
            match code_value(f, c) {
                None => assert!(got.is_nan(), "{f:?} code {c:#x}: got {got}, want NaN"),
                Some(w) => assert!(
                    got == w && got.is_sign_negative() == w.is_sign_negative(),
                    "{f:?} code {c:#x}: got {got}, want {w}"
                ),
            }
        }
    }
}

#[test]
fn float_round_picks_the_nearest_code_ties_to_even() {
    let mut rng = Rng::new("float_round_picks_the_nearest_code_ties_to_even");
    for f in formats() {
        let g = grid(f);
        let xs = inputs(&mut rng, f, &g);
        for saturate in [true, false] {
            let got = run(f, saturate, &xs);
            for (&x, &y) in xs.iter().zip(&got) {
                let want = oracle(f, saturate, x as f64, &g);
                let same = if want.is_nan() {
                    y.is_nan()
                } else {
                    y as f64 == want
                        && (want != 0.0 || y.is_sign_negative() == want.is_sign_negative())
                };
                assert!(
                    same,
                    "{f:?} saturate={saturate}: x = {x:e} ({:#010x}) gave {y:e}, want {want:e}",
                    x.to_bits()
                );
            }
        }
    }
}

/// The output is on the grid: rounding a rounded value changes nothing.
#[test]
fn float_round_is_idempotent() {
    let mut rng = Rng::new("float_round_is_idempotent");
    for f in formats() {
        let g = grid(f);
        let xs = inputs(&mut rng, f, &g);
        let once = run(f, true, &xs);
        let twice = run(f, true, &once);
        for (a, b) in once.iter().zip(&twice) {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{f:?}: {a} → {b}"
            );
        }
    }
}
