"""The server's reading of numbers as words: its worker process reads as the library does, comes back
when killed, and the normalizers load as the server starts (the library's own reading, against
upstream's: tests/runtime/test_normalize.py)."""

from __future__ import annotations

from omnivoice_rt import normalize_text
from omnivoice_rt.text.normalize import FSTS

# English and Chinese numbers, and a text long enough to be read in pieces
TEXTS = [
    "I paid $12.50 for 3 apples on Jan. 5, 2024.",
    "我花了12.5元买了3个苹果，2024年1月5日。",
    " ".join(
        [
            "I paid $12.50 for 3 apples on Jan. 5, 2024.",
            "Call 555-1234 at 10:30 am, or +1 (800) 555-0199.",
        ]
        * 4
    ),
]


def test_the_servers_worker_reads_as_this_process_and_comes_back_if_killed():
    from omnivoice_rt.server.normalizing import TextReader

    reader = TextReader(max_waiting=4)
    try:
        for text in TEXTS:
            assert reader.normalize(text, None) == normalize_text(text), text
        first = reader._process.pid
        reader._process.kill()
        reader._process.wait()
        assert reader.normalize("It is 7 pm.", "en") == normalize_text("It is 7 pm.", "en")
        assert reader._process.pid != first
        cached = reader.pieces_read
        assert reader.normalize(TEXTS[2], None) == normalize_text(TEXTS[2])  # kept: not read again
        assert reader.pieces_read == cached
    finally:
        reader.close()


def test_the_server_loads_the_normalizers_as_it_starts(cpu_artifacts, tmp_path):
    """Its doors normalize by default: the FSTs load in the background at start, before any
    request asks for them."""
    import time

    from tests.conftest import running_app

    log = tmp_path / "server.log"
    with running_app(["--artifacts", str(cpu_artifacts)], log, HF_HUB_OFFLINE="1"):
        deadline = time.time() + 60
        while time.time() < deadline:
            text = log.read_text()
            if all(f"loaded the {code} text normalizer" in text for code in FSTS):
                break
            time.sleep(0.2)
    text = log.read_text()
    assert all(f"loaded the {code} text normalizer" in text for code in FSTS), text
    assert "POST" not in text.split("loaded the zh text normalizer")[0]  # no request came first
