#!/usr/bin/python3
"""Writes tests/tokenizer/corpus.jsonl: the deterministic set of strings every tokenizer is compared on.

Usage: make_corpus.py [OUT]   (default: corpus.jsonl beside this script). One JSON object per line: {"id": N, "text": "..."}. The strings cover prose in many scripts, emoji (ZWJ sequences,
skin tones, flags), combining marks, digits, code, whitespace runs, control characters and special-token text
inside user text. Rerun after editing (`/usr/bin/python3 tests/tokenizer/make_corpus.py`), then regenerate the
goldens with tests/tokenizer/node/reference.mjs. Only long-assigned Unicode characters are used, so the answer
does not depend on which Unicode version the reference (V8/ICU) or parallm (PCRE2, utf8proc) was built with.
"""
import json
import os
import random
import sys

SEED = 20250301
TARGET = 2400

PROSE = [
    # Latin with accents
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How's it going? I'm fine, you're great, we'll see, they'd know, it's OK.",
    "HOW'S IT GOING? I'M FINE, YOU'RE GREAT, WE'LL SEE, THEY'D KNOW, IT'S OK, I'VE DONE IT.",
    "Ça va? Déjà vu, naïve café, résumé, coöperate, façade, piñata, jalapeño.",
    "Straße, Größe, Fußgängerübergänge, Äpfel, Öl, Übermut.",
    "Cửa Việt, Hà Nội, Thành phố Hồ Chí Minh, tiếng Việt có dấu.",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Ångström, Æsir, Ørsted, Þingvellir, ðe, İstanbul, ıslak, ŞİŞLİ.",
    "São Paulo é a maior cidade do Brasil; não há dúvida.",
    "¿Dónde está la biblioteca? ¡Qué día tan bonito!",
    # Cyrillic
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Привет, мир! Как дела? Всё хорошо.",
    "Україна, Київ, ґанок, їжак, є, Ї.",
    # Greek
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ΟΔΟΣ οδός Σίσυφος.",
    "Καλημέρα κόσμε· τι κάνεις;",
    # CJK
    "我能吞下玻璃而不伤身体。你好，世界！",
    "今日は良い天気ですね。カタカナとひらがな、漢字。",
    "日本語のテキスト：「こんにちは」と言いました。",
    "한국어 문장입니다. 안녕하세요, 세계!",
    "中文標點符號：，。！？；：「」『』（）【】",
    "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３　ｶﾀｶﾅ",
    # Arabic, Hebrew
    "مرحبا بالعالم! كيف حالك؟ اللغة العربية جميلة.",
    "العربية مع التشكيل: بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ",
    "שלום עולם! מה שלומך? עברית נכתבת מימין לשמאל.",
    "Mixed RTL: שלום world مرحبا 123.",
    # Indic
    "नमस्ते दुनिया! हिन्दी एक सुंदर भाषा है।",
    "क्षत्रिय, ज्ञान, श्री, द्वार, त्र्य",
    "বাংলা ভাষা, தமிழ் மொழி, తెలుగు, ಕನ್ನಡ, മലയാളം, ગુજરાતી, ਪੰਜਾਬੀ",
    # Southeast Asian
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ สวัสดีครับ",
    "ភាសាខ្មែរ សួស្តី ពិភពលោក",
    "ພາສາລາວ, မြန်မာဘာသာ, ᠮᠣᠩᠭᠣᠯ",
    # Other scripts
    "Հայերեն, ქართული ენა, አማርኛ, ᏣᎳᎩ, ᚠᚢᚦᚨᚱᚲ",
    "Sanskrit: ॐ नमः शिवाय. Tibetan: བོད་ཡིག",
]

