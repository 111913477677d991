//! cuBLASLt matmuls. `GemmDesc` speaks row-major (what the IR means); `prepare` turns it
//! into column-major Lt descriptors once at lowering, and each run only calls `cublasLtMatmul`.
use crate::lower::LowerError;
use crate::precision::Precision;
use crate::CudaError;
use cudarc::cublaslt::{result as lt, sys};
use rlx_ir::{Activation, DType};
use std::ffi::c_void;

/// Row-major `C[b] = act(opA(A[b]) · opB(B[b]) + bias) (+ C[b] when accumulate)` for
/// `b < batch`. `opA(A)` is `[m, k]`: A is stored `[m, k]` (or `[k, m]` when `trans_a`) with
/// row stride `lda` elements; likewise `opB(B)` is `[k, n]`, stored `[k, n]` or `[n, k]`
/// (`trans_b`). Batch strides are in elements; 0 broadcasts one matrix to every batch.
/// A, B, C (and bias) share `dtype`; accumulation is f32 (f64 for f64).
#[derive(Clone, Debug, PartialEq)]
pub struct GemmDesc {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub a: u64,
    pub lda: usize,
    pub stride_a: usize,
    pub trans_a: bool,
    pub b: u64,
    pub ldb: usize,
    pub stride_b: usize,
    pub trans_b: bool,
    pub c: u64,
    pub ldc: usize,
    pub stride_c: usize,
    pub dtype: DType,
    /// C's dtype when it differs from A's and B's (half inputs, an f32 product).
    pub c_dtype: Option<DType>,
    /// `[n]` added to every row of C.
    pub bias: Option<u64>,
    /// Relu or GeluApprox (cuBLASLt's GELU is the tanh form); others bail.
    pub act: Option<Activation>,
    /// C += result instead of C = result.
    pub accumulate: bool,
    pub label: String,
}

impl GemmDesc {
    /// Plain contiguous `C[m,n] = A[m,k] · B[k,n]`, batch 1.
    #[allow(clippy::too_many_arguments)]
    pub fn simple(m: usize, n: usize, k: usize, a: u64, b: u64, c: u64, dtype: DType) -> GemmDesc {
        GemmDesc {
            m,
            n,
            k,
            batch: 1,
            a,
            lda: k,
            stride_a: m * k,
            trans_a: false,
            b,
            ldb: n,
            stride_b: k * n,
            trans_b: false,
            c,
            ldc: n,
            stride_c: m * n,
            dtype,
            c_dtype: None,
            bias: None,
            act: None,
            accumulate: false,
            label: String::new(),
        }
    }
}

/// A prepared matmul: descriptors, algorithm and pointers, fixed for the plan's lifetime.
pub(crate) struct GemmCall {
    desc: sys::cublasLtMatmulDesc_t,
    la: sys::cublasLtMatrixLayout_t,
    lb: sys::cublasLtMatrixLayout_t,
    lc: sys::cublasLtMatrixLayout_t,
    pub(crate) algo: sys::cublasLtMatmulAlgo_t,
    /// cuBLASLt's candidates, its own pick first; `gemm_tune` times them on the device.
    pub(crate) candidates: Vec<sys::cublasLtMatmulAlgo_t>,
    pub(crate) tune_key: String,
    a: u64,
    b: u64,
    c: u64,
    beta: f64,
    f64_scale: bool,
    pub(crate) label: String,
}

// SAFETY: the descriptors are plain heap objects owned by this value; the Lt handle that
// uses them is only touched under the executable's lock.
unsafe impl Send for GemmCall {}

fn lt_type(d: DType) -> Result<sys::cudaDataType, LowerError> {
    Ok(match d {
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        DType::F64 => sys::cudaDataType::CUDA_R_64F,
        d => crate::unsupported!("no cuBLASLt matmul for {d}"),
    })
}

/// A failed cuBLASLt setup call is internal: the descriptors are built from shapes that
/// `prepare` has already accepted.
fn lt_err(what: &str, e: impl std::fmt::Debug) -> LowerError {
    LowerError::Internal(CudaError::Blas {
        node: "-".into(),
        msg: format!("{what}: {e:?}"),
    })
}

fn check(what: &str, r: Result<(), lt::CublasError>) -> Result<(), LowerError> {
    r.map_err(|e| lt_err(what, e))
}

fn layout(
    t: sys::cudaDataType,
    rows: usize,
    cols: usize,
    ld: usize,
    batch: usize,
    stride: usize,
) -> Result<sys::cublasLtMatrixLayout_t, LowerError> {
    let l = lt::create_matrix_layout(t, rows as u64, cols as u64, ld as i64)
        .map_err(|e| lt_err("cuBLASLt layout", e))?;
    if batch > 1 {
        let count = batch as i32;
        let stride = stride as i64;
        // SAFETY: l is a live layout; the attribute buffers match the documented types.
        unsafe {
            check(
                "batch count",
                lt::set_matrix_layout_attribute(
                    l,
                    sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                    &count as *const i32 as *const c_void,
                    4,
                ),
            )?;
            check(
                "batch stride",
                lt::set_matrix_layout_attribute(
                    l,
                    sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                    &stride as *const i64 as *const c_void,
                    8,
                ),
            )?;
        }
    }
    Ok(l)
}

