//! The planar row layout of the 32-value quant schemes on the GPU (`RLX_PLANAR=1`).
//!
//! GGUF blocks of Q8_0 / Q4_0 / Q5_0 (34 / 18 / 22 bytes) sit at 2-byte alignment, so the
//! decode GEMV reads a block's quants as 9–17 two-byte loads, each of a warp's loads touching
//! up to 9 cache lines. A weight whose only readers are matrix products is stored instead
//! with each row's blocks regrouped: `[units × quants][units × u32 fifth bits][units ×
//! scales]` (quants 16 bytes a block, Q8_0 32; fifth bits only for Q5_0 / Q5_1; scales an f16
//! d, or d and m for Q4_1 / Q5_1). Same bytes, same row size, so row chunks and offsets are
//! unchanged; a unit's quants become aligned 8-byte words (kernels/quant.cu, `GsUnit<..P>`).
//! The executable packs on upload and unpacks on download, so callers only ever see GGUF
//! bytes.
use rlx_ir::{Graph, Op, QuantScheme};
use std::collections::HashMap;

/// Bytes of one block's (quants, fifth bits, scales) in `s`, for the schemes that have a
/// planar form.
fn parts(s: QuantScheme) -> Option<(usize, usize, usize)> {
    use QuantScheme as Q;
    Some(match s {
        Q::Q8_0 => (32, 0, 2),
        Q::Q4_0 => (16, 0, 2),
        Q::Q4_1 => (16, 0, 4),
        Q::Q5_0 => (16, 4, 2),
        Q::Q5_1 => (16, 4, 4),
        _ => return None,
    })
}

/// Where each part sits inside a GGUF block: (scales, fifth bits, quants).
fn block_offsets(s: QuantScheme) -> (usize, usize, usize) {
    let (_, qh, sc) = parts(s).expect("a planar scheme");
    (0, sc, sc + qh)
}

/// Whether rows of `row_bytes` bytes of `s` may be stored planar: a planar scheme, and rows
/// whose starts stay 8-byte aligned (the kernels read quants as 8-byte words).
pub fn eligible(s: QuantScheme, row_bytes: usize) -> bool {
    parts(s).is_some() && row_bytes > 0 && row_bytes.is_multiple_of(8)
}

/// GGUF rows of `row_bytes` bytes → planar rows (`bytes.len()` a multiple of `row_bytes`).
pub fn pack(s: QuantScheme, bytes: &[u8], row_bytes: usize) -> Vec<u8> {
    convert(s, bytes, row_bytes, true)
}

/// Planar rows → GGUF rows.
pub fn unpack(s: QuantScheme, bytes: &[u8], row_bytes: usize) -> Vec<u8> {
    convert(s, bytes, row_bytes, false)
}

fn convert(s: QuantScheme, bytes: &[u8], row_bytes: usize, to_planar: bool) -> Vec<u8> {
    let (q, qh, sc) = parts(s).expect("a planar scheme");
    let bb = s.block_bytes();
    let units = row_bytes / bb;
    let (o_sc, o_qh, o_q) = block_offsets(s);
    let mut out = vec![0u8; bytes.len()];
    for (src, dst) in bytes
        .chunks_exact(row_bytes)
        .zip(out.chunks_exact_mut(row_bytes))
    {
        for u in 0..units {
            let blk = u * bb;
            // (offset in the block, offset in the planar row, length) of each part.
            let moves = [
                (o_q, u * q, q),
                (o_qh, units * q + u * qh, qh),
                (o_sc, units * (q + qh) + u * sc, sc),
            ];
            for (b, p, n) in moves {
                if to_planar {
                    dst[p..p + n].copy_from_slice(&src[blk + b..blk + b + n]);
                } else {
                    dst[blk + b..blk + b + n].copy_from_slice(&src[p..p + n]);
                }
            }
        }
    }
    out
}

