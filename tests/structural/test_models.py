"""Structured models (math.md §3.8): oracles against brute-force enumeration."""

import numpy as np
import pytest

from kernfw.datasets import load_ocr, make_chains
from kernfw.structured import Chain, Matching, MultiClass, StructuredModel, viterbi


def brute_force(model, x, w, y_true=None):
    """Best value of ⟨w, φ(x, y)⟩ (+ L(y_true, y)) over every output."""

    def value(y):
        v = float(w @ model.joint_feature(x, y))
        return v + model.loss(y_true, y) if y_true is not None else v

    return max(value(y) for y in model.labelings(x)), value


def random_chains(rng, q, d, lengths):
    X = [rng.normal(size=(T, d)) for T in lengths]
    Y = [rng.integers(0, q, size=T) for T in lengths]
    return X, Y


# -- chain / Viterbi --------------------------------------------------------------------------


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("q,d", [(2, 3), (3, 2), (4, 3)])
def test_viterbi_equals_brute_force(q, d, normalize):
    rng = np.random.default_rng(q * 10 + d + normalize)
    X, Y = random_chains(rng, q, d, [1, 2, 3, 4, 4, 3, 2, 5])
    model = Chain(q, normalize=normalize).initialize(X, Y)
    for _trial in range(3):
        w = rng.normal(scale=2.0, size=model.size_joint_feature)
        batch = model.prepare(X)
        aug_batch, plain_batch = model.batch_decode(batch, w, Y), model.batch_decode(batch, w)
        for i, (x, y) in enumerate(zip(X, Y)):
            best, value = brute_force(model, x, w, y)
            for y_hat in (model.loss_augmented_decode(x, y, w), aug_batch[i]):
                assert value(y_hat) == pytest.approx(best, abs=1e-10)
            best, value = brute_force(model, x, w)
            for y_hat in (model.decode(x, w), plain_batch[i]):
                assert value(y_hat) == pytest.approx(best, abs=1e-10)


def test_batched_viterbi_function_matches_enumeration():
    rng = np.random.default_rng(3)
    B, T, q = 6, 4, 3
    theta, G = rng.normal(size=(B, T, q)), rng.normal(size=(q, q))
    labels = viterbi(theta, G)
    assert labels.shape == (B, T)
    import itertools

    for b in range(B):

        def score(y):
            return theta[b, np.arange(T), y].sum() + sum(G[y[t], y[t + 1]] for t in range(T - 1))

        best = max(score(np.array(y)) for y in itertools.product(range(q), repeat=T))
        assert score(labels[b]) == pytest.approx(best, abs=1e-12)


