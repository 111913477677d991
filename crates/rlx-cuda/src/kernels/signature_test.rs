//! Host-only check that every family function packs the arguments its kernel declares: the
//! `extern "C" __global__` declarations are parsed from the `.cu` text (macro templates
//! included, `##` pieces matched as wildcards) and each parameter's size is compared with
//! the size of the value the Rust function packed at that position. A swapped `int` and
//! `i64`, a missing or extra argument, or a name that no declaration produces fails here.
use super::{
    attention, audio, linalg, norm, quant, reduce, shape_ops, vision, Kernel, Lib, Sfx, Unit,
};
use crate::lower::Dims8;

/// One declaration: its name template split at `##` (`None` = a macro parameter) and the
/// byte size of each parameter.
#[derive(Debug)]
struct Decl {
    pieces: Vec<Option<String>>,
    /// `None` when a parameter has a type this test does not know.
    sizes: Option<Vec<usize>>,
}

/// The byte size of a parameter type as the kernels spell it; struct parameters by their
/// Rust mirror's size (`None` for a struct without one).
fn param_size(ty: &str, structs: &[(&str, usize)]) -> Option<usize> {
    let ty = ty.trim();
    if ty.contains('*') {
        return Some(8);
    }
    let base = ty.trim_start_matches("const ").trim();
    match base {
        "int" | "float" | "u32" | "unsigned" | "unsigned int" => Some(4),
        "i64" | "u64" | "long long" | "int64_t" | "double" | "unsigned long long" => Some(8),
        "Dims8" => Some(std::mem::size_of::<Dims8>()),
        other => structs.iter().find(|(n, _)| *n == other).map(|(_, s)| *s),
    }
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The `#define NAME(params)` whose (continued) line holds byte `at` of `text`, if any.
fn enclosing_define(text: &str, at: usize) -> Option<(String, Vec<String>)> {
    let before = &text[..at];
    let d = before.rfind("#define ")?;
    if before[d..].contains('\n') {
        return None;
    }
    let def = &before[d + "#define ".len()..];
    let open = def.find('(')?;
    let close = def.find(')')?;
    let params = def[open + 1..close]
        .split(',')
        .map(|p| p.trim().to_string())
        .collect();
    Some((def[..open].trim().to_string(), params))
}

/// The argument lists of every call `name(...)` in `text` (not its `#define`), each with
/// the parameters of the macro the call sits in (its arguments that are still open).
fn invocations(text: &str, name: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let pat = format!("{name}(");
    let mut out = Vec::new();
    for (at, _) in text.match_indices(&pat) {
        let before = &text[..at];
        if before.chars().next_back().is_some_and(is_ident) || before.ends_with("#define ") {
            continue;
        }
        let args = &text[at + pat.len()..];
        let args: Vec<String> = args[..args.find(')').unwrap()]
            .split(',')
            .map(|a| a.trim().to_string())
            .collect();
        let open = enclosing_define(text, at).map(|d| d.1).unwrap_or_default();
        out.push((args, open));
    }
    out
}

/// Whole-word occurrences of `name` in `text`.
fn word_count(text: &str, name: &str) -> usize {
    text.match_indices(name)
        .filter(|(at, _)| {
            !text[..*at].chars().next_back().is_some_and(is_ident)
                && !text[at + name.len()..].chars().next().is_some_and(is_ident)
        })
        .count()
}

/// Every `extern "C" __global__` declaration of `text` (macro line continuations removed).
/// A template whose macro is called with literal arguments (`RLX_NORM_KERNEL(sfx, T, 4,
/// true, norm_w4, 256)`) gets one declaration per call with those literals substituted; a
/// macro also passed by name to an X-macro (`RLX_FLOAT_TYPES(RLX_ARGMAX)`) keeps its
/// all-wildcard form too.
fn parse(text: &str, structs: &[(&str, usize)]) -> Vec<Decl> {
    const EXTERN: &str = "extern \"C\" __global__";
    let text = text.replace("\\\n", " ");
    let mut out = Vec::new();
    for (at, _) in text.match_indices(EXTERN) {
        let rest = &text[at + EXTERN.len()..];
        let mut rest = rest.trim_start().trim_start_matches("void").trim_start();
        if let Some(r) = rest.strip_prefix("__launch_bounds__(") {
            rest = &r[r.find(')').unwrap() + 1..];
        }
        let open = rest.find('(').unwrap();
        let close = rest.find(')').unwrap();
        let sizes: Option<Vec<usize>> = rest[open + 1..close]
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                // Drop the parameter name: the type is everything up to the last word.
                let p = p.trim();
                let cut = p.rfind([' ', '*']).unwrap();
                param_size(&p[..=cut], structs)
            })
            .collect();
        let template: Vec<String> = rest[..open]
            .trim()
            .split("##")
            .map(|p| p.trim().to_string())
            .collect();
        let Some((mac, params)) = enclosing_define(&text, at) else {
            let pieces = template.into_iter().map(Some).collect();
            out.push(Decl { pieces, sizes });
            continue;
        };
        let subst = |value: &dyn Fn(usize) -> Option<String>| -> Vec<Option<String>> {
            template
                .iter()
                .map(|p| match params.iter().position(|m| m == p) {
                    Some(i) => value(i),
                    None => Some(p.clone()),
                })
                .collect()
        };
        let calls = invocations(&text, &mac);
        for (args, open) in &calls {
            let pieces = subst(&|i| {
                let a = args[i].clone();
                (!open.contains(&a)).then_some(a)
            });
            out.push(Decl {
                pieces,
                sizes: sizes.clone(),
            });
        }
        if calls.is_empty() || word_count(&text, &mac) > calls.len() + 1 {
            out.push(Decl {
                pieces: subst(&|_| None),
                sizes,
            });
        }
    }
    out
}

