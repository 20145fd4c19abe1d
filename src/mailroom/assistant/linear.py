"""A multinomial logistic regression in numpy: the offline assistant's classifier.

A few hundred examples of a few hundred features each train in milliseconds
with plain batch gradient descent, so scikit-learn (and its scipy) is not
worth installing for it. Features are standardised with the training set's
mean and spread; L2 regularisation keeps an owner's handful of corrections
from being learned by heart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LinearModel:
    """Trained weights: ``softmax(((x - mean) / scale) @ weights + bias)`` over ``labels``."""

    labels: tuple[str, ...]
    weights: Array
    bias: Array
    mean: Array
    scale: Array

    def probabilities(self, features: npt.ArrayLike) -> Array:
        """Class probabilities, one row per feature row."""
        x = (np.atleast_2d(np.asarray(features, dtype=np.float64)) - self.mean) / self.scale
        return _softmax(x @ self.weights + self.bias)

    def predict(self, features: npt.ArrayLike) -> list[tuple[str, float]]:
        """The most likely label and its probability, per row."""
        found = self.probabilities(features)
        best = found.argmax(axis=1)
        return [(self.labels[i], float(found[row, i])) for row, i in enumerate(best)]


def _softmax(scores: Array) -> Array:
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return np.asarray(shifted / shifted.sum(axis=1, keepdims=True))


def train(
    features: npt.ArrayLike,
    labels: Sequence[str],
    l2: float = 1e-2,
    steps: int = 300,
    rate: float = 0.5,
) -> LinearModel:
    """Fit the model (batch gradient descent on the mean cross-entropy plus L2)."""
    x = np.asarray(features, dtype=np.float64)
    names = tuple(sorted(set(labels)))
    index = {name: i for i, name in enumerate(names)}
    y = np.zeros((len(labels), len(names)))
    y[np.arange(len(labels)), [index[label] for label in labels]] = 1.0
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = (x - mean) / scale
    weights = np.zeros((x.shape[1], len(names)))
    bias = np.zeros(len(names))
    for _ in range(steps):
        error = (_softmax(z @ weights + bias) - y) / len(z)
        weights -= rate * (z.T @ error + l2 * weights)
        bias -= rate * error.sum(axis=0)
    return LinearModel(names, weights, bias, mean, scale)