def test_chain_features_and_loss():
    q, d = 3, 2
    x = np.arange(8.0).reshape(4, 2)
    y = np.array([0, 2, 2, 1])
    model = Chain(q).initialize([x], [y])
    assert model.size_joint_feature == q * d + 2 * q + q * q
    U, b_start, b_end, G = model.unpack(model.joint_feature(x, y))
    np.testing.assert_array_equal(U, [[0, 1], [6, 7], [2 + 4, 3 + 5]])
    np.testing.assert_array_equal(b_start, [1, 0, 0])
    np.testing.assert_array_equal(b_end, [0, 1, 0])
    expected_G = np.zeros((q, q))
    expected_G[0, 2] = expected_G[2, 2] = expected_G[2, 1] = 1
    np.testing.assert_array_equal(G, expected_G)
    assert model.loss(y, np.array([0, 2, 1, 0])) == pytest.approx(0.5)
    assert Chain(q, normalize=False).loss(y, np.array([0, 2, 1, 0])) == 2.0
    assert model.max_loss(y) == 1.0 and Chain(q, normalize=False).max_loss(y) == 4.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: Chain(3),
        lambda: Chain(3, normalize=False),
        lambda: MultiClass(
            4, cost=np.array([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0.0]])
        ),
        lambda: Matching(),
    ],
)
def test_batch_methods_match_per_example(make):
    rng = np.random.default_rng(1)
    model = make()
    if isinstance(model, Chain):
        X, Y = random_chains(rng, 3, 4, [2, 3, 5, 3, 1])
        Z = [rng.integers(0, 3, size=len(y)) for y in Y]
    elif isinstance(model, MultiClass):
        X, Y = rng.normal(size=(7, 3)), rng.integers(0, 4, size=7)
        Z = rng.integers(0, 4, size=7)
    else:
        X = [rng.normal(size=(r, r, 2)) for r in (2, 3, 4)]
        Y = [rng.permutation(r) for r in (2, 3, 4)]
        Z = [rng.permutation(r) for r in (2, 3, 4)]
    model.initialize(X, Y)
    batch = model.prepare(X)
    np.testing.assert_allclose(
        model.batch_joint_feature(batch, Z), sum(model.joint_feature(x, z) for x, z in zip(X, Z))
    )
    np.testing.assert_allclose(model.batch_loss(Y, Z), [model.loss(y, z) for y, z in zip(Y, Z)])
    for x, z in zip(X, Z):  # the compact statistics expand to φ
        np.testing.assert_allclose(
            model.expand(x, model.statistics(x, z)), model.joint_feature(x, z)
        )
    w = rng.normal(size=model.size_joint_feature)
    for got, x, y in zip(model.batch_decode(batch, w, Y), X, Y):
        assert model.loss(y, got) + w @ model.joint_feature(x, got) == pytest.approx(
            brute_force(model, x, w, y)[0]
        )


# -- matching ---------------------------------------------------------------------------------


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("r", [2, 3, 4, 5])
def test_matching_equals_brute_force(r, normalize):
    rng = np.random.default_rng(r + 10 * normalize)
    X = [rng.normal(size=(r, r, 3)) for _ in range(4)]
    Y = [rng.permutation(r) for _ in range(4)]
    model = Matching(normalize=normalize).initialize(X, Y)
    for x, y in zip(X, Y):
        w = rng.normal(size=3)
        best, value = brute_force(model, x, w, y)
        assert value(model.loss_augmented_decode(x, y, w)) == pytest.approx(best, abs=1e-10)
        best, value = brute_force(model, x, w)
        assert value(model.decode(x, w)) == pytest.approx(best, abs=1e-10)
    y = np.arange(r)
    assert model.max_loss(y) == max(model.loss(y, z) for z in model.labelings(X[0]))


# -- multi-class ------------------------------------------------------------------------------


def test_multiclass_oracles_and_cost():
    rng = np.random.default_rng(2)
    cost = rng.uniform(0.5, 2.0, size=(4, 4))
    np.fill_diagonal(cost, 0.0)
    X, Y = rng.normal(size=(10, 3)), rng.integers(0, 4, size=10)
    model = MultiClass(4, cost=cost).initialize(X, Y)
    w = rng.normal(size=12)
    W = w.reshape(4, 3)
    for x, y in zip(X, Y):
        assert model.loss_augmented_decode(x, y, w) == np.argmax(cost[y] + W @ x)
        assert model.decode(x, w) == np.argmax(W @ x)
        assert model.max_loss(y) == cost[y].max()
        best, value = brute_force(model, x, w, y)
        assert value(model.loss_augmented_decode(x, y, w)) == pytest.approx(best)
    np.testing.assert_array_equal(model.batch_decode(X, w), (X @ W.T).argmax(axis=1))


# -- user models ------------------------------------------------------------------------------


class Ranking2(StructuredModel):
    """A user model with only the required methods: y ∈ {−1, +1}, φ = y x / 2."""

    def joint_feature(self, x, y):
        return 0.5 * y * np.asarray(x, dtype=float)

    def loss(self, y_true, y):
        return float(y_true != y)

    def loss_augmented_decode(self, x, y_true, w):
        return max((-1, 1), key=lambda y: self.loss(y_true, y) + w @ self.joint_feature(x, y))

    def decode(self, x, w):
        return 1 if w @ x >= 0 else -1

    def labelings(self, x):
        return iter((-1, 1))


