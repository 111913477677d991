//! The device-independent half of a parity check: draws each case's inputs and picks the
//! dtype routing; the device's own parity function (GPU vs CPU in the dtype vs CPU f64,
//! with its tolerances and fallback rules) compiles, runs and compares.
use crate::case::{draw_inputs, Case, Check, ParityDtype};
use crate::Rng;
use rlx_ir::{DType, Graph, OpKindSet};

/// One named value for an input or param: dims and raw f64 values (the device harness
/// converts them to the declared dtype of the graph's leaf; the f64 oracle sees them raw).
pub type Feed = (String, Vec<usize>, Vec<f64>);

/// A device's parity check: `(name, build, feeds, dtype, allowed fallback kinds)`.
pub type ParityFn<'a> = &'a dyn Fn(&str, &dyn Fn(DType) -> Graph, &[Feed], DType, OpKindSet);

/// Run every parity case of a set through a device's parity function.
pub fn check(set: &str, cases: &[Case], parity: ParityFn) {
    let mut rng = Rng::new(set);
    let mut ran = 0;
    for case in cases.iter().filter(|c| c.checks.parity) {
        for &dt in case.parity_dtypes.as_ref().unwrap_or(&case.dtypes) {
            let raw = draw_inputs(case, Check::Parity, &mut rng, dt);
            let feeds: Vec<Feed> = case
                .inputs
                .iter()
                .zip(raw)
                .map(|(i, v)| (i.name.to_string(), i.dims.clone(), v))
                .collect();
            let name = format!("{} [{dt}]", case.name);
            let frozen = match case.parity {
                ParityDtype::Follow if dt.is_float() => None,
                ParityDtype::Follow => Some(DType::F32),
                ParityDtype::Frozen(t) => Some(t),
            };
            match frozen {
                None => parity(&name, &|d| (case.build)(d), &feeds, dt, case.fallback),
                Some(t) => parity(&name, &|_| (case.build)(dt), &feeds, t, case.fallback),
            }
            ran += 1;
        }
    }
    assert!(ran > 0, "{set}: no case has a parity check");
    println!("{set}: {ran} parity checks passed");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::elementwise::{binary, cast};
    use std::cell::RefCell;

    /// A float case follows the dtype (its oracle graph is f64), an integer or frozen case
    /// keeps its graph and takes the frozen tolerance dtype.
    #[test]
    fn dtype_routing() {
        let seen = RefCell::new(vec![]);
        let dev = |name: &str, build: &dyn Fn(DType) -> Graph, _: &[Feed], dt, _| {
            let f64_graph_dtype = build(DType::F64).nodes[0].shape.dtype;
            seen.borrow_mut()
                .push((name.to_string(), dt, f64_graph_dtype));
        };
        let b: Vec<_> = binary().into_iter().take(1).collect();
        check("b", &b, &dev);
        let c: Vec<_> = cast()
            .into_iter()
            .filter(|c| c.name.starts_with("Cast f16 -> i32"))
            .take(1)
            .collect();
        check("c", &c, &dev);
        let seen = seen.into_inner();
        assert!(seen.contains(&("Add [3, 1, 5] [4, 1] [f32]".into(), DType::F32, DType::F64)));
        assert!(seen.contains(&("Add [3, 1, 5] [4, 1] [i64]".into(), DType::F32, DType::I64)));
        assert!(seen
            .iter()
            .any(|(n, dt, g)| n.starts_with("Cast f16 -> i32")
                && *dt == DType::F16
                && *g == DType::F16));
    }
}
