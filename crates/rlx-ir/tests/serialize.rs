//! Graph serialization: round trips of every op, each class of malformed input, files,
//! the text dump, and a seeded mutation fuzz (bit flips, every truncation, splices,
//! length-prefix corruption) that asserts no panic and no absurd allocation.
mod corpus;

use rlx_ir::*;
use rlx_testutil::Rng;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeSet;

// ---- allocation watch: the largest single request made while decoding, per thread

struct Watch;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        }
    });
}

unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static GLOBAL: Watch = Watch;

/// Run `f` and return its result with the largest single allocation it asked for.
fn watched<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    (r, LARGEST.with(|l| l.get()))
}

#[test]
fn allocation_watch_sees_allocations() {
    // The fuzz's memory bound is only as good as the watch: it must see a big request.
    let (v, largest) = watched(|| vec![7u8; 3 << 20]);
    assert!(largest >= 3 << 20, "watch saw {largest}");
    assert_eq!(v.len(), 3 << 20);
    let (_, none) = watched(|| 1 + 1);
    assert_eq!(none, 0);
}

// ---- helpers

/// CRC-32 (IEEE) bit by bit, independent of the table-driven one under test.
fn crc_ref(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

const HEADER: usize = 14;

/// Build a well-framed file around `body` (right length and checksum), so the body
/// decoder sees the mutation instead of the frame checks catching it.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = b"RLXG".to_vec();
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc_ref(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn body(bytes: &[u8]) -> &[u8] {
    &bytes[HEADER..bytes.len() - 4]
}

fn decode_err(r: Result<Graph, IrError>) -> (usize, String) {
    match r {
        Err(IrError::Decode { offset, msg }) => (offset, msg),
        other => panic!("expected a Decode error, got {other:?}"),
    }
}

// ---- round trips

#[test]
fn corpus_covers_every_op_kind() {
    let g = corpus::every_op();
    let seen: BTreeSet<OpKind> = g.nodes.iter().map(|n| n.op.kind()).collect();
    let kinds: BTreeSet<OpKind> = OpKind::ALL.iter().copied().collect();
    let missing: Vec<_> = kinds.difference(&seen).collect();
    assert!(missing.is_empty(), "the corpus has no node of {missing:?}");
    let vals = corpus::param_values(&g);
    for want in [
        "mask:None",
        "mask:Causal",
        "mask:SlidingWindow",
        "mask:Custom",
        "layout:Packed",
        "layout:Bshd",
        "layout:Bhsd",
        "prologue:None",
        "prologue:ResizeNearest2x",
        "step:Activation",
        "step:Binary",
        "step:Cast",
        "step:Compare",
        "step:Where",
        "transform:Reshape",
        "transform:Transpose",
        "transform:Narrow",
        "transform:Expand",
        "quant:Q8_0",
        "quant:Q4_0",
        "quant:Q4_1",
        "quant:Q5_0",
        "quant:Q5_1",
        "quant:Q4_K",
        "quant:Q5_K",
        "quant:Q6_K",
        "quant:F16",
        "quant:BF16",
        "pool:Max",
        "pool:Avg",
        "fft:Backward",
        "fft:Ortho",
        "fft:Forward",
        "rope:Half",
        "collective:Sum",
        "collective:Mean",
        "collective:Max",
        "rope:Interleaved",
        "scatter:None",
        "scatter:Add",
        "scatter:Mul",
        "scatter:Max",
        "scatter:Min",
    ] {
        assert!(vals.contains(want), "corpus lacks {want}");
    }
    for a in Activation::ALL {
        assert!(vals.contains(&format!("act:{a:?}")), "corpus lacks {a:?}");
    }
    for d in DType::ALL {
        assert!(
            vals.contains(&format!("cast:{d}")),
            "corpus lacks cast to {d}"
        );
    }
}

#[test]
fn every_op_round_trips_binary() {
    let g = corpus::every_op();
    let bytes = g.to_bytes();
    assert_eq!(&bytes[..4], b"RLXG");
    assert_eq!(
        u16::from_le_bytes([bytes[4], bytes[5]]),
        GRAPH_FORMAT_VERSION
    );
    let back = Graph::from_bytes_unverified(&bytes).unwrap();
    assert_eq!(back, g);
    assert_eq!(back.to_bytes(), bytes, "encoding is not deterministic");
    // `RLX_FUZZ_SEED_DIR=fuzz/corpus/graph_from_bytes` writes seeds for cargo-fuzz: whole
    // files, bare bodies (the target re-frames them) and JSON.
    if let Some(dir) = rlx_ir::env::text(rlx_ir::env::Switch::FuzzSeedDir) {
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in seeds().iter().enumerate() {
            std::fs::write(format!("{dir}/seed{i}.rlxg"), s).unwrap();
            std::fs::write(format!("{dir}/seed{i}.body"), body(s)).unwrap();
        }
        let j = corpus::elementwise().to_json().unwrap();
        std::fs::write(format!("{dir}/ew.json"), j).unwrap();
    }
}

#[test]
fn every_op_round_trips_json() {
    let g = corpus::every_op();
    let text = g.to_json().unwrap();
    assert!(
        text.contains("\"-inf\""),
        "pad value -inf not written as a string"
    );
    let back = Graph::from_json_unverified(&text).unwrap();
    assert_eq!(back, g);
    assert_eq!(back.to_json().unwrap(), text);
}

#[test]
fn verified_graph_round_trips_both_forms() {
    let g = corpus::elementwise();
    g.verify().unwrap();
    assert_eq!(Graph::from_bytes(&g.to_bytes()).unwrap(), g);
    assert_eq!(Graph::from_json(&g.to_json().unwrap()).unwrap(), g);
    let empty = Graph::new("");
    assert_eq!(Graph::from_bytes(&empty.to_bytes()).unwrap(), empty);
    assert_eq!(Graph::from_json(&empty.to_json().unwrap()).unwrap(), empty);
}

#[test]
fn crc32_matches_reference() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926); // the standard check value
    let bytes = corpus::every_op().to_bytes();
    assert_eq!(crc32(&bytes), crc_ref(&bytes));
    let n = bytes.len();
    assert_eq!(
        u32::from_le_bytes(bytes[n - 4..].try_into().unwrap()),
        crc_ref(&bytes[..n - 4])
    );
}

