//! Tensor-parallel decoding over a [`Mesh`]: one rank graph per rank (its share of every
//! attention and FFN block, its own KV cache), every call run on all ranks at once.
//!
//! Why every call goes to every rank: the rank graphs meet at their all-reduces, so a rank
//! run alone would wait at its first collective. [`ShardedDecoder::run_typed`] therefore
//! feeds all ranks the same inputs through [`Mesh::run`] (a thread per rank; the first
//! failure aborts the group, so nothing hangs) and returns rank 0's outputs: after the last
//! all-reduce the residual stream, the final norm and the LM head are replicated, so every
//! rank holds the same logits.
//!
//! [`crate::generate::Decoder`] uses it when `LoadOptions::devices` names a mesh
//! (`cpu,cpu`), so [`crate::Llm`] generates with it unchanged.
use crate::llm::{self, BuildOptions, LlmConfig, ShardedStore, TensorParallel, TensorStore};
use crate::ModelError;
use rlx_ir::HostTensor;
use rlx_runtime::{CompiledGraph, Mesh};

/// One decoder graph per rank of a mesh, loaded with that rank's weights.
pub struct ShardedDecoder {
    mesh: Mesh,
    ranks: Vec<CompiledGraph>,
}

impl ShardedDecoder {
    /// Build, compile and fill rank r's graph for every rank of `mesh` from `cfg` (the
    /// file's config) and `store` (the whole model; each rank reads its slices).
    /// `opts.tensor_parallel` is set per rank.
    pub fn new(
        cfg: &LlmConfig,
        store: &(impl TensorStore + ?Sized),
        opts: &BuildOptions,
        mesh: Mesh,
    ) -> Result<ShardedDecoder, ModelError> {
        // Each session's own (rank, group size): a mesh from the environment holds this
        // process's rank of a larger group, and builds that rank's shard.
        let n = mesh.world();
        let mut ranks = Vec::with_capacity(mesh.ranks());
        for session in mesh.sessions() {
            let (r, world) = session.rank();
            if world != n {
                return Err(ModelError::Config(format!(
                    "mesh session of rank {r} is in a group of {world}, the mesh's is {n}"
                )));
            }
            let tp = TensorParallel::new(r, n)?;
            let bo = BuildOptions {
                tensor_parallel: tp,
                ..opts.clone()
            };
            let (graph, decls) = llm::build(cfg, &bo)?;
            let exe = session.compile(graph)?;
            llm::load_each(&ShardedStore::new(store, tp)?, &decls, |name, value| {
                Ok(exe.set_param_typed(name, value)?)
            })?;
            ranks.push(exe);
        }
        Ok(ShardedDecoder { mesh, ranks })
    }

    /// How many ranks share the model (across every process of the group).
    pub fn ranks(&self) -> usize {
        self.mesh.world()
    }

    /// Rank `r`'s compiled graph (to inspect; run it only through [`Self::run_typed`]).
    pub fn rank_graph(&self, r: usize) -> Option<&CompiledGraph> {
        self.ranks.get(r)
    }

    /// Run every rank of this process on `inputs` at once; the first one's outputs (every
    /// rank's are the same: the LM head is replicated after the all-reduces).
    pub fn run_typed(&self, inputs: &[(&str, HostTensor)]) -> Result<Vec<HostTensor>, ModelError> {
        let outs = self.mesh.run(|r, _| {
            let exe = self.ranks.get(r).ok_or_else(|| {
                ModelError::Config(format!("rank {r} has no graph (the mesh grew?)"))
            })?;
            Ok::<_, ModelError>(exe.run_typed(inputs)?)
        })?;
        outs.into_iter()
            .next()
            .ok_or_else(|| ModelError::Config("a mesh of no ranks ran nothing".into()))
    }
}