EMOJI = [
    "😀", "😂", "🥲", "👍", "👍🏻", "👍🏽", "👍🏿", "👋🏾", "❤️", "❤", "🔥", "✨", "🎉",
    "👨‍👩‍👧‍👦", "👩‍💻", "🧑🏽‍🚀", "🏳️‍🌈", "🏴‍☠️", "👁️‍🗨️", "🇺🇸", "🇯🇵", "🇩🇪", "🇫🇷",
    "#️⃣", "1️⃣", "©", "®", "™", "☺️", "✌🏼", "🤷‍♀️", "🙇‍♂️", "🐈‍⬛", "🍕🍔🍟",
]

COMBINING = [
    "e\u0301", "a\u0300", "o\u0308", "n\u0303", "c\u0327", "A\u030a", "i\u0307", "u\u0308\u0301",
    "Z\u0335\u0321\u0330a\u0336l\u0334g\u0337o\u0338", "\u1100\u1161\u11a8", "q\u0307\u0323", "e\u0301\u0301\u0301",
    "\u0915\u094d\u0937", "\u0e01\u0e34\u0e4a", "\u05e9\u05c1\u05b8", "\u0644\u0627",
    "ﬁ ﬂ ﬀ", "Ⅻ ⅻ", "① ② ⑩", "x² y³ H₂O", "Å Ω K", "ǅ ǈ ǋ", "ſ ẞ ß",
]

CODE = [
    "def foo(x):\n    return x * 2\n",
    "int main(int argc, char** argv) {\n\tprintf(\"%d\\n\", argc);\n\treturn 0;\n}\n",
    "for (let i = 0; i < n; ++i) { sum += a[i] ** 2; }",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%o%';",
    "<div class=\"container\"><p>Hello &amp; welcome</p></div>",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "#include <vector>\nstd::vector<int> v{1,2,3};\nauto it = v.begin();",
    "x = [i for i in range(10) if i % 2 == 0]  # comment",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "$ git commit -m 'fix: handle CRLF' && echo done || exit 1",
    "a=1;b=2;c=a+b;d=c*c;e=d/2;f=e-1",
    "https://example.com/path?query=1&other=two#frag",
    "user@example.org, +1 (555) 123-4567, 192.168.0.1:8080",
    "if (a != b && c <= d || e >= f) { g <<= 2; h >>= 3; }",
    "    indented with spaces\n\tindented with a tab\n\t\tdouble tab",
    "/* block comment */ // line comment\n--sql comment\n; lisp comment",
    "lambda x: x**2 if x>0 else -x",
    "matrix[i][j] += alpha * (beta - gamma) / delta;",
    "```python\nprint('hi')\n```",
    "@decorator\nclass Foo(Bar, metaclass=Meta):\n    pass",
]

SPECIALS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "[INST]", "[/INST]",
    "<<SYS>>", "<</SYS>>", "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|reserved_special_token_5|>", "<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>",
    "<pad>", "<mask>", "<unused12>", "<image_soft_token>", "<|assistant|>", "<|user|>", "<|system|>", "<|end|>",
    "<think>", "</think>", "<tool_call>", "<|fim_prefix|>", "<|im_start", "im_end|>", "<|IM_END|>", "< s>",
]

WORDS = [
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are", "as", "with",
    "his", "they", "I", "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but", "not",
    "what", "all", "were", "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she",
    "do", "how", "their", "if", "will", "up", "other", "about", "out", "many", "then", "them", "these", "so",
    "tokenization", "unbelievable", "antidisestablishmentarianism", "supercalifragilistic", "LLM", "GPU",
    "don't", "won't", "it's", "y'all", "O'Neil", "rock'n'roll", "Hello", "HELLO", "hElLo", "iPhone", "eBay",
    "Москва", "Αθήνα", "東京", "서울", "القاهرة", "ירושלים", "मुंबई", "กรุงเทพ", "ភ្នំពេញ", "naïve", "Zürich",
]

SEPARATORS = [" ", " ", " ", "", "  ", "\n", "\n\n", "\t", "\r\n", " \n", "\n ", "   ", ", ", ". ", "\u3000", "\u00a0"]

