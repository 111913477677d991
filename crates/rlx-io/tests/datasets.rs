//! Dataset tests: the embedded digits, IDX round trips on files written here (plain and
//! gzip), every malformed-IDX path, the split and the batch iterator.
use flate2::write::GzEncoder;
use flate2::Compression;
use rlx_io::datasets::{
    load_idx_pair, load_mnist_dir, parse_idx, read_idx, IdxArray, IdxDType, MNIST_FILES,
};
use rlx_io::{Dataset, DatasetError};
use rlx_ir::env::Switch;
use rlx_testutil::Rng;
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh seed per run, printed (RLX_SEED replays it).
fn seed(test: &str) -> u64 {
    let s = rlx_ir::env::number(Switch::Seed).unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(7)
    });
    println!("[{test}] seed = {s} (replay with RLX_SEED={s})");
    s
}

/// Random bytes below `modulo`.
fn bytes(rng: &mut Rng, n: usize, modulo: u64) -> Vec<u8> {
    (0..n).map(|_| (rng.next_u64() % modulo) as u8).collect()
}

/// A temp dir unique to this test and run.
fn tmp_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "rlx-io-{test}-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).expect("gzip");
    e.finish().expect("gzip")
}

/// IDX header + data written by hand (independent of `IdxArray::to_bytes`).
fn idx_bytes(code: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 0, code, dims.len() as u8];
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write test file");
    p
}

/// Unwrap an `Idx` error and return (path, offset, message).
fn idx_err(r: Result<impl std::fmt::Debug, DatasetError>) -> (PathBuf, u64, String) {
    match r {
        Err(DatasetError::Idx { path, offset, msg }) => (path, offset, msg),
        other => panic!("expected DatasetError::Idx, got {other:?}"),
    }
}

#[test]
fn digits_embedded_parse() {
    let d = Dataset::digits().expect("embedded digits");
    assert_eq!((d.n, d.rows, d.cols), (1797, 8, 8));
    assert_eq!(d.images.len(), 1797 * 64);
    assert_eq!(d.num_classes(), 10);
    let counts = d.class_counts();
    // scikit-learn's documented per-class counts: every class has 174..=183 samples.
    assert!(
        counts.iter().all(|&c| (174..=183).contains(&c)),
        "{counts:?}"
    );
    assert_eq!(counts.iter().sum::<usize>(), 1797);
    assert!(d.images.iter().all(|&p| (0.0..=1.0).contains(&p)));
    assert!(d.images.contains(&1.0), "some pixel should reach 16/16");
    // The first sample is a 0: first row of its bitmap is 0,0,5,13,9,1,0,0.
    assert_eq!(d.labels[0], 0);
    let row0: Vec<f32> = d.image(0).unwrap()[..8].iter().map(|p| p * 16.0).collect();
    assert_eq!(row0, vec![0.0, 0.0, 5.0, 13.0, 9.0, 1.0, 0.0, 0.0]);
    assert!(rlx_io::datasets::DIGITS_LICENSE.contains("BSD 3-Clause"));
}

#[test]
fn digits_csv_errors_name_the_line() {
    let good: String = (0..64).map(|_| "3,").collect::<String>() + "7\n";
    let d = rlx_io::datasets::parse_digits_csv(&good, "t").expect("one good line");
    assert_eq!((d.n, d.labels[0]), (1, 7));
    let bad_count = good.clone() + "1,2,3\n";
    let bad_pixel = good.clone() + &(0..64).map(|_| "17,").collect::<String>() + "1\n";
    let bad_label = good.clone() + &(0..64).map(|_| "1,").collect::<String>() + "x\n";
    for text in [bad_count, bad_pixel, bad_label] {
        match rlx_io::datasets::parse_digits_csv(&text, "t") {
            Err(DatasetError::Csv { line, .. }) => assert_eq!(line, 2),
            other => panic!("expected a Csv error, got {other:?}"),
        }
    }
}

