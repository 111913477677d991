//! On-GPU check of the shape lowering that needs no executor: each graph is lowered node by
//! node and its steps run eagerly on the legacy stream, then compared with the CPU reference
//! (data movement bit-exact, Rope by rel-L2). Skips without a GPU.
use crate::device::{DevBuf, Gpu, StreamSet};
use crate::lower::{lower_node, DevTensor, NodeCtx};
use crate::plan::{LowerEnv, Step};
use crate::precision::Precision;
use cudarc::driver::result as drv;
use rlx_cpu::CpuExecutable;
use rlx_ir::{DType, Dim, Graph, HostTensor, NodeId, Op, RopeStyle, Shape, TransformStep};
use rlx_testutil::{rel_l2, Rng};
use std::ffi::c_void;

type Feeds = Vec<(String, HostTensor)>;

fn run_gpu(g: &Graph, feeds: &Feeds) -> Vec<HostTensor> {
    let gpu = Gpu::get(0).expect("gpu");
    let streams = StreamSet::new(&gpu).expect("streams");
    let mut env = LowerEnv::new(gpu.clone(), &streams);
    let mut bufs: Vec<DevBuf> = Vec::new();
    let mut devs: Vec<DevTensor> = Vec::new();
    for node in &g.nodes {
        let dims = node.shape.static_dims().expect("static");
        let dtype = node.shape.dtype;
        let n: usize = dims.iter().product();
        let buf = DevBuf::new(&gpu, n * dtype.size_bytes()).expect("alloc");
        let out = DevTensor {
            ptr: buf.ptr,
            dims,
            dtype,
        };
        match &node.op {
            Op::Input { name } => {
                let t = &feeds.iter().find(|f| &f.0 == name).expect("feed").1;
                // SAFETY: buf holds exactly t.data.len() bytes.
                unsafe { drv::memcpy_htod_sync(buf.ptr, &t.data) }.expect("htod");
            }
            _ => {
                let ins = node.inputs.iter().map(|i| devs[i.0].clone()).collect();
                let mut ctx = NodeCtx {
                    node,
                    ins,
                    out: out.clone(),
                    precision: Precision::F32,
                    env: &mut env,
                };
                if let Err(e) = lower_node(&mut ctx) {
                    panic!("node {} ({}) bailed: {}", node.id, node.op.kind(), e.0);
                }
                for step in env.steps.drain(..) {
                    // SAFETY: pointers are live device buffers of this test; the args match
                    // the kernel signature (that is what is under test).
                    unsafe {
                        match step {
                            Step::Kernel(l) => {
                                let mut ps: Vec<*mut c_void> = l
                                    .args
                                    .vals
                                    .iter()
                                    .map(|v| v.as_ptr() as *mut c_void)
                                    .collect();
                                let (g3, b3) = (l.grid, l.block);
                                drv::launch_kernel(
                                    l.func.0,
                                    (g3[0], g3[1], g3[2]),
                                    (b3[0], b3[1], b3[2]),
                                    l.smem,
                                    std::ptr::null_mut(),
                                    &mut ps,
                                )
                                .unwrap_or_else(|e| panic!("{}: {e:?}", l.label));
                            }
                            Step::Copy { dst, src, bytes } => {
                                drv::memcpy_dtod_sync(dst, src, bytes).expect("dtod")
                            }
                            Step::Memset { dst, bytes } => {
                                drv::memset_d8_sync(dst, 0, bytes).expect("memset")
                            }
                            _ => panic!("unexpected step"),
                        }
                    }
                }
                drv::ctx::synchronize().expect("kernel failed");
            }
        }
        bufs.push(buf);
        devs.push(out);
    }
    g.outputs
        .iter()
        .map(|o| {
            let t = &devs[o.0];
            let mut data = vec![0u8; t.bytes()];
            // SAFETY: the buffer holds t.bytes() bytes.
            unsafe { drv::memcpy_dtoh_sync(&mut data, t.ptr) }.expect("dtoh");
            HostTensor::new(&t.dims, t.dtype, data).expect("tensor")
        })
        .collect()
}

