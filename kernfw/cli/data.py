"""Data for the command line: bundled datasets, svmlight, CSV and .npz files, the split."""

import os

import numpy as np

from .errors import CLIError, one_line

__all__ = ["DATASETS", "load_data", "prepare", "stack_folds", "subsample"]

#: bundled datasets (scikit-learn loaders, no download)
DATASETS = {
    "digits": "load_digits",
    "iris": "load_iris",
    "wine": "load_wine",
    "breast_cancer": "load_breast_cancer",
    "diabetes": "load_diabetes",  # regression targets (for --model l2svr)
}


def load_data(spec):
    """Load ``(X, y, description)`` from a bundled name, an svmlight file, a CSV file
    (``.csv``: numbers, the label in the last column, an optional header row) or an .npz.

    Raises
    ------
    CLIError
        When the name is unknown, the file cannot be read or holds no samples.
    """
    if spec in DATASETS:
        import sklearn.datasets

        X, y = getattr(sklearn.datasets, DATASETS[spec])(return_X_y=True)
        return X.astype(np.float64), y, spec
    if not os.path.isfile(spec):
        raise CLIError(
            f"--data {spec!r} is neither a bundled dataset "
            f"({', '.join(DATASETS)}) nor an existing file"
        )
    if spec.endswith(".npz"):
        X, y = _load_npz(spec)
    elif spec.lower().endswith(".csv"):
        X, y = _load_csv(spec)
    else:
        X, y = _load_svmlight(spec)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise CLIError(f"{spec!r} holds no data ({X.shape[0]} samples x {X.shape[1]} features)")
    return X, y, os.path.basename(spec)


def _load_svmlight(path):
    from sklearn.datasets import load_svmlight_file

    try:
        return load_svmlight_file(path)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path!r} as an svmlight file: {one_line(exc)}") from exc


def _load_csv(path):
    """Features and labels of a CSV file of numbers, the label in the last column."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline()
        header = any(c.isalpha() and c not in "eE" for c in first.replace("nan", ""))
        table = np.loadtxt(path, delimiter=",", skiprows=int(header), ndmin=2)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path!r} as a CSV file of numbers: {one_line(exc)}") from exc
    if table.shape[1] < 2:
        raise CLIError(f"{path!r}: a CSV file needs feature columns and a last label column")
    return table[:, :-1], table[:, -1]


#: the first bytes of a zip archive (what ``numpy.savez`` writes) and of a single .npy array
_ZIP_MAGIC, _NPY_MAGIC = (b"PK\x03\x04", b"PK\x05\x06"), b"\x93NUMPY"


def _check_npz_header(path):
    """CLIError naming the real problem when ``path`` is not a zip archive of arrays."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith(_ZIP_MAGIC):
        return
    if head.startswith(_NPY_MAGIC):
        raise CLIError(
            f"{path!r} is a single .npy array (numpy.save), not an .npz archive with arrays "
            "'X' and 'y' (numpy.savez(path, X=X, y=y))"
        )
    what = "empty" if not head else f"starts with {head!r}"
    raise CLIError(
        f"{path!r} is not an .npz file: it is not a zip archive of arrays ({what}); "
        "write one with numpy.savez(path, X=X, y=y)"
    )


def _load_npz(path):
    _check_npz_header(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = {"X", "y"} - set(data.files)
            if missing:
                raise CLIError(
                    f"{path!r} must hold arrays 'X' and 'y'; missing "
                    f"{sorted(missing)} (it has {sorted(data.files)})"
                )
            X, y = _npz_array(data, "X", path), _npz_array(data, "y", path)
    except CLIError:
        raise
    except Exception as exc:  # zipfile/format errors of a damaged archive
        raise CLIError(f"cannot read {path!r} as an .npz file: {one_line(exc)}") from exc
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise CLIError(
            f"{path!r}: X must be 2-D and y 1-D with as many rows; got X {X.shape}, y {y.shape}"
        )
    return X, y


def _npz_array(data, name, path):
    """Array ``name`` of an open .npz; CLIError if it holds Python objects (pickled)."""
    try:
        return data[name]
    except ValueError as exc:
        if "pickle" not in str(exc):
            raise
        raise CLIError(
            f"array {name!r} of {path!r} holds Python objects (saved with pickling); "
            "save numeric arrays (or strings for y), e.g. X.astype(float)"
        ) from None


def _split(X, y, test_size, seed, by_class=True):
    """The train/test split, stratified by class when ``by_class`` and every class has two
    points (never for regression targets)."""
    from sklearn.model_selection import train_test_split

    _, counts = np.unique(y, return_counts=True)
    stratify = y if by_class and counts.min() >= 2 else None
    try:
        return train_test_split(X, y, test_size=test_size, random_state=seed, stratify=stratify)
    except ValueError as exc:
        raise CLIError(f"cannot split the data: {one_line(exc)}") from exc


def prepare(args, kind):
    """Data, split and (optionally) standardization of ``args``; returns a dict with
    ``name``, ``shape``, ``n_classes`` (None for a regressor's real targets), ``X_train``,
    ``X_test``, ``y_train``, ``y_test``.

    ``kind`` is the model's kind (:class:`kernfw.cli.models.Model`): structured
    models get labels ``0 … m−1``.
    """
    X, y, name = load_data(args.data)
    n_classes = np.unique(y).size
    if kind == "structured":  # MultiClass wants labels 0 … m−1
        y = np.unique(y, return_inverse=True)[1]
    by_class = kind != "regressor"
    X_train, X_test, y_train, y_test = _split(X, y, args.test_size, args.seed, by_class)
    if args.standardize:
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler(with_mean=not hasattr(X, "tocsr")).fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    return {
        "name": name,
        "shape": X.shape,
        "n_classes": n_classes if by_class else None,
        "X_train": X_train,
        "X_test": X_test,
        "y_train": y_train,
        "y_test": y_test,
    }


def stack_folds(data):
    """Train and test splits stacked, with the one (train, test) fold they form."""
    import scipy.sparse as sp

    X_train, X_test = data["X_train"], data["X_test"]
    X = (
        sp.vstack([X_train, X_test]).tocsr()
        if sp.issparse(X_train)
        else np.vstack([X_train, X_test])
    )
    y = np.concatenate([data["y_train"], data["y_test"]])
    n = len(data["y_train"])
    return X, y, [(np.arange(n), np.arange(n, len(y)))]


def subsample(X, y, size, seed):
    """At most ``size`` rows of ``(X, y)`` (stratified when every class can be kept)."""
    if len(y) <= size:
        return X, y
    from sklearn.model_selection import train_test_split

    _, counts = np.unique(y, return_counts=True)
    stratify = y if counts.min() >= 2 and len(counts) <= size else None
    X, _, y, _ = train_test_split(X, y, train_size=size, random_state=seed, stratify=stratify)
    return X, y
