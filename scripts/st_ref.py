"""sentence-transformers' own embeddings of all-MiniLM-L6-v2, for rlx's sentence embedder tests.

  $(bash scripts/hf_ref_env.sh) scripts/st_ref.py [MODEL_DIR] [OUT.json]

MODEL_DIR defaults to $RLX_CACHE/hf/all-MiniLM-L6-v2 (scripts/hf_ref_env.sh unpacks it), OUT to
crates/rlx-models/tests/data/st_ref_minilm.json. For each of SENTENCES (36, from one word to
several paragraphs, five past 256 tokens and one at 206; accents, CJK, emoji, digits, code,
mixed case):
  ids        the model's token ids after sentence-transformers' truncation at max_seq_length
             (256), as SentenceTransformer.tokenize gives them for that sentence alone
  embedding  SentenceTransformer(dir, device="cpu").encode(SENTENCES, batch_size=32): the
             pipeline modules.json describes (Transformer, Pooling, Normalize), so the vectors
             are normalised by the pipeline itself; f32, 7 significant digits
plus the folder's modules.json, pooling config and sentence_bert_config.json as read, the
truncation and padding tokenizer.json itself asks for (which sentence-transformers overrides),
and the smallest cosine between the batched and the one-at-a-time embeddings (how much padding moves
the reference itself).
"""

import json
import os
import sys

import numpy as np
import sentence_transformers
import torch
import transformers
from sentence_transformers import SentenceTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))

PROSE = (
    "The harbour town woke slowly. Fishing boats came in with the tide, gulls followed them, "
    "and by seven the quay smelled of diesel, salt and fresh bread from the bakery on the "
    "corner. Nobody hurried; the ferry to the islands left at nine and it had never once left "
    "early. Children walked to school along the sea wall, counting the boats, arguing about "
    "which one was the fastest and whose uncle owned it. In the afternoon the wind picked up, "
    "the harbour master raised the small-craft warning, and the cafés moved their tables "
    "inside. "
)
CODE = (
    "fn softmax(xs: &mut [f32]) {\n    let m = xs.iter().cloned().fold(f32::MIN, f32::max);\n"
    "    let mut s = 0.0;\n    for x in xs.iter_mut() { *x = (*x - m).exp(); s += *x; }\n"
    "    for x in xs.iter_mut() { *x /= s; }\n}\n"
    "def mean_pool(h, mask):\n    m = mask.unsqueeze(-1).float()\n"
    "    return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)\n"
)
FRENCH = (
    "Le café était presque vide ce matin-là. Une vieille dame lisait le journal près de la "
    "fenêtre, un étudiant révisait ses notes de mécanique quantique, et le serveur essuyait "
    "les verres en sifflant une chanson que personne ne reconnaissait. Dehors, la pluie "
    "tombait doucement sur les pavés de la place Saint-Étienne. "
)
CJK = (
    "東京の朝は早い。電車は六時前から混み始め、駅のホームには眠そうな会社員が並んでいる。"
    "北京的秋天很美，天空很高，树叶慢慢变黄。我们在公园里散步，聊了很久。"
    "서울의 밤은 밝고 시끄럽다. 사람들은 늦게까지 거리에서 음식을 먹고 이야기를 나눈다. "
)

