//! Adapters, the device and what it can do. Every limit and feature a lowering relies on
//! comes from the adapter (`Caps`), never from an assumption about one vendor: f16 compute
//! only where `shader-f16` exists, subgroup operations only where `subgroup` does, workgroup
//! sizes and buffer sizes from the limits.
use crate::WgpuError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// What the adapter offers the lowerings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caps {
    /// `shader-f16`: WGSL `f16` arithmetic (half storage is read and written through
    /// `pack2x16float` / `unpack2x16float` everywhere, with or without it).
    pub f16: bool,
    /// Subgroup operations (`subgroupAdd`, shuffles, …).
    pub subgroups: bool,
    /// The smallest subgroup size the adapter may use.
    pub subgroup_min: u32,
    pub max_invocations: u32,
    pub max_workgroup_storage: u32,
    pub max_groups_per_dim: u32,
    pub max_binding_bytes: u64,
    pub max_buffer_bytes: u64,
    pub max_storage_buffers: u32,
}

impl Caps {
    /// The WebGPU defaults every adapter offers, without f16 or subgroups: what a shader
    /// corpus is generated for when it must run anywhere (the naga translation test).
    pub fn portable() -> Caps {
        let l = wgpu::Limits::default();
        Caps {
            f16: false,
            subgroups: false,
            subgroup_min: 4,
            max_invocations: l.max_compute_invocations_per_workgroup,
            max_workgroup_storage: l.max_compute_workgroup_storage_size,
            max_groups_per_dim: l.max_compute_workgroups_per_dimension,
            max_binding_bytes: l.max_storage_buffer_binding_size,
            max_buffer_bytes: l.max_buffer_size,
            max_storage_buffers: l.max_storage_buffers_per_shader_stage,
        }
    }

    /// These limits without the optional features (f16 arithmetic, subgroups): what
    /// `WgpuOptions::portable` lowers for.
    pub fn without_optional(&self) -> Caps {
        Caps {
            f16: false,
            subgroups: false,
            ..self.clone()
        }
    }

    fn of(adapter: &wgpu::Adapter) -> Caps {
        let l = adapter.limits();
        let f = adapter.features();
        let info = adapter.get_info();
        Caps {
            f16: f.contains(wgpu::Features::SHADER_F16),
            subgroups: f.contains(wgpu::Features::SUBGROUP),
            subgroup_min: info.subgroup_min_size.max(1),
            max_invocations: l.max_compute_invocations_per_workgroup,
            max_workgroup_storage: l.max_compute_workgroup_storage_size,
            max_groups_per_dim: l.max_compute_workgroups_per_dimension,
            max_binding_bytes: l.max_storage_buffer_binding_size,
            max_buffer_bytes: l.max_buffer_size,
            max_storage_buffers: l.max_storage_buffers_per_shader_stage,
        }
    }
}

/// One adapter as `rlx devices` lists it.
#[derive(Clone, Debug)]
pub struct AdapterDesc {
    pub index: usize,
    pub name: String,
    pub backend: String,
    pub kind: String,
    /// A real GPU (integrated or discrete), not a software rasterizer such as lavapipe.
    pub hardware: bool,
}

fn instance() -> &'static wgpu::Instance {
    static I: OnceLock<wgpu::Instance> = OnceLock::new();
    I.get_or_init(|| {
        // Without GL: rlx never runs on it (sorted_adapters drops it), and initialising EGL
        // on a machine without a display prints "XDG_RUNTIME_DIR is invalid" to stderr on
        // every CLI run that probes for the best device. WGPU_BACKEND still overrides.
        let mut d = wgpu::InstanceDescriptor::new_without_display_handle();
        d.backends = wgpu::Backends::all() - wgpu::Backends::GL;
        wgpu::Instance::new(d.with_env())
    })
}

fn hardware(t: wgpu::DeviceType) -> bool {
    matches!(
        t,
        wgpu::DeviceType::DiscreteGpu | wgpu::DeviceType::IntegratedGpu
    )
}

/// Every adapter, hardware ones first (the order `wgpu:N` indexes), compute-capable only.
fn sorted_adapters() -> Vec<wgpu::Adapter> {
    let mut v: Vec<wgpu::Adapter> =
        pollster::block_on(instance().enumerate_adapters(wgpu::Backends::all()))
            .into_iter()
            .filter(|a| a.get_info().backend != wgpu::Backend::Gl)
            .collect();
    v.sort_by_key(|a| {
        let i = a.get_info();
        (
            !hardware(i.device_type),
            i.device_type == wgpu::DeviceType::Cpu,
        )
    });
    v
}

/// The adapters `--device wgpu:N` can pick.
pub fn adapters() -> Vec<AdapterDesc> {
    sorted_adapters()
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let i = a.get_info();
            AdapterDesc {
                index,
                name: i.name.clone(),
                backend: format!("{:?}", i.backend),
                kind: format!("{:?}", i.device_type),
                hardware: hardware(i.device_type),
            }
        })
        .collect()
}

