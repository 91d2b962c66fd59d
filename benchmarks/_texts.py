"""Word-like text for the scenarios that fill content stores (``durable``)."""

from __future__ import annotations

import random

__all__ = ["prose"]


def prose(seed: str, size: int) -> str:
    """About `size` bytes of word-like ASCII text in lines, the same for the same seed."""
    draw = random.Random(seed)
    vocabulary = [
        "".join(draw.choices("etaoinshrdlucmfwyp", k=draw.randint(2, 9))) for _ in range(3000)
    ]
    words: list[str] = []
    length = 0
    while length < size:
        word = draw.choice(vocabulary)
        words.append(word + ("\n" if len(words) % 12 == 11 else " "))
        length += len(word) + 1
    return "".join(words)[:size]
