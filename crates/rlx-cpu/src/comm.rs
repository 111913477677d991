//! Collectives on the CPU: the [`Communicator`] an executable exchanges values through, a
//! group of simulated ranks in one process ([`LocalGroup`], one thread per rank), and the
//! reference semantics of `AllReduce`, `AllGather` and `ReduceScatter` over the ranks'
//! values.
//!
//! A communicator has one primitive, [`Communicator::exchange`]: every rank hands in its
//! value and gets every rank's, in rank order. Each rank then combines them itself, in rank
//! order and in f64 for floats, so every rank computes bit-identical results whatever the
//! number of ranks — the reference that NCCL's rings and trees are checked against.
use crate::buffer::{Buf, BufMut, OutView, Storage, TensorView};
use crate::error::op_err;
use crate::CpuError;
use rlx_ir::{CollectiveReduce, Op};
use std::fmt;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CommError {
    /// Some rank gave up (its run failed, or it timed out); the group is unusable after it.
    #[error("rank {rank}: the group was aborted: {why}")]
    Aborted { rank: usize, why: String },
    /// The other ranks did not reach the same collective in time.
    #[error("rank {rank}: waited {secs} s at {tag} for the other ranks")]
    Timeout { rank: usize, tag: String, secs: u64 },
    /// The ranks reached different collectives (their graphs differ).
    #[error("rank {rank} reached {mine} while rank {other} reached {theirs}")]
    Mismatch {
        rank: usize,
        mine: String,
        other: usize,
        theirs: String,
    },
}

/// One rank's view of a group of ranks.
pub trait Communicator: Send + Sync + fmt::Debug {
    /// This rank, `0..ranks()`.
    fn rank(&self) -> usize;
    /// How many ranks the group has.
    fn ranks(&self) -> usize;
    /// Hand in this rank's value for the collective named `tag` and get every rank's, in
    /// rank order (this rank's included). Blocks until every rank has handed in.
    fn exchange(&self, tag: &str, mine: Storage) -> Result<Vec<Arc<Storage>>, CommError>;
    /// Wake every rank waiting in (or later entering) an exchange with an error: the way a
    /// failed rank keeps the others from waiting forever.
    fn abort(&self, why: &str);
}

/// Ranks simulated in one process: each rank's executable runs on its own thread and the
/// exchange meets in shared memory.
#[derive(Clone)]
pub struct LocalGroup {
    rank: usize,
    shared: Arc<Shared>,
}

struct Shared {
    ranks: usize,
    timeout: Duration,
    state: Mutex<Round>,
    cv: Condvar,
}

/// The exchange in progress: ranks deposit while `values` is `None`; the last one to
/// deposit publishes `values`; once every rank has taken them the next round opens.
#[derive(Default)]
struct Round {
    number: u64,
    slots: Vec<Option<(String, Arc<Storage>)>>,
    deposited: usize,
    values: Option<Arc<Vec<Arc<Storage>>>>,
    mismatch: Option<(usize, String, usize, String)>,
    taken: usize,
    aborted: Option<String>,
}

impl LocalGroup {
    /// The handles of a group of `ranks` ranks (handle r is rank r); an exchange waits at
    /// most 10 minutes for the other ranks.
    pub fn new(ranks: usize) -> Vec<LocalGroup> {
        LocalGroup::with_timeout(ranks, Duration::from_secs(600))
    }

    /// [`LocalGroup::new`] with another wait limit.
    pub fn with_timeout(ranks: usize, timeout: Duration) -> Vec<LocalGroup> {
        let shared = Arc::new(Shared {
            ranks,
            timeout,
            state: Mutex::new(Round {
                slots: vec![None; ranks],
                ..Round::default()
            }),
            cv: Condvar::new(),
        });
        (0..ranks)
            .map(|rank| LocalGroup {
                rank,
                shared: shared.clone(),
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Round> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for LocalGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalGroup(rank {} of {})", self.rank, self.shared.ranks)
    }
}

impl Communicator for LocalGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.shared.ranks
    }