/// Whether adapter `n` can be opened (the reason when not).
pub fn check_available(n: usize) -> Result<(), WgpuError> {
    Gpu::get(n).map(|_| ())
}

/// Whether a hardware adapter exists (`Device::best()` takes wgpu only then: lavapipe runs,
/// but slower than the CPU backend).
pub fn has_hardware_adapter() -> bool {
    adapters().iter().any(|a| a.hardware)
}

/// True when adapter 0 is usable; else prints why and returns false (a panic under
/// `RLX_REQUIRE_WGPU=1`, as `.ci/run` sets after installing lavapipe).
pub fn gpu_or_skip() -> bool {
    match check_available(0) {
        Ok(()) => true,
        Err(e) => {
            if rlx_ir::env::flag(rlx_ir::env::Switch::RequireWgpu) {
                panic!("RLX_REQUIRE_WGPU=1 but {e}");
            }
            eprintln!("skipping wgpu test: {e}");
            false
        }
    }
}

/// An opened adapter: device, queue, capabilities, and the pipelines compiled so far.
pub struct Gpu {
    pub name: String,
    pub backend: String,
    pub caps: Caps,
    /// GPU timestamps inside compute passes (`rlx bench --profile`).
    pub timestamps: bool,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// Pipelines by their full WGSL source: 30 equal layers compile once.
    pipelines: Mutex<HashMap<String, Arc<wgpu::ComputePipeline>>>,
    /// Bind-group layouts by binding count: every binding is a read-write storage buffer.
    layouts: Mutex<HashMap<usize, Arc<(wgpu::BindGroupLayout, wgpu::PipelineLayout)>>>,
    /// Errors the device reported outside an error scope (checked after each submission).
    uncaptured: Arc<Mutex<Vec<String>>>,
}

impl Gpu {
    /// Adapter `n` in `adapters()` order (or the first whose name contains
    /// `RLX_WGPU_ADAPTER`), opened once per process.
    pub fn get(n: usize) -> Result<Arc<Gpu>, WgpuError> {
        static OPEN: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
        let open = OPEN.get_or_init(Default::default);
        let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = open.get(&n) {
            return Ok(g.clone());
        }
        let all = sorted_adapters();
        if all.is_empty() {
            return Err(WgpuError::Unavailable(
                "no Vulkan, Metal or DX12 adapter was found (on Linux install a Vulkan driver; \
                 for a software one, Mesa's lavapipe: `apt-get install mesa-vulkan-drivers \
                 libvulkan1`)"
                    .into(),
            ));
        }
        let wanted = rlx_ir::env::text(rlx_ir::env::Switch::WgpuAdapter);
        let adapter = match &wanted {
            Some(t) => all
                .iter()
                .filter(|a| a.get_info().name.contains(t.as_str()))
                .nth(n),
            None => all.get(n),
        }
        .ok_or_else(|| {
            let names: Vec<String> = all.iter().map(|a| a.get_info().name).collect();
            WgpuError::Unavailable(format!(
                "adapter {n}{} is not among the {} found: {}",
                wanted
                    .map(|t| format!(" matching {t:?}"))
                    .unwrap_or_default(),
                all.len(),
                names.join(", ")
            ))
        })?;
        let g = Arc::new(Gpu::open(adapter)?);
        open.insert(n, g.clone());
        Ok(g)
    }

