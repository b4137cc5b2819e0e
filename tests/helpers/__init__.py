"""What the tests share, imported as ``tests.helpers.NAME``: tiny models (tiny, models), Trainers (trainers), the
studio's test model and registry (studio), the Train tab's job (jobs), the served studio and headless Chromium
(browser), and how a command-line refusal looks (cli)."""
