//! Arbitrary bytes into the graph decoders: they must return, never panic. The bytes are
//! tried as a whole file, as a body inside a valid frame (libFuzzer cannot forge the
//! CRC, so without this the body decoder would rarely be reached), and as JSON. A graph
//! that decodes must re-encode to bytes that decode to the same encoding.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rlx_ir::{crc32, Graph, GRAPH_FORMAT_VERSION, GRAPH_MAGIC};

fn round_trip(g: &Graph) {
    let again = g.to_bytes();
    let g2 = Graph::from_bytes_unverified(&again).expect("re-encoded graph decodes");
    assert_eq!(g2.to_bytes(), again);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = Graph::from_bytes_unverified(data) {
        round_trip(&g);
    }
    let _ = Graph::from_bytes(data);

    let mut framed = GRAPH_MAGIC.to_vec();
    framed.extend_from_slice(&GRAPH_FORMAT_VERSION.to_le_bytes());
    framed.extend_from_slice(&(data.len() as u64).to_le_bytes());
    framed.extend_from_slice(data);
    let crc = crc32(&framed);
    framed.extend_from_slice(&crc.to_le_bytes());
    if let Ok(g) = Graph::from_bytes_unverified(&framed) {
        round_trip(&g);
    }
    let _ = Graph::from_bytes(&framed);

    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Graph::from_json(text);
        if let Ok(g) = Graph::from_json_unverified(text) {
            if let Ok(j) = g.to_json() {
                Graph::from_json_unverified(&j).expect("re-written JSON parses");
            }
        }
    }
});
