"""Hugging Face Spaces entry point (README front matter: sdk: gradio, app_file: app.py).
On a Space (SPACE_ID is set) it serves 0.0.0.0:7860 as a public studio (--public: visitors share one
bounded training run, controlled by whoever started it); elsewhere it behaves like `python -m studio`."""
import os
import sys

from studio.app import main

if __name__ == "__main__":
    main((["--host", "0.0.0.0", "--port", "7860", "--public"] if os.environ.get("SPACE_ID") else []) + sys.argv[1:])
