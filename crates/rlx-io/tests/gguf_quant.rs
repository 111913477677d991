//! Real quantised tensors: a few Q8_0 and Q4_1 tensors of the SmolLM2 GGUF (from
//! `scripts/fetch_models.sh`; skipped with a message when absent) dequantised by rlx-cpu
//! and by the tests' own f64 reading of ggml's block layouts (rlx-testutil's
//! `quant_oracle`), which must agree to the bit. Every tensor of the file must also be a
//! plain f32 or map to a `QuantScheme`.
use rlx_io::gguf::{GgmlType, Gguf};
use rlx_ir::QuantScheme;
use rlx_testutil::cases::quant_oracle::unpack;

#[test]
fn smollm2_quantised_tensors_match_the_block_oracle() {
    let Some(path) = rlx_io::model_cache().map(|d| d.join("gguf/SmolLM2-135M-Instruct.Q4_1.gguf"))
    else {
        eprintln!("skipped: no model cache directory can be named (set RLX_CACHE)");
        return;
    };
    if !path.exists() {
        eprintln!(
            "skipped: {} is absent (run scripts/fetch_models.sh)",
            path.display()
        );
        return;
    }
    let g = Gguf::open(&path).unwrap();
    for t in g.tensors() {
        let ty = t.ggml_type().unwrap();
        assert!(
            ty == GgmlType::F32 || QuantScheme::try_from(ty).is_ok(),
            "{}: {ty} has no QuantScheme",
            t.name()
        );
    }
    let mut checked = vec![];
    let names = [
        "token_embd.weight",
        "blk.0.attn_q.weight",
        "blk.0.ffn_down.weight",
        "blk.29.ffn_gate.weight",
    ];
    for name in names {
        let t = g.tensor(name).unwrap();
        let ty = t.ggml_type().unwrap();
        let scheme = QuantScheme::try_from(ty).unwrap();
        // ggml's dims are innermost first: [cols, rows].
        let dims = t.ggml_dims();
        let (cols, all_rows) = (dims[0] as usize, dims[1] as usize);
        let rows = all_rows.min(256);
        let rb = cols / scheme.block_len() * scheme.block_bytes();
        let bytes = &g.tensor_data(t).unwrap()[..rows * rb];
        let got = rlx_cpu::quant::dequantize(scheme, bytes, rows, cols).unwrap();
        let want = unpack(scheme, bytes, rows, cols);
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(a as f64, b, "{name} ({ty}) element {i}");
        }
        // Trained weights, not garbage: finite, O(0.01..1) RMS, not all one value.
        let rms = (want.iter().map(|v| v * v).sum::<f64>() / want.len() as f64).sqrt();
        assert!(want.iter().all(|v| v.is_finite()), "{name}");
        assert!((1e-3..10.0).contains(&rms), "{name}: rms {rms}");
        checked.push(format!(
            "{name} {ty} [{rows} of {all_rows}, {cols}] rms {rms:.4}"
        ));
    }
    assert!(
        checked.iter().any(|c| c.contains("Q8_0")) && checked.iter().any(|c| c.contains("Q4_1"))
    );
    println!("{}", checked.join("\n"));
}