    fn exchange(&self, tag: &str, mine: Storage) -> Result<Vec<Arc<Storage>>, CommError> {
        let sh = &self.shared;
        let deadline = Instant::now() + sh.timeout;
        let rank = self.rank;
        let mut st = self.lock();
        // Wait until this rank's slot of the open round is free (a fast rank may arrive
        // before the slow ones have taken the last round's values), then deposit.
        let number = loop {
            if let Some(why) = &st.aborted {
                return Err(CommError::Aborted {
                    rank,
                    why: why.clone(),
                });
            }
            if st.values.is_none() && st.slots[rank].is_none() {
                break st.number;
            }
            st = wait(self, st, deadline, tag)?;
        };
        st.slots[rank] = Some((tag.to_string(), Arc::new(mine)));
        st.deposited += 1;
        if st.deposited == sh.ranks {
            let slots: Vec<(String, Arc<Storage>)> = st.slots.iter().flatten().cloned().collect();
            st.mismatch = (slots.iter().enumerate())
                .find(|(_, (t, _))| *t != slots[0].0)
                .map(|(r, (t, _))| (0, slots[0].0.clone(), r, t.clone()));
            st.values = Some(Arc::new(slots.into_iter().map(|s| s.1).collect()));
            sh.cv.notify_all();
        }
        loop {
            if let Some(why) = &st.aborted {
                return Err(CommError::Aborted {
                    rank,
                    why: why.clone(),
                });
            }
            if st.number == number {
                if let Some(values) = st.values.clone() {
                    let mismatch = st.mismatch.clone();
                    st.taken += 1;
                    if st.taken == sh.ranks {
                        let ranks = sh.ranks;
                        *st = Round {
                            number: number + 1,
                            slots: vec![None; ranks],
                            ..Round::default()
                        };
                        sh.cv.notify_all();
                    }
                    if let Some((a, ta, b, tb)) = mismatch {
                        let (other, theirs) = if a == rank { (b, tb) } else { (a, ta) };
                        return Err(CommError::Mismatch {
                            rank,
                            mine: tag.to_string(),
                            other,
                            theirs,
                        });
                    }
                    return Ok(values.to_vec());
                }
            }
            st = wait(self, st, deadline, tag)?;
        }
    }

    fn abort(&self, why: &str) {
        let mut st = self.lock();
        st.aborted.get_or_insert_with(|| why.to_string());
        self.shared.cv.notify_all();
    }
}

/// Wait for a change of the round; past the deadline the group is aborted (so the other
/// ranks stop waiting too) and this rank gets `Timeout`.
fn wait<'a>(
    g: &'a LocalGroup,
    st: std::sync::MutexGuard<'a, Round>,
    deadline: Instant,
    tag: &str,
) -> Result<std::sync::MutexGuard<'a, Round>, CommError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        let mut st = st;
        let secs = g.shared.timeout.as_secs();
        st.aborted.get_or_insert_with(|| {
            format!("rank {} waited {secs} s at {tag} for the others", g.rank)
        });
        g.shared.cv.notify_all();
        return Err(CommError::Timeout {
            rank: g.rank,
            tag: tag.to_string(),
            secs,
        });
    }
    let (st, _) = (g.shared.cv.wait_timeout(st, left)).unwrap_or_else(PoisonError::into_inner);
    Ok(st)
}

/// `x`'s values as owned storage, for handing to the other ranks.
fn owned(x: &TensorView) -> Storage {
    match x.data {
        Buf::F32(s) => Storage::F32(s.to_vec()),
        Buf::F64(s) => Storage::F64(s.to_vec()),
        Buf::I64(s) => Storage::I64(s.to_vec()),
        Buf::U8(s) => Storage::I64(s.iter().map(|&v| v as i64).collect()),
    }
}

/// Element `i` of every rank's value combined, in rank order: floats in f64.
fn combine(parts: &[Arc<Storage>], reduce: CollectiveReduce, out: &mut BufMut) {
    let ranks = parts.len();
    match out {
        BufMut::F32(o) => float_combine(o, ranks, reduce, |r, i| match &*parts[r] {
            Storage::F32(v) => v[i] as f64,
            _ => f64::NAN,
        }),
        BufMut::F64(o) => float_combine(o, ranks, reduce, |r, i| match &*parts[r] {
            Storage::F64(v) => v[i],
            _ => f64::NAN,
        }),
        BufMut::I64(o) => {
            for (i, o) in o.iter_mut().enumerate() {
                let vals = (0..ranks).map(|r| match &*parts[r] {
                    Storage::I64(v) => v[i],
                    _ => 0,
                });
                *o = match reduce {
                    CollectiveReduce::Max => vals.max().unwrap_or(0),
                    // Mean never reaches integers (the shape rule needs a float).
                    CollectiveReduce::Sum | CollectiveReduce::Mean => {
                        vals.fold(0i64, i64::wrapping_add)
                    }
                };
            }
        }
    }
}