#[test]
fn frame_layout_is_as_documented() {
    let bytes = corpus::elementwise().to_bytes();
    assert_eq!(GRAPH_HEADER_LEN, HEADER);
    assert_eq!(frame(body(&bytes)), bytes);
}

// ---- malformed binary, one class at a time

#[test]
fn wrong_magic() {
    let mut b = corpus::elementwise().to_bytes();
    b[1] = b'X';
    let (off, msg) = decode_err(Graph::from_bytes(&b));
    assert_eq!(off, 0);
    assert!(msg.contains("magic"), "{msg}");
    let (off, _) = decode_err(Graph::from_bytes(b"{\"format\": 1}"));
    assert_eq!(off, 0);
}

#[test]
fn unsupported_version() {
    let mut b = corpus::elementwise().to_bytes();
    b[4..6].copy_from_slice(&(GRAPH_FORMAT_VERSION + 1).to_le_bytes());
    let (off, msg) = decode_err(Graph::from_bytes(&b));
    assert_eq!(off, 4);
    assert!(msg.contains("version"), "{msg}");
}

#[test]
fn truncated_at_every_length() {
    let b = corpus::every_op().to_bytes();
    for cut in 0..b.len() {
        let (off, msg) = decode_err(Graph::from_bytes(&b[..cut]));
        assert_eq!(off, cut, "cut at {cut}: {msg}");
        assert!(msg.contains("truncated"), "cut at {cut}: {msg}");
    }
}

#[test]
fn trailing_bytes() {
    let mut b = corpus::elementwise().to_bytes();
    let n = b.len();
    b.extend_from_slice(&[0, 1, 2]);
    let (off, msg) = decode_err(Graph::from_bytes(&b));
    assert_eq!(off, n);
    assert!(msg.contains("3 trailing"), "{msg}");
}

#[test]
fn bad_checksum() {
    let good = corpus::elementwise().to_bytes();
    let n = good.len();
    for at in [HEADER, HEADER + 7, n - 5, n - 1] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        let (off, msg) = decode_err(Graph::from_bytes(&b));
        assert_eq!(off, n - 4, "flip at {at}");
        assert!(msg.contains("checksum"), "{msg}");
    }
}