fn check(name: &str, g: &Graph, feeds: &Feeds, exact: bool) {
    let got = run_gpu(g, feeds);
    let refs: Vec<(&str, HostTensor)> =
        feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let want = CpuExecutable::new(g.clone())
        .expect("cpu")
        .run(&refs)
        .expect("cpu run");
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.shape, b.shape, "{name}: shape");
        if exact {
            assert!(a.data == b.data, "{name}: bytes differ");
        } else {
            let e = rel_l2(&a.to_f64_vec(), &b.to_f64_vec());
            assert!(e < 1e-5, "{name}: rel-L2 {e:e}");
        }
    }
    eprintln!("ok {name}");
}

struct B {
    g: Graph,
    feeds: Feeds,
}

impl B {
    fn new() -> B {
        B {
            g: Graph::new("t"),
            feeds: vec![],
        }
    }
    fn input(&mut self, rng: &mut Rng, dims: &[usize], dtype: DType) -> NodeId {
        let name = format!("x{}", self.feeds.len());
        let n = dims.iter().product();
        let vals: Vec<f64> = if dtype.is_float() {
            rng.normals(n)
        } else {
            (0..n).map(|_| rng.below(200) as f64).collect()
        };
        let id = self.g.input(&name, Shape::new(dims, dtype)).unwrap();
        self.feeds
            .push((name, HostTensor::from_f64_as(dims, &vals, dtype)));
        id
    }
    fn idx(&mut self, vals: Vec<f64>, dims: &[usize], dtype: DType) -> NodeId {
        let name = format!("x{}", self.feeds.len());
        let id = self.g.input(&name, Shape::new(dims, dtype)).unwrap();
        self.feeds
            .push((name, HostTensor::from_f64_as(dims, &vals, dtype)));
        id
    }
    fn go(mut self, name: &str, out: NodeId, exact: bool) {
        self.g.set_outputs(vec![out]);
        check(name, &self.g, &self.feeds, exact);
    }
}

const MOVERS: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I64,
    DType::I32,
    DType::U8,
];

