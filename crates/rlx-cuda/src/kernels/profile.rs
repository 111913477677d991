//! Family function of `kernels/profile.cu`: the spin kernel the step profiler queues ahead
//! of a plan so the host's enqueue time does not show in the first step's timing.
use super::{Kernel, Lib};
use crate::lower::KArgs;

/// `rlx_spin(cycles)`: one thread busy-waits about `cycles` clock ticks.
pub fn rlx_spin(cycles: i64) -> Kernel {
    Kernel::new(Lib::Profile, "rlx_spin".into(), KArgs::new().i64(cycles))
}
