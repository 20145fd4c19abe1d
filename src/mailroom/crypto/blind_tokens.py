"""The blind index's token words of a message, from its words and the owner's two token keys.

A token word is :data:`~mailroom.store.search.TOKEN_MARK` and the first
:data:`TOKEN_BYTES` of the word's keyed hash in hex (:func:`token_word`);
``crypto.blind_index`` says why. :class:`TokenKeys` holds the two HMAC keys
(derived from the owner's data key, one per part of the message, never the
data key itself) and the key version they come from, so a parse worker can
make a message's entry while it parses (``mime.pool``) and the writer only
stores it. Only ``hashlib`` and ``store.search``'s word splitting: the parse
workers import this without the cryptography package or the database layer.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from mailroom.crypto.keyed_hash import KeyedHash
from mailroom.store.search import BODY_LIMIT, TOKEN_MARK, blind_word_bytes

TOKEN_BYTES = 8  # of each HMAC-SHA256 lookup hash: 64 bits, 16 hex digits

# A message's entry: the key version its token words were hashed under, then the token words
# of its subject and participants, and of its body (each sorted, joined by spaces), then its
# words this process had not hashed under that key before (newline-separated): what the
# owner's sealed word list (``crypto.blind_vocabulary``) may not hold yet.
BlindEntry = tuple[int, str, str, str]


def token_word(digest: bytes) -> str:
    """The token word of a lookup hash: :data:`TOKEN_MARK` and its first 8 bytes in hex.

    64 bits keep collisions negligible: among an owner's distinct words (a few
    hundred thousand at most), the chance that any two share a token is about
    n**2 / 2**65, under 1e-8 for 500,000 words; and a collision could only make
    a query find one message too many, never miss one. Hex, not base32: 13 base32
    characters would be 3 fewer, but Python's base32 encoder took 1.9 s for the
    273,000 words of the benchmark corpus, ``bytes.hex`` 0.05 s; lower-case, as
    FTS5 folds words (PostgreSQL keeps a lexeme as written).
    """
    return TOKEN_MARK + digest[:TOKEN_BYTES].hex()


# Token words kept between batches, per key: the benchmark corpus's 1,034,789 words per message
# are 273,000 distinct per batch but 86,000 in all, so an import hashes each word once. At most
# _CACHED_WORDS per key (about 150 bytes each), for at most _CACHED_KEYS keys; a full one starts
# again empty. Hashes stay in this process only, as the keys do.
_CACHED_WORDS = 250_000
_CACHED_KEYS = 8
_cached: dict[bytes, tuple[KeyedHash, dict[bytes, str]]] = {}  # key -> its hash, word -> hex


def _cache_of(key: bytes) -> tuple[KeyedHash, dict[bytes, str]]:
    found = _cached.get(key)
    if found is None or len(found[1]) > _CACHED_WORDS:
        while len(_cached) >= _CACHED_KEYS:  # the oldest key goes (another thread may race)
            _cached.pop(next(iter(_cached), key), None)
        found = _cached[key] = (KeyedHash(key), {})
    return found


def forget(keys: TokenKeys) -> None:
    """Drop this process's cached words of ``keys``: their next entries report every word new.

    For a writer whose batch was rolled back: the words it reported as new are then in
    no word list, and would otherwise never be reported again by this process.
    """
    for key in (keys.header, keys.body):
        _cached.pop(key, None)


@dataclass(frozen=True, slots=True)
class TokenKeys:
    """One owner's token keys of one data key version: header words' and body words'."""

    version: int
    header: bytes
    body: bytes

    def entry(self, header_words: Collection[bytes], body_words: Collection[bytes]) -> BlindEntry:
        """The entry of a message with these distinct words (UTF-8, as ``store.search`` splits).

        Each word is hashed once per process (see ``_cached``): most words of a message
        occur in others too, and a dictionary look-up costs far less than an HMAC.
        """
        new: list[bytes] = []
        return (
            self.version,
            _joined(_looked_up(*_cache_of(self.header), header_words, new)),
            _joined(_looked_up(*_cache_of(self.body), body_words, new)),
            b"\n".join(sorted(set(new))).decode("utf-8"),
        )

    def entry_of(self, subject: str, participants: str, body: str) -> BlindEntry:
        """The entry of a message's subject, participants and body text."""
        header = blind_word_bytes(subject) | blind_word_bytes(participants)
        return self.entry(header, blind_word_bytes(body[:BODY_LIMIT]))


def _looked_up(
    keyed: KeyedHash, found: dict[bytes, str], words: Collection[bytes], new: list[bytes]
) -> list[str]:
    """The hex tokens of ``words``, hashing only those not ``found`` yet (kept, and added
    to ``new``)."""

    def hashed(word: bytes) -> str:
        token = found[word] = keyed.digest(word.decode("utf-8"))[:TOKEN_BYTES].hex()
        new.append(word)
        return token

    known = found.get
    return [known(word) or hashed(word) for word in words]


def _joined(tokens: list[str]) -> str:
    """Hex tokens as one entry's token words: sorted (their order says nothing), marked."""
    if not tokens:
        return ""
    tokens.sort()
    return TOKEN_MARK + _MARKED_SPACE.join(tokens)


_MARKED_SPACE = " " + TOKEN_MARK
