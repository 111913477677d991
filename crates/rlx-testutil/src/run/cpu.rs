//! CPU vs f64 oracle: each case in each of its dtypes runs on the CPU executor with inputs
//! rounded into their dtypes, and output 0 is compared with the oracle over the same
//! rounded values (rel-L2 within the dtype's tolerance of DESIGN.md, or exactly).
use crate::case::{draw_inputs, through, Case, Check, Compare};
use crate::{rel_l2, Rng};
use rlx_ir::{DType, HostTensor};

/// Tolerance of DESIGN.md for a dtype: rel-L2 error bound.
pub fn tol(dtype: DType) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        DType::F64 => 1e-12,
        _ => 1e-5,
    }
}

/// Assert `got` matches the f64 oracle within the tolerance of `dtype`.
pub fn assert_close(what: &str, got: &HostTensor, want: &[f64], dtype: DType) {
    let g = got.to_f64_vec();
    let (e, t) = (rel_l2(&g, want), tol(dtype));
    assert!(
        e <= t,
        "{what}: rel-L2 {e:.3e} > {t:.0e} ({dtype}); first values got {:?} want {:?}",
        &g[..g.len().min(6)],
        &want[..want.len().min(6)]
    );
}

/// `assert_close` for sums of products (matmul, dot): the error is measured against `abs`,
/// the oracle of the same sums over |terms|. Rounding error is a fraction of Σ|a·b|, so a
/// sum that cancels to near zero keeps its dtype's digits of its terms, not of its result.
pub fn assert_close_sums(what: &str, got: &HostTensor, want: &[f64], abs: &[f64], dtype: DType) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: length");
    let norm = |v: &mut dyn Iterator<Item = f64>| v.map(|x| x * x).sum::<f64>().sqrt();
    // NaN anywhere makes e NaN, which fails the check.
    let e = norm(&mut g.iter().zip(want).map(|(a, b)| a - b)) / norm(&mut abs.iter().copied());
    let t = tol(dtype);
    assert!(
        e <= t,
        "{what}: error of Σ|terms| {e:.3e} > {t:.0e} ({dtype}); first values got {:?} want {:?}",
        &g[..g.len().min(6)],
        &want[..want.len().min(6)]
    );
}

/// Assert `got` equals `want` element for element.
pub fn assert_exact(what: &str, got: &HostTensor, want: &[f64]) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{what}: length");
    for (k, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(a == b, "{what}: element {k} got {a} want {b}");
    }
}

/// Run every oracle case of a set on the CPU. The set must hold at least one.
pub fn check(set: &str, cases: &[Case]) {
    let mut rng = Rng::new(set);
    let mut ran = 0;
    for case in cases.iter().filter(|c| c.checks.oracle) {
        let oracle = case
            .oracle
            .as_ref()
            .unwrap_or_else(|| panic!("{}: an oracle case without an oracle", case.name));
        for &dt in &case.dtypes {
            let raw = draw_inputs(case, Check::Oracle, &mut rng, dt);
            let vals: Vec<Vec<f64>> = case
                .inputs
                .iter()
                .zip(&raw)
                .map(|(i, v)| through(i.dtype_in(dt), v))
                .collect();
            let g = (case.build)(dt);
            let feeds: Vec<(&str, HostTensor)> = case
                .inputs
                .iter()
                .zip(&vals)
                .map(|(i, v)| {
                    assert!(
                        super::is_leaf(&g, i.name),
                        "{}: no leaf {}",
                        case.name,
                        i.name
                    );
                    (i.name, HostTensor::from_f64_as(&i.dims, v, i.dtype_in(dt)))
                })
                .collect();
            let what = format!("{} [{dt}]", case.name);
            // Leaves declared as params (weights a device keeps resident) are fed as params.
            let (params, feeds): (Vec<_>, Vec<_>) =
                feeds.into_iter().partition(|(n, _)| super::is_param(&g, n));
            let out = rlx_cpu::run_graph(&g, &params, &feeds)
                .unwrap_or_else(|e| panic!("{what}: run failed: {e}"));
            let out_dt = case.out_dtype.as_ref().map_or(dt, |f| f(dt));
            if let Some(d) = &case.out_dims {
                assert_eq!(&out[0].shape, d, "{what}: output shape");
            }
            assert_eq!(out[0].dtype, out_dt, "{what}: output dtype");
            let want = oracle(&vals, dt);
            // Integer and boolean outputs are always exact.
            if case.compare == Compare::Exact || !out_dt.is_float() {
                assert_exact(&what, &out[0], &want);
            } else if let Some(abs) = &case.sums {
                assert_close_sums(&what, &out[0], &want, &abs(&vals, dt), dt);
            } else {
                let t = case.tol_dtype.unwrap_or(dt);
                assert_close(&what, &out[0], &through(out_dt, &want), t);
            }
            ran += 1;
        }
    }
    assert!(ran > 0, "{set}: no case has an oracle check");
    println!("{set}: {ran} oracle checks passed");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Draw, Input};
    use crate::cases::elementwise::graph;
    use rlx_ir::Activation;

    fn neg(oracle: fn(f64) -> f64) -> Vec<Case> {
        vec![Case::new(
            "neg",
            vec![Input::new("x", &[5], Draw::Normal(1.0))],
            |dt| {
                graph(&[("x", &[5], dt)], |g, x| {
                    g.activation(Activation::Neg, x[0]).unwrap()
                })
            },
        )
        .dtypes(&[DType::F32, DType::F64])
        .oracle(move |v, _| v[0].iter().map(|&x| oracle(x)).collect())]
    }

    #[test]
    fn a_right_oracle_passes() {
        check("neg", &neg(|x| -x));
    }

    #[test]
    #[should_panic(expected = "rel-L2")]
    fn a_wrong_oracle_fails() {
        check("neg_wrong", &neg(|x| x));
    }

    #[test]
    #[should_panic(expected = "no case has an oracle check")]
    fn a_set_without_oracle_cases_fails() {
        check("none", &[]);
    }
}
