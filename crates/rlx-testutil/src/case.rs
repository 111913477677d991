//! The case-table model: one `Case` says how to build a graph for a dtype, how to draw its
//! inputs, what the f64 oracle says it computes, and which of the three checks apply
//! (CPU vs oracle, device parity, gradcheck). Tables of cases live in `cases/<group>.rs`;
//! the runners in `run/` read them.
use crate::Rng;
use rlx_ir::{DType, Graph, OpKindSet};
use std::sync::Arc;

/// Builds the case's graph for a dtype; leaves are named after the case's inputs.
pub type Build = Arc<dyn Fn(DType) -> Graph + Send + Sync>;
/// The f64 oracle: input values (as stored, i.e. rounded into their dtypes) and the case
/// dtype in, output 0's values out. A plain loop, independent of rlx's kernels.
pub type Oracle = Arc<dyn Fn(&[Vec<f64>], DType) -> Vec<f64> + Send + Sync>;
/// Draws `n` values for one input in the case dtype.
pub type DrawFn = Arc<dyn Fn(&mut Rng, usize, DType) -> Vec<f64> + Send + Sync>;

/// How one input's values are drawn.
#[derive(Clone)]
pub enum Draw {
    /// `scale ·` standard normal.
    Normal(f64),
    /// Uniform in [lo, hi).
    Uniform(f64, f64),
    /// Uniform magnitude in [lo, hi) with a random sign (divisors, reciprocals).
    Signed(f64, f64),
    /// Normals pushed at least `gap` from zero (off kinks at 0).
    NormalAway(f64),
    /// Integers uniform in [lo, hi].
    Ints(i64, i64),
    /// Input `of`'s value with probability `p` (ties), else the fallback draw.
    TiedWith { of: usize, p: f64, other: Box<Draw> },
    /// Anything else: a function of the rng, count and case dtype.
    Custom(DrawFn),
}

impl Draw {
    pub fn custom(f: impl Fn(&mut Rng, usize, DType) -> Vec<f64> + Send + Sync + 'static) -> Draw {
        Draw::Custom(Arc::new(f))
    }

    /// Draw `n` values; `earlier` are the inputs drawn before this one (for ties).
    pub fn sample(&self, rng: &mut Rng, n: usize, dt: DType, earlier: &[Vec<f64>]) -> Vec<f64> {
        match self {
            Draw::Normal(s) => rng.normals(n).into_iter().map(|v| s * v).collect(),
            Draw::Uniform(lo, hi) => rng.uniforms(n, *lo, *hi),
            Draw::Signed(lo, hi) => (0..n)
                .map(|_| {
                    let s = if rng.below(2) == 0 { -1.0 } else { 1.0 };
                    s * rng.range(*lo, *hi)
                })
                .collect(),
            Draw::NormalAway(gap) => rng.normals_away(n, *gap),
            Draw::Ints(lo, hi) => (0..n)
                .map(|_| (lo + rng.below((hi - lo + 1) as usize) as i64) as f64)
                .collect(),
            Draw::TiedWith { of, p, other } => {
                let src = &earlier[*of];
                assert_eq!(src.len(), n, "a tied input has the shape of its source");
                (0..n)
                    .map(|k| {
                        if rng.chance(*p) {
                            src[k]
                        } else {
                            other.sample(rng, 1, dt, earlier)[0]
                        }
                    })
                    .collect()
            }
            Draw::Custom(f) => f(rng, n, dt),
        }
    }
}

/// The dtype of one input: the case dtype, or fixed (an index, a condition, a cast source).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum InDtype {
    Case,
    Fixed(DType),
}

/// One graph input of a case. `gpu` and `grad` override the draw for those checks where
/// their needs differ (inputs exact in the dtype for parity, inputs off kinks for finite
/// differences).
#[derive(Clone)]
pub struct Input {
    pub name: &'static str,
    pub dims: Vec<usize>,
    pub dtype: InDtype,
    pub draw: Draw,
    pub gpu: Option<Draw>,
    pub grad: Option<Draw>,
}

