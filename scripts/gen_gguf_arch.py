"""Write small random-weight GGUFs of arch llama, qwen2 and gemma3 for the decoder tests.

  python3 scripts/gen_gguf_arch.py SMOLLM2.gguf OUT_DIR     (PYTHONPATH: gguf-py)

writes OUT_DIR/tiny-{llama,qwen2,gemma3}.gguf. Reproducible: each file's weights come from
numpy's default_rng with a fixed seed (SEEDS below), and the vocabulary is derived from the
SmolLM2 file deterministically, so the same inputs give the same bytes.

What each file exercises (metadata keys and tensor names as llama.cpp's llama-arch.cpp and
src/models/<arch>.cpp read them):
  llama   untied `output.weight`, F16 matrices, GQA 4/2, BPE with pre-tokenizer "llama-bpe"
          (the Llama 3 regex), BOS added (tokenizer.ggml.add_bos_token = true)
  qwen2   q/k/v biases, tied LM head (no output.weight), F32 matrices, pre-tokenizer "qwen2"
          (digits split one by one), no BOS
  gemma3  SentencePiece vocabulary ("llama" tokenizer model, byte fallback), head_dim 32 with
          width 64 (key_length != width / heads), QK-norm, post-attention and post-FFN norms,
          GeGLU, embeddings scaled by sqrt(width) (llama.cpp does that in the graph), sliding
          window of 8 on every other layer (pattern 2) with its own RoPE base, tied LM head,
          BOS added. Norm weights are stored as gemma's converter stores them: 1 + w already.
Weights are scaled so the logits are decisive (std of a few units): a near-uniform random
model would make greedy comparisons hinge on rounding. With a tied head, a random model whose
residual stream is mostly the input embedding predicts its input token at every position;
qwen2's output projections and gemma3's post-norms are scaled by 4 so the layers dominate.
"""

import sys

import numpy as np

import gguf

SEEDS = {"llama": 1001, "qwen2": 1002, "gemma3": 1003}
VOCAB = 2048  # SmolLM2's first tokens: its 17 specials, the byte alphabet, the first merges
WIDTH = 64
HEADS = 4
KV_HEADS = 2
FFN = 128


def smollm_vocab(path):
    r = gguf.GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    toks = strings("tokenizer.ggml.tokens")[:VOCAB]
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data][:VOCAB]
    have = set(toks)
    # Keep a merge only when both halves and the result survive the truncation, so the BPE
    # tokenizer never produces an id outside the vocabulary.
    merges = []
    for m in strings("tokenizer.ggml.merges"):
        a, b = m.split(" ", 1)
        if a in have and b in have and a + b in have:
            merges.append(m)
    return toks, types, merges


