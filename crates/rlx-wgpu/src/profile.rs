//! GPU time per kernel (`WgpuExecutable::profile_runs`, `rlx bench --profile`). Each
//! dispatch gets a compute pass of its own with timestamps at its start and end (where the adapter has `TIMESTAMP_QUERY`); a
//! segment is submitted and its timestamps read back before the next one is recorded, so a
//! profiled run is slower than a plain one, but each figure is the kernel's own time.
use crate::device::Gpu;
use crate::exec::Prepared;
use crate::WgpuError;
use std::collections::HashMap;

/// wgpu's cap on one query set (two timestamps a dispatch).
const MAX_DISPATCHES: usize = 2048;

/// Time and count per kernel label, over every profiled run.
#[derive(Default, Debug)]
pub struct Profile {
    by_label: HashMap<String, (u64, f64)>,
    runs: u64,
}

impl Profile {
    fn add(&mut self, label: &str, ns: f64) {
        let e = self.by_label.entry(label.to_string()).or_default();
        e.0 += 1;
        e.1 += ns;
    }

    pub(crate) fn count_run(&mut self) {
        self.runs += 1;
    }

    /// Per kernel label, costliest first: (label, dispatches a run, ms a run).
    pub fn rows(&self) -> Vec<(String, usize, f64)> {
        let runs = self.runs.max(1);
        let mut rows: Vec<(String, usize, f64)> = self
            .by_label
            .iter()
            .map(|(l, (n, ns))| (l.clone(), (*n / runs) as usize, ns / runs as f64 / 1e6))
            .collect();
        rows.sort_by(|a, b| b.2.total_cmp(&a.2));
        rows
    }

    pub fn runs(&self) -> u64 {
        self.runs
    }
}

/// Record `steps` with a timed pass per dispatch, submit them (with whatever `enc` already
/// holds), read the timestamps into `prof`, and return a fresh encoder.
pub(crate) fn record_timed(
    gpu: &Gpu,
    mut enc: wgpu::CommandEncoder,
    steps: &[Prepared],
    buffers: &[wgpu::Buffer],
    prof: &mut Profile,
) -> Result<wgpu::CommandEncoder, WgpuError> {
    let mut k = 0;
    while k < steps.len() {
        let n = steps[k..]
            .iter()
            .filter(|s| matches!(s, Prepared::Dispatch { .. }))
            .count()
            .clamp(1, MAX_DISPATCHES);
        let qs = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("rlx profile"),
            ty: wgpu::QueryType::Timestamp,
            count: 2 * n as u32,
        });
        let mut labels = Vec::with_capacity(n);
        while k < steps.len() && labels.len() < n {
            match &steps[k] {
                Prepared::Copy { src, dst, bytes } => {
                    enc.copy_buffer_to_buffer(
                        &buffers[src.0],
                        src.1,
                        &buffers[dst.0],
                        dst.1,
                        *bytes,
                    );
                }
                Prepared::Dispatch {
                    pipeline,
                    bind,
                    groups,
                    label,
                } => {
                    let at = 2 * labels.len() as u32;
                    let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                        label: None,
                        timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                            query_set: &qs,
                            beginning_of_pass_write_index: Some(at),
                            end_of_pass_write_index: Some(at + 1),
                        }),
                    });
                    pass.set_pipeline(pipeline);
                    pass.set_bind_group(0, bind, &[]);
                    pass.dispatch_workgroups(groups[0], groups[1], groups[2]);
                    drop(pass);
                    labels.push(label.as_str());
                }
            }
            k += 1;
        }
        if labels.is_empty() {
            continue;
        }
        let bytes = 16 * labels.len() as u64;
        let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx profile resolve"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        enc.resolve_query_set(&qs, 0..2 * labels.len() as u32, &resolved, 0);
        let raw = gpu.read(enc, &[(&resolved, 0, bytes as usize)])?.remove(0);
        let period = f64::from(gpu.queue.get_timestamp_period());
        for (i, label) in labels.iter().enumerate() {
            let t = |j: usize| {
                let b: [u8; 8] = raw[8 * j..8 * j + 8].try_into().expect("8 bytes");
                u64::from_le_bytes(b)
            };
            let ticks = t(2 * i + 1).saturating_sub(t(2 * i));
            prof.add(label, ticks as f64 * period);
        }
        enc = gpu.encoder();
    }
    Ok(enc)
}
