//! The body of the `safetensors_from_bytes` fuzz target, as a plain function so
//! `tests/safetensors_from_bytes.rs` runs it over seeded mutations of valid files.
//!
//! Any input must parse or fail with an error, never panic; a file that parses must hand
//! out every tensor (bytes of exactly its element count × width, or a typed dtype error),
//! and the shape/dtype checks must refuse what does not match without a panic.
use rlx_io::safetensors::SafeTensors;

/// What became of one input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SafetensorsOutcome {
    Refused,
    /// It parsed; how many tensors converted to host tensors.
    Parsed {
        converted: usize,
    },
}

pub fn safetensors_from_bytes(data: &[u8]) -> SafetensorsOutcome {
    let st = match SafeTensors::from_bytes("fuzz.safetensors", data.to_vec()) {
        Ok(st) => st,
        Err(e) => {
            let _ = e.to_string();
            return SafetensorsOutcome::Refused;
        }
    };
    let mut converted = 0;
    let names: Vec<String> = st.names().map(str::to_string).collect();
    assert_eq!(names.len(), st.len());
    for name in &names {
        let t = st.get(name).expect("a listed tensor is found");
        assert_eq!(t.name, name);
        if let Some(dt) = t.dtype {
            assert_eq!(t.data.len(), t.numel() * dt.size_bytes(), "tensor {name}");
        }
        match t.to_host() {
            Ok(h) => {
                assert_eq!(h.shape, t.shape);
                converted += 1;
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
        let _ = st.float(name, t.shape).map_err(|e| e.to_string());
        let _ = st.float(name, &[t.numel() + 1]).map_err(|e| e.to_string());
    }
    assert!(st.get("\u{0}not-a-tensor").is_err());
    SafetensorsOutcome::Parsed { converted }
}
