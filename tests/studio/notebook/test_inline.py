"""The whole studio from a notebook (studio.notebook.studio): served from the kernel on the shipped models and the
notebook's own, which is picked, and stopped with close()."""
from __future__ import annotations

import json
import urllib.request


def test_the_whole_studio_serves_the_notebooks_model(numbers):
    app = nb_studio(numbers)
    try:
        with urllib.request.urlopen(app.local_url, timeout=30) as page:
            assert page.status == 200 and "Transformer Studio" in page.read().decode()
        with urllib.request.urlopen(app.local_url + "config", timeout=30) as config:
            assert "numbers-en-de-tiny" in json.dumps(json.load(config))
    finally:
        app.close()


def nb_studio(model):
    import studio.notebook as nb

    return nb.studio(model, height=600)