#[test]
fn split_is_stratified_and_deterministic() {
    let d = Dataset::digits().unwrap();
    let s = seed("split_is_stratified_and_deterministic");
    let (train, test) = d.split(0.2, s).unwrap();
    assert_eq!(train.n + test.n, d.n);
    let (tc, ac) = (test.class_counts(), d.class_counts());
    for c in 0..10 {
        let want = (ac[c] as f64 * 0.2).round() as usize;
        assert_eq!(tc[c], want, "class {c}");
    }
    // Same seed, same split; a different seed moves samples.
    let (_, test2) = d.split(0.2, s).unwrap();
    assert_eq!(test, test2);
    let (_, test3) = d.split(0.2, s ^ 0x5555).unwrap();
    assert_ne!(test.images, test3.images);
    // Train and test are disjoint and cover the data: match samples by pixels + label.
    let key = |ds: &Dataset, i: usize| {
        let mut k: Vec<u8> = ds
            .image(i)
            .unwrap()
            .iter()
            .map(|p| (p * 16.0) as u8)
            .collect();
        k.push(ds.labels[i]);
        k
    };
    let all: Vec<Vec<u8>> = (0..d.n).map(|i| key(&d, i)).collect();
    let mut pool: std::collections::HashMap<Vec<u8>, usize> = Default::default();
    for k in &all {
        *pool.entry(k.clone()).or_default() += 1;
    }
    for (ds, m) in [(&train, train.n), (&test, test.n)] {
        for i in 0..m {
            let c = pool.get_mut(&key(ds, i)).expect("sample from the data");
            assert!(*c > 0, "sample used twice");
            *c -= 1;
        }
    }
    assert!(pool.values().all(|&c| c == 0));
    for f in [0.0, 1.0, -0.5, f64::NAN] {
        assert!(matches!(d.split(f, 1), Err(DatasetError::BadArgument(_))));
    }
}

#[test]
fn batches_cover_once_in_shuffled_order() {
    let d = Dataset::digits().unwrap();
    let s = seed("batches_cover_once_in_shuffled_order");
    let bs = 64;
    let batches: Vec<_> = d.batches(bs, s).unwrap().collect();
    assert_eq!(batches.len(), d.n.div_ceil(bs));
    assert_eq!(batches.last().unwrap().len(), d.n % bs);
    let mut seen = HashSet::new();
    let mut first_labels = Vec::new();
    for b in &batches {
        let [nb, c, h, w] = b.image_shape();
        assert_eq!((c, h, w), (1, 8, 8));
        assert_eq!(b.images.len(), nb * 64);
        let t = b.images_tensor(rlx_ir::DType::F32);
        assert_eq!(t.shape, vec![nb, 1, 8, 8]);
        assert_eq!(b.labels_tensor().to_i64_vec().len(), nb);
        for i in 0..nb {
            // Find the sample by content: each batch row must be some dataset row with its label.
            let img = &b.images[i * 64..(i + 1) * 64];
            let j = (0..d.n)
                .find(|&j| {
                    !seen.contains(&j) && d.image(j).unwrap() == img && d.labels[j] == b.labels[i]
                })
                .expect("batch row is an unused dataset sample");
            seen.insert(j);
            first_labels.push(j);
        }
    }
    assert_eq!(seen.len(), d.n);
    assert_ne!(
        first_labels,
        (0..d.n).collect::<Vec<_>>(),
        "order is shuffled"
    );
    let again: Vec<_> = d.batches(bs, s).unwrap().collect();
    assert_eq!(again, batches, "same seed, same batches");
    let dropped: Vec<_> = d.batches(bs, s).unwrap().drop_last().collect();
    assert_eq!(dropped.len(), d.n / bs);
    assert!(dropped.iter().all(|b| b.len() == bs));
    assert!(d.batches(0, s).is_err());
}

fn write_pair(
    dir: &Path,
    rng: &mut Rng,
    n: u32,
    rows: u32,
    cols: u32,
    gzip: bool,
) -> (Vec<u8>, Vec<u8>) {
    let px = bytes(rng, (n * rows * cols) as usize, 256);
    let labels = bytes(rng, n as usize, 10);
    let (mut ib, mut lb) = (
        idx_bytes(0x08, &[n, rows, cols], &px),
        idx_bytes(0x08, &[n], &labels),
    );
    let suffix = if gzip { ".gz" } else { "" };
    if gzip {
        ib = gz(&ib);
        lb = gz(&lb);
    }
    write(dir, &format!("{}{suffix}", MNIST_FILES[0]), &ib);
    write(dir, &format!("{}{suffix}", MNIST_FILES[1]), &lb);
    write(dir, &format!("{}{suffix}", MNIST_FILES[2]), &ib);
    write(dir, &format!("{}{suffix}", MNIST_FILES[3]), &lb);
    (px, labels)
}

