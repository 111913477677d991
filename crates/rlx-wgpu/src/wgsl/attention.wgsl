// Tiled flash attention (see lower/transformer_attention.rs): one workgroup per (query
// block, head, batch). The Q block is staged once; K and V tiles take turns in one
// workgroup array; scores and probabilities live in workgroup memory only, with an online
// softmax in f32 (running max m, running sum l, rescale alpha per tile). The lowering
// prepends the constants (BQ, BK, D, DV, SQ, NA, strides, mask code) and the accessors
// ld_q/ld_k/ld_v, keep(b, key), first_pos() and st_o.
//
// K rows sit KD = D + 1 floats apart in workgroup memory: the score loop's invocations
// read one key each at the same c, which a stride of D (a multiple of the bank count for
// the usual head sizes) would put all in one bank.
//
// Masked scores are marked with NEG (finite, far below any real score) and tested by
// comparison, so nothing depends on the driver's handling of infinities.
const NEG: f32 = -3.0e38;
const NEG_T: f32 = -1.0e38;

var<workgroup> wq: array<f32, QN>;
var<workgroup> wkv: array<f32, KVN>;
var<workgroup> wp: array<f32, PN>;
var<workgroup> walpha: array<f32, BQ>;
var<workgroup> wm: array<f32, BQ>;
var<workgroup> wl: array<f32, BQ>;
var<workgroup> wbase: i32;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i0 = wid.x * BQ;
    let h = wid.y;
    let b = wid.z;
    let kvh = h / GROUP;
    // Position of query 0 (past, or Sk - Sq: negative when there are more queries than
    // keys), made uniform for the loop bounds below.
    if (lid == 0u) { wbase = first_pos(); }
    let base = workgroupUniformLoad(&wbase);
    let valid = base + i32(SQ);
    let last = i32(min(i0 + BQ, SQ)) - 1;
    // Keys some query of the block may see: [lo, hi).
    var hi_i = valid;
    if (MASK == 1u || MASK == 2u) { hi_i = min(valid, base + last + 1); }
    var lo_i = 0;
    if (MASK == 2u) { lo_i = base + i32(i0) + 1 - i32(WIN); }
    let lo = u32(max(lo_i, 0));
    let hi = u32(max(hi_i, 0));
    for (var e = lid; e < QN; e += 64u) {
        let r = e / D;
        var x = 0.0;
        if (i0 + r < SQ) { x = ld_q(b * QB + h * QH + (i0 + r) * QS + e % D); }
        wq[e] = x;
    }
    for (var r = lid; r < BQ; r += 64u) {
        wm[r] = NEG;
        wl[r] = 0.0;
    }
    var acc: array<f32, NA>;
    for (var k = 0u; k < NA; k++) { acc[k] = 0.0; }
    workgroupBarrier();
    for (var t0 = lo; t0 < hi; t0 += BK) {
        for (var e = lid; e < BK * D; e += 64u) {
            let j = e / D;
            var x = 0.0;
            if (t0 + j < hi) { x = ld_k(b * KB + kvh * KH + (t0 + j) * KS + e % D); }
            wkv[j * KD + e % D] = x;
        }
        workgroupBarrier();
        for (var e = lid; e < PN; e += 64u) {
            let r = e / BK;
            let j = e % BK;
            let kp = i32(t0 + j);
            let qp = base + i32(i0 + r);
            var ok = t0 + j < hi && i0 + r < SQ;
            if (MASK == 1u) { ok = ok && kp <= qp; }
            if (MASK == 2u) { ok = ok && kp <= qp && kp + i32(WIN) > qp; }
            if (MASK == 3u) { ok = ok && keep(b, t0 + j); }
            var s = NEG;
            if (ok) {
                var dot = 0.0;
                for (var c = 0u; c < D; c++) { dot += wq[r * D + c] * wkv[j * KD + c]; }
                s = score(dot);
            }
            wp[e] = s;
        }
        workgroupBarrier();
        for (var e = lid; e < BK * DV; e += 64u) {
            let j = e / DV;
            var x = 0.0;
            if (t0 + j < hi) { x = ld_v(b * VB + kvh * VH + (t0 + j) * VS + e % DV); }
            wkv[e] = x;
        }
        if (lid < BQ) {
            let m0 = wm[lid];
            var m = m0;
            for (var j = 0u; j < BK; j++) { m = max(m, wp[lid * BK + j]); }
            var l = wl[lid];
            var alpha = 1.0;
            if (m > NEG_T) {
                alpha = select(exp(m0 - m), 0.0, m0 <= NEG_T);
                l = l * alpha;
                for (var j = 0u; j < BK; j++) {
                    let s = wp[lid * BK + j];
                    let p = select(exp(s - m), 0.0, s <= NEG_T);
                    wp[lid * BK + j] = p;
                    l += p;
                }
            } else {
                for (var j = 0u; j < BK; j++) { wp[lid * BK + j] = 0.0; }
            }
            walpha[lid] = alpha;
            wm[lid] = m;
            wl[lid] = l;
        }
        workgroupBarrier();
        for (var k = 0u; k < NA; k++) {
            let idx = lid + 64u * k;
            if (idx < BQ * DV) {
                let r = idx / DV;
                let c = idx % DV;
                var a = acc[k] * walpha[r];
                for (var j = 0u; j < BK; j++) { a += wp[r * BK + j] * wkv[j * DV + c]; }
                acc[k] = a;
            }
        }
        workgroupBarrier();
    }
    for (var k = 0u; k < NA; k++) {
        let idx = lid + 64u * k;
        let r = idx / DV;
        if (idx < BQ * DV && i0 + r < SQ) {
            let l = wl[r];
            st_o(b * OB + h * OH + (i0 + r) * OS + idx % DV, select(acc[k] / l, 0.0, l == 0.0));
        }
    }
}
