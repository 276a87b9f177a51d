"""course.tatoeba: finding, downloading, reading and splitting the real sentence pairs.

Never the real file, never the network: reading uses small generated files of the same
format (tests/_tatoeba_sample.py), and downloading a zip served by a thread on loopback.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import threading
import zipfile
from pathlib import Path

import pytest
from _tatoeba_sample import sample_pairs, write_sample

from course import tatoeba
from course.data import UNK, load_task
from course.tatoeba import BadDataFile, DataUnavailable

# ------------------------------------------------------------------ where it lives --


def test_the_data_directory_is_course_data_dir_or_the_repositorys_data(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    assert tatoeba.data_dir() == tmp_path
    monkeypatch.delenv("COURSE_DATA_DIR")
    default = tatoeba.data_dir()
    assert default == Path(tatoeba.__file__).resolve().parent.parent / "data"
    assert "data/" in (default.parent / ".gitignore").read_text().splitlines()  # never committed


def test_find_prefers_the_plain_file_and_finds_the_gzipped_one(tmp_path):
    assert tatoeba.find(tmp_path) is None
    (tmp_path / "eng-fra.txt.gz").write_bytes(gzip.compress(b"Hi.\tSalut.\n"))
    assert tatoeba.find(tmp_path) == tmp_path / "eng-fra.txt.gz"
    (tmp_path / "eng-fra.txt").write_text("Hi.\tSalut.\n")
    assert tatoeba.find(tmp_path) == tmp_path / "eng-fra.txt"


# ------------------------------------------------------------------- reading it --


def test_read_pairs_reads_two_and_three_columns_plain_and_gzipped(tmp_path):
    two = write_sample(tmp_path / "two.txt")
    three = write_sample(tmp_path / "three.txt", three_columns=True)
    zipped = tmp_path / "eng-fra.txt.gz"
    zipped.write_bytes(gzip.compress(two.read_bytes()))
    expected = sample_pairs()
    assert tatoeba.read_pairs(two) == expected
    assert tatoeba.read_pairs(three) == expected  # the attribution column is dropped
    assert tatoeba.read_pairs(zipped) == expected


def test_windows_line_ends_a_byte_order_mark_and_no_final_newline_are_fine(tmp_path):
    path = tmp_path / "pairs.txt"
    path.write_bytes("\ufeffI'm tired.\tJe suis fatigué.\r\nGo.\tVa !".encode())
    assert tatoeba.read_pairs(path) == [("I'm tired.", "Je suis fatigué."), ("Go.", "Va !")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"Go.\tVa !\nno tab here\n", "line 2: expected English<TAB>French"),
        (b"Go.\tVa !\na\tb\tc\td\n", "line 2: expected English<TAB>French (optionally a third"),
        (b"Go.\t\n", "line 1: the French side is empty"),
        (b"  \tVa !\n", "line 1: the English side is empty"),
        ("Go.\tVa !\nI'm tired.\tJe suis fatigu\xe9.\n".encode("latin-1"), "line 2: not UTF-8"),
        (b"", "no sentence pairs in it"),
    ],
)
def test_a_bad_line_names_the_file_and_the_line(tmp_path, content, message):
    path = tmp_path / "mine.txt"
    path.write_bytes(content)
    with pytest.raises(BadDataFile) as error:
        tatoeba.read_pairs(path)
    assert str(error.value).startswith(f"{path}, ") or str(error.value).startswith(f"{path}:")
    assert message in str(error.value)


def test_a_missing_file_and_a_broken_gzip_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no pairs file at"):
        tatoeba.read_pairs(tmp_path / "absent.txt")
    broken = tmp_path / "eng-fra.txt.gz"
    broken.write_bytes(gzip.compress(b"Go.\tVa !\n" * 50)[:30])
    with pytest.raises(BadDataFile, match="not a readable gzip file"):
        tatoeba.read_pairs(broken)


def test_a_file_other_than_the_tutorials_is_used_with_a_note(tmp_path, capsys):
    write_sample(tmp_path / "eng-fra.txt")
    assert tatoeba.load_pairs(tmp_path, progress=False) == sample_pairs()
    assert "is not the PyTorch tutorial's eng-fra.txt (196 pairs" in capsys.readouterr().err


# ----------------------------------------------------------- the tutorial's small set --


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("I'm tired.", "i m tired ."),
        ("Vous êtes fatigués !", "vous etes fatigues !"),
        ("Ça va ?", "ca va ?"),
        ("Tom, 19, can't swim...", "tom can t swim . . ."),
        ("Je suis à l'école.", "je suis a l ecole ."),
    ],
)
def test_tutorial_normalize(text, normalized):
    assert tatoeba.tutorial_normalize(text) == normalized


def test_tutorial_pairs_keep_short_pronoun_sentences_as_french_then_english():
    kept = tatoeba.tutorial_pairs(sample_pairs())
    assert ("vous etes fatigue .", "you re tired .") in kept  # source French, target English
    assert len(kept) == 192  # 196 less "Go.", "Who are you?", "Tom can't swim." and a long one
    assert all(english.startswith(tatoeba.ENGLISH_PREFIXES) for _, english in kept)
    long_one = [("I am " + "very " * 6 + "tired.", "Je suis fatigué.")]  # 9 words + "." = 10
    assert tatoeba.tutorial_pairs(long_one) == []
    assert len(tatoeba.tutorial_pairs([("I am " + "very " * 5 + "tired.", "Je suis.")])) == 1


def test_detokenize_joins_punctuation_to_its_word():
    assert tatoeba.detokenize(["i", "m", "tired", "."]) == "i m tired."
    assert tatoeba.detokenize(["are", "you", "ok", "?", "yes", "!"]) == "are you ok? yes!"


# ---------------------------------------------------------------- the held-out split --


def _by_english(pair):
    return pair[1]


def test_grouped_split_keeps_each_group_on_one_side_and_every_item_once():
    pairs = tatoeba.tutorial_pairs(sample_pairs())
    train, test = tatoeba.grouped_split(pairs, _by_english, test_fraction=0.2, seed=0)
    assert sorted(train + test) == sorted(pairs)
    assert not {_by_english(p) for p in train} & {_by_english(p) for p in test}
    largest = max(sum(_by_english(p) == g for p in pairs) for g in {_by_english(p) for p in pairs})
    assert round(0.2 * len(pairs)) <= len(test) < round(0.2 * len(pairs)) + largest
    assert train == [p for p in pairs if p in train]  # the original order on each side
    assert test == [p for p in pairs if p in test]


def test_grouped_split_is_drawn_by_the_seed():
    pairs = tatoeba.tutorial_pairs(sample_pairs())
    first = tatoeba.grouped_split(pairs, _by_english, 0.2, seed=0)
    assert tatoeba.grouped_split(pairs, _by_english, 0.2, seed=0) == first
    assert tatoeba.grouped_split(pairs, _by_english, 0.2, seed=1) != first


@pytest.mark.parametrize("fraction", [0, 1, -0.1, 1.5])
def test_grouped_split_refuses_a_fraction_outside_0_1(fraction):
    with pytest.raises(ValueError, match="test_fraction must be between 0 and 1"):
        tatoeba.grouped_split([("a", "b")], _by_english, fraction, seed=0)


# ------------------------------------------------------------------- the fra-eng task --


def test_fra_eng_holds_no_test_target_in_training():
    task = load_task("fra-eng", seed=0)
    assert len(task.train) + len(task.test) == 192
    assert not {target for _, target in task.train} & {target for _, target in task.test}
    # Tatoeba's several French sentences for one English one all land on one side
    assert {target for _, target in task.train} >= {("you", "re", "tired", ".")} or {
        target for _, target in task.test
    } >= {("you", "re", "tired", ".")}


def test_fra_eng_vocabularies_come_from_the_training_split_only():
    task = load_task("fra-eng", seed=0)
    train_words = {word for source, _ in task.train for word in source}
    assert set(task.src_vocab.itos) == {*train_words, UNK, "<pad>", "<bos>", "<eos>"}
    for source, target in task.test:
        assert all(word in task.src_vocab.stoi for word in source)  # unknowns became <unk>
        assert all(word in task.tgt_vocab.stoi for word in target)


def test_fra_eng_references_are_the_real_text():
    task = load_task("fra-eng", seed=0)
    assert len(task.references) == len(task.test)
    for reference, (_, target) in zip(task.references, task.test, strict=True):
        if UNK not in target:
            assert reference == tatoeba.detokenize(target)
        assert UNK not in reference


# ------------------------------------------------------------------- downloading --


def _zipped(text: bytes, member: str = tatoeba.ZIP_MEMBER) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data/names/French.txt", "Abel\n")  # the tutorial's zip has more
        archive.writestr(member, text)
    return buffer.getvalue()


class _Server:
    """A thread serving `body` on loopback at /data.zip, counting requests."""

    def __init__(self, body: bytes, declared_length: int | None = None):
        self.body, self.requests = body, 0
        length = len(body) if declared_length is None else declared_length
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the base class's name)
                server.requests += 1
                self.send_response(200)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/data.zip"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def sample_text(tmp_path_factory):
    return write_sample(tmp_path_factory.mktemp("src") / "eng-fra.txt").read_bytes()


def _download(directory, url, text, **overrides):
    expected = dict(lines=len(sample_pairs()), sha256=hashlib.sha256(text).hexdigest())
    return tatoeba.find_or_download(directory, url=url, timeout=10, **{**expected, **overrides})


def test_a_download_is_checked_written_once_and_shows_progress(tmp_path, sample_text, capsys):
    directory = tmp_path / "new" / "data"  # created when needed
    with _Server(_zipped(sample_text)) as server:
        path = _download(directory, server.url, sample_text)
        assert path == directory / "eng-fra.txt" and path.read_bytes() == sample_text
        assert "downloading data.zip" in capsys.readouterr().err  # tqdm's bar
        assert _download(directory, server.url, sample_text) == path
        assert server.requests == 1  # the second call found the file
    assert sorted(p.name for p in directory.iterdir()) == ["eng-fra.txt"]  # no temporary left


def test_the_download_is_written_through_a_temporary_file(tmp_path, sample_text, monkeypatch):
    moves = []
    real_replace = tatoeba.os.replace

    def replace(source, target):
        moves.append((Path(source).name, Path(target).name))
        assert Path(target).exists() is False  # the final name appears only by the rename
        real_replace(source, target)

    monkeypatch.setattr(tatoeba.os, "replace", replace)
    with _Server(_zipped(sample_text)) as server:
        _download(tmp_path, server.url, sample_text)
    assert len(moves) == 1 and moves[0][1] == "eng-fra.txt" and moves[0][0].endswith(".tmp")


@pytest.mark.parametrize(
    ("make_body", "message"),
    [
        (lambda zipped, text: zipped[: len(zipped) // 2], "is not a readable zip"),
        (lambda zipped, text: b"<html>not found</html>", "is not a readable zip"),
        (lambda zipped, text: _zipped(text, member="data/other.txt"), "has no member data/eng-fra.txt"),  # noqa: E501
        (lambda zipped, text: _zipped(text + b"one line without a tab\n"), "expected English<TAB>French"),  # noqa: E501
        (lambda zipped, text: _zipped(text + b"Hi.\tSalut.\n"), "has 197 pairs, expected 196"),
        (lambda zipped, text: _zipped(text.replace(b"tired", b"tyred")), "is not the file the course"),  # noqa: E501
    ],
)  # fmt: skip
def test_a_bad_download_is_rejected_and_nothing_is_written(
    tmp_path, sample_text, make_body, message
):
    with _Server(make_body(_zipped(sample_text), sample_text)) as server:
        with pytest.raises(DataUnavailable, match=message):
            _download(tmp_path, server.url, sample_text)
    assert list(tmp_path.iterdir()) == []


def test_a_download_that_stops_early_is_rejected(tmp_path, sample_text):
    body = _zipped(sample_text)
    with _Server(body[:1000], declared_length=len(body)) as server:
        with pytest.raises(DataUnavailable):  # urllib's IncompleteRead, or our own check
            _download(tmp_path, server.url, sample_text)
    assert list(tmp_path.iterdir()) == []


def test_offline_says_what_to_put_where(tmp_path):
    with _Server(b"") as server:  # a port that nobody listens on once this server is gone
        url = server.url
    with pytest.raises(DataUnavailable) as error:
        tatoeba.find_or_download(tmp_path, url=url, timeout=5)
    text = str(error.value)
    assert (
        f"need the Tatoeba English-French pairs, eng-fra.txt (or eng-fra.txt.gz), in {tmp_path}"
        in text
    )
    assert "downloading it failed: URLError" in text
    assert f"download {url} yourself and put its member data/eng-fra.txt" in text
    assert "set COURSE_DATA_DIR to the folder that holds it" in text
    assert list(tmp_path.iterdir()) == []