impl Input {
    pub fn new(name: &'static str, dims: &[usize], draw: Draw) -> Input {
        Input {
            name,
            dims: dims.to_vec(),
            dtype: InDtype::Case,
            draw,
            gpu: None,
            grad: None,
        }
    }

    pub fn of(mut self, dt: DType) -> Input {
        self.dtype = InDtype::Fixed(dt);
        self
    }

    pub fn gpu(mut self, d: Draw) -> Input {
        self.gpu = Some(d);
        self
    }

    pub fn grad(mut self, d: Draw) -> Input {
        self.grad = Some(d);
        self
    }

    pub fn dtype_in(&self, case_dt: DType) -> DType {
        match self.dtype {
            InDtype::Case => case_dt,
            InDtype::Fixed(d) => d,
        }
    }
}

/// How the CPU output is compared with the oracle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Compare {
    /// rel-L2 within the dtype's tolerance, the oracle rounded into the output dtype
    /// (half results can be subnormal).
    Close,
    /// Element for element (integers, booleans, selections, exact casts).
    Exact,
}

/// The dtype a device parity check runs a case in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ParityDtype {
    /// The case dtype for floats: the oracle graph is `build(F64)`. Integer case dtypes
    /// are frozen with the F32 tolerance.
    Follow,
    /// The graph is frozen at the case dtype (`build(dt)` for the oracle too: comparisons,
    /// casts, integer graphs), with this dtype's tolerance.
    Frozen(DType),
}

/// Which checks a case takes part in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Checks {
    pub oracle: bool,
    pub parity: bool,
    pub grad: bool,
}

impl Checks {
    pub const ALL: Checks = Checks {
        oracle: true,
        parity: true,
        grad: true,
    };
}

/// One case of an op group's table.
#[derive(Clone)]
pub struct Case {
    pub name: String,
    pub inputs: Vec<Input>,
    pub build: Build,
    /// Dtypes the oracle and parity checks run in (gradchecks always run in f64).
    pub dtypes: Vec<DType>,
    /// Dtypes the parity check runs in, where they differ from `dtypes` (a kernel family
    /// without an f64 kernel, say); `None`: the same.
    pub parity_dtypes: Option<Vec<DType>>,
    pub oracle: Option<Oracle>,
    pub compare: Compare,
    /// Output 0's expected dims and dtype (from the case dtype), checked against the CPU.
    pub out_dims: Option<Vec<usize>>,
    pub out_dtype: Option<Arc<dyn Fn(DType) -> DType + Send + Sync>>,
    pub parity: ParityDtype,
    /// Op kinds the device may leave to the CPU for this case.
    pub fallback: OpKindSet,
    /// Inputs to gradcheck by name (empty: not differentiated).
    pub wrt: Vec<&'static str>,
    /// Whether finite differences may step across a kink (see `gradcheck_with`).
    pub allow_kinks: bool,
    pub checks: Checks,
    /// The dtype whose tolerance the oracle check takes (None: the case dtype), for ops
    /// whose output storage is less precise than their input's.
    pub tol_dtype: Option<DType>,
    /// For sums of products (matmul): the oracle of the same sums over |terms|. When set,
    /// the oracle check measures the error against its norm instead of the result's (a sum
    /// that cancels keeps its dtype's digits of the terms, not of the result).
    pub sums: Option<Oracle>,
}

impl Case {
    pub fn new(
        name: impl Into<String>,
        inputs: Vec<Input>,
        build: impl Fn(DType) -> Graph + Send + Sync + 'static,
    ) -> Case {
        Case {
            name: name.into(),
            inputs,
            build: Arc::new(build),
            dtypes: vec![DType::F32],
            parity_dtypes: None,
            oracle: None,
            compare: Compare::Close,
            out_dims: None,
            out_dtype: None,
            parity: ParityDtype::Follow,
            fallback: OpKindSet::empty(),
            wrt: vec![],
            allow_kinks: true,
            checks: Checks::ALL,
            tol_dtype: None,
            sums: None,
        }
    }