/// How many of cuBLASLt's heuristic candidates are kept for timing.
const TUNE_CANDIDATES: usize = 8;

/// Build the Lt call. Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ, so Lt's "A" is our B.
pub(crate) fn prepare(
    handle: sys::cublasLtHandle_t,
    workspace_bytes: usize,
    g: &GemmDesc,
    precision: Precision,
) -> Result<GemmCall, LowerError> {
    if g.m == 0 || g.n == 0 || g.k == 0 || g.batch == 0 {
        crate::unsupported!("empty matmul {}x{}x{}", g.m, g.n, g.k);
    }
    let t = lt_type(g.dtype)?;
    let f64_scale = g.dtype == DType::F64;
    let compute = match (g.dtype, precision) {
        (DType::F64, _) => sys::cublasComputeType_t::CUBLAS_COMPUTE_64F,
        (DType::F32, Precision::F32) => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        (DType::F32, _) => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
        _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
    };
    let scale_t = if f64_scale {
        sys::cudaDataType::CUDA_R_64F
    } else {
        sys::cudaDataType::CUDA_R_32F
    };
    let desc =
        lt::create_matmul_desc(compute, scale_t).map_err(|e| lt_err("cuBLASLt matmul desc", e))?;
    let op = |t: bool| {
        if t {
            cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_T
        } else {
            cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N
        }
    };
    let (ta, tb) = (op(g.trans_b), op(g.trans_a));
    let epilogue = match (g.bias.is_some(), g.act) {
        (false, None) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
        (true, None) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
        (false, Some(Activation::Relu)) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
        (true, Some(Activation::Relu)) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
        (false, Some(Activation::GeluApprox)) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU,
        (true, Some(Activation::GeluApprox)) => {
            sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS
        }
        (_, Some(a)) => crate::unsupported!("no cuBLASLt epilogue for {a:?}"),
    };
    // SAFETY: desc is live; each buffer has the attribute's documented type and size.
    unsafe {
        use sys::cublasLtMatmulDescAttributes_t as A;
        check(
            "transa",
            lt::set_matmul_desc_attribute(
                desc,
                A::CUBLASLT_MATMUL_DESC_TRANSA,
                &ta as *const _ as *const c_void,
                4,
            ),
        )?;
        check(
            "transb",
            lt::set_matmul_desc_attribute(
                desc,
                A::CUBLASLT_MATMUL_DESC_TRANSB,
                &tb as *const _ as *const c_void,
                4,
            ),
        )?;
        check(
            "epilogue",
            lt::set_matmul_desc_attribute(
                desc,
                A::CUBLASLT_MATMUL_DESC_EPILOGUE,
                &epilogue as *const _ as *const c_void,
                4,
            ),
        )?;
        if let Some(bias) = g.bias {
            let p = bias as *const c_void;
            check(
                "bias pointer",
                lt::set_matmul_desc_attribute(
                    desc,
                    A::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &p as *const *const c_void as *const c_void,
                    std::mem::size_of::<*const c_void>(),
                ),
            )?;
            check(
                "bias type",
                lt::set_matmul_desc_attribute(
                    desc,
                    A::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                    &t as *const _ as *const c_void,
                    4,
                ),
            )?;
            if g.batch > 1 {
                let zero: i64 = 0;
                check(
                    "bias batch stride",
                    lt::set_matmul_desc_attribute(
                        desc,
                        A::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                        &zero as *const i64 as *const c_void,
                        8,
                    ),
                )?;
            }
        }
    }
    // Lt's A = our B: column-major view of row-major storage swaps rows and cols.
    let (ra, ca) = if g.trans_b { (g.k, g.n) } else { (g.n, g.k) };
    let (rb, cb) = if g.trans_a { (g.m, g.k) } else { (g.k, g.m) };
    let la = layout(t, ra, ca, g.ldb, g.batch, g.stride_b)?;
    let lb = layout(t, rb, cb, g.lda, g.batch, g.stride_a)?;
    let tc = lt_type(g.c_dtype.unwrap_or(g.dtype))?;
    let lc = layout(tc, g.n, g.m, g.ldc, g.batch, g.stride_c)?;
    let pref = lt::create_matmul_pref().map_err(|e| lt_err("cuBLASLt pref", e))?;
    let ws = workspace_bytes as u64;
    // SAFETY: all descriptors are live; pref is destroyed once below.
    let heur = unsafe {
        check(
            "workspace pref",
            lt::set_matmul_pref_attribute(
                pref,
                sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &ws as *const u64 as *const c_void,
                8,
            ),
        )?;
        // Lt assumes 256-byte aligned operands unless told otherwise; views into the arena
        // can sit at smaller offsets, so state the real alignment of each pointer.
        use sys::cublasLtMatmulPreferenceAttributes_t as P;
        for (attr, ptr) in [
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, g.b),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, g.a),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, g.c),
            (P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, g.c),
        ] {
            let align: u32 = 1 << ptr.trailing_zeros().min(8);
            check(
                "alignment pref",
                lt::set_matmul_pref_attribute(pref, attr, &align as *const u32 as *const c_void, 4),
            )?;
        }
        let mut found =
            [std::mem::zeroed::<sys::cublasLtMatmulHeuristicResult_t>(); TUNE_CANDIDATES];
        let mut count = 0i32;
        let st = sys::cublasLtMatmulAlgoGetHeuristic(
            handle,
            desc,
            la,
            lb,
            lc,
            lc,
            pref,
            TUNE_CANDIDATES as i32,
            found.as_mut_ptr(),
            &mut count,
        );
        let _ = lt::destroy_matmul_pref(pref);
        // NOT_SUPPORTED (or no result) means this layout / type combination has no
        // algorithm: a legitimate fallback. Any other status is a library failure.
        if st == sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED
            || (st == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS && count <= 0)
        {
            crate::unsupported!("cuBLASLt found no algorithm for {}: {st:?}", g.label);
        }
        if st != sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(lt_err(
                &format!("cublasLtMatmulAlgoGetHeuristic for {}", g.label),
                st,
            ));
        }
        found[..count as usize]
            .iter()
            .filter(|h| h.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
            .map(|h| h.algo)
            .collect::<Vec<_>>()
    };
    if heur.is_empty() {
        crate::unsupported!("cuBLASLt found no usable algorithm for {}", g.label);
    }
    // Everything but the pointers decides which algorithm is fastest: the tuning cache key.
    let tune_key = format!(
        "{:?}/{:?} {precision:?} {} {} {} {} {} {} {} {} {} {} {} {} {:?} {} {}",
        g.dtype,
        g.c_dtype,
        g.m,
        g.n,
        g.k,
        g.batch,
        g.lda,
        g.ldb,
        g.ldc,
        g.stride_a,
        g.stride_b,
        g.stride_c,
        g.trans_a,
        g.trans_b,
        g.act,
        g.bias.is_some(),
        g.accumulate,
    ) + &format!(
        " align {} {} {}",
        g.a.trailing_zeros().min(8),
        g.b.trailing_zeros().min(8),
        g.c.trailing_zeros().min(8)
    );
    Ok(GemmCall {
        desc,
        la,
        lb,
        lc,
        algo: heur[0],
        candidates: heur,
        tune_key,
        a: g.b,
        b: g.a,
        c: g.c,
        beta: if g.accumulate { 1.0 } else { 0.0 },
        f64_scale,
        label: format!(
            "{} gemm {}x{}x{}{}",
            g.label,
            g.m,
            g.n,
            g.k,
            if g.batch > 1 {
                format!(" x{}", g.batch)
            } else {
                String::new()
            }
        ),
    })
}

