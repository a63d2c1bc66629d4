"""The conversion cache of real models: converted once per file, shared, written atomically."""

import json
import threading
import time

import pytest

from sao_online.models.converted import (
    MARKER_FILE,
    converted_folder,
    converted_gguf,
    file_sha256,
)


class SavesAFile:
    """Stands in for a model or tokenizer: ``save_pretrained`` writes one named file."""

    def __init__(self, name, text):
        self.name, self.text = name, text

    def save_pretrained(self, folder, **options):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / self.name).write_text(self.text)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SAO_ONLINE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def gguf_file(folder, content):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.gguf"
    path.write_bytes(content)
    return path


def test_concurrent_first_loads_convert_once(tmp_path, cache):
    source = gguf_file(tmp_path / "models", b"GGUF weights")
    conversions = []

    def convert():
        conversions.append(threading.get_ident())
        time.sleep(0.3)  # the others arrive while this one converts
        return SavesAFile("weights.txt", "dequantized"), SavesAFile("tokenizer.txt", "vocab")

    folders = []
    threads = [
        threading.Thread(target=lambda: folders.append(converted_gguf(source, convert)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(conversions) == 1 and len(set(folders)) == 1 and len(folders) == 4
    folder = folders[0]
    assert folder.parent == cache / "converted"
    assert (folder / "weights.txt").read_text() == "dequantized"
    assert (folder / "tokenizer.txt").read_text() == "vocab"
    marker = json.loads((folder / MARKER_FILE).read_text())
    assert marker["source_sha256"] == file_sha256(source) and marker["source_bytes"] == 12
    # Nothing half-written is left beside it.
    assert sorted(path.name for path in folder.parent.iterdir()) == [
        folder.name,
        f"{folder.name}.lock",
    ]


def test_the_folder_is_keyed_by_the_files_bytes_not_its_path(tmp_path, cache):
    first = gguf_file(tmp_path / "a", b"same bytes")
    moved = gguf_file(tmp_path / "b", b"same bytes")
    other = gguf_file(tmp_path / "c", b"other bytes")
    assert converted_folder(first) == converted_folder(moved) != converted_folder(other)
    conversions = []

    def convert():
        conversions.append(1)
        return SavesAFile("w", "x"), SavesAFile("t", "y")

    assert converted_gguf(first, convert) == converted_gguf(moved, convert)
    converted_gguf(other, convert)
    assert len(conversions) == 2


def test_a_failed_or_unfinished_conversion_is_never_used(tmp_path, cache):
    source = gguf_file(tmp_path / "models", b"GGUF")
    folder = converted_folder(source)
    folder.mkdir(parents=True)
    (folder / "weights.txt").write_text("from a conversion killed before its marker")

    def broken():
        raise RuntimeError("dequantizing failed")

    with pytest.raises(RuntimeError, match="dequantizing failed"):
        converted_gguf(source, broken)
    assert not (folder / MARKER_FILE).exists()
    assert converted_gguf(source, lambda: (SavesAFile("w", "new"), SavesAFile("t", "t"))) == folder
    assert sorted(path.name for path in folder.iterdir()) == [MARKER_FILE, "t", "w"]