#[test]
fn absurd_body_length() {
    let mut b = corpus::elementwise().to_bytes();
    b[6..14].copy_from_slice(&u64::MAX.to_le_bytes());
    let (off, msg) = decode_err(Graph::from_bytes(&b));
    assert_eq!(off, 6, "{msg}");
    b[6..14].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let (off, msg) = decode_err(Graph::from_bytes(&b));
    assert_eq!(off, b.len());
    assert!(msg.contains("truncated"), "{msg}");
}

#[test]
fn body_that_fails_to_decode() {
    // Graph "g" with one Input: body = [1, 'g', count 1, id 0, op tag 0 (Input), ...].
    let mut g = Graph::new("g");
    g.input("x", Shape::new(&[2], DType::F32)).unwrap();
    let good = g.to_bytes();
    let mut bd = body(&good).to_vec();
    assert_eq!(&bd[..5], &[1, b'g', 1, 0, 0]);
    bd[4] = 0x7F; // no such Op variant
    let (off, msg) = decode_err(Graph::from_bytes(&frame(&bd)));
    assert_eq!(off, HEADER + 4, "{msg}");
    assert!(msg.contains("node 0"), "{msg}");

    // A name that is not UTF-8.
    let mut bd = body(&good).to_vec();
    bd[1] = 0xFF;
    let (off, msg) = decode_err(Graph::from_bytes(&frame(&bd)));
    assert_eq!(off, HEADER + 1, "{msg}");
    assert!(msg.contains("graph name"), "{msg}");

    // A body that stops mid-node (framed consistently).
    let bd = &body(&good)[..6];
    let (off, msg) = decode_err(Graph::from_bytes(&frame(bd)));
    assert_eq!(off, HEADER + 6, "{msg}");

    // A node count far beyond the body: fails where the bytes run out, allocates little.
    let mut bd = vec![1, b'g'];
    bd.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]);
    let (r, largest) = watched(|| Graph::from_bytes(&frame(&bd)));
    let (off, _) = decode_err(r);
    assert_eq!(off, HEADER + bd.len());
    assert!(largest < 1 << 16, "allocated {largest} bytes");

    // A constant claiming 2^62 bytes.
    let mut bd = body(&good).to_vec();
    let mut c = Graph::new("g");
    c.constant_f32(&[1], &[1.0]).unwrap();
    let cb = body(&c.to_bytes()).to_vec();
    assert_eq!(&cb[..6], &[1, b'g', 1, 0, 2, 4]); // ..., op tag 2 (Constant), 4 data bytes
    bd.clear();
    bd.extend_from_slice(&cb[..5]);
    bd.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40]);
    let (r, largest) = watched(|| Graph::from_bytes(&frame(&bd)));
    decode_err(r);
    assert!(largest < 1 << 16, "allocated {largest} bytes");
}

#[test]
fn unused_bytes_after_the_graph() {
    let good = corpus::elementwise().to_bytes();
    let mut bd = body(&good).to_vec();
    let n = bd.len();
    bd.push(0);
    let (off, msg) = decode_err(Graph::from_bytes(&frame(&bd)));
    assert_eq!(off, HEADER + n);
    assert!(msg.contains("1 unused"), "{msg}");
}

#[test]
fn decoded_but_inconsistent_graph_fails_verify() {
    let mut g = Graph::new("bad");
    let a = g.input("a", Shape::new(&[2, 3], DType::F32)).unwrap();
    let b = g.input("b", Shape::new(&[2, 3], DType::F16)).unwrap();
    let s = g.push_node(
        Op::Binary(BinaryOp::Add),
        vec![a, b],
        Shape::new(&[2, 3], DType::F32),
    );
    g.set_name(s, "sum").unwrap();
    let bytes = g.to_bytes();
    match Graph::from_bytes(&bytes) {
        Err(IrError::Verify { node, msg, .. }) => {
            assert_eq!(node, s);
            assert!(msg.contains("dtypes differ"), "{msg}");
        }
        other => panic!("expected Verify, got {other:?}"),
    }
    assert_eq!(Graph::from_bytes_unverified(&bytes).unwrap(), g);
    let text = g.to_json().unwrap();
    assert!(matches!(
        Graph::from_json(&text),
        Err(IrError::Verify { node, .. }) if node == s
    ));
    assert_eq!(Graph::from_json_unverified(&text).unwrap(), g);
}

// ---- malformed JSON

