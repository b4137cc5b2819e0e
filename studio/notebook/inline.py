"""The whole studio in a notebook, on demand: the app ``python -m studio`` serves, on the shipped models and the
notebook's own, inline in Jupyter (an iframe below the cell) and in Colab (an iframe and a link through Colab's
own proxy, which only the notebook's user can open). Gradio loads here, when it is asked for."""
from __future__ import annotations

from typing import Any

from ..server.registry import ModelRegistry
from .models import Model, bundle_of


def studio(*models: Model, height: int = 900, port: int | None = None) -> Any:
    """Serve the studio from this kernel with the shipped models and `models` (bundles, folders or runs trained
    here; the first is picked), and show it below the cell. Returns the app (gr.Blocks): app.close() stops it.
    port: None takes the first free one from 7860."""
    from .. import app
    from ..server import sessions

    registry = ModelRegistry()
    names = [registry.add(getattr(model, "name", None) or bundle.name, bundle)
             for model, bundle in ((m, bundle_of(m)) for m in models)]
    demo = app.build_app(registry, names[0] if names else None)
    with demo:  # idle sessions are forgotten, as the command line's studio does
        sessions.Forgetter(demo).start()
    demo.queue(max_size=app.QUEUE_SIZE, default_concurrency_limit=app.DEFAULT_CONCURRENCY, status_update_rate=1)
    # share=False: Colab's proxy, not a public gradio.live link (a public studio wants --public's limits).
    demo.launch(inline=True, share=False, prevent_thread_lock=True, height=height, server_port=port, quiet=True,
                css=app.CSS, js=app.page_js(), theme=app.THEME, show_error=False,
                max_file_size=app.MAX_UPLOAD_BYTES, i18n=app.STATUS_WORDS)
    return demo