impl GemmCall {
    /// Enqueue on `stream`.
    pub(crate) fn enqueue(
        &self,
        handle: sys::cublasLtHandle_t,
        workspace: u64,
        workspace_bytes: usize,
        stream: sys::cudaStream_t,
    ) -> Result<(), lt::CublasError> {
        let (a32, b32) = (1.0f32, self.beta as f32);
        let (a64, b64) = (1.0f64, self.beta);
        let (alpha, beta): (*const c_void, *const c_void) = if self.f64_scale {
            (&a64 as *const f64 as _, &b64 as *const f64 as _)
        } else {
            (&a32 as *const f32 as _, &b32 as *const f32 as _)
        };
        // SAFETY: descriptors are live; pointers are device addresses the plan owns.
        unsafe {
            lt::matmul(
                handle,
                self.desc,
                alpha,
                beta,
                self.a as *const c_void,
                self.la,
                self.b as *const c_void,
                self.lb,
                self.c as *const c_void,
                self.lc,
                self.c as *mut c_void,
                self.lc,
                &self.algo,
                workspace as *mut c_void,
                workspace_bytes,
                stream,
            )
        }
    }
}

impl Drop for GemmCall {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created in `prepare` and is destroyed once.
        unsafe {
            let _ = lt::destroy_matrix_layout(self.la);
            let _ = lt::destroy_matrix_layout(self.lb);
            let _ = lt::destroy_matrix_layout(self.lc);
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}