/// Whether `name` is an instance of `pieces`; a wildcard (a macro parameter such as `sfx`,
/// `opn`, `m`) matches a non-empty run of letters and digits.
fn matches(pieces: &[Option<String>], name: &str) -> bool {
    match pieces.split_first() {
        None => name.is_empty(),
        Some((Some(lit), rest)) => name
            .strip_prefix(lit.as_str())
            .is_some_and(|r| matches(rest, r)),
        Some((None, rest)) => {
            let run = name
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(name.len());
            (1..=run).any(|k| matches(rest, &name[k..]))
        }
    }
}

/// The declaration `name` comes from: of all templates it fits, the most literal one.
fn decl_for<'a>(decls: &'a [Decl], name: &str) -> Option<&'a Decl> {
    decls
        .iter()
        .filter(|d| matches(&d.pieces, name))
        .max_by_key(|d| d.pieces.iter().flatten().map(|p| p.len()).sum::<usize>())
}

/// The kernel parameter structs with a Rust mirror, by their C name.
fn structs() -> Vec<(&'static str, usize)> {
    vec![
        ("ConvG", std::mem::size_of::<vision::ConvG>()),
        ("AttnArgs", std::mem::size_of::<attention::AttnArgs>()),
        ("AttnCw", std::mem::size_of::<attention::AttnCw>()),
        ("QkvArgs", std::mem::size_of::<shape_ops::QkvArgs>()),
    ]
}

/// Check one kernel against its library's declarations.
fn check(k: &Kernel) {
    let lib = match &k.src {
        super::Src::Lib(l) | super::Src::Shard(l, _) => *l,
        super::Src::Generated(_) => panic!("{} is generated", k.name),
    };
    let structs = structs();
    let decls = parse(lib.source(), &structs);
    let d = decl_for(&decls, &k.name)
        .unwrap_or_else(|| panic!("no declaration in {}.cu produces {}", lib.name(), k.name));
    let sizes = d
        .sizes
        .as_ref()
        .unwrap_or_else(|| panic!("{}: a parameter type of its declaration is unknown", k.name));
    assert_eq!(
        &k.args.sizes, sizes,
        "{}: packed argument sizes differ from the declaration",
        k.name
    );
    assert_eq!(k.args.vals.len(), k.args.sizes.len());
}

const FLOATS: [Sfx; 3] = [Sfx::F32, Sfx::F16, Sfx::BF16];
const FLOATS64: [Sfx; 4] = [Sfx::F32, Sfx::F16, Sfx::BF16, Sfx::F64];

