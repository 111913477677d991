//! One compiled graph shared by several threads: runs give what sequential runs give, param
//! updates stay whole, and binding mistakes found once (by the session) are typed errors.
use rlx_ir::{Activation, DType, Dim, Graph, HostTensor, Shape};
use rlx_runtime::{CompiledGraph, Device, Error, Session};
use rlx_testutil::Rng;
use std::sync::Barrier;

fn graph() -> Graph {
    let mut g = Graph::new("shared");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), 32.into()], DType::F32),
        )
        .unwrap();
    let w = g.param("w", Shape::new(&[32, 32], DType::F32)).unwrap();
    let mut h = x;
    for _ in 0..4 {
        h = g.matmul(h, w).unwrap();
        h = g.activation(Activation::Tanh, h).unwrap();
    }
    g.set_outputs(vec![h]);
    g
}

fn f32s(rng: &mut Rng, n: usize, r: f64) -> Vec<f32> {
    rng.uniforms(n, -r, r)
        .into_iter()
        .map(|v| v as f32)
        .collect()
}

fn compiled(rng: &mut Rng) -> CompiledGraph {
    let c = Session::new(Device::Cpu).compile(graph()).unwrap();
    c.set_param("w", &f32s(rng, 32 * 32, 0.3)).unwrap();
    c
}

#[test]
fn threads_running_one_graph_get_sequential_results() {
    let mut rng = Rng::new("threads_running_one_graph_get_sequential_results");
    let c = compiled(&mut rng);
    const THREADS: usize = 4;
    const RUNS: usize = 8;
    let xs: Vec<HostTensor> = (0..THREADS * RUNS)
        .map(|_| HostTensor::from_f32(&[16, 32], &f32s(&mut rng, 16 * 32, 1.0)))
        .collect();
    let want: Vec<Vec<HostTensor>> = xs
        .iter()
        .map(|x| c.run_typed(&[("x", x.clone())]).unwrap())
        .collect();
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (c, xs, want, barrier) = (&c, &xs, &want, &barrier);
            s.spawn(move || {
                barrier.wait();
                for r in 0..RUNS {
                    let k = t * RUNS + r;
                    let got = c.run_typed(&[("x", xs[k].clone())]).unwrap();
                    assert_eq!(got, want[k], "thread {t} run {r}");
                }
            });
        }
    });
}

#[test]
fn inconsistent_dynamic_dims_are_named() {
    let mut g = Graph::new("two");
    let d = || Shape::with_dims(vec![Dim::dynamic("B"), 2.into()], DType::F32);
    let a = g.input("a", d()).unwrap();
    let b = g.input("b", d()).unwrap();
    let s = g.add(a, b).unwrap();
    g.set_outputs(vec![s]);
    let c = Session::new(Device::Cpu).compile(g).unwrap();
    let e = c
        .run(&[("a", vec![1.0f32; 4]), ("b", vec![1.0f32; 6])])
        .unwrap_err();
    assert!(
        matches!(&e, Error::InconsistentDim { name, symbol, got: 3, bound: 2, bound_by } if name == "b" && symbol == "B" && bound_by == "a"),
        "{e}"
    );
    assert_eq!(
        c.run(&[("a", vec![1.0f32; 4]), ("b", vec![2.0f32; 4])])
            .unwrap()[0],
        vec![3.0; 4]
    );
}

#[test]
fn duplicate_param_names_fail_at_compile() {
    let mut g = Graph::new("dup");
    let x = g.input("x", Shape::new(&[2], DType::F32)).unwrap();
    let p = g.param("w", Shape::new(&[2], DType::F32)).unwrap();
    let q = g.param("w2", Shape::new(&[2], DType::F32)).unwrap();
    let s = g.add(x, p).unwrap();
    let s = g.add(s, q).unwrap();
    g.set_outputs(vec![s]);
    // The builder refuses a second "w"; a loaded or hand-edited graph can still carry one.
    g.nodes[q.0].op = rlx_ir::Op::Param { name: "w".into() };
    g.nodes[q.0].name = Some("w".into());
    let e = Session::new(Device::Cpu)
        .compile(g)
        .err()
        .expect("must fail");
    // The verifier catches it first and names both nodes.
    assert!(
        matches!(
            &e,
            Error::Ir(rlx_ir::IrError::DuplicateName { kind: rlx_ir::OpKind::Param, name, first, second })
                if name == "w" && *first == p && *second == q
        ),
        "{e:?}"
    );
}

#[test]
fn arena_beyond_memory_is_a_typed_error_not_an_abort() {
    // Constant → Expand to 2^45 f32 values (128 TiB): the run must fail at once with the
    // size asked, and the process (and the compiled graph) live on.
    let mut g = Graph::new("huge");
    let c = g.constant_f32(&[1], &[2.0]).unwrap();
    let e = g.expand_to(c, &[1 << 25, 1 << 20]).unwrap();
    g.set_outputs(vec![e]);
    let c = Session::new(Device::Cpu).compile(g).unwrap();
    let none: [(&str, &[f32]); 0] = [];
    let err = c.run(&none).unwrap_err();
    assert!(
        matches!(&err, Error::Cpu(rlx_cpu::CpuError::Alloc { requested, .. }) if *requested >= 1u128 << 47),
        "{err}"
    );
    assert!(err.to_string().contains("128.0 TiB"), "{err}");
}
