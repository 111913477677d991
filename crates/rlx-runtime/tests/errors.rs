//! Every runtime error a user can trigger is a typed error naming the tensor — never a panic.
use rlx_ir::{Activation, DType, Dim, Graph, HostTensor, Shape};
use rlx_runtime::{CompiledGraph, Device, Error, Session};

fn graph() -> Graph {
    let mut g = Graph::new("errors");
    let x = g.input("x", Shape::new(&[2, 3], DType::F32)).unwrap();
    let w = g.param("w", Shape::new(&[2, 3], DType::F32)).unwrap();
    let y = g.mul(x, w).unwrap();
    let y = g.activation(Activation::Exp, y).unwrap();
    g.set_outputs(vec![y]);
    g
}

fn compiled() -> CompiledGraph {
    Session::new(Device::Cpu).compile(graph()).unwrap()
}

#[test]
fn api_types_are_send_sync_errors() {
    fn check<T: Send + Sync>() {}
    check::<CompiledGraph>();
    check::<Error>();
    fn is_error<T: std::error::Error + Send + Sync + 'static>() {}
    is_error::<Error>();
    is_error::<rlx_ir::IrError>();
    is_error::<rlx_cpu::CpuError>();
}

#[test]
fn runs_and_matches_oracle() {
    let c = compiled();
    let x = [0.5f32, -1.0, 0.25, 2.0, -0.75, 1.5];
    let w = [1.25f32, 0.5, -2.0, 0.1, 0.3, -0.6];
    c.set_param("w", &w).unwrap();
    let out = c.run(&[("x", &x)]).unwrap();
    for i in 0..6 {
        let want = (x[i] as f64 * w[i] as f64).exp();
        assert!(((out[0][i] as f64) - want).abs() <= 1e-6 * want.abs());
    }
}

#[test]
fn unknown_input_is_named() {
    let c = compiled();
    c.set_param("w", &[1.0; 6]).unwrap();
    let e = c
        .run(&[("x", &[1.0f32; 6][..]), ("nope", &[1.0f32; 6][..])])
        .unwrap_err();
    assert!(
        matches!(&e, Error::UnknownInput { name, .. } if name == "nope"),
        "{e}"
    );
    assert!(e.to_string().contains("nope"));
}

#[test]
fn missing_input_is_named() {
    let c = compiled();
    c.set_param("w", &[1.0; 6]).unwrap();
    let none: [(&str, &[f32]); 0] = [];
    let e = c.run(&none).unwrap_err();
    assert!(
        matches!(&e, Error::MissingInput { name, .. } if name == "x"),
        "{e}"
    );
}

#[test]
fn duplicate_input_is_rejected() {
    let c = compiled();
    c.set_param("w", &[1.0; 6]).unwrap();
    let e = c
        .run(&[("x", [1.0f32; 6]), ("x", [1.0f32; 6])])
        .unwrap_err();
    assert!(
        matches!(&e, Error::DuplicateInput { name } if name == "x"),
        "{e}"
    );
}

#[test]
fn wrong_length_is_named() {
    let c = compiled();
    c.set_param("w", &[1.0; 6]).unwrap();
    let e = c.run(&[("x", vec![1.0f32; 5])]).unwrap_err();
    assert!(
        matches!(&e, Error::WrongLength { name, expected: 6, got: 5, .. } if name == "x"),
        "{e}"
    );
    let e = c.set_param("w", &[1.0; 7]).unwrap_err();
    assert!(
        matches!(&e, Error::WrongLength { name, .. } if name == "w"),
        "{e}"
    );
}

#[test]
fn unset_and_unknown_params_are_named() {
    let c = compiled();
    let e = c.run(&[("x", [1.0f32; 6])]).unwrap_err();
    assert!(
        matches!(&e, Error::ParamNotSet { name } if name == "w"),
        "{e}"
    );
    let e = c.set_param("bias", &[1.0]).unwrap_err();
    assert!(
        matches!(&e, Error::UnknownParam { name, .. } if name == "bias"),
        "{e}"
    );
}

#[test]
fn dtype_and_shape_mismatches_are_named() {
    let c = compiled();
    c.set_param("w", &[1.0; 6]).unwrap();
    let t = HostTensor::from_f64(&[2, 3], &[1.0; 6]);
    let e = c.run_typed(&[("x", t)]).unwrap_err();
    assert!(
        matches!(&e, Error::WrongDtype { name, expected: DType::F32, got: DType::F64, .. } if name == "x"),
        "{e}"
    );
    let t = HostTensor::from_f32(&[3, 2], &[1.0; 6]);
    let e = c.run_typed(&[("x", t)]).unwrap_err();
    assert!(
        matches!(&e, Error::WrongShape { name, .. } if name == "x"),
        "{e}"
    );
    let t = HostTensor::from_f16(&[2, 3], &[half::f16::ONE; 6]);
    let e = c.set_param_typed("w", t).unwrap_err();
    assert!(
        matches!(&e, Error::WrongDtype { name, .. } if name == "w"),
        "{e}"
    );
}

#[test]
fn cuda_without_backend_is_a_clear_error() {
    let e = Session::new(Device::Cuda(0))
        .compile(graph())
        .err()
        .expect("must fail");
    assert!(
        matches!(&e, Error::DeviceUnavailable { device, .. } if device == "cuda:0"),
        "{e}"
    );
}

#[test]
fn invalid_graph_is_rejected_at_compile() {
    let mut g = graph();
    g.nodes[3].inputs = vec![rlx_ir::NodeId(5)];
    let e = Session::new(Device::Cpu)
        .compile(&g)
        .err()
        .expect("must fail");
    assert!(e.to_string().contains("%3"), "{e}");
}

#[test]
fn dynamic_batch_binds_from_flat_and_typed_inputs() {
    let mut g = Graph::new("dyn");
    let x = g
        .input(
            "x",
            Shape::with_dims(vec![Dim::dynamic("B"), Dim::Static(4)], DType::F32),
        )
        .unwrap();
    let y = g.activation(Activation::Neg, x).unwrap();
    g.set_outputs(vec![y]);
    let c = Session::new(Device::Cpu).compile(g).unwrap();
    let a = c.run(&[("x", vec![1.0f32; 8])]).unwrap();
    assert_eq!(a[0], vec![-1.0; 8]);
    let b = c
        .run_typed(&[("x", HostTensor::from_f32(&[3, 4], &[2.0; 12]))])
        .unwrap();
    assert_eq!(b[0].shape, vec![3, 4]);
    assert_eq!(b[0].to_f32_vec(), vec![-2.0; 12]);
    let e = c.run(&[("x", vec![1.0f32; 7])]).unwrap_err();
    assert!(
        matches!(&e, Error::Unbindable { name, .. } if name == "x"),
        "{e}"
    );
}