def test_user_model_gets_defaults():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 3))
    Y = np.where(X[:, 0] > 0, 1, -1)
    model = Ranking2().initialize(list(X), list(Y))
    assert model.size_joint_feature == 3
    batch = model.prepare(list(X))
    w = rng.normal(size=3)
    assert model.batch_decode(batch, w) == [model.decode(x, w) for x in X]
    np.testing.assert_allclose(
        model.batch_joint_feature(batch, Y), sum(model.joint_feature(x, y) for x, y in zip(X, Y))
    )
    np.testing.assert_allclose(
        model.expand(X[0], model.statistics(X[0], 1)), model.joint_feature(X[0], 1)
    )
    assert model.max_loss(1) is None


def test_base_class_requires_the_oracles():
    with pytest.raises(TypeError):
        StructuredModel()


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: Chain(1), "n_states"),
        (lambda: Chain(2.5), "n_states"),
        (lambda: MultiClass(1), "n_classes"),
        (lambda: MultiClass(3, cost=np.ones((2, 2))), "shape"),
        (lambda: MultiClass(2, cost=np.array([[0, -1], [1, 0.0]])), "nonnegative"),
        (lambda: MultiClass(2, cost=np.array([[1, 1], [1, 0.0]])), "diagonal"),
    ],
)
def test_bad_model_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_training_data():
    X, Y = make_chains(3, n_states=3, random_state=0)
    with pytest.raises(ValueError, match="different numbers"):
        Chain(3).initialize(X, Y[:2])
    with pytest.raises(ValueError, match="states outside"):
        Chain(2).initialize(X, [y + 5 for y in Y])
    with pytest.raises(ValueError, match="shape"):
        Chain(3).initialize(X, [y[:-1] for y in Y])
    with pytest.raises(ValueError, match="features"):
        Chain(3).initialize([X[0], X[1][:, :2]], Y[:2])
    with pytest.raises(ValueError, match="labels must lie"):
        MultiClass(3).initialize(np.ones((2, 2)), [0, 3])
    with pytest.raises(ValueError, match="integers"):
        MultiClass(3).initialize(np.ones((2, 2)), ["a", "b"])
    with pytest.raises(ValueError, match="integers"):
        MultiClass(3).initialize(np.ones((2, 2)), [0.5, 1])
    with pytest.raises(ValueError, match="permutation"):
        Matching().initialize([np.ones((2, 2, 1))], [np.array([0, 0])])
    with pytest.raises(ValueError, match=r"\(r, r, d\)"):
        Matching().initialize([np.ones((2, 3, 1))], [np.array([0, 1])])


# -- data -------------------------------------------------------------------------------------


def test_make_chains_is_reproducible():
    X1, Y1 = make_chains(5, n_states=4, n_features=3, length=(2, 7), random_state=7)
    X2, Y2 = make_chains(5, n_states=4, n_features=3, length=(2, 7), random_state=7)
    assert len(X1) == 5 and all(x.shape == (len(y), 3) for x, y in zip(X1, Y1))
    assert all(2 <= len(y) <= 7 and y.max() < 4 for y in Y1)
    for a, b in zip(X1, X2):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="length"):
        make_chains(2, length=(3, 2))


def test_load_ocr_split():
    X_train, Y_train, X_test, Y_test = load_ocr()
    assert (len(X_train), len(X_test)) == (6251, 626)
    assert X_train[0].shape[1] == 128 and X_train[0].dtype == np.float64
    assert all(len(x) == len(y) for x, y in zip(X_train, Y_train))
    assert max(int(y.max()) for y in Y_train) == 25
    with pytest.raises(ValueError, match="test_fold"):
        load_ocr(test_fold=10)
