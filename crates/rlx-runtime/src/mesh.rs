//! Device meshes: a group of ranks, one [`Session`] each, whose compiled graphs exchange
//! values through the collectives (`AllReduce`, `AllGather`, `ReduceScatter`).
//!
//! - [`Mesh::cpu`]: ranks simulated in one process (a thread per rank, the exchange in
//!   shared memory): the reference that sharded models are tested against.
//! - [`Mesh::cuda`]: one process driving several local GPUs, a NCCL communicator each.
//! - [`Mesh::from_env`]: one process per GPU; the ranks meet through `MASTER_ADDR` /
//!   `MASTER_PORT` / `RANK` / `WORLD_SIZE` (see [`crate::rendezvous`]), so the same program
//!   runs across nodes. The mesh then holds this process's rank only.
//! - Every rank's graph must be the same program (SPMD); [`Mesh::run`] runs a closure on
//!   every rank at once, one thread each, and when one rank fails it aborts the group so
//!   the others stop waiting at their next collective.
use crate::session::{Device, Session};
use crate::Error;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

/// The group a session's graphs are one rank of.
#[derive(Clone)]
pub enum RankComm {
    /// A rank of ranks simulated in this process (CPU executables).
    Host(Arc<dyn rlx_cpu::Communicator>),
    /// A NCCL rank on one GPU (CUDA executables).
    Nccl(Arc<rlx_cuda::NcclComm>),
}

impl RankComm {
    pub fn rank(&self) -> usize {
        match self {
            RankComm::Host(c) => c.rank(),
            RankComm::Nccl(c) => c.rank(),
        }
    }

    pub fn ranks(&self) -> usize {
        match self {
            RankComm::Host(c) => c.ranks(),
            RankComm::Nccl(c) => c.ranks(),
        }
    }

    /// Wake every rank waiting at a collective with an error.
    pub fn abort(&self, why: &str) {
        match self {
            RankComm::Host(c) => c.abort(why),
            RankComm::Nccl(c) => c.abort(),
        }
    }
}

impl fmt::Debug for RankComm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RankComm::Host(c) => write!(f, "Host({c:?})"),
            RankComm::Nccl(c) => write!(f, "{c:?}"),
        }
    }
}

/// A group of ranks, one session each. A clone shares the communicators: run one program
/// over a mesh at a time (two interleaved would meet each other's collectives).
#[derive(Clone, Debug)]
pub struct Mesh {
    sessions: Vec<Session>,
}

impl Mesh {
    /// A mesh of these sessions: each names its own rank and group through its
    /// communicator (a process holding some ranks of a larger group, as [`Mesh::from_env`]
    /// makes). The sessions must belong to one group, each rank at most once.
    pub fn from_sessions(sessions: Vec<Session>) -> Result<Mesh, Error> {
        let Some(first) = sessions.first() else {
            return Err(Error::Mesh("a mesh needs at least one rank".into()));
        };
        let world = first.rank().1;
        let mut seen = Vec::new();
        for s in &sessions {
            let (r, w) = s.rank();
            if w != world || seen.contains(&r) {
                return Err(Error::Mesh(format!(
                    "sessions of ranks {:?} do not form one group",
                    sessions.iter().map(Session::rank).collect::<Vec<_>>()
                )));
            }
            seen.push(r);
        }
        Ok(Mesh { sessions })
    }

    /// How many ranks the whole group has (more than [`Mesh::ranks`] when other processes
    /// hold the rest).
    pub fn world(&self) -> usize {
        self.sessions.first().map_or(0, |s| s.rank().1)
    }

    /// The global rank of each session (`0..ranks` for a local mesh; a mesh from the
    /// environment holds one rank of a larger group).
    pub fn global_ranks(&self) -> Vec<usize> {
        self.sessions.iter().map(|s| s.rank().0).collect()
    }

    /// `ranks` CPU ranks simulated in this process.
    pub fn cpu(ranks: usize) -> Result<Mesh, Error> {
        if ranks == 0 {
            return Err(Error::Mesh("a mesh needs at least one rank".into()));
        }
        let sessions = (rlx_cpu::LocalGroup::new(ranks).into_iter())
            .map(|c| Session::new(Device::Cpu).with_comm(RankComm::Host(Arc::new(c))))
            .collect();
        Ok(Mesh { sessions })
    }

    /// One rank per GPU of `ordinals`, driven from this process (NCCL, `ncclCommInitAll`).
    pub fn cuda(ordinals: &[usize]) -> Result<Mesh, Error> {
        for &o in ordinals {
            rlx_cuda::check_available(o).map_err(|e| Error::DeviceUnavailable {
                device: format!("cuda:{o}"),
                reason: e.to_string(),
            })?;
        }
        let comms = rlx_cuda::NcclComm::init_all(ordinals)?;
        let sessions = (ordinals.iter().zip(comms))
            .map(|(&o, c)| Session::new(Device::Cuda(o)).with_comm(RankComm::Nccl(c)))
            .collect();
        Ok(Mesh { sessions })
    }

