"""Opening an uploaded checkpoint (studio/server/uploads.py): what is not a checkpoint is named by the upload's
own name with what the studio takes, a .zip Python cannot unpack is said, a checkpoint's files or its .zip
open (a model open already is picked, not offered twice), and a same-named checkpoint that no longer loads
does not block an upload."""
from __future__ import annotations

import html
import zipfile

from core.checkpoint import save_checkpoint
from studio.server.guard import guard
from studio.server.registry import ModelRegistry
from studio.server.uploads import UPLOAD_EXPECTED, open_checkpoint
from tests.helpers.studio import studio_bundle


def test_opening_a_file_that_is_not_a_checkpoint_warns_and_keeps_serving(registry, tmp_path, toasts):
    """The message names the upload by its own name (never the server's copies) and says what the
    studio takes."""
    uploads = tmp_path / "gradio" / "0123abcd"  # where Gradio keeps an upload, under its original name
    uploads.mkdir(parents=True)
    folder = save_checkpoint(tmp_path / "shipped", studio_bundle())
    for name, data in (("model.bin", b"\x00not a model"), ("fake.zip", b"PK not really"),
                       ("config.json", (folder / "config.json").read_bytes())):
        (uploads / name).write_bytes(data)
    with zipfile.ZipFile(uploads / "notes.zip", "w") as z:
        z.writestr("notes/readme.md", "no checkpoint here")
    (folder / "model.safetensors").write_bytes(b"\x00not weights")
    damaged = uploads / "damaged.zip"
    with zipfile.ZipFile(damaged, "w") as z:
        for p in folder.iterdir():
            z.write(p, f"shipped/{p.name}")
    expected = UPLOAD_EXPECTED
    for files, message in (
            (["model.bin"], f"Cannot open model.bin: it is not a .zip. {expected}"),
            (["fake.zip"], f"Cannot open fake.zip: it is not a readable .zip archive. {expected}"),
            (["notes.zip"], "Cannot open notes.zip: config.json, model.safetensors and tokenizer.json are missing. "
                            + expected),
            (["config.json", "model.bin"], "Cannot open config.json, model.bin: model.safetensors and tokenizer.json "
                                           f"are missing. {expected}")):
        picker, status = open_checkpoint(registry, [str(uploads / f) for f in files], "studio-tiny")
        assert toasts[-1] == html.escape(message, quote=False)
        assert registry.names() == ["studio-tiny"] and picker.value == "studio-tiny" and "studio\\-tiny" in status
    open_checkpoint(registry, [str(damaged)], "studio-tiny")  # core's message, without the server's path
    assert toasts[-1].startswith("Cannot open damaged.zip: model.safetensors: not a readable safetensors file")
    assert "/tmp" not in toasts[-1] and str(tmp_path) not in " ".join(toasts) and registry.names() == ["studio-tiny"]
    assert expected == ("The studio opens a .zip of a checkpoint folder, or the checkpoint's files uploaded together: "
                        "config.json, model.safetensors and tokenizer.json.")


def _with_zip_headers(zip_bytes: bytes, local: int, central: int, change) -> bytes:
    """zip_bytes with change(data, offset) applied at each local and central file header's field."""
    data = bytearray(zip_bytes)
    for signature, at in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
        start = 0
        while (start := data.find(signature, start)) >= 0:
            change(data, start + at)
            start += 4
    return bytes(data)


def test_a_zip_that_python_cannot_unpack_is_named_not_raised(registry, tmp_path, toasts):
    """An encrypted member (RuntimeError) or Windows' Deflate64 (NotImplementedError) fell through to the
    generic 'Something went wrong' toast."""
    folder = save_checkpoint(tmp_path / "ck", studio_bundle())
    plain = tmp_path / "plain.zip"
    with zipfile.ZipFile(plain, "w") as z:
        for p in sorted(folder.iterdir()):
            z.write(p, f"ck/{p.name}")

    def encrypted(data, at):  # general-purpose flag bit 0
        data[at] |= 1

    def deflate64(data, at):  # compression method 9
        data[at:at + 2] = (9).to_bytes(2, "little")

    for name, (local, central, change), said in (
            ("locked.zip", (6, 8, encrypted), "is encrypted; zip the folder again without a password"),
            ("d64.zip", (8, 10, deflate64), "is compressed with a method the studio cannot read")):
        (tmp_path / name).write_bytes(_with_zip_headers(plain.read_bytes(), local, central, change))
        guard(open_checkpoint)(registry, [str(tmp_path / name)], "studio-tiny")
        assert toasts[-1].startswith(f"Cannot open {name}: config.json in the .zip {said}")
    assert registry.names() == ["studio-tiny"]


def test_opening_uploaded_checkpoint_files_and_a_zip(registry, tmp_path, toasts):
    same = save_checkpoint(tmp_path / "same", studio_bundle())  # the model offered as studio-tiny
    picker, _ = open_checkpoint(registry, [str(p) for p in sorted(same.iterdir())], "other")
    assert picker.value == "studio-tiny" and registry.names() == ["studio-tiny"]  # picked, not offered twice
    assert toasts[-1] == "studio-tiny is open already (the same weights): it is picked."
    folder = save_checkpoint(tmp_path / "shipped", studio_bundle(max_len=16))  # another model, the same name
    files = [str(p) for p in sorted(folder.iterdir())]
    picker, status = open_checkpoint(registry, files, "studio-tiny")
    assert picker.value == "studio-tiny (2)" and "studio\\-tiny \\(2\\)" in status
    assert ("studio-tiny (2) (uploaded)", "studio-tiny (2)") in picker.choices  # gone when the studio stops
    archive = tmp_path / "shipped.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for p in folder.iterdir():
            z.write(p, f"shipped/{p.name}")
    picker, _ = open_checkpoint(registry, [str(archive)], "studio-tiny")
    assert picker.value == "studio-tiny (2)" and len(registry.names()) == 2  # its .zip: the same model again


def test_a_same_named_checkpoint_that_no_longer_loads_does_not_block_an_upload(tmp_path):
    shelf = tmp_path / "checkpoints"
    save_checkpoint(shelf / "studio-tiny", studio_bundle())
    (shelf / "studio-tiny" / "model.safetensors").write_bytes(b"damaged since the app started")
    registry = ModelRegistry(shelf)
    upload = save_checkpoint(tmp_path / "upload", studio_bundle())
    picker, _ = open_checkpoint(registry, [str(p) for p in sorted(upload.iterdir())], None)
    assert picker.value == "studio-tiny (2)"