def gpt2_byte_decoder():
    """Map GPT-2's printable stand-in characters back to the bytes they encode."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def spm_vocab(bpe_toks, bpe_types):
    """A SentencePiece-style vocabulary (gemma layout: pad, eos, bos, unk, turn markers, byte
    fallback <0xXX>, then pieces with '▁' for space, scored so earlier pieces merge first)."""
    dec = gpt2_byte_decoder()
    toks = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
    types = [3, 3, 3, 2, 3, 3]  # control, control, control, unknown, control, control
    scores = [0.0] * len(toks)
    for b in range(256):
        toks.append(f"<0x{b:02X}>")
        types.append(6)  # byte
        scores.append(0.0)
    seen = set(toks)
    for i, (t, ty) in enumerate(zip(bpe_toks, bpe_types)):
        if ty != 1:
            continue
        try:
            text = bytes(dec[c] for c in t).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            continue  # a partial UTF-8 sequence: byte fallback covers it
        piece = text.replace(" ", "\u2581")
        if piece in seen or piece == "":
            continue
        seen.add(piece)
        toks.append(piece)
        types.append(1)
        scores.append(-float(i))
    return toks, types, scores


def common(w, arch, layers, file_type, ctx=2048):
    w.add_context_length(ctx)
    w.add_embedding_length(WIDTH)
    w.add_block_count(layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(file_type)  # 0: all F32, 1: mostly F16
    w.add_string("general.name", f"rlx tiny random {arch}")


def bpe_tokenizer(w, toks, types, merges, pre, add_bos, bos, eos):
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(add_bos)
    w.add_vocab_size(len(toks))


class Weights:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def mat(self, rows, cols, dtype):
        """A (rows = out, cols = in) matrix with std 1/sqrt(in), as numpy (GGUF ne = [in, out])."""
        x = self.rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)
        return x.astype(dtype)

    def norm(self, n):
        return (1.0 + 0.1 * self.rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    def vec(self, n, std):
        return (std * self.rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    def emb(self, vocab, dtype):
        return self.rng.standard_normal((vocab, WIDTH), dtype=np.float32).astype(dtype)


def write_llama(vocab, out):
    toks, types, merges = vocab
    layers, hd, f16 = 2, WIDTH // HEADS, np.float16
    w = gguf.GGUFWriter(out, "llama")
    common(w, "llama", layers, 1)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(500000.0)
    bpe_tokenizer(w, toks, types, merges, "llama-bpe", True, 0, 2)
    g = Weights(SEEDS["llama"])
    w.add_tensor("token_embd.weight", g.emb(len(toks), f16))
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", g.norm(WIDTH))
        w.add_tensor(p + "attn_q.weight", g.mat(HEADS * hd, WIDTH, f16))
        w.add_tensor(p + "attn_k.weight", g.mat(KV_HEADS * hd, WIDTH, f16))
        w.add_tensor(p + "attn_v.weight", g.mat(KV_HEADS * hd, WIDTH, f16))
        w.add_tensor(p + "attn_output.weight", g.mat(WIDTH, HEADS * hd, f16))
        w.add_tensor(p + "ffn_norm.weight", g.norm(WIDTH))
        w.add_tensor(p + "ffn_gate.weight", g.mat(FFN, WIDTH, f16))
        w.add_tensor(p + "ffn_up.weight", g.mat(FFN, WIDTH, f16))
        w.add_tensor(p + "ffn_down.weight", g.mat(WIDTH, FFN, f16))
    w.add_tensor("output_norm.weight", g.norm(WIDTH))
    w.add_tensor("output.weight", (4.0 * g.mat(len(toks), WIDTH, np.float32)).astype(f16))
    finish(w, out)


def write_qwen2(vocab, out):
    toks, types, merges = vocab
    layers, hd, f32 = 2, WIDTH // HEADS, np.float32
    w = gguf.GGUFWriter(out, "qwen2")
    common(w, "qwen2", layers, 0)
    w.add_rope_freq_base(1000000.0)
    bpe_tokenizer(w, toks, types, merges, "qwen2", False, 0, 2)
    g = Weights(SEEDS["qwen2"])
    w.add_tensor("token_embd.weight", g.emb(len(toks), f32))
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", g.norm(WIDTH))
        w.add_tensor(p + "attn_q.weight", g.mat(HEADS * hd, WIDTH, f32))
        w.add_tensor(p + "attn_q.bias", g.vec(HEADS * hd, 0.5))
        w.add_tensor(p + "attn_k.weight", g.mat(KV_HEADS * hd, WIDTH, f32))
        w.add_tensor(p + "attn_k.bias", g.vec(KV_HEADS * hd, 0.5))
        w.add_tensor(p + "attn_v.weight", g.mat(KV_HEADS * hd, WIDTH, f32))
        w.add_tensor(p + "attn_v.bias", g.vec(KV_HEADS * hd, 0.5))
        w.add_tensor(p + "attn_output.weight", 4.0 * g.mat(WIDTH, HEADS * hd, f32))
        w.add_tensor(p + "ffn_norm.weight", g.norm(WIDTH))
        w.add_tensor(p + "ffn_gate.weight", g.mat(FFN, WIDTH, f32))
        w.add_tensor(p + "ffn_up.weight", g.mat(FFN, WIDTH, f32))
        w.add_tensor(p + "ffn_down.weight", 4.0 * g.mat(WIDTH, FFN, f32))
    w.add_tensor("output_norm.weight", g.norm(WIDTH))
    finish(w, out)


def write_gemma3(vocab, out):
    bpe_toks, bpe_types, _ = vocab
    toks, types, scores = spm_vocab(bpe_toks, bpe_types)
    layers, hd, f16 = 4, 32, np.float16
    w = gguf.GGUFWriter(out, "gemma3")
    common(w, "gemma3", layers, 1)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(1000000.0)
    w.add_rope_freq_base_swa(10000.0)
    w.add_sliding_window(8)
    w.add_uint32("gemma3.attention.sliding_window_pattern", 2)  # layer i is dense when i % 2 == 1
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)
    w.add_vocab_size(len(toks))
    g = Weights(SEEDS["gemma3"])
    # std 0.35: large enough for decisive logits through the tied head, small enough that the
    # sqrt(width)-scaled embedding does not swamp the layers' outputs in the residual stream
    # (at std 1 every position just predicts its own input token)
    w.add_tensor("token_embd.weight", (0.35 * g.emb(len(toks), np.float32)).astype(f16))
    for i in range(layers):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", g.norm(WIDTH))
        w.add_tensor(p + "attn_q.weight", g.mat(HEADS * hd, WIDTH, f16))
        w.add_tensor(p + "attn_k.weight", g.mat(KV_HEADS * hd, WIDTH, f16))
        w.add_tensor(p + "attn_v.weight", g.mat(KV_HEADS * hd, WIDTH, f16))
        w.add_tensor(p + "attn_q_norm.weight", g.norm(hd))
        w.add_tensor(p + "attn_k_norm.weight", g.norm(hd))
        w.add_tensor(p + "attn_output.weight", g.mat(WIDTH, HEADS * hd, f16))
        w.add_tensor(p + "post_attention_norm.weight", 4.0 * g.norm(WIDTH))
        w.add_tensor(p + "ffn_norm.weight", g.norm(WIDTH))
        w.add_tensor(p + "ffn_gate.weight", g.mat(FFN, WIDTH, f16))
        w.add_tensor(p + "ffn_up.weight", g.mat(FFN, WIDTH, f16))
        w.add_tensor(p + "ffn_down.weight", g.mat(WIDTH, FFN, f16))
        w.add_tensor(p + "post_ffw_norm.weight", 4.0 * g.norm(WIDTH))
    w.add_tensor("output_norm.weight", g.norm(WIDTH))
    finish(w, out)


def finish(w, out):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", out)


def main():
    smol, out_dir = sys.argv[1], sys.argv[2]
    vocab = smollm_vocab(smol)
    write_llama(vocab, f"{out_dir}/tiny-llama.gguf")
    write_qwen2(vocab, f"{out_dir}/tiny-qwen2.gguf")
    write_gemma3(vocab, f"{out_dir}/tiny-gemma3.gguf")


if __name__ == "__main__":
    main()