#[test]
fn malformed_json() {
    let g = corpus::elementwise();
    let text = g.to_json().unwrap();
    for bad in [
        "",
        "{",
        "[]",
        "null",
        &text[..text.len() / 2],
        &text.replace("\"version\": 1", "\"version\": 99"),
        &text.replace("\"rlx-graph\"", "\"other\""),
        &text.replace("\"Gelu\"", "\"Gelux\""),
        &text.replace("\"F32\"", "-3"),
    ] {
        match Graph::from_json(bad) {
            Err(IrError::Json(msg)) => assert!(!msg.is_empty()),
            other => panic!("expected a Json error for {bad:.60?}, got {other:?}"),
        }
    }
    let Err(IrError::Json(msg)) =
        Graph::from_json(&text.replace("\"version\": 1", "\"version\": 99"))
    else {
        panic!("expected a version error")
    };
    assert!(msg.contains("version 99"), "{msg}");
}

#[test]
fn non_finite_params_refuse_json_but_pad_value_survives() {
    let mut g = Graph::new("nf");
    let x = g.input("x", Shape::new(&[4], DType::F32)).unwrap();
    let n = g.push_node(
        Op::LayerNorm {
            axis: -1,
            eps: f32::NAN,
        },
        vec![x],
        Shape::new(&[4], DType::F32),
    );
    let err = g.to_json().unwrap_err();
    assert!(err.to_string().contains(&n.to_string()), "{err}");
    assert!(err.to_string().contains("eps"), "{err}");

    for v in [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.5, 3.0] {
        let mut g = Graph::new("pad");
        let x = g.input("x", Shape::new(&[4], DType::F32)).unwrap();
        g.push_node(
            Op::Pad {
                pads: vec![[1, 2]],
                value: v,
            },
            vec![x],
            Shape::new(&[7], DType::F32),
        );
        for back in [
            Graph::from_json_unverified(&g.to_json().unwrap()).unwrap(),
            Graph::from_bytes_unverified(&g.to_bytes()).unwrap(),
        ] {
            let Op::Pad { value, .. } = back.nodes[1].op else {
                panic!("not a pad")
            };
            assert!(value.to_bits() == v.to_bits() || (v.is_nan() && value.is_nan()));
        }
    }
}

// ---- files