SENTENCES = [
    "Hello",
    "embeddings",
    "A cat.",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
    "tHe QuIcK bRoWn FoX",
    "How do I reset my password?",
    "I forgot my login credentials and cannot sign in.",
    "The weather in Paris is lovely in spring.",
    "Crème brûlée, jalapeño, naïve façade, Ångström, Straße, smörgåsbord.",
    "Überraschung! Die Prüfung war schwieriger als erwartet, aber wir haben bestanden.",
    "¿Dónde está la biblioteca? Está al lado del museo.",
    "東京は日本の首都です。",
    "我喜欢在周末读书和喝茶。",
    "안녕하세요, 만나서 반갑습니다.",
    "Привет, как дела? Всё хорошо, спасибо.",
    "مرحبا بكم في المكتبة",
    "I love pizza 🍕🍕 and tacos 🌮 — best day ever!!! 😂👍",
    "🚀🌕✨",
    "Call me at +1 (555) 010-9999 or on 2024-12-01 at 14:30; order #A-77321 costs $1,234.56.",
    "3.14159 2.71828 1.41421 0.57721 1.61803",
    "Version 2.4.6 fixes CVE-2024-12345 in libfoo.so.3 (x86_64, aarch64).",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;",
    "https://example.com/path/to/page?query=embeddings&lang=en#section-2",
    "   leading and trailing spaces   ",
    "tabs\tand\nnew\nlines\r\nmixed",
    "A sentence with a very long word: pneumonoultramicroscopicsilicovolcanoconiosis.",
    "Machine learning models map sentences to vectors so that similar meanings end up close "
    "together, which makes semantic search, clustering and deduplication straightforward.",
    PROSE,
    FRENCH + FRENCH,
    # Past 256 tokens: truncation has to cut exactly where sentence-transformers cuts.
    PROSE * 3,
    "\n\n".join([PROSE, FRENCH, CODE, PROSE.upper()]),
    CODE * 4,
    CJK * 3,
    " ".join(str(i) for i in range(1, 400)) + " 🎉 done",
]


def sig7(xs):
    return [float(f"{x:.7g}") for x in xs]


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CACHE, "hf",
                                                                    "all-MiniLM-L6-v2")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "..", "crates", "rlx-models", "tests", "data", "st_ref_minilm.json")
    assert len(SENTENCES) == 36, len(SENTENCES)
    torch.set_num_threads(2)
    model = SentenceTransformer(model_dir, device="cpu")
    model.eval()
    ids = []
    for s in SENTENCES:
        feat = model.tokenize([s])
        row = feat["input_ids"][0]
        mask = feat["attention_mask"][0]
        ids.append(row[mask.bool()].tolist())
    batched = model.encode(SENTENCES, batch_size=32, convert_to_numpy=True)
    single = np.stack([model.encode([s], convert_to_numpy=True)[0] for s in SENTENCES])
    cos = (batched * single).sum(1) / (np.linalg.norm(batched, axis=1)
                                      * np.linalg.norm(single, axis=1))
    modules = read_json(os.path.join(model_dir, "modules.json"))
    pooling = read_json(os.path.join(model_dir, "1_Pooling", "config.json"))
    st_config = read_json(os.path.join(model_dir, "sentence_bert_config.json"))
    tok_json = read_json(os.path.join(model_dir, "tokenizer.json"))
    ref = {
        "source": "scripts/st_ref.py (SentenceTransformer.encode, f32, CPU, batch_size 32)",
        "sentence_transformers": sentence_transformers.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "modules": modules,
        "pooling": pooling,
        "sentence_bert_config": st_config,
        "max_seq_length": model.max_seq_length,
        # tokenizer.json's own settings (truncation 128, fixed padding 128 for this model),
        # which sentence-transformers overrides with max_seq_length and per-batch padding.
        "tokenizer_json_truncation": tok_json.get("truncation"),
        "tokenizer_json_padding": tok_json.get("padding"),
        "pipeline": [type(m).__name__ for m in model],
        "dim": int(batched.shape[1]),
        "batched_vs_single_min_cos": float(cos.min()),
        "cases": [{"text": s, "ids": i, "embedding": sig7(e.tolist())}
                  for s, i, e in zip(SENTENCES, ids, batched)],
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    lens = [len(i) for i in ids]
    print(f"{out}: {len(SENTENCES)} sentences, {sum(n >= 256 for n in lens)} truncated at 256, "
          f"lengths {min(lens)}..{max(lens)}, norms {np.linalg.norm(batched, axis=1).min():.6f}"
          f"..{np.linalg.norm(batched, axis=1).max():.6f}, batched vs single min cos "
          f"{cos.min():.8f}, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