CONTROL = ["\x00", "\x01", "\x07", "\x08", "\x0b", "\x0c", "\x1b", "\x1f", "\x7f", "\u0085", "\u200b", "\u200c",
           "\u200d", "\u200e", "\u2028", "\u2029", "\ufeff", "\u00ad", "\u2060", "\ufffd"]

WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \t ", "\r\n\r\n", "\u00a0",
              "\u2003", "\u3000", " \n \n", "\t\n", "\u2009", "\u202f"]


def digits(rng):
    n = rng.choice([1, 2, 3, 4, 5, 6, 7, 10, 16, 25, 40])
    s = "".join(rng.choice("0123456789") for _ in range(n))
    form = rng.randrange(6)
    if form == 0:
        return s
    if form == 1:
        return f"{s}.{rng.randrange(1000)}"
    if form == 2:
        return f"{int(s):,}" if len(s) < 20 else s
    if form == 3:
        return f"-{s}e{rng.randrange(-20, 20)}"
    if form == 4:
        return "٠١٢٣٤٥٦٧٨٩"[: rng.randrange(1, 10)] + s[:3]  # Arabic-Indic digits
    return "१२३४" + s[:2] + "๑๒๓"  # Devanagari and Thai digits


def fragment(rng):
    kind = rng.randrange(10)
    if kind == 0:
        return rng.choice(PROSE)
    if kind == 1:
        return rng.choice(EMOJI) * rng.choice([1, 1, 2, 3])
    if kind == 2:
        return rng.choice(COMBINING)
    if kind == 3:
        return rng.choice(CODE)
    if kind == 4:
        return rng.choice(SPECIALS)
    if kind == 5:
        return digits(rng)
    if kind == 6:
        return rng.choice(WHITESPACE)
    if kind == 7:
        return rng.choice(CONTROL)
    if kind == 8:
        # a slice of prose, cut at an arbitrary character (not byte) position
        p = rng.choice(PROSE)
        a = rng.randrange(len(p))
        return p[a:a + rng.randrange(1, 30)]
    return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 8)))


def main():
    rng = random.Random(SEED)
    texts = []
    # Fixed cases first: every pool entry alone, and edge cases.
    texts += ["", " ", "  ", "\n", "\t", "\r\n", "a", "A", " a", "a ", " a ", "  leading", "trailing  ",
              "\n\nnewlines first", "ends with newline\n", "x" * 300, " " * 100, "\n" * 50, "ab" * 200,
              "1" * 100, "!" * 80, "😀" * 40, "Ä" * 60, "a\u0301" * 30, "\t" * 30, "_" * 70, "-=" * 50]
    for pool in (PROSE, EMOJI, COMBINING, CODE, SPECIALS, WORDS, CONTROL, WHITESPACE):
        texts += pool
    for sp in SPECIALS:
        texts += [f"Hello {sp} world", f"x{sp}y", f" {sp} ", f"{sp}\n", f"{sp}{sp}", f"text {sp}"]
    for c in CONTROL:
        texts += [f"a{c}b", f"{c} start", f"end {c}"]
    for w in WHITESPACE:
        texts += [f"word{w}word", f"{w}lead", f"trail{w}", f"a{w}{w}b"]
    # Random mixtures up to TARGET.
    while len(texts) < TARGET:
        n = rng.choice([1, 2, 2, 3, 3, 4, 5, 8, 12])
        parts = []
        for _ in range(n):
            parts.append(fragment(rng))
            parts.append(rng.choice(SEPARATORS))
        s = "".join(parts[:-1])
        if rng.randrange(8) == 0:
            s = " " + s
        if rng.randrange(8) == 0:
            s = s + rng.choice([" ", "  ", "\n", "\t"])
        texts.append(s)
    # A few long documents (several KB), built the same way.
    for _ in range(8):
        texts.append("".join(fragment(rng) + rng.choice(SEPARATORS) for _ in range(300)))

    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.jsonl")
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n")
    print(f"wrote {len(texts)} strings to {out}")


if __name__ == "__main__":
    main()