/// Every converted family, every suffix and variant it is called with.
fn every_kernel() -> Vec<Kernel> {
    use reduce::{RedOp, RowMode, RowTile};
    let mut v = Vec::new();
    let d = Dims8::contiguous(&[2, 3]).unwrap();
    for s in FLOATS64 {
        v.push(audio::fft_dft(s, 1, 2, 3, 4, 0, 1.0, 1));
    }
    let g = audio::MelGemm {
        items: 1,
        rows: 2,
        cols: 3,
        inner: 4,
        sa: 5,
        ars: 6,
        acs: 7,
        brs: 8,
        bcs: 9,
    };
    v.push(audio::mel_max(1, 2, 3));
    for s in FLOATS {
        v.push(audio::mel_gemm(s, false, 1, 2, 3, g));
        v.push(audio::mel_gemm(s, true, 1, 2, 3, g));
        v.push(audio::mel_out(s, 1, 2, 3, 4, 5));
        v.push(audio::mel_grad(s, 1, 2, 3, 4, 5));
    }
    let red_sfx = [Sfx::F32, Sfx::F16, Sfx::BF16, Sfx::I32, Sfx::I64];
    for op in [RedOp::Sum, RedOp::Max, RedOp::Min, RedOp::Prod] {
        for s in red_sfx {
            for m in [RowMode::Warp, RowMode::Block] {
                v.push(reduce::reduce_rows(op, m, s, (1, 2, 3), 4, 5, 6, 0, 7));
            }
            v.push(reduce::reduce_cols(op, s, (1, 2, 3), d, d, 4, 5, 1, 6));
            v.push(reduce::reduce_finish(op, s, 1, 2, 3, 4, 0, 5));
        }
    }
    let lab = reduce::CeLabels {
        ptr: 1,
        code: 0,
        dense: 1,
    };
    for s in FLOATS {
        for vpt in [1, 2, 4, 8, 16] {
            let tile = RowTile {
                mode: RowMode::Warp,
                vpt,
            };
            v.push(reduce::softmax_rows(tile, s, 1, 2, 3, 4));
        }
        for vpt in [0, 4, 8, 16] {
            let tile = RowTile {
                mode: RowMode::Block,
                vpt,
            };
            v.push(reduce::softmax_rows(tile, s, 1, 2, 3, 4));
        }
        v.push(reduce::softmax_cols(s, 1, 2, 3, 4, 5));
        for m in [RowMode::Warp, RowMode::Block] {
            v.push(reduce::ce_loss(m, s, 1, lab, 2, 3, 4));
            v.push(reduce::ce_back(m, s, 1, lab, (2, 3), 4, 5, 6));
        }
    }
    for s in [Sfx::F32, Sfx::F16, Sfx::BF16, Sfx::I32, Sfx::I64] {
        for m in [RowMode::Warp, RowMode::Block] {
            v.push(reduce::argmax_rows(m, s, 1, 2, 3, 4));
        }
        v.push(reduce::argmax_cols(s, 1, 2, 3, 4, 5));
    }
    let g = vision::PoolGeom {
        planes: 1,
        h: 2,
        w: 3,
        ho: 4,
        wo: 5,
        k: [6, 7],
        s: [8, 9],
        p: [1, 0],
    };
    for s in FLOATS {
        v.push(vision::pool2d(s, 1, 2, g, 1));
        v.push(vision::maxpool2d_bwd_tiled(s, 1, 2, 3, g));
        v.push(vision::maxpool2d_bwd(s, 1, 2, 3, g));
        v.push(vision::pool_argmax(s, 1, 2, g));
        v.push(vision::maxpool2d_bwd_idx(s, 1, 2, 3, g));
    }
    for u in [Unit::B1, Unit::B2, Unit::B4, Unit::B8] {
        v.push(vision::resize_nearest2x(u, 1, 2, 3, 4, 5));
        v.push(shape_ops::strided_copy(u, 1, 2, d, 3));
        let e = shape_ops::TileExtents {
            nb: 1,
            p: 2,
            q: 3,
            sq: 4,
            dp: 5,
        };
        v.push(shape_ops::tile_transpose(u, (1, 2), d, d, e));
        v.push(shape_ops::pad_rows(u, (1, 2), d, d, 3, 4, 5, 6, 7));
    }
    let all = [
        Sfx::F32,
        Sfx::F16,
        Sfx::BF16,
        Sfx::F64,
        Sfx::I32,
        Sfx::I64,
        Sfx::U8,
    ];
    for u in [Unit::B1, Unit::B2, Unit::B4, Unit::B8, Unit::B16] {
        v.push(shape_ops::row_copy(u, 1, 2, d, d, 3, 4));
        v.push(shape_ops::cache_write(u, (1, 2, 3), [4, 5, 6, 7]));
        for i in all {
            v.push(shape_ops::gather_rows(u, i, (1, 2, 3), 4, 5, 6, 7));
        }
    }
    for s in [Sfx::F32, Sfx::F16, Sfx::BF16, Sfx::F64, Sfx::I32, Sfx::I64] {
        v.push(attention::attn_keep(s, 1, 2, 3));
    }
    let io = attention::AttnIo {
        q: 1,
        k: 2,
        v: 3,
        keep: 4,
        out: 5,
    };
    let a = attention::AttnArgs::default();
    // The instances `ATT_FWD_ALL` declares (the lowering picks among these).
    let mut flash = Vec::new();
    for (cv, dq) in [(1, 32), (2, 64), (4, 128), (1, 0), (2, 0), (4, 0)] {
        for rows in [1, 2, 4] {
            flash.push((rows, cv, dq, 8));
        }
    }
    flash.extend([(1, 8, 0, 4), (2, 8, 0, 4)]);
    for s in FLOATS {
        for &(rows, cv, dq, kj) in &flash {
            let fv = attention::FlashVariant { rows, cv, dq, kj };
            v.push(attention::attn_fwd(fv, s, io, a));
        }
        v.push(attention::attn_split(s, io, 6, 7, a));
        let cw = attention::AttnCw::default();
        v.push(attention::attn_split_cw(s, io, 6, 7, a, cw));
        v.push(attention::attn_combine(s, 1, 2, a));
    }
    for d in [32, 64, 128] {
        for w in [1, 2, 4] {
            for bk in [32, 64] {
                v.push(attention::attn_x3(d, w, bk, false, io, a));
                if w > 1 {
                    v.push(attention::attn_x3(d, w, bk, true, io, a));
                }
            }
        }
    }
    for s in [Sfx::F16, Sfx::BF16] {
        for d in [32, 64, 128] {
            for w in [1, 2, 4] {
                v.push(attention::attn_mma(d, w, s, io, a));
            }
        }
    }
    let cg = vision::ConvG::default();
    let chunk = vision::ColChunk {
        nb: 1,
        ld: 2,
        gs: 3,
    };
    let pack = vision::WeightPack {
        ones: 1,
        ldw: 2,
        wgs: 3,
    };
    for s in FLOATS {
        v.push(vision::conv_direct(s, 1, 2, 3, 4, cg));
        v.push(vision::im2col(s, (1, 2), (3, 4, 5), cg, chunk, pack));
        v.push(vision::col2im(s, 1, 2, cg, chunk));
        v.push(vision::conv_bwd_input_direct(s, 1, 2, 3, cg));
        v.push(vision::conv_bwd_weight_direct(s, (1, 2, 3, 4), cg, 5));
        v.push(vision::conv_bwd_weight_reduce(s, 1, 2, 3, 4));
        v.push(vision::swap01(s, 1, 2, (3, 4, 5), 6));
    }
    v.push(super::profile::rlx_spin(7));
    for s in FLOATS64 {
        v.push(linalg::mm_bias_act(false, s, 1, 2, 3, 4, 5));
    }
    for s in FLOATS {
        v.push(linalg::mm_bias_act(true, s, 1, 2, 3, 4, 5));
        for q in rlx_ir::QuantScheme::ALL {
            v.push(quant::dq_gemv(q, s, (1, 2, 3), Default::default(), 4, 5, 6));
            v.push(quant::dq_dequant(q, s, 1, 2, 3, 4));
            for m in [1, 3] {
                for &d in quant::gemv_depths(q, s, m as usize) {
                    let e = Default::default();
                    v.push(quant::dq_gemv_st(q, s, (1, 2, 3), e, (m, 5, 6), 7, (8, d)));
                }
            }
        }
        for w in [Sfx::F16, Sfx::BF16] {
            v.push(quant::dq_cast_in(s, w, 1, 2, 3));
            v.push(quant::dq_cast_out(w, s, 1, 2, 3, 4));
            v.push(quant::dq_split_in(s, w, (1, 2, 3), 4, 5, 6, 1));
        }
        v.push(quant::dq_split_out(s, (1, 2, 3, 4), 5, 6, 7));
        v.push(quant::dq_split2_out(s, (1, 2, 3, 4, 5), (6, 7, 8, 9)));
    }
    for q in rlx_ir::QuantScheme::ALL
        .into_iter()
        .filter(|q| !q.is_half())
    {
        v.push(quant::dq_split_w(q, (1, 2, 3), 4, 5));
    }
    // The planar layout's kernels (f32 activations; every dtype for the weight decode).
    for scheme in rlx_ir::QuantScheme::ALL
        .into_iter()
        .filter(|&q| crate::planar::eligible(q, 8 * q.block_bytes()))
    {
        let q = quant::Wq {
            scheme,
            planar: true,
        };
        let e = Default::default();
        v.push(quant::dq_gemv(q, Sfx::F32, (1, 2, 3), e, 4, 5, 6));
        for m in [1, 3] {
            for &d in quant::gemv_depths(scheme, Sfx::F32, m as usize) {
                v.push(quant::dq_gemv_st(
                    q,
                    Sfx::F32,
                    (1, 2, 3),
                    e,
                    (m, 5, 6),
                    7,
                    (8, d),
                ));
            }
        }
        for s in FLOATS {
            v.push(quant::dq_dequant(q, s, 1, 2, 3, 4));
        }
        v.push(quant::dq_split_w(q, (1, 2, 3), 4, 5));
    }
    for u in [Unit::B2, Unit::B4, Unit::B8] {
        v.push(linalg::mm_gather(u, 1, 2, d, 3));
    }
    let np = norm::NormPtrs {
        x: 1,
        r: 2,
        b: 3,
        g: 4,
        be: 5,
        y: 6,
    };
    let mut variants: Vec<norm::NormRows> = [1, 2, 4, 8, 16]
        .map(|vpt| RowTile {
            mode: RowMode::Warp,
            vpt,
        })
        .into_iter()
        .chain([0, 4, 8, 16].map(|vpt| RowTile {
            mode: RowMode::Block,
            vpt,
        }))
        .map(norm::NormRows::Cached)
        .collect();
    variants.extend([1, 2, 4, 8].map(norm::NormRows::Vec4));
    for s in FLOATS {
        for r in &variants {
            v.push(norm::norm(*r, s, np, 7, 8, 1e-5, 1));
        }
        for ws in [Sfx::F16, Sfx::BF16] {
            for vv in [1, 2, 4, 8] {
                v.push(norm::norm_split(vv, s, ws, (1, 2, 3, 4), 5, 6, 1e-5, 2));
            }
        }
    }
    for xs in FLOATS {
        for cs in FLOATS {
            v.push(shape_ops::rope(xs, cs, (1, 2, 3, 4), d, 5, 6, 7, 0));
            let rcw = (1, 2, 3, 4, 5);
            v.push(shape_ops::rope_cache_write(
                xs,
                cs,
                rcw,
                d,
                [6, 7, 8, 9],
                10,
                11,
                0,
            ));
            let qa = shape_ops::QkvArgs::default();
            v.push(shape_ops::qkv_rope_cache(
                xs,
                cs,
                (1, 2, 3, 4),
                (5, 6, 7),
                d,
                d,
                qa,
            ));
        }
    }
    v
}

