"""Reports: the HTML report, charts and traces written from an analysis."""
