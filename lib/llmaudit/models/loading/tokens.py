"""Token helpers shared by every chapter that reads words off a next-token distribution."""

from __future__ import annotations

from collections.abc import Sequence


def encode(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of chat-formatted texts, each tokenised on its own (the template holds the special tokens)."""
    return [tokenizer.encode(t, add_special_tokens=False) for t in texts]


def single_token_ids(tokenizer, words: Sequence[str]) -> list[int]:
    """Ids of the forms of `words` (as given, Capitalised, with a leading space, both) that are one known token each,
    in order and without repeats: the words a single next-token distribution can say."""
    ids: list[int] = []
    for word in words:
        for form in (word, word.capitalize(), " " + word, " " + word.capitalize()):
            tokens = tokenizer.encode(form, add_special_tokens=False)
            if len(tokens) == 1 and tokens[0] not in ids and tokens[0] != tokenizer.unk_token_id:
                ids.append(tokens[0])
    return ids
