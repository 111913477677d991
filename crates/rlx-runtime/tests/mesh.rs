//! `Mesh` on simulated CPU ranks through the public API: every rank compiles the same
//! graph, `Mesh::run` drives them at once, collectives meet, and a failing rank ends the
//! run with its own error instead of leaving the others waiting.
use rlx_ir::{CollectiveReduce, DType, Graph, HostTensor, Shape};
use rlx_runtime::{Error, Mesh};
use rlx_testutil::{rel_l2, Rng};

fn sum_graph() -> Graph {
    let mut g = Graph::new("sum");
    let x = g.input("x", Shape::new(&[5], DType::F32)).unwrap();
    let y = g.all_reduce(x, CollectiveReduce::Sum).unwrap();
    g.set_outputs(vec![y]);
    g
}

#[test]
fn ranks_of_a_cpu_mesh_all_reduce() {
    let mut rng = Rng::new("ranks_of_a_cpu_mesh_all_reduce");
    for ranks in 1..=4 {
        let mesh = Mesh::parse(&vec!["cpu"; ranks].join(",")).unwrap();
        assert_eq!(mesh.ranks(), ranks);
        assert_eq!(mesh.global_ranks(), (0..ranks).collect::<Vec<_>>());
        let xs: Vec<Vec<f64>> = (0..ranks).map(|_| rng.normals(5)).collect();
        let g = sum_graph();
        let outs = mesh
            .run(|r, s| -> Result<Vec<f64>, Error> {
                let c = s.compile(&g)?;
                let x = HostTensor::from_f64_as(&[5], &xs[r], DType::F32);
                Ok(c.run_typed(&[("x", x)])?[0].to_f64_vec())
            })
            .unwrap();
        // The f32 inputs summed in f64, rounded once.
        let want: Vec<f64> = (0..5)
            .map(|i| xs.iter().map(|x| x[i] as f32 as f64).sum::<f64>() as f32 as f64)
            .collect();
        for o in &outs {
            assert!(rel_l2(o, &want) < 1e-7);
        }
    }
}

#[test]
fn a_failing_rank_ends_the_run_with_its_error() {
    let mesh = Mesh::cpu(3).unwrap();
    let g = sum_graph();
    let e = mesh
        .run(|r, s| -> Result<Vec<f64>, Error> {
            let c = s.compile(&g)?;
            // Rank 2 feeds a wrong shape: its run fails before the collective.
            let n = if r == 2 { 4 } else { 5 };
            let x = HostTensor::from_f32(&[n], &vec![1.0; n]);
            Ok(c.run_typed(&[("x", x)])?[0].to_f64_vec())
        })
        .unwrap_err();
    assert!(e.to_string().contains("\"x\""), "{e}");
}

#[test]
fn bad_device_lists_are_errors() {
    for spec in ["", "cpu,tpu", "cpu*x", "cpu,cuda:0", "cpu*0"] {
        assert!(Mesh::parse(spec).is_err(), "{spec}");
    }
    assert_eq!(Mesh::parse("cpu*3").unwrap().ranks(), 3);
}
