"""``python -m benanza`` runs the command line."""
from benanza.cli import main

main()