#[test]
fn shape_ops_on_gpu() {
    if crate::check_available(0).is_err() {
        eprintln!("skipping: no GPU");
        return;
    }
    let mut rng = Rng::new("shape_ops_on_gpu");
    let perms: &[(&[usize], &[usize])] = &[
        (&[33, 65], &[1, 0]),
        (&[7, 33, 129], &[0, 2, 1]),
        (&[2, 9, 5, 16], &[0, 2, 1, 3]),
        (&[3, 5, 7, 11], &[3, 1, 0, 2]),
        (&[2, 3, 4, 5, 6], &[4, 2, 0, 3, 1]),
        (&[1, 300, 3], &[2, 0, 1]),
        (&[4, 3, 2], &[2, 1, 0]),
    ];
    for dt in MOVERS {
        for (dims, perm) in perms {
            let mut b = B::new();
            let x = b.input(&mut rng, dims, dt);
            let y = b.g.transpose(x, perm).unwrap();
            b.go(&format!("transpose {dims:?} {perm:?} {dt}"), y, true);
        }
        let mut b = B::new();
        let x = b.input(&mut rng, &[5, 1, 7], dt);
        let y = b.g.expand_to(x, &[3, 5, 4, 7]).unwrap();
        b.go(&format!("expand {dt}"), y, true);
        let mut b = B::new();
        let x = b.input(&mut rng, &[33, 1], dt);
        let y = b.g.expand_to(x, &[33, 65]).unwrap();
        b.go(&format!("expand last {dt}"), y, true);
        let mut b = B::new();
        let x = b.input(&mut rng, &[6, 40, 9], dt);
        let y = b.g.narrow(x, -2, 3, 30).unwrap();
        b.go(&format!("narrow {dt}"), y, true);
        let mut b = B::new();
        let x = b.input(&mut rng, &[6, 40, 9], dt);
        let y =
            b.g.slice(x, &[-1, 0, 1], &[100, 1, -3], &[-100, 6, 2], &[-2, 2, -5])
                .unwrap();
        b.go(&format!("slice {dt}"), y, true);
        let mut b = B::new();
        let xs: Vec<NodeId> = [3usize, 1, 17]
            .iter()
            .map(|&m| b.input(&mut rng, &[4, m, 7], dt))
            .collect();
        let y = b.g.concat(&xs, 1).unwrap();
        b.go(&format!("concat {dt}"), y, true);
        let mut b = B::new();
        let x = b.input(&mut rng, &[3, 5, 7], dt);
        let y =
            b.g.pad(x, vec![[1, 0], [0, 2], [3, 4]], f64::NEG_INFINITY)
                .unwrap();
        b.go(&format!("pad {dt}"), y, true);
        for it in [DType::I64, DType::I32, DType::F32] {
            let mut b = B::new();
            let x = b.input(&mut rng, &[9, 6, 5], dt);
            let vals: Vec<f64> = (0..14).map(|_| rng.below(12) as f64 - 6.0).collect();
            let i = b.idx(vals, &[2, 7], it);
            let y = b.g.gather(x, i, -2).unwrap();
            b.go(&format!("gather {dt} idx {it}"), y, true);
        }
        let mut b = B::new();
        let x = b.input(&mut rng, &[4, 6, 5], dt);
        let steps = vec![
            TransformStep::Transpose(vec![1, 0, 2]),
            TransformStep::Reshape(vec![6, -1]),
            TransformStep::Narrow {
                axis: 1,
                start: 2,
                len: 15,
            },
            TransformStep::Expand(vec![Dim::Static(2), Dim::Static(6), Dim::Static(15)]),
        ];
        let y = b.g.transform_region(x, steps).unwrap();
        b.go(&format!("region {dt}"), y, true);
    }
    // Big cases, one per kernel family.
    let mut b = B::new();
    let x = b.input(&mut rng, &[4, 1031, 1029], DType::F32);
    let y = b.g.transpose(x, &[0, 2, 1]).unwrap();
    b.go("big transpose", y, true);
    let mut b = B::new();
    let x = b.input(&mut rng, &[2, 2048, 16, 64], DType::BF16);
    let y = b.g.transpose(x, &[0, 2, 1, 3]).unwrap();
    b.go("big bshd->bhsd", y, true);
    let mut b = B::new();
    let x = b.input(&mut rng, &[32000, 256], DType::F16);
    let vals: Vec<f64> = (0..4 * 1000).map(|_| rng.below(32000) as f64).collect();
    let i = b.idx(vals, &[4, 1000], DType::I64);
    let y = b.g.gather(x, i, 0).unwrap();
    b.go("big embedding", y, true);
    let mut b = B::new();
    let x = b.input(&mut rng, &[64, 3, 255, 255], DType::F32);
    let y =
        b.g.pad(x, vec![[0, 0], [0, 0], [1, 1], [2, 1]], 0.5)
            .unwrap();
    b.go("big pad", y, true);
    let mut b = B::new();
    let x = b.input(&mut rng, &[3000, 1500], DType::F32);
    let y =
        b.g.slice(x, &[0, 1], &[-1, 0], &[-4000, 1500], &[-1, 3])
            .unwrap();
    b.go("big slice", y, true);
    for style in [RopeStyle::Half, RopeStyle::Interleaved] {
        for (xd, cd, hd, nr) in [
            (
                vec![2usize, 7, 3, 64],
                vec![7usize, 1, 32],
                64usize,
                64usize,
            ),
            (vec![2, 7, 3 * 16], vec![7, 1, 4], 16, 8),
            (vec![2, 3, 9, 32], vec![9, 16], 32, 32),
            (vec![4, 1024, 8 * 128], vec![1024, 1, 48], 128, 96),
        ] {
            for dt in [DType::F32, DType::F16, DType::BF16] {
                let mut b = B::new();
                let x = b.input(&mut rng, &xd, dt);
                let c = b.input(&mut rng, &cd, DType::F32);
                let s = b.input(&mut rng, &cd, DType::F32);
                let y = b.g.rope(x, c, s, hd, nr, style).unwrap();
                b.go(&format!("rope {style:?} {xd:?} {dt}"), y, true);
            }
        }
    }
}