#[test]
fn every_family_packs_its_declared_parameters() {
    let all = every_kernel();
    for k in &all {
        check(k);
    }
    println!("{} kernels checked", all.len());
}

#[test]
fn the_checker_rejects_a_wrong_packing() {
    // A reduce_finish with mean packed as i64 instead of int must not pass.
    let mut k = reduce::reduce_finish(reduce::RedOp::Sum, Sfx::F32, 1, 2, 3, 4, 0, 5);
    k.args = crate::lower::KArgs::new()
        .ptr(1)
        .ptr(2)
        .i64(3)
        .i64(4)
        .i64(0)
        .i64(5);
    assert!(std::panic::catch_unwind(|| check(&k)).is_err());
    // And a name no declaration produces.
    let k = Kernel::new(Lib::Reduce, "reduce_nope_f32".into(), Default::default());
    assert!(std::panic::catch_unwind(|| check(&k)).is_err());
}

#[test]
fn the_parser_reads_macro_templates() {
    let decls = parse(Lib::Norm.source(), &structs());
    let d = decl_for(&decls, "norm_w4_bf16").expect("norm_w4_bf16");
    assert_eq!(d.sizes, Some(vec![8, 8, 8, 8, 8, 8, 8, 8, 4, 4]));
    assert!(decl_for(&decls, "norm_x4_bf16").is_none());
}
