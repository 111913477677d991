//! Every hand-written kernel source compiles with NVRTC for sm_90. Needs only libnvrtc and
//! the CUDA headers (CI takes both from PyPI wheels), no GPU. Skips when libnvrtc is absent
//! unless `RLX_REQUIRE_NVRTC=1`.
use rlx_cuda::kernels::{Lib, Src};
use rlx_cuda::nvrtc;

pub fn nvrtc_or_skip() -> bool {
    if nvrtc::nvrtc_available() {
        return true;
    }
    if rlx_ir::env::flag(rlx_ir::env::Switch::RequireNvrtc) {
        panic!("RLX_REQUIRE_NVRTC=1 but libnvrtc was not found on the loader path");
    }
    eprintln!("skipping: libnvrtc not found (set LD_LIBRARY_PATH to CUDA 13's lib folder)");
    false
}

#[test]
fn every_static_source_compiles_for_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    // RLX_KERNEL_SOURCES=norm,linalg compiles only those (a quick check while editing one).
    let only = rlx_ir::env::text(rlx_ir::env::Switch::KernelSources);
    let mut failed = Vec::new();
    for lib in Lib::ALL {
        let name = lib.name();
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n == name))
        {
            continue;
        }
        // The library whole and each of its shards, compiled side by side.
        let srcs: Vec<Src> = std::iter::once(Src::Lib(lib))
            .chain(lib.shard_tags().iter().map(|t| Src::Shard(lib, t)))
            .collect();
        let built: Vec<_> = std::thread::scope(|s| {
            let jobs: Vec<_> = srcs
                .iter()
                .map(|src| {
                    s.spawn(move || {
                        let t = std::time::Instant::now();
                        let r = nvrtc::compile_uncached(&src.name(), &src.full(), "sm_90");
                        (r, t.elapsed().as_secs_f64())
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().unwrap()).collect()
        });
        let mut whole = Vec::new();
        let mut shards = Vec::new();
        for (src, (r, secs)) in srcs.iter().zip(built) {
            match r {
                Ok(cubin) => {
                    assert!(!cubin.is_empty(), "{}: empty CUBIN", src.name());
                    // With RLX_CACHE_DIR set, leave the CUBINs in that cache (warms a device run).
                    if rlx_ir::env::is_set(rlx_ir::env::Switch::CacheDir) {
                        nvrtc::store(nvrtc::cache_path(src, "sm_90").as_deref(), &cubin);
                    }
                    let syms = kernel_symbols(&cubin);
                    println!(
                        "{}: {} bytes of sm_90 CUBIN, {} kernels, {secs:.1} s",
                        src.name(),
                        cubin.len(),
                        syms.len()
                    );
                    match src {
                        Src::Shard(_, tag) => shards.push((*tag, syms)),
                        _ => whole = syms,
                    }
                }
                Err(e) => failed.push(format!("{e}")),
            }
        }
        // Every kernel of a sharded library is in the shard the device looks in first (the
        // device falls back to the whole library, slowly, for one that is not).
        if !shards.is_empty() && !whole.is_empty() {
            for k in &whole {
                let tag = lib
                    .shard_of(k)
                    .expect("a sharded library routes every kernel");
                let held = shards.iter().find(|(t, _)| *t == tag).map(|(_, s)| s);
                assert!(
                    held.is_some_and(|s| s.contains(k)),
                    "{name}: kernel {k} is not in shard {tag}"
                );
            }
            let split: usize = shards.iter().map(|(_, s)| s.len()).sum();
            assert!(
                split >= whole.len(),
                "{name}: shards hold fewer kernels than the library"
            );
        }
    }
    assert!(
        failed.is_empty(),
        "kernel sources failed to compile:\n{}",
        failed.join("\n")
    );
}

/// The names of the kernels (global functions) in a CUBIN: its ELF symbol table's global
/// FUNC symbols.
fn kernel_symbols(elf: &[u8]) -> Vec<String> {
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a CUBIN is a 64-bit ELF image");
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));
    let section = |i: usize| shoff + i * shentsize;
    let mut names = Vec::new();
    for i in 0..shnum {
        let sh = section(i);
        if u32_at(sh + 4) != 2 {
            continue; // SHT_SYMTAB only
        }
        let (off, size, ent) = (u64_at(sh + 0x18), u64_at(sh + 0x20), u64_at(sh + 0x38));
        let strtab = u64_at(section(u32_at(sh + 0x28)) + 0x18);
        for s in (off..off + size).step_by(ent.max(1)) {
            let info = elf[s + 4];
            // STB_GLOBAL functions: the kernels.
            if info >> 4 == 1 && info & 0xf == 2 {
                let at = strtab + u32_at(s);
                let end = elf[at..].iter().position(|&b| b == 0).unwrap();
                names.push(String::from_utf8_lossy(&elf[at..at + end]).into_owned());
            }
        }
    }
    names.sort();
    names
}
