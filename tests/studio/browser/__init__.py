"""The studio in headless Chromium: `python -m studio` served on a free port, every tab opened and used."""