fn float_combine<T: Copy + FromF64>(
    o: &mut [T],
    ranks: usize,
    reduce: CollectiveReduce,
    get: impl Fn(usize, usize) -> f64,
) {
    for (i, o) in o.iter_mut().enumerate() {
        let v = match reduce {
            CollectiveReduce::Sum => (0..ranks).map(|r| get(r, i)).sum(),
            CollectiveReduce::Mean => (0..ranks).map(|r| get(r, i)).sum::<f64>() / ranks as f64,
            // NaN anywhere gives NaN (f64::max would drop it).
            CollectiveReduce::Max => {
                (0..ranks)
                    .map(|r| get(r, i))
                    .fold(f64::NEG_INFINITY, |a, b| {
                        if a.is_nan() || b.is_nan() {
                            f64::NAN
                        } else {
                            a.max(b)
                        }
                    })
            }
        };
        *o = T::from_f64(v);
    }
}

trait FromF64 {
    fn from_f64(v: f64) -> Self;
}
impl FromF64 for f32 {
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}
impl FromF64 for f64 {
    fn from_f64(v: f64) -> f64 {
        v
    }
}

/// Copy `len` values from `src` at `from` into `dst` at `to` (one class on both sides).
fn copy_run(
    dst: &mut BufMut,
    to: usize,
    src: &Storage,
    from: usize,
    len: usize,
) -> Result<(), CpuError> {
    match (dst, src) {
        (BufMut::F32(d), Storage::F32(s)) => d[to..to + len].copy_from_slice(&s[from..from + len]),
        (BufMut::F64(d), Storage::F64(s)) => d[to..to + len].copy_from_slice(&s[from..from + len]),
        (BufMut::I64(d), Storage::I64(s)) => d[to..to + len].copy_from_slice(&s[from..from + len]),
        _ => return Err(op_err("the ranks' values are held in different classes")),
    }
    Ok(())
}

/// Run collective `op` on this rank's `x` over `comm`; with no communicator the group is
/// this one rank.
pub(crate) fn run(
    op: &Op,
    tag: &str,
    comm: Option<&dyn Communicator>,
    x: &TensorView,
    mut out: OutView,
) -> Result<(), CpuError> {
    let want = match op {
        Op::AllGather { ranks, .. } | Op::ReduceScatter { ranks, .. } => Some(*ranks),
        _ => None,
    };
    let group = comm.map_or(1, |c| c.ranks());
    if want.is_some_and(|w| w != group) {
        return Err(op_err(format!(
            "spans {} ranks but runs in a group of {group}{}",
            want.unwrap_or(0),
            if comm.is_none() {
                " (no communicator: compile it for a mesh of that many ranks)"
            } else {
                ""
            }
        )));
    }
    let mine = owned(x);
    let n = mine.len();
    let parts = match comm {
        Some(c) => c.exchange(tag, mine).map_err(|e| op_err(e.to_string()))?,
        None => vec![Arc::new(mine)],
    };
    if let Some((r, p)) = parts.iter().enumerate().find(|(_, p)| p.len() != n) {
        return Err(op_err(format!(
            "rank {r} handed in {} values, this rank {n}: the ranks' graphs differ",
            p.len()
        )));
    }
    // Outer (before the axis) and inner (the axis and after) extents of x.
    let split = |axis: usize| -> (usize, usize) {
        let d = x.shape;
        (d[..axis].iter().product(), d[axis + 1..].iter().product())
    };
    match *op {
        Op::AllReduce { reduce } => combine(&parts, reduce, &mut out.data),
        Op::AllGather { axis, ranks } => {
            let (outer, after) = split(axis);
            let run = x.shape[axis] * after;
            for o in 0..outer {
                for (r, p) in parts.iter().enumerate() {
                    copy_run(&mut out.data, (o * ranks + r) * run, p, o * run, run)?;
                }
            }
        }
        Op::ReduceScatter {
            reduce,
            axis,
            ranks,
        } => {
            let mut full = match &*parts[0] {
                Storage::F32(_) => Storage::F32(vec![0.0; n]),
                Storage::F64(_) => Storage::F64(vec![0.0; n]),
                _ => Storage::I64(vec![0; n]),
            };
            let mut full_mut = match &mut full {
                Storage::F32(v) => BufMut::F32(v),
                Storage::F64(v) => BufMut::F64(v),
                Storage::I64(v) => BufMut::I64(v),
                Storage::U8(_) => return Err(op_err("byte values cannot be reduced")),
            };
            combine(&parts, reduce, &mut full_mut);
            let (outer, after) = split(axis);
            let piece = x.shape[axis] / ranks * after;
            let rank = comm.map_or(0, |c| c.rank());
            for o in 0..outer {
                let from = o * x.shape[axis] * after + rank * piece;
                copy_run(&mut out.data, o * piece, &full, from, piece)?;
            }
        }
        _ => return Err(op_err("not a collective")),
    }
    Ok(())
}
