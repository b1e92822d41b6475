"""``python -m benanza`` runs the command line."""
from .cli import main

main()