    pub fn dtypes(mut self, d: &[DType]) -> Case {
        self.dtypes = d.to_vec();
        self
    }

    pub fn parity_dtypes(mut self, d: &[DType]) -> Case {
        self.parity_dtypes = Some(d.to_vec());
        self
    }

    pub fn oracle(
        mut self,
        f: impl Fn(&[Vec<f64>], DType) -> Vec<f64> + Send + Sync + 'static,
    ) -> Case {
        self.oracle = Some(Arc::new(f));
        self
    }

    /// Compare as sums of products: `abs` is the oracle over |terms| (see `Case::sums`).
    pub fn sums(
        mut self,
        abs: impl Fn(&[Vec<f64>], DType) -> Vec<f64> + Send + Sync + 'static,
    ) -> Case {
        self.sums = Some(Arc::new(abs));
        self
    }

    pub fn exact(mut self) -> Case {
        self.compare = Compare::Exact;
        self
    }

    pub fn out(mut self, dims: &[usize]) -> Case {
        self.out_dims = Some(dims.to_vec());
        self
    }

    pub fn out_dtype(mut self, f: impl Fn(DType) -> DType + Send + Sync + 'static) -> Case {
        self.out_dtype = Some(Arc::new(f));
        self
    }

    pub fn frozen(mut self, tol_dtype: DType) -> Case {
        self.parity = ParityDtype::Frozen(tol_dtype);
        self
    }

    pub fn fallback(mut self, k: OpKindSet) -> Case {
        self.fallback = k;
        self
    }

    /// Check against the oracle at `dt`'s tolerance instead of the case dtype's.
    pub fn tol(mut self, dt: DType) -> Case {
        self.tol_dtype = Some(dt);
        self
    }

    pub fn wrt(mut self, names: &[&'static str]) -> Case {
        self.wrt = names.to_vec();
        self
    }

    pub fn no_kinks(mut self) -> Case {
        self.allow_kinks = false;
        self
    }

    /// Leave the oracle check out (the case has no oracle, or one too slow for its size).
    pub fn no_oracle(mut self) -> Case {
        self.checks.oracle = false;
        self
    }

    pub fn no_parity(mut self) -> Case {
        self.checks.parity = false;
        self
    }

    /// Leave gradcheck out (big shapes: finite differences cost a run per element).
    pub fn no_grad(mut self) -> Case {
        self.checks.grad = false;
        self
    }

    pub fn only_grad(mut self) -> Case {
        self.checks = Checks {
            oracle: false,
            parity: false,
            grad: true,
        };
        self
    }

    pub fn only_parity(mut self) -> Case {
        self.checks = Checks {
            oracle: false,
            parity: true,
            grad: false,
        };
        self
    }

    /// Whether the gradcheck runner has work in this case.
    pub fn grads(&self) -> bool {
        self.checks.grad && !self.wrt.is_empty()
    }
}

/// The checks a runner performs: it picks each input's draw override.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Check {
    Oracle,
    Parity,
    Grad,
}

/// Draw every input of `case` for a check, in order (ties see earlier inputs). Values are
/// raw f64: the runner rounds them into the stored dtype where it needs to.
pub fn draw_inputs(case: &Case, check: Check, rng: &mut Rng, dt: DType) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = Vec::with_capacity(case.inputs.len());
    for inp in &case.inputs {
        let d = match check {
            Check::Parity => inp.gpu.as_ref().unwrap_or(&inp.draw),
            Check::Grad => inp.grad.as_ref().unwrap_or(&inp.draw),
            Check::Oracle => &inp.draw,
        };
        let n = inp.dims.iter().product();
        let v = d.sample(rng, n, inp.dtype_in(dt), &out);
        out.push(v);
    }
    out
}

/// Round f64 values through a storage dtype (so oracles see what the graph sees).
pub fn through(dtype: DType, v: &[f64]) -> Vec<f64> {
    rlx_ir::HostTensor::from_f64_as(&[v.len()], v, dtype).to_f64_vec()
}
