//! CacheWrite on a param: the written rows persist into later runs (the param is the KV
//! cache), nothing but those rows changes, the cache takes no arena space (it is written
//! in place), a write past the end is a typed error that leaves the cache as it was, and the
//! verifier refuses a cache that anything else reads.
use rlx_cpu::CpuExecutable;
use rlx_ir::{DType, Graph, HostTensor, Shape};
use rlx_testutil::Rng;

const CTX: usize = 12;
const W: usize = 6;

/// cache [1, CTX, W] param; new [1, s, W] and pos [1] inputs; output: 2 × the whole cache
/// (read through the write, so the step's rows are in it).
fn graph(s: usize) -> Graph {
    let mut g = Graph::new("cache");
    let cache = g
        .param("cache", Shape::new(&[1, CTX, W], DType::F32))
        .unwrap();
    let new = g.input("new", Shape::new(&[1, s, W], DType::F32)).unwrap();
    let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
    let w = g.cache_write(cache, new, pos, 1).unwrap();
    let two = g.add(w, w).unwrap();
    g.set_outputs(vec![two]);
    g
}

fn run(exe: &mut CpuExecutable, new: &[f32], s: usize, pos: i64) -> Result<Vec<f32>, String> {
    let ins = [
        ("new", HostTensor::from_f32(&[1, s, W], new)),
        ("pos", HostTensor::from_i64(&[1], &[pos])),
    ];
    exe.run(&ins)
        .map(|o| o[0].to_f32_vec())
        .map_err(|e| e.to_string())
}

#[test]
fn cache_param_keeps_each_steps_rows() {
    let mut rng = Rng::new("cache_param_keeps_each_steps_rows");
    let s = 1 + rng.below(3);
    let mut exe = CpuExecutable::new(graph(s)).unwrap();
    let init: Vec<f32> = rng.normals(CTX * W).into_iter().map(|v| v as f32).collect();
    exe.set_param("cache", &HostTensor::from_f32(&[1, CTX, W], &init))
        .unwrap();
    let mut want = init.clone();
    let mut pos = 0usize;
    while pos + s <= CTX {
        let new: Vec<f32> = rng.normals(s * W).into_iter().map(|v| v as f32).collect();
        want[pos * W..(pos + s) * W].copy_from_slice(&new);
        let got = run(&mut exe, &new, s, pos as i64).unwrap();
        let twice: Vec<f32> = want.iter().map(|v| 2.0 * v).collect();
        assert_eq!(got, twice, "after writing {s} rows at {pos}");
        pos += s;
    }
    // The cache is the param's own storage: the arena holds only the doubled output.
    assert_eq!(
        exe.arena_bytes(),
        CTX * W * 4,
        "the cache must not be copied"
    );
}

#[test]
fn overrun_is_an_error_and_changes_nothing() {
    let mut rng = Rng::new("overrun_is_an_error_and_changes_nothing");
    let s = 2 + rng.below(3);
    let mut exe = CpuExecutable::new(graph(s)).unwrap();
    let init: Vec<f32> = rng.normals(CTX * W).into_iter().map(|v| v as f32).collect();
    exe.set_param("cache", &HostTensor::from_f32(&[1, CTX, W], &init))
        .unwrap();
    let new: Vec<f32> = rng.normals(s * W).into_iter().map(|v| v as f32).collect();
    for pos in [-1, (CTX - s + 1) as i64, i64::MAX, i64::MIN] {
        let e = run(&mut exe, &new, s, pos).unwrap_err();
        assert!(e.contains("overruns") && e.contains("CacheWrite"), "{e}");
    }
    // A valid write of zero change (the rows it already holds) shows the cache intact.
    let keep = init[..s * W].to_vec();
    let got = run(&mut exe, &keep, s, 0).unwrap();
    let twice: Vec<f32> = init.iter().map(|v| 2.0 * v).collect();
    assert_eq!(got, twice);
}

#[test]
fn a_cache_with_another_reader_is_refused() {
    let mut g = Graph::new("bad");
    let cache = g
        .param("cache", Shape::new(&[1, CTX, W], DType::F32))
        .unwrap();
    let new = g.input("new", Shape::new(&[1, 1, W], DType::F32)).unwrap();
    let pos = g.input("pos", Shape::new(&[1], DType::I64)).unwrap();
    let w = g.cache_write(cache, new, pos, 1).unwrap();
    let other = g.add(cache, w).unwrap();
    g.set_outputs(vec![other]);
    let e = CpuExecutable::new(g).err().expect("refused").to_string();
    assert!(e.contains("in place") && e.contains("readers"), "{e}");
}