#[test]
fn save_and_load_pick_the_form_by_extension() {
    let dir = std::env::temp_dir().join(format!("rlx-ir-ser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let g = corpus::elementwise();
    let (j, b) = (dir.join("g.json"), dir.join("g.rlxg"));
    g.save(&j).unwrap();
    g.save(&b).unwrap();
    assert!(std::fs::read_to_string(&j).unwrap().starts_with('{'));
    assert_eq!(std::fs::read(&b).unwrap(), g.to_bytes());
    assert_eq!(Graph::load(&j).unwrap(), g);
    assert_eq!(Graph::load(&b).unwrap(), g);

    let missing = dir.join("missing.rlxg");
    match Graph::load(&missing) {
        Err(IrError::File { path, error }) => {
            assert!(path.ends_with("missing.rlxg"), "{path}");
            assert!(matches!(*error, IrError::Io(_)));
        }
        other => panic!("expected File error, got {other:?}"),
    }
    let mut bytes = g.to_bytes();
    bytes.truncate(bytes.len() - 1);
    std::fs::write(&b, &bytes).unwrap();
    let err = Graph::load(&b).unwrap_err();
    assert!(err.to_string().contains("g.rlxg"), "{err}");
    assert!(
        matches!(&err, IrError::File { error, .. } if matches!(**error, IrError::Decode { .. }))
    );
    std::fs::write(&j, [0xFF, 0xFE]).unwrap();
    let err = Graph::load(&j).unwrap_err();
    assert!(err.to_string().contains("g.json") && err.to_string().contains("UTF-8"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- the text dump

#[test]
fn dump_shows_every_node_compactly() {
    let mut g = Graph::new("demo");
    let s = Dim::dynamic("S");
    let q = g
        .input(
            "q",
            Shape::with_dims(vec![2.into(), s.clone(), 512.into()], DType::F32),
        )
        .unwrap();
    g.constant_f32(&[2, 3], &[1.5, -2.0, 1e-5, 4.0, 5.0, 6.0])
        .unwrap();
    let a = g.push_node(
        Op::Attention(AttentionSpec::new(8, 64).causal()),
        vec![q, q, q],
        Shape::with_dims(vec![2.into(), s, 512.into()], DType::F32),
    );
    g.set_name(a, "attn").unwrap();
    g.set_outputs(vec![a]);
    let text = g.to_string();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].contains("\"demo\"") && lines[0].contains("3 nodes"),
        "{text}"
    );
    assert!(lines[0].contains("q: f32[2, S, 512]"), "{text}");
    assert_eq!(lines[1].trim(), "%0 = Input : f32[2, S, 512]  \"q\"");
    assert_eq!(
        lines[2].trim(),
        "%1 = Constant{[1.5, -2, 1e-5, 4, …] (6 values)} : f32[2, 3]"
    );
    assert_eq!(
        lines[3].trim(),
        "%2 = Attention{heads=8, head_dim=64, mask=Causal} (%0, %0, %0) : f32[2, S, 512]  \"attn\""
    );
    assert_eq!(lines[4].trim(), "outputs: (%2)");
}

#[test]
fn dump_and_summary_of_every_op() {
    let g = corpus::every_op();
    let text = g.to_string();
    println!("{text}\n{}", g.summary());
    assert_eq!(text.lines().count(), g.len() + 2);
    for (n, line) in g.nodes.iter().zip(text.lines().skip(1)) {
        assert!(
            line.trim_start()
                .starts_with(&format!("{} = {}", n.id, n.op.kind())),
            "{line}"
        );
    }
    for want in [
        "mask=SlidingWindow(128)",
        "v_head_dim=32, mask=Causal, scale=0.125, softcap=30, layout=Bshd",
        "Pad{pads=[[0, 1], [2, 3], [4, 0]], value=-inf}",
        "LayerNorm{axis=-1, eps=1e-5}",
        "s4 = Where(s3, s1, in0)",
        "Narrow(axis=-2, 1..10)",
        "DequantMatMul{Q4_1}",
        "Dequantize{Q6_K}",
        "CacheWrite{axis=1}",
        "mask=Causal, past",
        "Conv{k=[3, 5], stride=[2, 1], pad=[1, 2], dil=[1, 3], groups=3}",
        "Cast{to=bf16}",
        "Constant{[1.5, -2, 0.25, 3e-7, …] (6 values)}",
        "\"attn3\"",
    ] {
        assert!(text.contains(want), "dump lacks {want}:\n{text}");
    }
    let s = g.summary();
    assert!(!s.contains('\n'));
    assert!(s.contains(&format!("{} nodes", g.len())), "{s}");
    assert!(
        s.contains("Activation×18") && s.contains("Attention×5") && s.contains("CacheWrite×1"),
        "{s}"
    );
    assert!(
        s.contains("x: f32[B, S, 512]") && s.contains("ids: i64[B, S]"),
        "{s}"
    );
    assert!(s.contains("params 1 (262144 elements)"), "{s}");
}

// ---- mutation fuzz

/// Decode must return, not panic, and not ask for absurd memory; an Ok result must
/// re-encode to bytes that decode to the same encoding.
fn check_bytes(input: &[u8], what: &str) -> bool {
    let (r, largest) = watched(|| {
        std::panic::catch_unwind(|| {
            (
                Graph::from_bytes(input).is_ok(),
                Graph::from_bytes_unverified(input).ok(),
            )
        })
    });
    let Ok((verified_ok, unverified)) = r else {
        panic!("{what}: decoding panicked on {input:02x?}");
    };
    let limit = (2 << 20) + 64 * input.len();
    assert!(
        largest <= limit,
        "{what}: one allocation of {largest} bytes"
    );
    if let Some(g) = unverified {
        let again = g.to_bytes();
        let g2 = Graph::from_bytes_unverified(&again).expect("re-encoded graph decodes");
        assert_eq!(g2.to_bytes(), again, "{what}: re-encoding differs");
    } else {
        assert!(
            !verified_ok,
            "{what}: verified decode ok but unverified failed"
        );
    }
    verified_ok
}

fn check_json(input: &str, what: &str) {
    let (r, largest) = watched(|| std::panic::catch_unwind(|| Graph::from_json(input).is_ok()));
    assert!(r.is_ok(), "{what}: from_json panicked on {input:?}");
    assert!(
        largest <= (2 << 20) + 64 * input.len(),
        "{what}: {largest} bytes"
    );
}

fn seeds() -> Vec<Vec<u8>> {
    let mut small = Graph::new("g");
    small.input("x", Shape::new(&[2], DType::F32)).unwrap();
    vec![
        corpus::every_op().to_bytes(),
        corpus::elementwise().to_bytes(),
        small.to_bytes(),
        Graph::new("").to_bytes(),
    ]
}

/// A varint of a huge value, as postcard writes lengths and counts.
fn huge_varint(rng: &mut Rng) -> Vec<u8> {
    let mut v = rng.next_u64() | (1 << 40);
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

#[test]
fn fuzz_binary_mutations_never_panic() {
    let mut rng = Rng::new("fuzz_binary_mutations_never_panic");
    let seeds = seeds();
    let iters = 4000;
    let (mut ok, mut total) = (0, 0);
    for it in 0..iters {
        let src = &seeds[rng.below(seeds.len())];
        let mut bd = body(src).to_vec();
        let class = it % 5;
        let input = match class {
            // Bit flips anywhere; the frame checks should catch nearly all of these.
            0 => {
                let mut b = src.clone();
                for _ in 0..1 + rng.below(3) {
                    let i = rng.below(b.len());
                    b[i] ^= 1 << rng.below(8);
                }
                b
            }
            // Bit flips inside a well-framed body.
            1 => {
                if !bd.is_empty() {
                    for _ in 0..1 + rng.below(4) {
                        let i = rng.below(bd.len());
                        bd[i] ^= 1 << rng.below(8);
                    }
                }
                frame(&bd)
            }
            // Splice a run of another seed's body into this one.
            2 => {
                let other = body(&seeds[rng.below(seeds.len())]);
                let (a, n) = (rng.below(other.len() + 1), rng.below(40));
                let piece = &other[a..(a + n).min(other.len())];
                let at = rng.below(bd.len() + 1);
                let cut = rng.below(8).min(bd.len() - at);
                bd.splice(at..at + cut, piece.iter().copied());
                frame(&bd)
            }
            // Overwrite or insert a huge length prefix.
            3 => {
                let v = huge_varint(&mut rng);
                let at = rng.below(bd.len() + 1);
                if rng.below(2) == 0 {
                    let end = (at + v.len()).min(bd.len());
                    bd.splice(at..end, v);
                } else {
                    bd.splice(at..at, v);
                }
                frame(&bd)
            }
            // Random bytes in a random-length window of the body.
            _ => {
                let at = rng.below(bd.len() + 1);
                let n = rng.below(16).min(bd.len() - at);
                for b in &mut bd[at..at + n] {
                    *b = rng.next_u64() as u8;
                }
                frame(&bd)
            }
        };
        total += 1;
        ok += check_bytes(&input, &format!("iteration {it} class {class}")) as usize;
    }
    // Every-length truncations of every seed, raw and re-framed.
    for (si, s) in seeds.iter().enumerate() {
        for cut in 0..s.len() {
            assert!(
                !check_bytes(&s[..cut], &format!("seed {si} cut {cut}")),
                "truncation at {cut} decoded"
            );
        }
        let bd = body(s);
        for cut in 0..bd.len() {
            check_bytes(&frame(&bd[..cut]), &format!("seed {si} body cut {cut}"));
        }
    }
    println!("{total} mutations, {ok} decoded and verified");
}

#[test]
fn fuzz_json_mutations_never_panic() {
    let mut rng = Rng::new("fuzz_json_mutations_never_panic");
    let texts = [
        corpus::every_op().to_json().unwrap(),
        corpus::elementwise().to_json().unwrap(),
    ];
    for (ti, t) in texts.iter().enumerate() {
        for cut in (0..t.len()).step_by(7) {
            if t.is_char_boundary(cut) {
                check_json(&t[..cut], &format!("text {ti} cut {cut}"));
            }
        }
    }
    let alphabet = b"{}[]\":,-0123456789.eE truefalsnul\\";
    for it in 0..2000 {
        let mut b = texts[rng.below(texts.len())].clone().into_bytes();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(b.len());
            match rng.below(3) {
                0 => b[i] = alphabet[rng.below(alphabet.len())],
                1 => {
                    b.remove(i);
                }
                _ => {
                    let n = rng.below(30).min(b.len() - i);
                    let j = rng.below(b.len() - n + 1);
                    let piece = b[j..j + n].to_vec();
                    b.splice(i..i, piece);
                }
            }
        }
        let s = String::from_utf8_lossy(&b);
        check_json(&s, &format!("iteration {it}"));
    }
}