    fn open(adapter: &wgpu::Adapter) -> Result<Gpu, WgpuError> {
        let info = adapter.get_info();
        let caps = Caps::of(adapter);
        let mut features = wgpu::Features::empty();
        if caps.f16 {
            features |= wgpu::Features::SHADER_F16;
        }
        if caps.subgroups {
            features |= wgpu::Features::SUBGROUP;
        }
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        if timestamps {
            features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("rlx"),
            required_features: features,
            required_limits: adapter.limits(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| WgpuError::Unavailable(format!("{}: {e}", info.name)))?;
        let uncaptured: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = uncaptured.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(e.to_string());
        }));
        Ok(Gpu {
            name: info.name.clone(),
            backend: format!("{:?}", info.backend),
            caps,
            timestamps,
            device,
            queue,
            pipelines: Mutex::default(),
            layouts: Mutex::default(),
            uncaptured,
        })
    }

    /// The layout of a kernel with `n` storage bindings.
    pub(crate) fn layout(&self, n: usize) -> Arc<(wgpu::BindGroupLayout, wgpu::PipelineLayout)> {
        let mut m = self.layouts.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(n)
            .or_insert_with(|| {
                let entries: Vec<wgpu::BindGroupLayoutEntry> = (0..n as u32)
                    .map(|b| wgpu::BindGroupLayoutEntry {
                        binding: b,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: wgpu::BufferBindingType::Storage { read_only: false },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    })
                    .collect();
                let bgl = self
                    .device
                    .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                        label: None,
                        entries: &entries,
                    });
                let pl = self
                    .device
                    .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: None,
                        bind_group_layouts: &[Some(&bgl)],
                        immediate_size: 0,
                    });
                Arc::new((bgl, pl))
            })
            .clone()
    }

    /// The compute pipeline of `src` (entry point `main`, `bindings` storage buffers),
    /// compiled once. A shader that does not validate is an error naming `label`.
    pub(crate) fn pipeline(
        &self,
        label: &str,
        src: &str,
        bindings: usize,
    ) -> Result<Arc<wgpu::ComputePipeline>, WgpuError> {
        if let Some(p) = self
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(src)
        {
            return Ok(p.clone());
        }
        // naga first: its message names the line, and nothing reaches the driver unchecked.
        crate::shader::validate(label, src)?;
        // Debug builds (every test run, CI included) also translate each shader to MSL,
        // SPIR-V and HLSL: a kernel that would not build for Metal or DX12 fails here,
        // without a Mac or a Windows machine.
        if cfg!(debug_assertions) {
            crate::shader::translate_all(label, src)?;
        }
        let layout = self.layout(bindings);
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(label),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
        let p = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(label),
                layout: Some(&layout.1),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(WgpuError::Shader {
                label: label.into(),
                msg: e.to_string(),
            });
        }
        let p = Arc::new(p);
        self.pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(src.to_string(), p.clone());
        Ok(p)
    }

    /// A storage buffer of at least `bytes` (rounded up to 16), zeroed.
    pub(crate) fn buffer(&self, label: &str, bytes: u64) -> Result<wgpu::Buffer, WgpuError> {
        let size = bytes.max(16).div_ceil(16) * 16;
        if size > self.caps.max_buffer_bytes {
            return Err(WgpuError::device(
                "create_buffer",
                format!(
                    "{label}: {size} bytes exceed the adapter's largest buffer ({})",
                    self.caps.max_buffer_bytes
                ),
            ));
        }
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }))
    }

    /// Write `data` at byte `off` of `buf` (padded to the 4-byte copy granularity).
    pub(crate) fn write(&self, buf: &wgpu::Buffer, off: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        if data.len().is_multiple_of(4) {
            self.queue.write_buffer(buf, off, data);
        } else {
            let mut v = data.to_vec();
            v.resize(data.len().div_ceil(4) * 4, 0);
            self.queue.write_buffer(buf, off, &v);
        }
    }

    /// Copy the byte ranges `(buffer, offset, len)` to the host, in one submission after
    /// everything queued so far (`enc` carries any commands still to be submitted first).
    pub(crate) fn read(
        &self,
        mut enc: wgpu::CommandEncoder,
        ranges: &[(&wgpu::Buffer, u64, usize)],
    ) -> Result<Vec<Vec<u8>>, WgpuError> {
        let slot = |n: usize| (n.max(4).div_ceil(256) * 256) as u64;
        let total: u64 = ranges.iter().map(|r| slot(r.2)).sum::<u64>().max(256);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx readback"),
            size: total,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut at = 0u64;
        for (buf, off, len) in ranges {
            // Copies move whole words: a tensor of odd byte size reads its padding too.
            let n = (*len as u64).div_ceil(4) * 4;
            if n > 0 {
                enc.copy_buffer_to_buffer(buf, *off, &staging, at, n);
            }
            at += slot(*len);
        }
        self.queue.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::device("poll", e))?;
        rx.recv()
            .map_err(|e| WgpuError::device("map_async", e))?
            .map_err(|e| WgpuError::device("map_async", e))?;
        self.check_errors()?;
        let view = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| WgpuError::device("get_mapped_range", e))?;
        let mut out = Vec::with_capacity(ranges.len());
        let mut at = 0usize;
        for (_, _, len) in ranges {
            out.push(view[at..at + len].to_vec());
            at += slot(*len) as usize;
        }
        drop(view);
        staging.unmap();
        Ok(out)
    }

    /// Submit `enc` and wait for the device to finish it.
    pub(crate) fn submit_wait(&self, enc: wgpu::CommandEncoder) -> Result<(), WgpuError> {
        self.queue.submit([enc.finish()]);
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::device("poll", e))?;
        self.check_errors()
    }

    /// An error the device raised since the last check (a failed dispatch, a lost device).
    pub(crate) fn check_errors(&self) -> Result<(), WgpuError> {
        let mut e = self.uncaptured.lock().unwrap_or_else(|p| p.into_inner());
        if e.is_empty() {
            return Ok(());
        }
        let msg = e.join("; ");
        e.clear();
        Err(WgpuError::device("queue", msg))
    }

    pub(crate) fn encoder(&self) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None })
    }
}
