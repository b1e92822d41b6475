"""The use cases: one function per command, taking a request (:mod:`benanza.spec`) and returning a
typed result, never printing.

The CLI (:mod:`benanza.cli`) and the Python API (:mod:`benanza.api`) call the same functions, so one
request gives one answer whichever way it is asked. Progress (stage lines, notices, job and build
bars) goes through :class:`benanza.usecases.progress.Progress`, which the CLI implements with rich
(:class:`benanza.reports.progress.TerminalProgress`) and the API with nothing
(:data:`benanza.usecases.progress.SILENT`).

- :mod:`~benanza.usecases.common`: a scenario's lower bound and training step (every analysis starts here);
- :mod:`~benanza.usecases.analyze`: ``analyze`` (LBLs, training steps, a decoder's LLM terms, insights against a profile);
- :mod:`~benanza.usecases.predict`: ``predict`` (a scenario's LBL, or training step, on a GPU you do not have);
- :mod:`~benanza.usecases.roofline`: ``roofline`` (classic and time-based);
- :mod:`~benanza.usecases.bench`: ``bench``, ``run``, ``build``, ``ceilings``, ``worker`` (the GPU side);
- :mod:`~benanza.usecases.torch`: ``torch`` and :func:`benanza.api.analyze_module` (a PyTorch module in, insights out).
"""
