"""Checkpoint directories: long work (a sweep, an evaluation) that loses nothing.

A :class:`Checkpoint` is a directory that holds, for one call of
:func:`kernfw.sweep` or :func:`kernfw.evaluate`:

- ``manifest.json``: what was asked — a digest of every argument that changes
  the numbers (the estimator's parameters, the data, the values, the folds,
  ...), and the readable ones (the swept parameter and its values) as they are;
- ``rows/<key>.json``: one file per finished fit, written as the fit
  completes (to a temporary file, then renamed: a file is whole or absent,
  even when the process is killed while writing it);
- ``models/<key>.joblib``: the fitted model of that row, when asked
  (written before the row, so a row's model is there when its row is);
- ``running/<key>``: a marker per fit in progress (process id and host),
  removed when the fit's row is written; the markers left by a process that
  died name the fits it was running.

A call with the same arguments and the same directory reads the rows there,
fits only the missing ones and returns the whole table: a finished fit is
never refitted.  A call with different arguments stops with
:class:`~kernfw.sweeps.CheckpointMismatch`, which names the arguments that differ: rows of
two different sweeps are never mixed.  One call at a time may use a
directory.
"""

import hashlib
import json
import os
import socket
import tempfile

import joblib

__all__ = ["Checkpoint", "CheckpointMismatch", "digest", "FORMAT"]

#: version of the directory layout (a directory of another version is refused)
FORMAT = 1


class CheckpointMismatch(ValueError):
    """The checkpoint directory holds the rows of a call with other arguments."""


def digest(obj):
    """A hex digest of ``obj``'s content: :func:`joblib.hash` (arrays by value), or a
    hash of ``repr(obj)`` for an object that cannot be pickled (a lambda)."""
    try:
        return joblib.hash(obj)
    except Exception:  # noqa: BLE001 -- any pickling failure: fall back to the text
        return hashlib.sha1(repr(obj).encode()).hexdigest()


def _write_atomic(path, write):
    """Call ``write(handle)`` on a temporary file next to ``path``, then rename it to
    ``path``: readers see the old file, the whole new one, or none."""
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Checkpoint:
    """A directory of finished fits, keyed by strings (see the module docstring).

    Parameters
    ----------
    path : str or path-like
        The directory (created if absent; it must be empty, absent, or a
        checkpoint of the same ``kind``).
    kind : str
        What the directory holds (``"sweep"``, ``"evaluate"``).
    arguments : dict of {str: JSON value}
        The arguments of the call, digested or readable; stored in the
        manifest and compared on reuse.

    Instances are small and picklable: workers receive one and write their
    rows themselves, so a worker that dies loses only the fit it was running.
    """

    def __init__(self, path, kind, arguments):
        self.path = os.fspath(path)
        self.kind = kind
        self.arguments = dict(arguments)

    # -- the manifest --------------------------------------------------------------------------
    @property
    def manifest_path(self):
        return os.path.join(self.path, "manifest.json")

    def open(self):
        """Create the directory, or check that it holds this call's rows.

        Removes the markers of fits left running by an earlier process.

        Raises
        ------
        kernfw.sweeps.CheckpointMismatch
            The directory holds a call with other arguments, or is not an
            empty directory or a checkpoint.
        """
        manifest = {"kind": f"kernfw {self.kind}", "format": FORMAT, "arguments": self.arguments}
        # normalize through JSON, as the stored manifest was
        manifest = json.loads(json.dumps(manifest))
        if os.path.exists(self.manifest_path):
            with open(self.manifest_path) as handle:
                stored = json.load(handle)
            self._check(stored, manifest)
        else:
            if os.path.isdir(self.path) and os.listdir(self.path):
                raise CheckpointMismatch(
                    f"checkpoint directory {self.path!r} is not empty and holds no kernfw "
                    "manifest.json: give a new or empty directory"
                )
            os.makedirs(self.path, exist_ok=True)
            for sub in ("rows", "models", "running"):
                os.makedirs(os.path.join(self.path, sub), exist_ok=True)
            text = json.dumps(manifest, indent=1, sort_keys=True).encode()
            _write_atomic(self.manifest_path, lambda handle: handle.write(text))
        for sub in ("rows", "models", "running"):
            os.makedirs(os.path.join(self.path, sub), exist_ok=True)
        for name in os.listdir(os.path.join(self.path, "running")):
            os.unlink(os.path.join(self.path, "running", name))
        return self

    def _check(self, stored, manifest):
        if stored.get("kind") != manifest["kind"] or stored.get("format") != FORMAT:
            raise CheckpointMismatch(
                f"checkpoint directory {self.path!r} holds a {stored.get('kind')!r} "
                f"(format {stored.get('format')}), not a {manifest['kind']!r} "
                f"(format {FORMAT}): give another directory"
            )
        old, new = stored.get("arguments", {}), manifest["arguments"]
        differ = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        if differ:
            details = "; ".join(
                f"{k} (stored {_short(old.get(k))}, given {_short(new.get(k))})" for k in differ
            )
            raise CheckpointMismatch(
                f"checkpoint directory {self.path!r} holds the rows of a {self.kind} with other "
                f"arguments; its rows are not mixed with these. Differ: {details}. Give a new "
                "directory, or delete this one to start afresh."
            )

    # -- rows, models and running markers ------------------------------------------------------
    def _file(self, sub, key, ext=""):
        return os.path.join(self.path, sub, f"{key}{ext}")

    def has_row(self, key):
        """Whether the row of ``key`` is written."""
        return os.path.exists(self._file("rows", key, ".json"))

    def read_row(self, key):
        """The row of ``key`` (a dict), or None."""
        try:
            with open(self._file("rows", key, ".json")) as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def rows(self):
        """All written rows, ``{key: row}``."""
        folder = os.path.join(self.path, "rows")
        out = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith(".json") and not name.startswith("."):
                row = self.read_row(name[: -len(".json")])
                if row is not None:
                    out[name[: -len(".json")]] = row
        return out

    def write_row(self, key, row):
        """Write the row of ``key`` (atomically) and remove its running marker."""
        text = json.dumps(row, sort_keys=True).encode()
        os.makedirs(os.path.join(self.path, "rows"), exist_ok=True)
        _write_atomic(self._file("rows", key, ".json"), lambda handle: handle.write(text))
        self.finish(key)

    def model_path(self, key):
        """The file of ``key``'s fitted model (written by :meth:`write_model`)."""
        return self._file("models", key, ".joblib")

    def write_model(self, key, model):
        """Save ``model`` (:func:`joblib.dump`, atomically) as ``key``'s model."""
        os.makedirs(os.path.join(self.path, "models"), exist_ok=True)
        _write_atomic(self.model_path(key), lambda handle: joblib.dump(model, handle))

    def load_model(self, key):
        """The fitted model saved for ``key``."""
        return joblib.load(self.model_path(key))

    def start(self, key):
        """Mark ``key`` as running in this process."""
        os.makedirs(os.path.join(self.path, "running"), exist_ok=True)
        with open(self._file("running", key), "w") as handle:
            handle.write(f"{os.getpid()} {socket.gethostname()}\n")

    def finish(self, key):
        """Remove ``key``'s running marker (if any)."""
        try:
            os.unlink(self._file("running", key))
        except FileNotFoundError:
            pass

    def running(self):
        """The keys marked running (by this call, or by a process that died)."""
        folder = os.path.join(self.path, "running")
        if not os.path.isdir(folder):
            return []
        return sorted(name for name in os.listdir(folder) if not name.startswith("."))


def _short(value, width=80):
    text = json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."
