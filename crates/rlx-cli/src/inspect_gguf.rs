//! `rlx inspect FILE.gguf`: a GGUF model's header, metadata (long arrays and strings cut to
//! their first items and a count) and tensor table, with totals per ggml type.
use crate::CliError;
use rlx_io::gguf::Gguf;
use std::collections::BTreeMap;
use std::path::Path;

/// Array items shown before "… (N items)".
const MAX_ITEMS: usize = 6;

/// True when `file` is to be read as GGUF: named `.gguf`, or starting with the magic.
pub fn is_gguf(file: &Path) -> bool {
    if file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    {
        return true;
    }
    let mut magic = [0u8; 4];
    std::fs::File::open(file)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok_and(|()| magic == rlx_io::gguf::GGUF_MAGIC)
}

pub fn run(file: &Path) -> Result<(), CliError> {
    let g = Gguf::open(file)?;
    println!(
        "{}: GGUF v{}, {} metadata keys, {} tensors, alignment {}, data at byte {}, {} bytes",
        file.display(),
        g.version(),
        g.metadata().len(),
        g.tensors().len(),
        g.alignment(),
        g.data_start(),
        g.file_len()
    );

    println!("\nmetadata:");
    let key_w = g
        .metadata()
        .entries()
        .iter()
        .map(|(k, _)| k.len())
        .max()
        .unwrap_or(0);
    for (k, v) in g.metadata().entries() {
        println!(
            "  {k:key_w$}  {:13}  {}",
            v.type_name(),
            v.summary(MAX_ITEMS)
        );
    }

    println!("\ntensors:");
    let name_w = g
        .tensors()
        .iter()
        .map(|t| t.name().len())
        .max()
        .unwrap_or(0)
        .max(4);
    println!(
        "  {:name_w$}  {:7}  {:22}  {:>12}  {:>12}",
        "name", "type", "shape (row-major)", "offset", "bytes"
    );
    // Per type name: (tensors, elements, bytes).
    let mut by_type: BTreeMap<String, (usize, u64, u64)> = BTreeMap::new();
    let (mut elements, mut bytes) = (0u64, 0u64);
    for t in g.tensors() {
        let ty = t
            .ggml_type()
            .map(|ty| ty.name().to_string())
            .unwrap_or_else(|_| format!("type#{}", t.type_id()));
        let n_bytes = t.n_bytes().ok();
        println!(
            "  {:name_w$}  {ty:7}  {:22}  {:>12}  {:>12}",
            t.name(),
            format!("{:?}", t.shape()),
            t.offset(),
            n_bytes.map_or("?".to_string(), |b| b.to_string())
        );
        let e = by_type.entry(ty).or_default();
        e.0 += 1;
        e.1 += t.n_elements();
        e.2 += n_bytes.unwrap_or(0);
        elements += t.n_elements();
        bytes += n_bytes.unwrap_or(0);
    }
    println!(
        "\ntotal: {} tensors, {elements} elements, {bytes} bytes of tensor data",
        g.tensors().len()
    );
    for (ty, (n, e, b)) in by_type {
        println!("  {ty:7}  {n:5} tensors  {e:>12} elements  {b:>12} bytes");
    }
    Ok(())
}
