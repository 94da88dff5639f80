#!/usr/bin/env python3
"""Reference test of data/text against Hugging Face tokenizers and transformers.

Trains a small byte-level BPE tokenizer.json with Qwen2's pre-tokenizer regex, NFC normaliser and
special tokens, then checks that tokenize_tool (our C++ tokenizer) gives the ids `tokenizers`
gives on > 1 MB of generated mixed text, and that our Qwen2-VL chat template gives the string and
ids transformers' apply_chat_template gives with the official template, and the labels an
independent offset-based computation gives. Prints both throughputs (information only).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402
from tokenizers import AddedToken  # noqa: E402

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                 r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
           "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
           "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
NORMAL_ADDED = ["<tool_call>", "</tool_call>"]  # Qwen2.5 has these as non-special added tokens

# The official Qwen2-VL chat template (chat_template.json of Qwen/Qwen2-VL-2B-Instruct).
QWEN2VL_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}"
    "Picture {{ image_count.value }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}"
    "Video {{ video_count.value }}: {% endif %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

WORDS = ("the of and to in is was that for it with as his on be at by had are but from or have "
         "an they which one you were her all she there would their we him been has when who will "
         "more no if out so said what up its about into than them can only other new some could "
         "time these two may then do first any my now such like our over man me even most made "
         "after also did many before must through back years where much your way well down "
         "Transformer tokenizer gradient shard FSDP checkpoint Qwen vision").split()
CONTRACTIONS = ["don't", "I'll", "we've", "they're", "it's", "she'd", "I'm", "DON'T", "WE'LL",
                "You'Re"]
CODE = ["def f(x):\n    return x * 2  # double\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "if x == None:\n        pass\n", "std::vector<int64_t> ids{1, 2, 3};", "x=>{y+=1}",
        "#include <cstdio>\nint main() { printf(\"%d\\n\", 42); }\n", "a_b.c-d/e\\f|g&&h||!i",
        "    \n    \n\tlambda: None\r\n", "SELECT * FROM runs WHERE id=7;", "$ ls -la ~/.cache\n"]
EMOJI = ["😀", "🎉", "👍🏽", "👨\u200d👩\u200d👧", "🇯🇵", "❤️", "🤖", "✅", "🔥🔥🔥", "🧪"]
COMBINING = ["e\u0301", "a\u0308", "\u1100\u1161", "\u1112\u1161\u11ab", "A\u030a", "\u212b",
             "n\u0303o", "a\u0302\u0323", "o\u0323\u0302", "\u0041\u0300\u0301", "Cafe\u0301",
             "\u0301", "x\u0301\u0301", "\u00e9", "\u1e9b\u0323", "\uff71\u3099", "\u304b\u3099"]
OTHER = ["Привет, мир", "مرحبا بالعالم", "नमस्ते दुनिया", "Γειά σου", "שלום", "ข้อความ",
         "１２３ＡＢＣ", "٣٤٥", "½ ² ³", "\u00a0", "\u3000", "\u2009", "\u0085", "\u200b", "\u2028",
         "\u180e", "\ufeff", "ﬁ", "ǅ"]
SPACES = [" " * k for k in (2, 3, 5, 17)] + ["\n" * k for k in (1, 2, 4)] + \
         ["\r\n", "\t", " \n ", "\n \n", "  \t\n", "\n\n\n   "]
CHINESE = [chr(c) for c in range(0x4E00, 0x4E00 + 400)] + list("，。！？：；“”（）的了是在我有他这")
SPECIALS_IN_TEXT = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "<|image_pad|>",
                    "<|im_start", "<|im_end|>>", "</tool_call>"]


def chunk(rng):
    kind = rng.random()
    if kind < 0.35:
        ws = [rng.choice(WORDS) for _ in range(rng.randint(3, 15))]
        if rng.random() < 0.3:
            ws.append(rng.choice(CONTRACTIONS))
        s = " ".join(ws)
        return (s[0].upper() + s[1:] if rng.random() < 0.5 else s) + rng.choice([". ", ", ", "! ", "? ", "\n"])
    if kind < 0.55:
        return "".join(rng.choice(CHINESE) for _ in range(rng.randint(2, 30)))
    if kind < 0.67:
        return rng.choice(CODE)
    if kind < 0.73:
        return rng.choice(EMOJI) * rng.randint(1, 3)
    if kind < 0.80:
        return rng.choice(COMBINING)
    if kind < 0.86:
        return rng.choice(OTHER)
    if kind < 0.95:
        return rng.choice(SPACES)
    if kind < 0.98:
        return str(rng.randint(0, 10 ** rng.randint(1, 12)))
    return rng.choice(SPECIALS_IN_TEXT)


def mixed_text(seed, size):
    rng = random.Random(seed)
    parts, n = [], 0
    while n < size:
        c = chunk(rng)
        parts.append(c)
        n += len(c.encode("utf-8"))
    return "".join(parts)


def train_tokenizer(out_dir, vocab):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = mixed_text(1, 600_000).split("\n")
    tok.train_from_iterator(corpus, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL])
    tok.add_tokens([AddedToken(s, special=False, normalized=False) for s in NORMAL_ADDED])
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "chat_template": QWEN2VL_TEMPLATE,
                   "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "model_max_length": 1 << 30}, f, indent=1)
    return tok


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare_ids(tok, tool, tok_dir, text, special, label):
    args = [tool, tok_dir] + ([] if special else ["--no-special"])
    run = subprocess.run(args, input=text.encode("utf-8"), capture_output=True, check=False)
    if run.returncode != 0:
        sys.exit(f"FAIL {label}: tokenize_tool exit {run.returncode}: {run.stderr.decode()}")
    ours = json.loads(run.stdout)
    tok.encode_special_tokens = not special
    t0 = time.process_time()  # CPU time, as tokenize_tool reports: the machine may be shared
    theirs = tok.encode(text, add_special_tokens=False).ids
    hf_s = time.process_time() - t0
    tok.encode_special_tokens = False
    mb = len(text.encode("utf-8")) / 1e6
    print(f"{label}: {mb:.2f} MB, {len(theirs)} tokens; HF tokenizers {mb / hf_s:.2f} MB/s CPU; "
          f"ours: {run.stderr.decode().strip()}")
    if ours != theirs:
        i = first_difference(ours, theirs)
        print(f"FAIL {label}: ids differ at token {i} of {len(theirs)} (ours {len(ours)})")
        print("  ours:  ", ours[max(0, i - 3):i + 5], repr(tok.decode(ours[max(0, i - 3):i + 5])))
        print("  theirs:", theirs[max(0, i - 3):i + 5], repr(tok.decode(theirs[max(0, i - 3):i + 5])))
        return False
    return True


CHAT_SAMPLES = [
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "4"}]}]},
    {"messages": [{"role": "system", "content": [{"type": "text", "text": "Answer briefly."}]},
                  {"role": "user", "content": [{"type": "image", "image": "img/a.png"},
                                               {"type": "text", "text": "What colour is the shape?"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "red"}]}]},
    {"messages": [{"role": "system", "content": "You are terse."},
                  {"role": "user", "content": "Hello there"},
                  {"role": "assistant", "content": "Hi."},
                  {"role": "user", "content": [{"type": "image", "image": "a.png"},
                                               {"type": "image", "image": "sub/b.png"},
                                               {"type": "text", "text": "Compare them."}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "\n  The left one is bigger.\n"}]}]},
    {"messages": [{"role": "user", "content": "写一首诗 🎉 about cafe\u0301s"},
                  {"role": "assistant", "content": "春眠不觉晓，处处闻啼鸟。\n\nDone! 👍🏽"},
                  {"role": "user", "content": [{"type": "text", "text": "again "},
                                               {"type": "text", "text": "please\n\n"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "   "}]}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "Describe"},
                                               {"type": "image", "image": "x.png"}]},
                  {"role": "assistant", "content": ""}]},
]
IMAGE_TOKENS = [4, 9, 1]


def hf_chat(tok, messages):
    text = tok.apply_chat_template(messages, tokenize=False)
    ids = tok.apply_chat_template(messages, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):
        ids = ids["input_ids"]
    return text, list(ids)


def expected_labels(tok, text, messages):
    """Labels from character offsets: tokens overlapping an assistant turn's content or its
    <|im_end|> keep their id, the rest -100 (independent of our C++ logic)."""
    spans, pos = [], 0
    for m in messages:
        header = "<|im_start|>" + m["role"] + "\n"
        pos = text.index(header, pos) + len(header)
        end = text.index("<|im_end|>", pos) + len("<|im_end|>")
        if m["role"] == "assistant":
            spans.append((pos, end))
        pos = end
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    labels = []
    for tid, (b, e) in zip(enc["input_ids"], enc["offset_mapping"]):
        inside = any(b < se and e > sb for sb, se in spans)
        labels.append(tid if inside else -100)
    return enc["input_ids"], labels


def expand(ids, labels, pad_id, counts):
    out_ids, out_labels, k = [], [], 0
    for t, l in zip(ids, labels):
        if t == pad_id:
            n = counts[k % len(counts)]
            k += 1
            out_ids += [t] * n
            out_labels += [-100] * n
        else:
            out_ids.append(t)
            out_labels.append(l)
    return out_ids, out_labels


def compare_chat(tool, tok_dir, work):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(tok_dir)
    data = os.path.join(work, "chat.jsonl")
    with open(data, "w", encoding="utf-8") as f:
        for s in CHAT_SAMPLES:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    run = subprocess.run([tool, tok_dir, "--chat", data, "--image-tokens",
                          ",".join(map(str, IMAGE_TOKENS))], capture_output=True, check=False)
    if run.returncode != 0:
        sys.exit(f"FAIL chat: tokenize_tool exit {run.returncode}: {run.stderr.decode()}")
    ours = [json.loads(line) for line in run.stdout.decode("utf-8").splitlines()]
    good = len(ours) == len(CHAT_SAMPLES)
    pad_id = tok.convert_tokens_to_ids("<|image_pad|>")
    for i, (sample, mine) in enumerate(zip(CHAT_SAMPLES, ours)):
        text, ids = hf_chat(tok, sample["messages"])
        ref_ids, ref_labels = expected_labels(tok, text, sample["messages"])
        if ref_ids != ids:
            sys.exit(f"FAIL chat {i}: transformers' own ids disagree with tokenizing its text")
        unexpanded = [t for t in mine["input_ids"]]
        exp_ids, exp_labels = expand(ids, ref_labels, pad_id, IMAGE_TOKENS)
        checks = {"text": (mine["text"], text), "input_ids": (mine["input_ids"], exp_ids),
                  "labels": (mine["labels"], exp_labels)}
        for name, (a, b) in checks.items():
            if a != b:
                good = False
                print(f"FAIL chat sample {i} {name}:\n  ours:   {a!r}\n  theirs: {b!r}")
        print(f"chat sample {i}: {len(unexpanded)} tokens, "
              f"{sum(1 for l in mine['labels'] if l != -100)} labelled: "
              f"{'equal' if good else 'DIFFERENT'}")
    return good


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--vocab", type=int, default=4000)
    ap.add_argument("--mb", type=float, default=1.2)
    a = ap.parse_args()
    tok_dir = os.path.join(a.work, "tokenizer")
    t0 = time.perf_counter()
    tok = train_tokenizer(tok_dir, a.vocab)
    print(f"trained a {tok.get_vocab_size()}-token byte-level BPE in {time.perf_counter() - t0:.1f} s")
    text = mixed_text(2, int(a.mb * 1e6))
    good = compare_ids(tok, a.tool, tok_dir, text, True, "mixed text")
    good &= compare_ids(tok, a.tool, tok_dir, mixed_text(3, 200_000), False,
                        "mixed text, special tokens as text")
    good &= compare_chat(a.tool, tok_dir, a.work)
    print("PASS" if good else "FAIL")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
