//! Finite-difference checks: Conv (stride, padding, dilation, groups, bias, the 1-D form),
//! Pool (max, average with padding), ResizeNearest2x.
mod common;
use common::*;
use rlx_ir::{ConvSpec, Graph, Op, PoolKind, PoolSpec};

#[test]
fn conv_vjp() {
    let mut rng = Rng::new("conv_vjp");
    // (x dims, w dims, spec, bias)
    let cases = [
        ([1, 2, 5, 5], [3, 2, 3, 3], ConvSpec::new([3, 3]), true),
        (
            [2, 2, 6, 5],
            [2, 2, 2, 3],
            ConvSpec::new([2, 3]).stride([2, 1]).padding([1, 1]),
            false,
        ),
        (
            [1, 4, 7, 7],
            [4, 2, 3, 3],
            ConvSpec::new([3, 3])
                .dilation([2, 2])
                .groups(2)
                .padding([1, 0]),
            true,
        ),
        // 1-D form: [N, C, 1, L] with kernel [k, 1], length parameters at index 0.
        (
            [2, 3, 1, 9],
            [2, 3, 3, 1],
            ConvSpec::new([3, 1]).stride([2, 1]).padding([1, 0]),
            true,
        ),
    ];
    for (xd, wd, spec, bias) in cases {
        let mut g = Graph::new("conv");
        let x = f64_input(&mut g, "x", &xd);
        let w = f64_input(&mut g, "w", &wd);
        let b = f64_input(&mut g, "b", &[wd[0]]);
        let mut ins = vec![x, w];
        if bias {
            ins.push(b);
        }
        let y = g.add_node(Op::Conv(spec), &ins).unwrap();
        g.set_outputs(vec![y]);
        gradcheck(
            &format!("conv {xd:?} {wd:?} {spec:?} bias {bias}"),
            &g,
            &[
                ("x", rng.tensor(&xd)),
                ("w", rng.tensor(&wd)),
                ("b", rng.tensor(&[wd[0]])),
            ],
            &ins,
            &mut rng,
        );
    }
}

#[test]
fn pool_and_resize_vjp() {
    let mut rng = Rng::new("pool_and_resize_vjp");
    let specs = [
        PoolSpec {
            kind: PoolKind::Max,
            kernel_size: [2, 2],
            stride: [2, 2],
            padding: [0, 0],
        },
        PoolSpec {
            kind: PoolKind::Max,
            kernel_size: [3, 2],
            stride: [1, 2],
            padding: [1, 1],
        },
        PoolSpec {
            kind: PoolKind::Avg,
            kernel_size: [2, 2],
            stride: [2, 2],
            padding: [0, 0],
        },
        PoolSpec {
            kind: PoolKind::Avg,
            kernel_size: [3, 3],
            stride: [2, 1],
            padding: [1, 1],
        },
    ];
    for spec in specs {
        let xd = [2, 3, 5, 6];
        let mut g = Graph::new("pool");
        let x = f64_input(&mut g, "x", &xd);
        let y = g.add_node(Op::Pool(spec), &[x]).unwrap();
        g.set_outputs(vec![y]);
        // Distinct values spaced apart so max pooling has no near-ties under perturbation.
        let n: usize = xd.iter().product();
        let mut v: Vec<f64> = (0..n).map(|i| i as f64 * 0.05).collect();
        for i in (1..n).rev() {
            v.swap(i, rng.below(i + 1));
        }
        gradcheck(
            &format!("pool {spec:?}"),
            &g,
            &[("x", rlx_ir::HostTensor::from_f64(&xd, &v))],
            &[x],
            &mut rng,
        );
    }
    let mut g = Graph::new("resize");
    let x = f64_input(&mut g, "x", &[1, 2, 3, 4]);
    let y = g.add_node(Op::ResizeNearest2x, &[x]).unwrap();
    let s = g.activation(rlx_ir::Activation::Sin, y).unwrap();
    g.set_outputs(vec![s]);
    gradcheck(
        "resize",
        &g,
        &[("x", rng.tensor(&[1, 2, 3, 4]))],
        &[x],
        &mut rng,
    );
}
