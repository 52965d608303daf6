"""The chat route's stand-in for a tokenizer, where the auditor has none for the model (a hosted API's): answer words
and sampled answers are cut into spellings (a word with the whitespace before it), each one id, the same in every
process (a hash), so that answer words are one "token" each as the chapters require, a sampled answer's ids decode to
its text, and counts are of spellings, not of the server's tokens. An id is decoded from the spellings this process
has seen, else from the replies the request ledger holds (an answer the tensor cache kept from an earlier run)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence

from llmaudit.errors import AuditError

SPELLING = re.compile(r"\s*\S+|\s+")  # a word with the whitespace before it, or trailing whitespace
RESTART = 40  # characters of a reply after which an answer may start (a prefix the model repeated, stripped)


class Spellings:
    """A tokenizer's `encode` and `decode` over spellings, with no vocabulary file; id 0 is the end of text."""

    chat_template = None
    bos_token = bos_token_id = unk_token_id = None
    eos_token = pad_token = ""
    eos_token_id = pad_token_id = 0

    def __init__(self, replies: Callable[[], Iterable[str]] = tuple):
        self.replies = replies  # the request ledger's reply texts, read where an id is not known
        self.spelled: dict[int, str] = {0: ""}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """The ids of `text`'s spellings, each remembered for `decode`."""
        ids = []
        for piece in SPELLING.findall(text):
            ids.append(spelling_id(piece))
            self.spelled[ids[-1]] = piece
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of spellings `ids`; an unknown id is looked for in the request ledger's replies first."""
        if any(i not in self.spelled for i in ids):
            for reply in self.replies():
                self.encode(reply)
                for start in range(1, min(RESTART, len(reply))):
                    self.encode(SPELLING.findall(reply[start:])[0] if reply[start:].strip() else "")
        unknown = [i for i in ids if i not in self.spelled]
        if unknown:
            raise AuditError(f"the chat route's answer ids {unknown[:3]} are in no reply of the request ledger: delete "
                             "the audit's cache to ask again")
        return "".join(self.spelled[i] for i in ids)


def spelling_id(piece: str) -> int:
    """A spelling's id: 62 bits of its sha256, never 0."""
    return (int.from_bytes(hashlib.sha256(piece.encode()).digest()[:8], "big") >> 2) or 1
