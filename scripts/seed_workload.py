#!/usr/bin/env python3
"""Writes the seed workload of `parallm batch` (mlx_parallm's benchmark): 325 prompts "Think of a real word
containing both the letters X and Y. Then, say 3 sentences which use the word.", one per pair of distinct
letters (26 * 25 / 2 = 325), max_tokens 100, greedy, as chat messages.

Usage: scripts/seed_workload.py > seed.jsonl
       build/src/cli/parallm batch -m MODEL --input seed.jsonl --output results.jsonl
"""
import itertools
import json
import string
import sys


def main():
    for i, (x, y) in enumerate(itertools.combinations(string.ascii_uppercase, 2)):
        prompt = (f"Think of a real word containing both the letters {x} and {y}. "
                  "Then, say 3 sentences which use the word.")
        record = {"id": f"seed-{i:03d}", "messages": [{"role": "user", "content": prompt}],
                  "max_tokens": 100, "temperature": 0}
        sys.stdout.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
