use rlx_cpu::quant::{act_format, matmul_q8, matvec, Q8Act};
use rlx_ir::QuantScheme as S;
fn f32s(p: &str) -> Vec<f32> { std::fs::read(p).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect() }
fn main() {
    let (n, k, m) = (37, 768, 3);
    for (name, s) in [("Q4_0", S::Q4_0), ("Q4_1", S::Q4_1), ("Q5_0", S::Q5_0), ("Q5_1", S::Q5_1), ("Q8_0", S::Q8_0), ("Q4_K", S::Q4_K), ("Q5_K", S::Q5_K), ("Q6_K", S::Q6_K)] {
        let d = "/tmp/ggmlcmp/";
        let w = std::fs::read(format!("{d}{name}.w")).unwrap();
        let x = f32s(&format!("{d}{name}.x"));
        let y = f32s(&format!("{d}{name}.y"));
        let xq = std::fs::read(format!("{d}{name}.xq")).unwrap();
        let mut o = vec![0f32; m * n];
        matmul_q8(s, &w, n, k, &x, &mut o).unwrap();
        let mut f = vec![0f32; m * n];
        matvec(s, &w, n, k, &x, &mut f).unwrap();
        let a = Q8Act::quantize(act_format(s).unwrap(), &x, k).unwrap();
        // compare quants
        let (bl, bb) = if a.format().block_len() == 256 { (256, 292) } else if name.ends_with("_1") { (32, 36) } else { (32, 34) };
        let mut qdiff = 0; let mut ddiff = 0;
        for b in 0..m * k / bl {
            let blk = &xq[b * bb..(b + 1) * bb];
            let (dd, qs) = if bl == 256 { (f32::from_le_bytes(blk[0..4].try_into().unwrap()), &blk[4..260]) } else { (half::f16::from_le_bytes([blk[0], blk[1]]).to_f32(), &blk[if bb == 36 { 4 } else { 2 }..][..32]) };
            if dd != a.d()[b] { ddiff += 1; }
            for j in 0..bl { if qs[j] as i8 != a.qs()[b * bl + j] { qdiff += 1; } }
        }
        let rel = |u: &[f32]| { let (mut e, mut r) = (0f64, 0f64); for (a, b) in u.iter().zip(&y) { e += ((a - b) as f64).powi(2); r += (*b as f64).powi(2); } (e / r).sqrt() };
        println!("{name}: d diffs {ddiff}, q diffs {qdiff}; rel-L2 vs ggml: q8 {:.2e}  f32 {:.2e}", rel(&o), rel(&f));
    }
}
