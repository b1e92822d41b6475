"""A stand-in for torch (and its tensors) in the PyTorch candidates' tests, where torch is not
installed: every attribute is another recorder named by its dotted path (``ops.aten.native_batch_norm``),
every call is appended to ``calls`` as ``(path, args)`` and returns a recorder, operators and
indexing return recorders, and iteration yields nothing. Building a candidate only allocates its
inputs and closes over the call, so nothing runs; the tests read which ATen ops were called, and
with which arguments."""


class Recorder:
    def __init__(self, calls: list, path: str = ""):
        self._calls, self.path = calls, path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Recorder(self._calls, f"{self.path}.{name}" if self.path else name)

    def __call__(self, *a, **k):
        self._calls.append((self.path, a))
        return Recorder(self._calls)

    def __getitem__(self, k):
        return Recorder(self._calls)

    def __iter__(self):
        return iter(())

    def _op(self, other):
        return Recorder(self._calls)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _op
    __ge__ = __gt__ = __le__ = __lt__ = _op
