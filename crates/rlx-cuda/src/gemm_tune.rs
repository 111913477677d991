//! cuBLASLt's heuristic picks one algorithm from a model of the GPU; for the skinny and
//! under-one-wave shapes of small-batch inference its first guess is often not the fastest.
//! Each distinct matmul (shape, layout, dtype, epilogue, precision, alignment) is therefore
//! timed once per process over the heuristic's candidates on the plan's own buffers, and the
//! fastest is kept. `RLX_GEMM_TUNE=0` keeps the heuristic's first choice.
use crate::gemm::GemmCall;
use crate::lower::Bail;
use cudarc::cublaslt::sys as ltsys;
use cudarc::driver::{result as drv, sys};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

fn cache() -> &'static Mutex<HashMap<String, ltsys::cublasLtMatmulAlgo_t>> {
    static C: OnceLock<Mutex<HashMap<String, ltsys::cublasLtMatmulAlgo_t>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

fn enabled() -> bool {
    !std::env::var("RLX_GEMM_TUNE").is_ok_and(|v| v == "0")
}

const WARMUP: usize = 2;
const REPS: usize = 5;

/// Pick the fastest candidate for `call` (timed on `stream`; the buffers' contents are
/// scratch at this point: lowering runs before any input is uploaded).
pub(crate) fn tune(
    call: &mut GemmCall,
    lt: ltsys::cublasLtHandle_t,
    workspace: u64,
    workspace_bytes: usize,
    stream: sys::CUstream,
) -> Result<(), Bail> {
    if call.candidates.len() <= 1 || !enabled() {
        return Ok(());
    }
    let hit = cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&call.tune_key)
        .copied();
    if let Some(a) = hit {
        call.algo = a;
        return Ok(());
    }
    let ev = || {
        drv::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
            .map_err(|e| Bail(format!("gemm tuning: cuEventCreate: {e:?}")))
    };
    let (start, end) = (ev()?, ev()?);
    let mut best: Option<(f32, ltsys::cublasLtMatmulAlgo_t)> = None;
    for algo in call.candidates.clone() {
        call.algo = algo;
        let mut ok = true;
        let mut times = Vec::with_capacity(REPS);
        for i in 0..WARMUP + REPS {
            // SAFETY: events and stream are live; the call's buffers belong to the plan.
            unsafe {
                let _ = drv::event::record(start, stream);
                if call
                    .enqueue(lt, workspace, workspace_bytes, stream as _)
                    .is_err()
                {
                    ok = false;
                }
                let _ = drv::event::record(end, stream);
                if drv::event::synchronize(end).is_err() {
                    ok = false;
                }
                if ok && i >= WARMUP {
                    times.push(drv::event::elapsed(start, end).unwrap_or(f32::INFINITY));
                }
            }
            if !ok {
                break;
            }
        }
        if !ok {
            continue;
        }
        times.sort_by(|a, b| a.total_cmp(b));
        let t = times[times.len() / 2];
        if best.is_none_or(|(b, _)| t < b) {
            best = Some((t, algo));
        }
    }
    // SAFETY: created above, destroyed once.
    unsafe {
        let _ = drv::event::destroy(start);
        let _ = drv::event::destroy(end);
    }
    let Some((_, algo)) = best else {
        crate::bail!("gemm tuning: no candidate ran for {}", call.label);
    };
    call.algo = algo;
    cache()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(call.tune_key.clone(), algo);
    Ok(())
}
