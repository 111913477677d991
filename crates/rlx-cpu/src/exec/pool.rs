//! The arenas of concurrent runs: a run checks one out of a small pool (or makes one),
//! sizes it for its plan and gives it back when done, so runs of one executable from
//! several threads each write their own intermediates and proceed in parallel.
use super::alloc::grow;
use crate::buffer::Storage;
use crate::error::CpuError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// One run's memory: the three arenas of the plan and the run's input values by node id.
#[derive(Default)]
pub(crate) struct Arena {
    pub f32: Vec<f32>,
    pub f64: Vec<f64>,
    pub i64: Vec<i64>,
    pub inputs: Vec<Option<Storage>>,
}

#[derive(Default)]
pub(crate) struct ArenaPool {
    idle: Mutex<Vec<Arena>>,
    out: AtomicUsize,
    peak: AtomicUsize,
}

/// More idle arenas than cores would only hold memory no run can use at once.
fn idle_cap() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get())
}

impl ArenaPool {
    /// An arena with at least `sizes` elements per pool and an empty input slot per node.
    pub fn checkout(
        &self,
        sizes: [usize; 3],
        nodes: usize,
        graph: &str,
    ) -> Result<ArenaGuard<'_>, CpuError> {
        let arena = self
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_default();
        let now = self.out.fetch_add(1, Ordering::AcqRel) + 1;
        self.peak.fetch_max(now, Ordering::AcqRel);
        // The guard exists before any growth, so a failed allocation still gives it back.
        let mut g = ArenaGuard {
            pool: self,
            arena: Some(arena),
        };
        let a = g.arena.as_mut().expect("arena");
        let what = |pool: &str| format!("the {pool} arena of graph \"{graph}\"");
        grow(&mut a.f32, sizes[0], 0.0, &|| what("f32"))?;
        grow(&mut a.f64, sizes[1], 0.0, &|| what("f64"))?;
        grow(&mut a.i64, sizes[2], 0, &|| what("i64"))?;
        a.inputs.clear();
        a.inputs.resize(nodes, None);
        Ok(g)
    }

    /// The most arenas checked out at once so far.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }
}

/// A checked-out arena; back to the pool on drop.
pub(crate) struct ArenaGuard<'a> {
    pool: &'a ArenaPool,
    arena: Option<Arena>,
}

impl std::ops::Deref for ArenaGuard<'_> {
    type Target = Arena;
    fn deref(&self) -> &Arena {
        self.arena.as_ref().expect("arena")
    }
}

impl std::ops::DerefMut for ArenaGuard<'_> {
    fn deref_mut(&mut self) -> &mut Arena {
        self.arena.as_mut().expect("arena")
    }
}

impl Drop for ArenaGuard<'_> {
    fn drop(&mut self) {
        self.pool.out.fetch_sub(1, Ordering::AcqRel);
        if let Some(mut a) = self.arena.take() {
            // Inputs are the caller's values: do not keep them alive between runs.
            a.inputs.clear();
            let mut idle = self.pool.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < idle_cap() {
                idle.push(a);
            }
        }
    }
}