#[test]
fn idx_round_trip_plain_and_gzip() {
    let mut rng = Rng::seeded(seed("idx_round_trip_plain_and_gzip"));
    for gzip in [false, true] {
        let dir = tmp_dir(if gzip { "rt-gz" } else { "rt-plain" });
        let (n, rows, cols) = (13 + (rng.next_u64() % 20) as u32, 7, 5);
        let (px, labels) = write_pair(&dir, &mut rng, n, rows, cols, gzip);
        for train in [true, false] {
            let d = load_mnist_dir(&dir, train).expect("load");
            assert_eq!((d.n, d.rows, d.cols), (n as usize, 7, 5));
            assert_eq!(d.labels, labels);
            let want: Vec<f32> = px.iter().map(|&p| p as f32 / 255.0).collect();
            assert_eq!(d.images, want);
        }
        std::fs::remove_dir_all(&dir).ok();
    }
    // Every element type decodes big-endian, via files and via in-memory bytes.
    let dir = tmp_dir("rt-types");
    let vals: Vec<f64> = (0..6)
        .map(|i| (rng.next_u64() % 200) as f64 - 100.0 + i as f64)
        .collect();
    let cases: [(IdxDType, Vec<u8>); 5] = [
        (IdxDType::I8, vals.iter().map(|&v| v as i8 as u8).collect()),
        (
            IdxDType::I16,
            vals.iter()
                .flat_map(|&v| (v as i16).to_be_bytes())
                .collect(),
        ),
        (
            IdxDType::I32,
            vals.iter()
                .flat_map(|&v| (v as i32).to_be_bytes())
                .collect(),
        ),
        (
            IdxDType::F32,
            vals.iter()
                .flat_map(|&v| (v as f32).to_be_bytes())
                .collect(),
        ),
        (
            IdxDType::F64,
            vals.iter().flat_map(|&v| v.to_be_bytes()).collect(),
        ),
    ];
    for (dt, data) in cases {
        let bytes = idx_bytes(dt.code(), &[2, 3], &data);
        let p = write(&dir, "a.idx.gz", &gz(&bytes));
        let a = read_idx(&p).expect("read");
        assert_eq!((a.dtype, a.dims.clone()), (dt, vec![2, 3]));
        assert_eq!(a.to_f64_vec(), vals, "{dt:?}");
        let b = parse_idx(&bytes, "mem").expect("parse");
        assert_eq!(a, b);
        assert_eq!(b.to_bytes().unwrap(), bytes);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn idx_malformed_files_give_offsets() {
    let mut rng = Rng::seeded(seed("idx_malformed_files_give_offsets"));
    let dir = tmp_dir("bad");
    let px = bytes(&mut rng, 4 * 3 * 3, 256);
    let good = idx_bytes(0x08, &[4, 3, 3], &px);
    for gzip in [false, true] {
        let enc = |b: &[u8]| if gzip { gz(b) } else { b.to_vec() };
        let name = if gzip { "x.gz" } else { "x" };

        let mut bad_magic = good.clone();
        bad_magic[1] = 0x17;
        let (p, off, msg) = idx_err(read_idx(write(&dir, name, &enc(&bad_magic))));
        assert_eq!(
            (p.file_name().unwrap().to_str().unwrap(), off),
            (name, 0),
            "{msg}"
        );
        assert!(msg.contains("magic"), "{msg}");

        let mut bad_type = good.clone();
        bad_type[2] = 0x0A;
        let (_, off, _) = idx_err(read_idx(write(&dir, name, &enc(&bad_type))));
        assert_eq!(off, 2);

        let (_, off, msg) = idx_err(read_idx(write(&dir, name, &enc(&good[..3]))));
        assert_eq!(off, 3, "{msg}");
        // Header cut inside the dims: the file ends at byte 9 of the 16-byte header.
        let (_, off, msg) = idx_err(read_idx(write(&dir, name, &enc(&good[..9]))));
        assert_eq!(off, 9, "{msg}");
        assert!(msg.contains("dims"), "{msg}");

        let cut = good.len() - 1 - (rng.next_u64() % 30) as usize;
        let (_, off, msg) = idx_err(read_idx(write(&dir, name, &enc(&good[..cut]))));
        assert_eq!(off as usize, cut, "{msg}");
        assert!(msg.contains("truncated"), "{msg}");

        let mut trailing = good.clone();
        trailing.push(1);
        let (_, off, _) = idx_err(read_idx(write(&dir, name, &enc(&trailing))));
        assert_eq!(off as usize, good.len());

        // Dims whose byte count overflows: reported at the dim that overflows, and no
        // allocation is attempted (this would be 2^96 bytes).
        let huge = idx_bytes(0x0E, &[u32::MAX, u32::MAX, u32::MAX, 2], &[]);
        let (_, off, msg) = idx_err(read_idx(write(&dir, name, &enc(&huge))));
        assert!((4..20).contains(&off) && off % 4 == 0, "{off} {msg}");
        assert!(msg.contains("overflow"), "{msg}");
        // A large but addressable claim on a tiny file is a truncation, not an allocation.
        let liar = idx_bytes(0x08, &[60000, 4096, 4096], &px);
        let (_, off, msg) = idx_err(read_idx(write(&dir, name, &enc(&liar))));
        assert_eq!(off as usize, liar.len(), "{msg}");
    }
    // A broken gzip stream is its own error kind.
    let mut z = gz(&good);
    let mid = z.len() / 2;
    z.truncate(mid);
    match read_idx(write(&dir, "cut.gz", &z)) {
        Err(DatasetError::Gzip { .. }) | Err(DatasetError::Idx { .. }) => {}
        other => panic!("expected an error for a cut gzip stream, got {other:?}"),
    }
    assert!(matches!(
        read_idx(dir.join("missing")),
        Err(DatasetError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

/// The deterministic counterpart of `fuzz/fuzz_targets/idx_from_bytes.rs`: mutated plain
/// and gzip IDX bytes (flipped, cut, grown, a header claiming 2^32 − 1 rows) return an error
/// or an array that round-trips; never a panic, never an allocation the bytes don't hold.
#[test]
fn idx_mutations_return_errors_not_panics() {
    let mut rng = Rng::seeded(seed("idx_mutations_return_errors_not_panics"));
    let good = idx_bytes(0x0D, &[3, 5], &bytes(&mut rng, 60, 256));
    let good_gz = gz(&good);
    let (mut decoded, mut failed) = (0, 0);
    for i in 0..4000 {
        let mut b = if i % 2 == 0 {
            good.clone()
        } else {
            good_gz.clone()
        };
        for _ in 0..1 + rng.next_u64() % 3 {
            let at = (rng.next_u64() as usize) % (b.len() + 1);
            match rng.next_u64() % 4 {
                0 if at < b.len() => b[at] = rng.next_u64() as u8,
                1 => b.truncate(at),
                2 => b.insert(at, rng.next_u64() as u8),
                3 if i % 2 == 0 && b.len() >= 8 => b[4..8].copy_from_slice(&u32::MAX.to_be_bytes()),
                _ => {}
            }
        }
        match parse_idx(&b, "mutated.idx") {
            Ok(a) => {
                decoded += 1;
                let again = parse_idx(&a.to_bytes().expect("encodes"), "again.idx");
                assert_eq!(again.expect("re-encoded array decodes"), a);
            }
            Err(_) => failed += 1,
        }
    }
    assert!(
        decoded > 0 && failed > 0,
        "{decoded} decoded, {failed} failed"
    );
}

#[test]
fn idx_pair_mismatches_are_errors() {
    let mut rng = Rng::seeded(seed("idx_pair_mismatches_are_errors"));
    let dir = tmp_dir("pair");
    let px = bytes(&mut rng, 5 * 4 * 4, 256);
    let imgs = write(&dir, "i", &idx_bytes(0x08, &[5, 4, 4], &px));
    let labels6 = write(&dir, "l6", &idx_bytes(0x08, &[6], &bytes(&mut rng, 6, 10)));
    match load_idx_pair(&imgs, &labels6) {
        Err(DatasetError::CountMismatch {
            n_images, n_labels, ..
        }) => assert_eq!((n_images, n_labels), (5, 6)),
        other => panic!("expected CountMismatch, got {other:?}"),
    }
    // Labels as a rank-2 array or images as i32 are rejected with the offending file named.
    let labels_2d = write(
        &dir,
        "l2",
        &idx_bytes(0x08, &[5, 1], &bytes(&mut rng, 5, 10)),
    );
    let (p, _, _) = idx_err(load_idx_pair(&imgs, &labels_2d));
    assert_eq!(p, labels_2d);
    let imgs_i32 = write(&dir, "ii", &idx_bytes(0x0C, &[1, 1, 2], &[0; 8]));
    let labels1 = write(&dir, "l1", &idx_bytes(0x08, &[1], &[3]));
    let (p, _, _) = idx_err(load_idx_pair(&imgs_i32, &labels1));
    assert_eq!(p, imgs_i32);
    match load_mnist_dir(&dir, true) {
        Err(DatasetError::NotFound { name, .. }) => assert_eq!(name, MNIST_FILES[0]),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert!(IdxArray {
        dtype: IdxDType::U8,
        dims: vec![2, 2],
        data: vec![1, 2, 3],
    }
    .to_bytes()
    .is_err());
    std::fs::remove_dir_all(&dir).ok();
}

/// Real Fashion-MNIST when installed (Debian `dataset-fashion-mnist`, or RLX_FASHION_MNIST).
#[test]
fn fashion_mnist_when_present() {
    let dir = rlx_ir::env::text(Switch::FashionMnist)
        .unwrap_or_else(|| rlx_io::datasets::DEBIAN_FASHION_MNIST_DIR.into());
    if !Path::new(&dir).join("t10k-labels-idx1-ubyte.gz").exists() {
        println!("fashion-mnist not installed at {dir}; skipped");
        return;
    }
    let test = load_mnist_dir(&dir, false).expect("t10k");
    assert_eq!((test.n, test.rows, test.cols), (10000, 28, 28));
    assert_eq!(test.class_counts(), vec![1000; 10]);
    let train = load_mnist_dir(&dir, true).expect("train");
    assert_eq!(train.n, 60000);
    assert_eq!(train.class_counts(), vec![6000; 10]);
}
