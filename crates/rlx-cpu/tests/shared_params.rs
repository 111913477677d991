//! `CpuExecutable::set_param_shared`: packed weights kept as a range of bytes owned
//! elsewhere (a mapped model file) compute exactly what an owned copy computes, and are
//! checked against the param like any other value.
use rlx_cpu::CpuExecutable;
use rlx_ir::{BindError, ByteOwner, DType, Graph, HostTensor, Shape, SharedBytes};
use rlx_testutil::cases::linalg::{random_packed, SCHEMES};
use rlx_testutil::Rng;
use std::sync::Arc;

fn graph(m: usize, k: usize, n: usize, rb: usize, scheme: rlx_ir::QuantScheme) -> Graph {
    let mut g = Graph::new("dq");
    let xi = g.input("x", Shape::new(&[m, k], DType::F32)).unwrap();
    let wi = g.param("w", Shape::new(&[n, rb], DType::U8)).unwrap();
    let y = g.dequant_matmul(xi, wi, scheme).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn shared_weights_compute_what_owned_ones_do() {
    let mut rng = Rng::new("shared_weights_compute_what_owned_ones_do");
    for scheme in SCHEMES {
        let bl = scheme.block_len();
        let (k, n) = (bl * (1 + rng.below(3)), 1 + rng.below(40));
        let rb = k / bl * scheme.block_bytes();
        let w = random_packed(&mut rng, scheme, n, k);
        // The weight sits inside a larger "file", at an offset that is not a block boundary.
        let at = 1 + rng.below(64);
        let mut file: Vec<u8> = (0..at).map(|_| rng.below(256) as u8).collect();
        file.extend_from_slice(&w);
        file.extend((0..1 + rng.below(64)).map(|_| rng.below(256) as u8));
        let owner: ByteOwner = Arc::new(file);
        let shared = SharedBytes::new(owner, at..at + w.len()).unwrap();
        for m in [1, 5] {
            let g = graph(m, k, n, rb, scheme);
            let x: Vec<f32> = rng.normals(m * k).iter().map(|&v| v as f32).collect();
            let xt = HostTensor::from_f32(&[m, k], &x);
            let mut owned = CpuExecutable::new(g.clone()).unwrap();
            owned
                .set_param(
                    "w",
                    &HostTensor::new(&[n, rb], DType::U8, w.clone()).unwrap(),
                )
                .unwrap();
            let mut mapped = CpuExecutable::new(g).unwrap();
            mapped
                .set_param_shared("w", &[n, rb], shared.clone())
                .unwrap();
            let a = owned.run(&[("x", xt.clone())]).unwrap()[0].to_f32_vec();
            let b = mapped.run(&[("x", xt)]).unwrap()[0].to_f32_vec();
            assert_eq!(a, b, "{scheme:?} m {m}");
            assert!(
                a.iter().any(|&v| v != 0.0),
                "{scheme:?}: a product of zeros"
            );
            assert_eq!(mapped.param_value("w").unwrap().data, w, "{scheme:?}");
        }
    }
}

#[test]
fn shared_weights_are_checked_against_the_param() {
    let scheme = rlx_ir::QuantScheme::Q8_0;
    let (k, n) = (64, 3);
    let rb = k / 32 * scheme.block_bytes();
    let exe = CpuExecutable::new(graph(1, k, n, rb, scheme)).unwrap();
    let owner: ByteOwner = Arc::new(vec![7u8; n * rb + 10]);
    let bytes = |len: usize| SharedBytes::new(owner.clone(), 0..len).unwrap();
    let e = exe
        .set_param_shared("w", &[n, rb], bytes(n * rb - 1))
        .unwrap_err();
    assert!(
        matches!(e, rlx_cpu::CpuError::Bind(BindError::WrongLength { .. })),
        "{e}"
    );
    let e = exe
        .set_param_shared("w", &[n + 1, rb], bytes(n * rb))
        .unwrap_err();
    assert!(
        matches!(e, rlx_cpu::CpuError::Bind(BindError::WrongShape { .. })),
        "{e}"
    );
    let e = exe.set_param_shared("x", &[1, k], bytes(k)).unwrap_err();
    assert!(e.to_string().contains('x'), "{e}");
    exe.set_param_shared("w", &[n, rb], bytes(n * rb)).unwrap();
}
