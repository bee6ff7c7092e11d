"""Structured output models: joint features, task losses, decoding oracles (math.md §3).

- :class:`StructuredModel`: the protocol a model implements (plug in your own);
- :class:`MultiClass`: multi-class classification (optional label-cost matrix);
- :class:`Chain`: sequence labeling with Viterbi decoding;
- :class:`Matching`: bipartite matching by linear assignment.
"""

from .base import StructuredModel
from .chain import Chain, ChainBatch, viterbi
from .matching import Matching
from .multiclass import MultiClass

__all__ = ["StructuredModel", "MultiClass", "Chain", "ChainBatch", "Matching", "viterbi"]
