//! The public API exactly as the foundation issue spells it, used from outside the workspace's
//! crates (only `rlx::prelude::*`), so a rename or signature change breaks this test.
use rlx::prelude::*;

fn rng_vals(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

#[test]
fn builder_session_and_run_api() -> Result<(), Error> {
    let mut g = Graph::new("api");
    let x = g.input("x", Shape::new(&[2, 4, 8], DType::F32))?;
    let w = g.param("w", Shape::new(&[8, 8], DType::F32))?;
    let gamma = g.param("gamma", Shape::new(&[8], DType::F32))?;
    let beta = g.param("beta", Shape::new(&[8], DType::F32))?;
    let c = g.constant(HostTensor::from_f32(&[8], &[0.5; 8]))?;
    let h = g.matmul(x, w)?;
    let h = g.add(h, c)?;
    let h = g.sub(h, c)?;
    let h = g.mul(h, c)?;
    let h = g.div(h, c)?;
    let h = g.activation(Activation::Gelu, h)?;
    let h = g.layer_norm(h, gamma, beta, -1, 1e-5)?;
    let h = g.rms_norm(h, gamma, None, -1, 1e-6)?;
    let s = g.softmax(h, -1)?;
    let r = g.reshape(s, &[2, 4, 2, 4])?;
    let t = g.transpose(r, &[0, 2, 1, 3])?;
    let q = g.reshape(t, &[2, 8, 4])?;
    let a = g.attention(q, q, q, None, AttentionSpec::new(2, 2).causal())?;
    let img = g.input("img", Shape::new(&[1, 2, 5, 5], DType::F32))?;
    let k = g.param("k", Shape::new(&[3, 2, 3, 3], DType::F32))?;
    let conv = g.conv2d(img, k, ConvSpec::new([3, 3]).padding([1, 1]))?;
    g.set_outputs(vec![a, conv]);
    println!("{g}");

    let compiled: CompiledGraph = Session::new(Device::Cpu).compile(g)?;
    compiled.set_param("w", &rng_vals(64, 1))?;
    compiled.set_param("gamma", &[1.0; 8])?;
    compiled.set_param_typed("beta", HostTensor::from_f32(&[8], &rng_vals(8, 2)))?;
    compiled.set_param("k", &rng_vals(54, 3))?;
    let xs = rng_vals(64, 4);
    let imgs = rng_vals(50, 5);
    let out: Vec<Vec<f32>> = compiled.run(&[("x", &xs[..]), ("img", &imgs[..])])?;
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].len(), 2 * 8 * 4);
    assert_eq!(out[1].len(), 3 * 25);
    let typed: Vec<HostTensor> = compiled.run_typed(&[
        ("x", HostTensor::from_f32(&[2, 4, 8], &xs)),
        ("img", HostTensor::from_f32(&[1, 2, 5, 5], &imgs)),
    ])?;
    assert_eq!(typed[0].shape, vec![2, 8, 4]);
    assert_eq!(typed[0].to_f32_vec(), out[0]);
    Ok(())
}

#[test]
fn errors_are_std_errors() {
    fn check<E: std::error::Error + Send + Sync + 'static>() {}
    check::<Error>();
    check::<IrError>();
    let e = Session::new(Device::Cuda(0)).compile(Graph::new("empty"));
    assert!(e.is_err());
}

#[test]
fn compare_where_and_stop_gradient_builders() -> Result<(), Error> {
    let mut g = Graph::new("select");
    let a = g.input("a", Shape::new(&[5], DType::F32))?;
    let b = g.input("b", Shape::new(&[5], DType::F32))?;
    let gt = g.compare(CompareOp::Gt, a, b)?;
    let m = g.where_(gt, a, b)?;
    let m = g.stop_gradient(m)?;
    let mx = g.maximum(a, b)?;
    let d = g.sub(m, mx)?;
    g.set_outputs(vec![m, d]);
    let c = Session::new(Device::Cpu).compile(g)?;
    let av = rng_vals(5, 11);
    let bv = rng_vals(5, 12);
    let out = c.run(&[("a", &av), ("b", &bv)])?;
    for i in 0..5 {
        assert_eq!(out[0][i], av[i].max(bv[i]));
        assert_eq!(out[1][i], 0.0);
    }
    Ok(())
}
