"""`python -m studio`: the studio from the command line (app.main; `python -m studio --help`)."""
from .app import main

main()
