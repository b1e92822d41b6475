"""Generation: unique layers -> benchmark jobs -> C++ benchmark suites rendered from the Jinja templates."""