/// The params and constants to store planar (node index → scheme): u8 `[N, row_bytes]`
/// leaves that only DequantMatMul / FusedDequantMatMul read, as their weight, under one
/// eligible scheme with f32 activations, never written in place nor an output
/// (`CudaOptions::planar` decides whether to use it).
pub fn choose(g: &Graph) -> HashMap<usize, QuantScheme> {
    let mut pick: HashMap<usize, Option<QuantScheme>> = HashMap::new();
    for n in &g.nodes {
        let scheme = match &n.op {
            Op::DequantMatMul { scheme } | Op::FusedDequantMatMul { scheme, .. } => Some(*scheme),
            _ => None,
        };
        let written = n.op.written_inputs();
        let x_f32 =
            (n.inputs.first()).is_some_and(|x| g.nodes[x.0].shape.dtype == rlx_ir::DType::F32);
        for (k, i) in n.inputs.iter().enumerate() {
            let as_weight = k == 1 && !written.contains(&k);
            let ok = match scheme {
                Some(s) if as_weight && x_f32 => Some(s),
                _ => None,
            };
            let e = pick.entry(i.0).or_insert(ok);
            if *e != ok {
                *e = None;
            }
        }
    }
    for o in &g.outputs {
        pick.insert(o.0, None);
    }
    pick.into_iter()
        .filter_map(|(i, s)| {
            let s = s?;
            let n = &g.nodes[i];
            let leaf = matches!(n.op, Op::Param { .. } | Op::Constant { .. });
            let dims = n.shape.static_dims()?;
            let fits =
                n.shape.dtype == rlx_ir::DType::U8 && dims.len() == 2 && eligible(s, dims[1]);
            (leaf && fits).then_some((i, s))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::{DType, Shape};
    use rlx_testutil::Rng;

    #[test]
    fn pack_regroups_blocks_and_unpack_restores_them() {
        let mut rng = Rng::new("pack_regroups_blocks_and_unpack_restores_them");
        for s in QuantScheme::ALL.into_iter().filter(|&s| parts(s).is_some()) {
            let units = 4 + 4 * rng.below(5);
            let (rb, rows) = (units * s.block_bytes(), 1 + rng.below(4));
            let bytes: Vec<u8> = (0..rows * rb).map(|_| rng.next_u64() as u8).collect();
            let p = pack(s, &bytes, rb);
            assert_ne!(p, bytes, "{s:?}: packing moved nothing");
            assert_eq!(unpack(s, &p, rb), bytes, "{s:?}: round trip");
            // Spot-check the layout: unit u's quants at u·q, its first scale byte after the
            // quant and fifth-bit planes.
            let (q, qh, sc) = parts(s).unwrap();
            let (o_sc, o_qh, o_q) = block_offsets(s);
            for r in 0..rows {
                for u in 0..units {
                    let (blk, row) = (r * rb + u * s.block_bytes(), r * rb);
                    assert_eq!(
                        p[row + u * q..row + (u + 1) * q],
                        bytes[blk + o_q..blk + o_q + q]
                    );
                    let at = row + units * (q + qh) + u * sc;
                    assert_eq!(p[at..at + sc], bytes[blk + o_sc..blk + o_sc + sc]);
                    let at = row + units * q + u * qh;
                    assert_eq!(p[at..at + qh], bytes[blk + o_qh..blk + o_qh + qh]);
                }
            }
        }
    }

    #[test]
    fn only_weights_read_by_products_alone_are_chosen() {
        let mut g = Graph::new("planar");
        let x = g.input("x", Shape::new(&[1, 128], DType::F32)).unwrap();
        let x64 = g.input("x64", Shape::new(&[1, 64], DType::F32)).unwrap();
        // Q5_0 rows of 128 values: 4 blocks, 88 bytes.
        let wq = g.param("wq", Shape::new(&[8, 88], DType::U8)).unwrap();
        let wshared = g.param("ws", Shape::new(&[8, 88], DType::U8)).unwrap();
        // Q8_0 rows of 64 values: 68 bytes, not a multiple of 8.
        let wodd = g.param("wo", Shape::new(&[8, 68], DType::U8)).unwrap();
        let mm = |g: &mut Graph, x, w, s| {
            g.add_node(Op::DequantMatMul { scheme: s }, &[x, w])
                .unwrap()
        };
        let a = mm(&mut g, x, wq, QuantScheme::Q5_0);
        let b = mm(&mut g, x, wshared, QuantScheme::Q5_0);
        // Also read by another op: must stay in GGUF layout.
        let c = g
            .add_node(
                Op::Dequantize {
                    scheme: QuantScheme::Q5_0,
                },
                &[wshared],
            )
            .unwrap();
        let d = mm(&mut g, x64, wodd, QuantScheme::Q8_0);
        g.set_outputs(vec![a, b, c, d]);
        let got = choose(&g);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got.get(&wq.0), Some(&QuantScheme::Q5_0));
    }
}
