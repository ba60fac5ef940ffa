"""hapref.evaluation — the published evaluation protocols of the real benchmarks, exactly and fast.

::

    from hapref.evaluation import evaluate, dataset_ids
    results = evaluate("fivr-5k", similarities, root="~/data/hapref")   # {query: {target: score}} or [Q, N]
    results["DSVR"], results["DSVR_h"]                                  # the released evaluator's numbers
    results.coverage, results.tied                                      # what was scored; tied groups

A dict missing videos is scored against the protocol's whole database (a missing video is a miss, as the
released dataset classes count it); ``available=`` declares a deliberate subset; ``ties="expected"``
(default) or ``"released"`` picks the tie policy.

``python -m hapref.evaluation fivr-5k --similarities sims.pk --root DIR`` does the same from the command
line. :mod:`hapref.evaluation.fixtures` writes small files in the released layouts (tests, the book).
:func:`similarities` scores queries × a streamed database with a similarity network as the released
evaluation loop does, without padding (``python -m hapref.evaluation DATASET --features FILE.hdf5 ...``).
"""

from hapref.evaluation.protocols import (DATASETS, RESULT_KEYS, TIES, Coverage, CoverageWarning, Results,
                                         annotation_root, dataset_ids, evaluate, ranked_ap)

from hapref.evaluation.scoring import similarities  # noqa: E402  (streaming scorer of similarity networks)

__all__ = ["annotation_root", "Coverage", "CoverageWarning", "DATASETS", "dataset_ids", "evaluate", "ranked_ap",
           "Results", "RESULT_KEYS", "similarities", "TIES"]
