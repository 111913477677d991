//! Plan-time tuning: where several correct ways to run a node exist, time them once on the
//! device, on the plan's own buffers, and keep the fastest. The buffers hold scratch at this
//! point (lowering runs before any input is uploaded, and every run recomputes what the
//! candidates write). Choices are cached per process by a key that names everything but the
//! pointers, so the six layers of an encoder tune once. `RLX_TUNE=0` keeps the first candidate.
//!
//! - cuBLASLt's heuristic picks one algorithm from a model of the GPU; for the skinny,
//!   under-one-wave shapes of small-batch inference its first guess is often not the fastest,
//!   so its candidates are timed.
//! - Kernel families with several tile shapes (attention's query tile) time the launches
//!   that fit.
use crate::gemm::GemmCall;
use crate::lower::LowerError;
use crate::plan::Launch;
use cudarc::cublaslt::sys as ltsys;
use cudarc::driver::{result as drv, sys};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

const WARMUP: usize = 2;
const REPS: usize = 9;
/// A candidate replaces the default (the first: cuBLASLt's own pick, a family's usual tile)
/// only when it is this much faster: timing noise must not trade a good default for a
/// worse one.
const MARGIN: f32 = 0.97;

/// Index of the fastest of `times` (None: did not run), preferring the first unless another
/// beats it by `MARGIN`.
fn pick(times: &[Option<f32>]) -> Option<usize> {
    let mut best: Option<(f32, usize)> = times[0].map(|t| (t * MARGIN, 0));
    for (i, t) in times.iter().enumerate().skip(1) {
        if let Some(t) = *t {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, i));
            }
        }
    }
    best.map(|(_, i)| i)
}

pub(crate) fn enabled() -> bool {
    rlx_ir::env::flag(rlx_ir::env::Switch::Tune)
}

type Cache<V> = OnceLock<Mutex<HashMap<String, V>>>;

fn cached<V: Copy>(c: &'static Cache<V>, key: &str) -> Option<V> {
    c.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(key)
        .copied()
}

fn remember<V>(c: &'static Cache<V>, key: &str, v: V) {
    c.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.to_string(), v);
}

/// Median device time of `enqueue` (after warm-up runs) between two CUDA events; `None` if
/// an enqueue or the synchronisation failed.
fn time(stream: sys::CUstream, enqueue: impl FnMut() -> bool) -> Result<Option<f32>, LowerError> {
    time_after(stream, || true, enqueue)
}

/// Like [`time`], running `before` (untimed) ahead of each run.
fn time_after(
    stream: sys::CUstream,
    mut before: impl FnMut() -> bool,
    mut enqueue: impl FnMut() -> bool,
) -> Result<Option<f32>, LowerError> {
    let ev = || {
        drv::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(|e| {
            LowerError::Internal(crate::CudaError::driver("cuEventCreate (tuning)", e))
        })
    };
    let (start, end) = (ev()?, ev()?);
    let mut times = Vec::with_capacity(REPS);
    let mut ok = true;
    for i in 0..WARMUP + REPS {
        // SAFETY: events and stream are live; what is enqueued works on the plan's buffers.
        unsafe {
            ok &= before();
            let _ = drv::event::record(start, stream);
            ok &= enqueue();
            let _ = drv::event::record(end, stream);
            ok &= drv::event::synchronize(end).is_ok();
            if !ok {
                break;
            }
            if i >= WARMUP {
                times.push(drv::event::elapsed(start, end).unwrap_or(f32::INFINITY));
            }
        }
    }
    // SAFETY: created above, destroyed once.
    unsafe {
        let _ = drv::event::destroy(start);
        let _ = drv::event::destroy(end);
    }
    if !ok {
        return Ok(None);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(Some(times[times.len() / 2]))
}

/// Keep the fastest of cuBLASLt's candidate algorithms for `call`.
pub(crate) fn gemm(
    call: &mut GemmCall,
    lt: ltsys::cublasLtHandle_t,
    stream: sys::CUstream,
    workspace: u64,
    workspace_bytes: usize,
) -> Result<(), LowerError> {
    static CACHE: Cache<ltsys::cublasLtMatmulAlgo_t> = OnceLock::new();
    if call.candidates.len() <= 1 || !enabled() {
        return Ok(());
    }
    if let Some(a) = cached(&CACHE, &call.tune_key) {
        call.algo = a;
        return Ok(());
    }
    let mut times = Vec::with_capacity(call.candidates.len());
    for algo in call.candidates.clone() {
        call.algo = algo;
        times.push(time(stream, || {
            call.enqueue(lt, workspace, workspace_bytes, stream as _)
                .is_ok()
        })?);
    }
    let Some(i) = pick(&times) else {
        // Every candidate failed to launch: a library or driver failure, not a shape limit.
        return Err(LowerError::Internal(crate::CudaError::Blas {
            node: call.label.clone(),
            msg: "gemm tuning: no cuBLASLt candidate ran".into(),
        }));
    };
    let algo = call.candidates[i];
    call.algo = algo;
    remember(&CACHE, &call.tune_key, algo);
    Ok(())
}

/// Index of the fastest of `cands` (each a complete launch computing the same result).
pub(crate) fn kernel(
    key: &str,
    cands: &[Launch],
    stream: sys::CUstream,
) -> Result<usize, LowerError> {
    kernel_flushed(key, cands, stream, None)
}

/// [`kernel`], with `flush` (a device buffer larger than the L2 cache) overwritten before
/// each timed run: for kernels that stream operands a real run finds in HBM, not in the
/// L2 where back-to-back timing would leave them (a decode step reads far more weight
/// bytes than the L2 holds, so each GEMV meets its weight cold).
pub(crate) fn kernel_flushed(
    key: &str,
    cands: &[Launch],
    stream: sys::CUstream,
    flush: Option<(u64, usize)>,
) -> Result<usize, LowerError> {
    if cands.len() <= 1 || !enabled() {
        return Ok(0);
    }
    if let Some(i) = kernel_choice(key).filter(|&i| i < cands.len()) {
        return Ok(i);
    }
    let before = || match flush {
        // SAFETY: the buffer is live for this call and nothing else uses it.
        Some((p, n)) => unsafe { drv::memset_d8_async(p, 0x5a, n, stream).is_ok() },
        None => true,
    };
    let times = cands
        .iter()
        .map(|l| time_after(stream, before, || l.enqueue(stream).is_ok()))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(i) = pick(&times) else {
        return Err(LowerError::Internal(crate::CudaError::Driver {
            call: "cuLaunchKernel (tuning)",
            msg: format!("no candidate of {key} ran"),
        }));
    };
    remember(&KERNELS, key, i);
    Ok(i)
}

/// Kernel choices made so far in this process, by key.
static KERNELS: Cache<usize> = OnceLock::new();

/// The candidate already chosen for `key`, if any.
pub(crate) fn kernel_choice(key: &str) -> Option<usize> {
    cached(&KERNELS, key)
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn the_default_stays_unless_clearly_beaten() {
        // Within the margin: keep the first.
        assert_eq!(pick(&[Some(10.0), Some(9.8)]), Some(0));
        // Clearly faster: take it; the fastest of several wins.
        assert_eq!(pick(&[Some(10.0), Some(9.0), Some(8.0)]), Some(2));
        // A default that did not run loses to any that did; nothing ran: none.
        assert_eq!(pick(&[None, Some(12.0)]), Some(1));
        assert_eq!(pick(&[None, None]), None);
    }
}
