//! rlx-wgpu: the portable GPU backend on `wgpu` (Metal on Apple silicon, Vulkan on Linux and
//! Android, DX12 on Windows; Mesa's lavapipe runs it on the CPU in CI). A graph is lowered
//! once into compute pipelines — a generated WGSL shader per elementwise chain, hand-written
//! WGSL per op group — over one memory-planned arena, params resident; nodes it cannot lower
//! run on the CPU thunks with explicit copies, listed by the dispatch report.
mod device;
mod error;
mod exec;
pub mod lower;
mod profile;
pub mod shader;
mod verify;

pub use device::{
    adapters, check_available, gpu_or_skip, has_hardware_adapter, AdapterDesc, Caps, Gpu,
};
pub use error::WgpuError;
pub use exec::{WgpuExecutable, WgpuOptions};
pub use profile::Profile;
pub use verify::verify_tolerance;