    /// This process's rank of a group of processes, one GPU each (`cuda:LOCAL_RANK`), met
    /// through the `MASTER_ADDR` / `MASTER_PORT` / `RANK` / `WORLD_SIZE` rendezvous.
    pub fn from_env() -> Result<Mesh, Error> {
        let me = crate::rendezvous::EnvRank::from_env()?;
        rlx_cuda::check_available(me.local_rank).map_err(|e| Error::DeviceUnavailable {
            device: format!("cuda:{}", me.local_rank),
            reason: e.to_string(),
        })?;
        let blob = me.share(
            || Ok(rlx_cuda::NcclId::new()?.to_bytes().to_vec()),
            std::time::Duration::from_secs(300),
        )?;
        let id = rlx_cuda::NcclId::from_bytes(&blob)?;
        let comm = rlx_cuda::NcclComm::init_rank(me.local_rank, me.rank, me.world_size, id)?;
        let s = Session::new(Device::Cuda(me.local_rank)).with_comm(RankComm::Nccl(comm));
        Ok(Mesh { sessions: vec![s] })
    }

    /// A mesh from a device list such as `cpu,cpu` (two simulated CPU ranks), `cpu*4`,
    /// `cuda:0,cuda:1`, or `env` ([`Mesh::from_env`]: this process's rank of a group of
    /// processes).
    pub fn parse(spec: &str) -> Result<Mesh, Error> {
        if spec.trim() == "env" {
            return Mesh::from_env();
        }
        let bad = |why: String| Error::Mesh(format!("device list \"{spec}\": {why}"));
        let mut devices = Vec::new();
        for part in spec.split(',').map(str::trim) {
            let (name, count) = match part.split_once('*') {
                Some((n, c)) => (
                    n,
                    c.parse::<usize>()
                        .map_err(|_| bad(format!("bad count in {part}")))?,
                ),
                None => (part, 1),
            };
            let d = Device::parse(name)
                .ok_or_else(|| bad(format!("unknown device {name} (cpu, cuda:N)")))?;
            devices.extend(std::iter::repeat_n(d, count));
        }
        if devices.iter().all(|d| *d == Device::Cpu) {
            return Mesh::cpu(devices.len());
        }
        let gpus: Vec<usize> = (devices.iter())
            .filter_map(|d| match d {
                Device::Cuda(n) => Some(*n),
                _ => None,
            })
            .collect();
        if gpus.len() == devices.len() {
            return Mesh::cuda(&gpus);
        }
        Err(bad(
            "a mesh is all CPU ranks (simulated in this process) or all CUDA GPUs".into(),
        ))
    }

    pub fn ranks(&self) -> usize {
        self.sessions.len()
    }

    /// Rank `r`'s session (compile that rank's graph with it).
    pub fn session(&self, r: usize) -> &Session {
        &self.sessions[r]
    }

    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// Tell every rank to stop waiting at collectives.
    pub fn abort(&self, why: &str) {
        for s in &self.sessions {
            if let Some(c) = s.comm() {
                c.abort(why);
            }
        }
    }

    /// Run `f(rank, session)` on every rank at once, a thread each; the results in rank
    /// order. The first rank to fail aborts the group, and its error is the one returned.
    pub fn run<T, E, F>(&self, f: F) -> Result<Vec<T>, E>
    where
        T: Send,
        E: Send + fmt::Display,
        F: Fn(usize, &Session) -> Result<T, E> + Sync,
    {
        if let [s] = self.sessions.as_slice() {
            // One rank: nothing to meet, so no thread (a training step per call adds up).
            return f(0, s)
                .map(|v| vec![v])
                .inspect_err(|e| self.abort(&format!("rank 0 failed: {e}")));
        }
        let first: Mutex<Option<E>> = Mutex::new(None);
        let results: Vec<Option<T>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (self.sessions.iter().enumerate())
                .map(|(r, s)| {
                    let (f, first) = (&f, &first);
                    scope.spawn(move || {
                        // A panicking rank aborts the group too, then panics on.
                        let out =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(r, s)));
                        match out {
                            Ok(Ok(v)) => Some(v),
                            Ok(Err(e)) => {
                                let mut slot = first.lock().unwrap_or_else(PoisonError::into_inner);
                                if slot.is_none() {
                                    self.abort(&format!("rank {r} failed: {e}"));
                                    *slot = Some(e);
                                }
                                None
                            }
                            Err(p) => {
                                self.abort(&format!("rank {r} panicked"));
                                std::panic::resume_unwind(p)
                            }
                        }
                    })
                })
                .collect();
            (handles.into_iter())
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        match first.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(e) => Err(e),
            None => Ok(results.into_iter().flatten().collect()),
        }
    }
}
