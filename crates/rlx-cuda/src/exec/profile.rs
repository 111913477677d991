//! Per-kernel device times: every GPU step of the plan launched on its own between two CUDA
//! events, summed per kernel (or cuBLASLt call) across the graph's nodes. This is where a
//! benchmark's time goes; the captured replay `time_replays` measures is the total. A spin
//! kernel holds the stream while the host queues the steps, so host launch cost is not
//! counted as kernel time.
use super::replay::{enqueue, Segment};
use super::CudaExecutable;
use crate::plan::Step;
use crate::CudaError;
use cudarc::driver::{result as drv, sys};
use rlx_ir::{CheckedInputs, HostTensor};
use std::collections::HashMap;

/// One kernel (or library call, copy, memset) of the plan, aggregated over the nodes that
/// launch it: `what` is the op kind and kernel name, `launches` per run, `ms` per run.
#[derive(Clone, Debug)]
pub struct ProfileRow {
    pub what: String,
    pub launches: usize,
    pub ms: f64,
}

/// A step's label without its node id ("MatMul#12 gemm 4096x384x384" → "MatMul gemm …"), so
/// the same kernel over many nodes adds up.
fn kind_of(step: &Step) -> String {
    let label = match step {
        Step::Kernel(l) => l.label.as_str(),
        Step::Gemm(g) => g.label.as_str(),
        Step::Copy { .. } => return "device copy".into(),
        Step::Memset { .. } => return "memset".into(),
        Step::Collective(c) => c.label.as_str(),
        Step::Join(_) => return "collective join".into(),
        Step::Cpu(c) => return format!("CPU fallback {}", c.label),
    };
    match label.split_once('#') {
        Some((kind, rest)) => {
            let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
            format!("{kind}{rest}")
        }
        None => label.to_string(),
    }
}

struct Events(Vec<sys::CUevent>);

impl Drop for Events {
    fn drop(&mut self) {
        for &e in &self.0 {
            // SAFETY: created by cuEventCreate below, destroyed once.
            unsafe {
                let _ = drv::event::destroy(e);
            }
        }
    }
}

impl CudaExecutable {
    /// Run once with `inputs`, then launch every GPU step of the plan on its own `iters`
    /// times, timing each between CUDA events. Rows are sorted by time, largest first; CPU
    /// fallback steps are timed on the host. A spin kernel holds the stream while the host
    /// queues the steps, so host launch cost is excluded; each row still includes its
    /// launches' own GPU-side start-up (a few µs each), which a captured replay partly
    /// overlaps, so the rows add up to somewhat more than `time_replays`.
    pub fn profile(
        &mut self,
        inputs: &[(&str, HostTensor)],
        iters: usize,
    ) -> Result<Vec<ProfileRow>, CudaError> {
        let checked = self.check(inputs)?;
        self.profile_bound(&checked, iters)
    }

    /// `profile` on checked inputs.
    pub fn profile_bound(
        &mut self,
        inputs: &CheckedInputs,
        iters: usize,
    ) -> Result<Vec<ProfileRow>, CudaError> {
        let _dev = self.gpu.lock();
        self.run_bound(inputs, &[], false)?;
        let iters = iters.max(1);
        let stream = self.streams.stream;
        let plan = self.plan.as_ref().expect("plan after a run");
        let steps: Vec<&Step> = plan
            .segments
            .iter()
            .flat_map(|s| match s {
                Segment::Gpu { steps, .. } => steps.iter().collect::<Vec<_>>(),
                Segment::Cpu(_) => Vec::new(),
            })
            .collect();
        let mut events = Events(Vec::with_capacity(steps.len() + 1));
        for _ in 0..=steps.len() {
            events.0.push(
                drv::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT)
                    .map_err(|e| CudaError::driver("cuEventCreate", e))?,
            );
        }
        // About 20 ms at the H200's ~2 GHz: longer than the host takes to queue a plan.
        let k = crate::kernels::profile::rlx_spin(40_000_000);
        let spin = crate::plan::Launch {
            func: self.gpu.function(&k.src, &k.name)?,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            smem: 0,
            args: k.args,
            label: k.name,
            pdl: false,
        };
        let mut total = vec![0f64; steps.len()];
        for _ in 0..iters {
            spin.enqueue(stream)?;
            // SAFETY: events and stream are live; the plan's buffers outlive the launches.
            unsafe {
                drv::event::record(events.0[0], stream)
                    .map_err(|e| CudaError::driver("cuEventRecord", e))?;
            }
            for (i, st) in steps.iter().enumerate() {
                enqueue(&self.streams, std::slice::from_ref(*st))?;
                unsafe {
                    drv::event::record(events.0[i + 1], stream)
                        .map_err(|e| CudaError::driver("cuEventRecord", e))?;
                }
            }
            unsafe {
                drv::event::synchronize(events.0[steps.len()])
                    .map_err(|e| CudaError::driver("cuEventSynchronize", e))?;
            }
            for (i, t) in total.iter_mut().enumerate() {
                // SAFETY: both events were recorded and have completed.
                *t += unsafe { drv::event::elapsed(events.0[i], events.0[i + 1]) }
                    .map_err(|e| CudaError::driver("cuEventElapsedTime", e))?
                    as f64;
            }
        }
        let mut rows: HashMap<String, ProfileRow> = HashMap::new();
        for (st, t) in steps.iter().zip(&total) {
            let what = kind_of(st);
            let r = rows.entry(what.clone()).or_insert(ProfileRow {
                what,
                launches: 0,
                ms: 0.0,
            });
            r.launches += 1;
            r.ms += t / iters as f64;
        }
        for seg in &plan.segments {
            if let Segment::Cpu(c) = seg {
                let t0 = std::time::Instant::now();
                c.run(&self.streams)?;
                let what = format!("CPU fallback {}", c.label);
                rows.insert(
                    what.clone(),
                    ProfileRow {
                        what,
                        launches: 1,
                        ms: t0.elapsed().as_secs_f64() * 1e3,
                    },
                );
            }
        }
        let mut rows: Vec<ProfileRow> = rows.into_values().collect();
        rows.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        Ok(rows)
    }
}
