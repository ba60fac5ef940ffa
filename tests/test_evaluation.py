"""hapref.evaluation: evaluate() against slow literal transcriptions of the released evaluators.

The ``_ref_*`` functions below follow the released protocols step by step (plain Python loops, the
released AP primitive with numpy's argsort); they run on real-layout fixtures always and on the real
annotation files in ``<repo>/../shared/data/annotations`` when that folder exists (FIVR-5K and id subsets,
so the file stays well under a minute).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tie_orders

from hapref.data import loaders
from hapref.data.unpickle import load_pickle
from hapref.evaluation import dataset_ids, evaluate, ranked_ap
from hapref.evaluation.fixtures import fixture_similarities, write_fixtures

REAL = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_real = pytest.mark.skipif(not (REAL / "annotations").is_dir(), reason="real annotation files absent")


# ------------------------------------------------------------------------------ slow literal transcriptions
def _released_ap(y_true, y_score, gt_len):
    """Sort by numpy's argsort reversed, precision@k = cumsum/k, AP = sum(precision · rel) / gt_len."""
    y = np.array(y_true, dtype=float)[np.argsort(np.array(y_score, dtype=float))[::-1]]
    precision = np.cumsum(y) / (np.arange(len(y)) + 1)
    return float(np.sum(precision * y / gt_len))


def _ref_fivr(similarities, all_db, data, version, easy):
    queries = sorted(data[version]["queries"])
    database = set(data[version]["database"])
    all_db = database if all_db is None else database & set(all_db)
    tasks = {"DSVR": ["ND", "DS"], "CSVR": ["ND", "DS", "CS"], "ISVR": ["ND", "DS", "CS", "IS"]}
    out = {}
    for db, ext in ((all_db, ""), (all_db - easy, "_h")):
        for task, labels in tasks.items():
            aps, y_all, s_all, gt_all = [], [], [], 0
            for query, targets in similarities.items():
                if query not in queries:
                    continue
                gt = set()
                for label in labels:
                    gt.update(data["annotation"][query].get(label, []))
                gt = (gt & db) - {query}
                y, s = [], []
                for target, sim in targets.items():
                    if target != query and target in db:
                        y.append(int(target in gt))
                        s.append(float(sim))
                if gt:
                    aps.append(_released_ap(y, s, len(gt)))
                y_all += y
                s_all += s
                gt_all += len(gt)
            out[task + ext] = float(np.mean(aps))
            out[task[:-1] + "D" + ext] = _released_ap(y_all, s_all, gt_all)
    return out


def _ref_evve(similarities, all_db, data):
    queries = sorted(data["queries"])
    event_of = {q: e for e, (qs, _, _) in data["annotation"].items() for q in qs}
    aps, y_all, s_all, gt_all = [], [], [], 0
    for query in queries:
        if query not in similarities:
            continue
        targets = similarities[query]
        pos = data["annotation"][event_of[query]][1]
        if all_db:
            pos = pos & all_db
        ranks, n_ext = [], 0
        for ri, name in enumerate(sorted(targets, key=lambda x: targets[x], reverse=True)):
            if name in pos:
                ranks.append(ri - n_ext)
            if name not in all_db:
                n_ext += 1
        ap = 0.0
        if pos and ranks:
            for ntp, rank in enumerate(ranks):
                before = 1.0 if rank == 0 else ntp / rank
                ap += (before + (ntp + 1) / (rank + 1)) / 2.0 / len(pos)
        aps.append(ap)
        for target, sim in targets.items():
            if target in all_db:
                y_all.append(target in pos)
                s_all.append(sim)
        gt_all += len(pos)
    return {"EVVE_mAP": float(np.mean(aps)), "EVVE_uAP": _released_ap(y_all, s_all, gt_all)}


def _ref_cc_web(similarities, data):
    out = {}
    for key, all_videos, clean in (("mAP", False, False), ("mAP_star", True, False), ("mAP_c", False, True),
                                   ("mAP_c_star", True, True)):
        total = 0.0
        for qset, labels in enumerate(data["ground_truth"]):
            query = data["queries"][qset]
            if query not in similarities:
                continue
            res = similarities[query]
            i = ri = s = 0.0
            for name in sorted(res, key=lambda x: res[x], reverse=True):
                if name not in data["index"]:
                    continue
                video = data["index"][name]
                if (all_videos or video in labels) and (not clean or video not in data["excluded"][qset]):
                    ri += 1
                    if video in labels and labels[video] in "ESLMV":
                        i += 1
                        s += i / ri
            positives = sum(1 for k, v in labels.items()
                            if v in "ESLMV" and (not clean or k not in data["excluded"][qset]))
            total += s / positives
        out[key] = total / len(set(data["queries"]) & set(similarities))
    return out


def _ref_svd(similarities, all_db, lines):
    from sklearn.metrics import average_precision_score
    gt = {}
    for line in lines:
        q, c, label = line.split()
        gt.setdefault(q, {})[c] = int(label)
    aps, y_all, s_all = [], [], []
    for query, targets in gt.items():
        res = similarities[query]
        y = [label for t, label in targets.items() if t in all_db]
        s = [res[t] for t in targets if t in all_db]
        aps.append(average_precision_score(y, s))
        y_all += y
        s_all += s
    return {"mAP": float(np.mean(aps)), "uAP": _released_ap(y_all, s_all, y_all.count(1))}


def _ref_vcdb(similarities, all_db, queries, positives):
    aps, y_all, s_all, gt_all = [], [], [], 0
    for query in queries:
        if query not in similarities:
            continue
        gt = positives[query] & all_db
        y, s = [], []
        for target, sim in similarities[query].items():
            if target != query and target in all_db:
                y.append(int(target in gt))
                s.append(float(sim))
        aps.append(_released_ap(y, s, len(gt)))
        y_all += y
        s_all += s
        gt_all += len(gt)
    return {"VCDB_mAP": float(np.mean(aps)), "VCDB_uAP": _released_ap(y_all, s_all, gt_all)}


def _close(got: dict, want: dict, tol: float = 1e-9) -> None:
    assert list(got) == list(want) or set(got) == set(want), (sorted(got), sorted(want))
    for key in want:
        assert abs(got[key] - want[key]) <= tol, (key, got[key], want[key])


# ------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def fixture_root(tmp_path_factory):
    return write_fixtures(tmp_path_factory.mktemp("annotations_root"), seed=3)


def _sims(dataset, root, seed=0, decimals=None):
    ann = {"fivr-5k": lambda p: loaders.load_fivr(p, "5k"), "fivr-200k": lambda p: loaders.load_fivr(p, "200k"),
           "evve": loaders.load_evve, "svd": loaders.load_svd, "cc_web_video": loaders.load_cc_web_video,
           "vcdb": loaders.load_vcdb}[dataset]
    folder = {"fivr-5k": "fivr", "fivr-200k": "fivr"}.get(dataset, dataset)
    from hapref.evaluation.fixtures import annotation_path
    a = ann(annotation_path(root, folder))
    relevant = a.relevance().numpy()
    if dataset == "cc_web_video":  # the query's own match is labelled E
        relevant |= np.array([[v == q for v in a.database] for q in a.queries])
    return a, fixture_similarities(a.queries, a.database, relevant, seed=seed, decimals=decimals)


def _load(path):
    return load_pickle(path)  # built-in values and sets only, as every released annotation pickle


@pytest.mark.parametrize("seed", [0, 1])
def test_fivr_matches_reference_on_fixtures(fixture_root, seed):
    folder = fixture_root / "annotations" / "fivr"
    data = _load(folder / "fivr.pickle")
    easy = set((folder / "fivr_easy_duplicates.txt").read_text().split())
    for version in ("5k", "200k"):
        ann, sims = _sims(f"fivr-{version}", fixture_root, seed)
        _close(evaluate(f"fivr-{version}", sims, fixture_root), _ref_fivr(sims, None, data, version, easy))
        drop = set(ann.database[::5])
        available = [v for v in ann.database + ann.queries if v not in drop]
        _close(evaluate(f"fivr-{version}", sims, fixture_root, available),
               _ref_fivr(sims, available, data, version, easy))
        tensor = torch.tensor([[sims[q][v] for v in ann.database] for q in ann.queries], dtype=torch.float64)
        _close(evaluate(f"fivr-{version}", tensor, fixture_root), evaluate(f"fivr-{version}", sims, fixture_root))


def test_fivr_fixture_has_the_real_quirks(fixture_root):
    folder = fixture_root / "annotations" / "fivr"
    data = _load(folder / "fivr.pickle")
    assert isinstance(data["5k"]["queries"], list) and isinstance(data["5k"]["database"], set)
    assert data["5k"]["queries"] != sorted(data["5k"]["queries"])
    assert set(data["5k"]["queries"]) & data["5k"]["database"]  # a query that is also a database video
    multi = [(q, v) for q, per in data["annotation"].items()
             for v in {v for ids in per.values() for v in ids} if sum(v in ids for ids in per.values()) > 1]
    assert multi
    easy = set((folder / "fivr_easy_duplicates.txt").read_text().split())
    ann = loaders.load_fivr(folder / "fivr.pickle")
    assert not ann.without(easy).relevance("DSVR").all(1).all() and (~ann.without(easy).relevance("DSVR").any(1)).any()


@pytest.mark.parametrize("decimals", [None, 1])
def test_evve_and_cc_web_match_reference_with_and_without_ties(fixture_root, decimals):
    """EVVE's and CC_WEB_VIDEO's mAP sort stably: tied scores keep the dict order, which ties="released"
    reproduces (the default, ties="expected", agrees on tie-free scores)."""
    data = _load(fixture_root / "annotations" / "evve" / "evve.pickle")
    ann, sims = _sims("evve", fixture_root, decimals=decimals)
    got = evaluate("evve", sims, fixture_root, ties="released")
    want = _ref_evve(sims, set(ann.queries) | set(ann.database), data)
    _close(got, want, 1e-12)
    if decimals is None:
        _close(evaluate("evve", sims, fixture_root), want)
    available = set(ann.database[::2])  # positives shrink and unavailable targets shift later ranks
    _close(evaluate("evve", sims, fixture_root, available, ties="released") | {"EVVE_uAP": 0.0},
           _ref_evve(sims, available, data) | {"EVVE_uAP": 0.0})
    cc = _load(fixture_root / "annotations" / "cc_web_video" / "cc_web_video.pickle")
    _, sims = _sims("cc_web_video", fixture_root, decimals=decimals)
    _close(evaluate("cc_web_video", sims, fixture_root, ties="released"), _ref_cc_web(sims, cc), 1e-12)
    if decimals is None:
        _close(evaluate("cc_web_video", sims, fixture_root), _ref_cc_web(sims, cc), 1e-12)


def test_targets_outside_the_annotation_count_where_released_counts_them(fixture_root):
    data = _load(fixture_root / "annotations" / "evve" / "evve.pickle")
    ann, sims = _sims("evve", fixture_root, seed=4)
    extra = {q: ({"unknown-video": 9.0, **row} if i % 2 else {**row, "other": -9.0})
             for i, (q, row) in enumerate(sims.items())}
    all_db = set(extra) | {t for row in extra.values() for t in row}
    got = evaluate("evve", extra, fixture_root)
    _close(got, _ref_evve(extra, all_db, data))
    assert got["EVVE_mAP"] < evaluate("evve", sims, fixture_root)["EVVE_mAP"]  # a distractor ranked first
    folder = fixture_root / "annotations" / "fivr"
    easy = set((folder / "fivr_easy_duplicates.txt").read_text().split())
    ann, sims = _sims("fivr-5k", fixture_root, seed=4)
    extra = {q: {**row, "not-in-fivr": 9.0} for q, row in sims.items()}
    _close(evaluate("fivr-5k", extra, fixture_root), _ref_fivr(extra, None, _load(folder / "fivr.pickle"), "5k", easy))


def test_cc_web_counts_self_match_and_missing_positive(fixture_root):
    cc = _load(fixture_root / "annotations" / "cc_web_video" / "cc_web_video.pickle")
    ann = loaders.load_cc_web_video(fixture_root / "annotations" / "cc_web_video" / "cc_web_video.pickle")
    ideal = {q: {v: float(v == q) + float(cc["ground_truth"][i].get(cc["index"][v], "x") in "ESLMV")
                 for v in ann.database} for i, q in enumerate(ann.queries)}
    got = evaluate("cc_web_video", ideal, fixture_root)
    assert got == pytest.approx(_ref_cc_web(ideal, cc), abs=1e-12)
    assert got["mAP"] < 1.0  # the positive missing from the index is never retrieved but still counts
    cc["ground_truth"][0] = {k: v for k, v in cc["ground_truth"][0].items() if k in cc["index"].values()}
    assert _ref_cc_web(ideal, cc)["mAP"] == pytest.approx(1.0)


def test_svd_and_vcdb_match_reference(fixture_root):
    lines = (fixture_root / "annotations" / "svd" / "test_groundtruth").read_text().splitlines()
    ann, sims = _sims("svd", fixture_root)
    with_mp4 = {f"{q}.mp4": {f"{t}.mp4": s for t, s in row.items()} for q, row in sims.items()}
    all_db = set(with_mp4) | {t for row in with_mp4.values() for t in row}
    want = _ref_svd(with_mp4, all_db, lines)
    _close(evaluate("svd", with_mp4, fixture_root), want)
    _close(evaluate("svd", sims, fixture_root), want)
    unlabeled = ["900.mp4", "901.mp4"]
    extra = {q: {**row, "900": -5.0, "901": 9.0} for q, row in sims.items()}
    got = evaluate("svd", extra, fixture_root, unlabeled=unlabeled)
    assert got["mAP"] < want["mAP"]  # a distractor above everything lowers every AP
    q, db = dataset_ids("svd", fixture_root, unlabeled=unlabeled)
    tensor = np.array([[extra[a].get(b, -9.0) for b in db] for a in q])
    _close(evaluate("svd", tensor, fixture_root, unlabeled=unlabeled), got)

    queries, positives, _ = loaders.read_vcdb(fixture_root / "annotations" / "vcdb" / "vcdb.pickle")
    ann, sims = _sims("vcdb", fixture_root)
    all_db = set(sims) | {t for row in sims.values() for t in row}
    _close(evaluate("vcdb", sims, fixture_root), _ref_vcdb(sims, all_db, queries, positives))
    core_only = {q: {t: s for t, s in row.items() if t in set(queries)} for q, row in sims.items()}
    _close(evaluate("vcdb", core_only, fixture_root, available=queries),
           _ref_vcdb(core_only, set(queries), queries, positives))


# ---------------------------------------------------------------------------------------------------- ties
def test_tie_policy_is_the_expected_value_over_tie_orders():
    rng = np.random.default_rng(0)
    for _ in range(30):
        scores = rng.integers(0, 3, size=7).astype(float)
        relevant = rng.random(7) < 0.5
        if not relevant.any():
            continue
        gt_len = int(relevant.sum()) + int(rng.integers(0, 2))
        values = [np.sum(np.cumsum(y) / np.arange(1, len(y) + 1) * y) / gt_len
                  for _, y in tie_orders(scores, relevant)]
        assert ranked_ap(scores, relevant, gt_len) == pytest.approx(np.mean(values), abs=1e-12)
        assert min(values) - 1e-12 <= ranked_ap(scores, relevant, gt_len) <= max(values) + 1e-12


def test_ties_do_not_depend_on_the_stored_order(fixture_root):
    _, sims = _sims("fivr-5k", fixture_root, decimals=0)
    reversed_sims = {q: dict(reversed(list(row.items()))) for q, row in reversed(list(sims.items()))}
    assert evaluate("fivr-5k", sims, fixture_root) == pytest.approx(evaluate("fivr-5k", reversed_sims, fixture_root),
                                                                   abs=1e-12)
    # groups of only relevant or only irrelevant items: every order agrees and so does evaluate
    folder = fixture_root / "annotations" / "fivr"
    ann = loaders.load_fivr(folder / "fivr.pickle")
    rel = ann.relevance("ISVR").numpy()
    coarse = {q: {v: float(rel[i, j]) for j, v in enumerate(ann.database)} for i, q in enumerate(ann.queries)}
    easy = set((folder / "fivr_easy_duplicates.txt").read_text().split())
    got = evaluate("fivr-5k", coarse, fixture_root)
    want = _ref_fivr(coarse, None, _load(folder / "fivr.pickle"), "5k", easy)
    assert got["ISVR"] == pytest.approx(want["ISVR"], abs=1e-12) == pytest.approx(1.0)


# --------------------------------------------------------------------------------------------- bad inputs
def test_bad_inputs_are_refused(fixture_root, tmp_path):
    q, db = dataset_ids("evve", fixture_root)
    with pytest.raises(ValueError, match="dataset"):
        evaluate("fivr-10k", {}, fixture_root)
    with pytest.raises(ValueError, match="shape"):
        evaluate("evve", np.zeros((len(q), len(db) + 1)), fixture_root)
    with pytest.raises(ValueError, match="NaN"):
        evaluate("evve", np.full((len(q), len(db)), np.nan), fixture_root)
    with pytest.raises(TypeError, match="similarities"):
        evaluate("evve", [[0.0]], fixture_root)
    with pytest.raises(FileNotFoundError, match="annotations/evve"):
        evaluate("evve", {}, tmp_path)
    with pytest.raises(ValueError, match="no EVVE query"):
        evaluate("evve", {"unknown": {"a": 1.0}}, fixture_root)


# ------------------------------------------------------------------------------------------------------ CLI
def test_cli_reads_pickle_and_json_and_writes_results(fixture_root, tmp_path, capsys):
    from hapref.evaluation.__main__ import main
    _, sims = _sims("evve", fixture_root)
    (tmp_path / "sims.pk").write_bytes(pickle.dumps(sims, protocol=3))
    (tmp_path / "sims.json").write_text(json.dumps(sims))
    assert main(["evve", "--similarities", str(tmp_path / "sims.pk"), "--root", str(fixture_root),
                 "--out", str(tmp_path / "results.json")]) == 0
    printed = capsys.readouterr().out
    results = json.loads((tmp_path / "results.json").read_text())
    assert results == pytest.approx(evaluate("evve", sims, fixture_root)) and "μAP" in printed
    assert main(["evve", "--similarities", str(tmp_path / "sims.json"), "--root", str(fixture_root)]) == 0
    (tmp_path / "evil.pk").write_bytes(pickle.dumps({"q": Path("x")}))
    with pytest.raises(SystemExit):
        main(["evve", "--similarities", str(tmp_path / "evil.pk"), "--root", str(fixture_root)])
    assert "evil.pk" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- real files
@pytest.fixture(scope="module")
def real_fivr():
    folder = REAL / "annotations" / "fivr"
    return _load(folder / "fivr.pickle"), set((folder / "fivr_easy_duplicates.txt").read_text().split())


@needs_real
def test_real_fivr_5k_matches_reference(real_fivr):
    data, easy = real_fivr
    ann = loaders.load_fivr(REAL / "annotations" / "fivr" / "fivr.pickle", "5k")
    rel = ann.relevance("ISVR").numpy()
    for seed, available in ((0, None), (1, [v for v in ann.database[::3]] + ann.queries)):
        sims = fixture_similarities(ann.queries, ann.database, rel, seed=seed, separation=1.5)
        _close(evaluate("fivr-5k", sims, REAL, available), _ref_fivr(sims, available, data, "5k", easy), 1e-9)


@needs_real
def test_real_fivr_multi_label_pairs_are_kept(real_fivr):
    data, _ = real_fivr
    ann = loaders.load_fivr(REAL / "annotations" / "fivr" / "fivr.pickle", "5k")
    database = set(ann.database)
    inside = [(q, v) for q in ann.queries for v, labels in ann.labels[q].items() if v in database]
    assert len(inside) == 1945 and sum(len(ann.labels[q][v]) > 1 for q, v in inside) == 646
    one_label = {q: {v: label for label, ids in data["annotation"][q].items() for v in ids} for q in ann.queries}
    lost = sum(1 for q, v in inside if v != q and not {"ND", "DS"}.isdisjoint(ann.labels[q][v])
               and one_label[q][v] not in ("ND", "DS"))
    assert lost == 354


@needs_real
def test_real_fivr_5k_queries_outside_the_database():
    """Chapter 8: 49 of the 50 FIVR-5K queries are not database videos (so never targets); one is."""
    ann = loaders.load_fivr(REAL / "annotations" / "fivr" / "fivr.pickle", "5k")
    outside = [q for q in ann.queries if q not in set(ann.database)]
    assert (len(ann.queries), len(outside)) == (50, 49)


@needs_real
def test_real_evve_svd_cc_web_vcdb_match_reference():
    ann = loaders.load_evve(REAL / "annotations" / "evve" / "evve.pickle")
    data = _load(REAL / "annotations" / "evve" / "evve.pickle")
    sims = fixture_similarities(ann.queries, ann.database, ann.relevance().numpy(), seed=0)
    _close(evaluate("evve", sims, REAL), _ref_evve(sims, set(sims) | set(ann.database), data))

    lines = (REAL / "annotations" / "svd" / "test_groundtruth").read_text().splitlines()
    svd = loaders.load_svd(REAL / "annotations" / "svd" / "test_groundtruth")
    rng = np.random.default_rng(0)
    sims = {f"{q}.mp4": {f"{c}.mp4": float(rng.normal() + (label == frozenset("1")))
                         for c, label in svd.labels[q].items()} for q in svd.queries}
    all_db = set(sims) | {t for row in sims.values() for t in row}
    _close(evaluate("svd", sims, REAL), _ref_svd(sims, all_db, lines))

    cc = _load(REAL / "annotations" / "cc_web_video" / "cc_web_video.pickle")
    ann = loaders.load_cc_web_video(REAL / "annotations" / "cc_web_video" / "cc_web_video.pickle")
    relevant = ann.relevance().numpy() | np.array([[v == q for v in ann.database] for q in ann.queries])
    sims = fixture_similarities(ann.queries, ann.database, relevant, seed=0, separation=2.0)
    _close(evaluate("cc_web_video", sims, REAL), _ref_cc_web(sims, cc))

    queries, positives, negs = loaders.read_vcdb(REAL / "annotations" / "vcdb" / "vcdb.pickle")
    assert len(queries) == 528 and len(negs) == 99176
    sub = queries + negs[:2000]
    rel = np.array([[v in positives[q] for v in sub] for q in queries])
    sims = fixture_similarities(queries, sub, rel, seed=0, separation=2.0)
    _close(evaluate("vcdb", sims, REAL), _ref_vcdb(sims, set(sub), queries, positives))


@needs_real
def test_real_fivr_200k_is_fast():
    import time
    queries, database = dataset_ids("fivr-200k", REAL)
    assert (len(queries), len(database)) == (100, 225960)
    scores = torch.from_numpy(np.random.default_rng(0).random((100, len(database)), dtype=np.float32))
    start = time.perf_counter()
    results = evaluate("fivr-200k", scores, REAL)
    assert time.perf_counter() - start < 60 and 0 < results["DSVR"] < 0.2  # random scores: low mAP


def test_restricted_unpickler_reads_fixtures_like_pickle(fixture_root):
    for name in ("fivr/fivr.pickle", "evve/evve.pickle", "cc_web_video/cc_web_video.pickle", "vcdb/vcdb.pickle"):
        path = fixture_root / "annotations" / name
        with open(path, "rb") as f:
            assert load_pickle(path) == pickle.load(f)  # a file this test wrote itself


@needs_real
def test_real_pickles_load_with_the_restricted_unpickler():
    for name in ("fivr/fivr.pickle", "evve/evve.pickle", "cc_web_video/cc_web_video.pickle", "vcdb/vcdb.pickle"):
        data = load_pickle(REAL / "annotations" / name)
        assert isinstance(data, dict) and data


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_similarity_pickles_with_numpy_scalars_load_and_arrays_are_refused(tmp_path, protocol) -> None:
    path = tmp_path / "sims.pk"
    path.write_bytes(pickle.dumps({"q": {"a": np.float32(0.25), "b": np.float64(0.5), "c": np.int64(2)}},
                                  protocol=protocol))
    loaded = load_pickle(path)
    assert loaded["q"] == {"a": 0.25, "b": 0.5, "c": 2}
    path.write_bytes(pickle.dumps({"q": np.array([1.0])}, protocol=protocol))  # arrays need more than scalars
    with pytest.raises(ValueError, match="sims.pk"):
        load_pickle(path)


# ------------------------------------------------------------------------ coverage: partial results (issue 22)
def _partial(sims: dict, keep: int, seed: int = 0, same: bool = False) -> dict:
    """Each query scored against ``keep`` database videos drawn at random (a partial result file); ``same``:
    the same videos for every query."""
    rng = np.random.default_rng(seed)
    out = {}
    first = list(next(iter(sims.values())))
    fixed = sorted(rng.choice(len(first), size=min(keep, len(first)), replace=False))
    for q, row in sims.items():
        targets = list(row)
        chosen = fixed if same else sorted(rng.choice(len(targets), size=min(keep, len(targets)), replace=False))
        out[q] = {targets[i]: row[targets[i]] for i in chosen}
    return out


def test_partial_similarities_are_scored_against_the_whole_database(fixture_root):
    from hapref.evaluation import CoverageWarning
    folder = fixture_root / "annotations" / "fivr"
    data, easy = _load(folder / "fivr.pickle"), set((folder / "fivr_easy_duplicates.txt").read_text().split())
    ann, sims = _sims("fivr-5k", fixture_root, seed=2)
    partial = _partial(sims, 20)
    with pytest.warns(CoverageWarning, match="never retrieved"):
        got = evaluate("fivr-5k", partial, fixture_root)
    _close(got, _ref_fivr(partial, None, data, "5k", easy))          # the released default: all_db = database
    with pytest.warns(CoverageWarning):
        _close(evaluate("fivr-5k", partial, fixture_root, available=ann.queries + ann.database), got)
    inflated = {k: v for k, v in evaluate("fivr-5k", sims, fixture_root).items()}
    assert got["DSVR"] < inflated["DSVR"]
    cov = got.coverage
    assert (cov.queries, cov.queries_total, cov.database_total, cov.counted) == (6, 6, 81, 81)
    assert cov.pairs < cov.pairs_total and not cov.complete and cov.basis == "protocol"
    full = evaluate("fivr-5k", sims, fixture_root)
    assert full.coverage.complete and full.coverage.pairs == full.coverage.pairs_total
    # a query missing from the file is left out (the released classes skip it with a warning)
    fewer = dict(list(sims.items())[1:])
    with pytest.warns(CoverageWarning, match="1 of 6 queries"):
        assert evaluate("fivr-5k", fewer, fixture_root).coverage.queries == 5
    # EVVE and VCDB: a missing positive is a miss, as with the released default all_db
    data = _load(fixture_root / "annotations" / "evve" / "evve.pickle")
    ann, sims = _sims("evve", fixture_root, seed=1)
    partial = _partial(sims, 25)
    with pytest.warns(CoverageWarning):
        _close(evaluate("evve", partial, fixture_root), _ref_evve(partial, set(ann.queries) | set(ann.database), data))
    queries, positives, _ = loaders.read_vcdb(fixture_root / "annotations" / "vcdb" / "vcdb.pickle")
    _, sims = _sims("vcdb", fixture_root)
    partial = _partial(sims, 30)
    all_db = set(dataset_ids("vcdb", fixture_root)[1])
    with pytest.warns(CoverageWarning):
        _close(evaluate("vcdb", partial, fixture_root), _ref_vcdb(partial, all_db, queries, positives))


def test_a_missing_query_is_not_scored_and_only_missing_pairs_of_scored_queries_are_misses(fixture_root):
    """The coverage warning says what happens: a query the file lacks is not scored (left out of mAP and
    μAP, its pairs with it); a (query, database video) pair a scored query lacks is never retrieved."""
    from hapref.evaluation import CoverageWarning
    folder = fixture_root / "annotations" / "fivr"
    data, easy = _load(folder / "fivr.pickle"), set((folder / "fivr_easy_duplicates.txt").read_text().split())
    ann, sims = _sims("fivr-5k", fixture_root, seed=2)
    for dropped in (ann.queries[0], next(q for q in ann.queries if q in ann.database)):
        fewer = {q: row for q, row in sims.items() if q != dropped}
        its_pairs = len(ann.database) - (dropped in ann.database)   # a query is never its own target
        with pytest.warns(CoverageWarning) as caught:
            got = evaluate("fivr-5k", fewer, fixture_root)
        message = str(caught[0].message)
        assert (f"1 of {len(ann.queries)} queries have no scores: not scored, left out of mAP and μAP "
                f"(with their {its_pairs} pairs)") in message, message
        assert "never retrieved" not in message, message   # every scored query has all its pairs
        cov = got.coverage
        assert cov.missing_query_pairs == its_pairs and cov.pairs == cov.pairs_total - its_pairs
        # the score is the score over the scored queries only: the released reference that skips the query,
        # and mAP the mean of the scored queries' own APs (ranked_ap), not a 0 for the missing one
        _close(got, _ref_fivr(fewer, None, data, "5k", easy))
        for key in ("DSVR", "CSVR", "ISVR"):
            relevance = ann.relevance(key).numpy()
            aps = []
            for q, row in fewer.items():
                targets = [t for t in row if t != q]
                rel = relevance[ann.queries.index(q)]
                relevant = np.array([rel[ann.database.index(t)] for t in targets])
                gt_len = int(sum(r for v, r in zip(ann.database, rel) if v != q))
                if gt_len:
                    aps.append(ranked_ap(np.array([row[t] for t in targets]), relevant, gt_len))
            assert len(aps) == len(fewer) and got[key] == pytest.approx(np.mean(aps), abs=1e-12)
            assert got[key] > np.mean(aps + [0.0]) + 1e-3
        # dropping videos of the scored queries as well: those pairs, and only those, are never retrieved
        partial = _partial(fewer, 20)
        missing = sum(its_pairs_q - len([t for t in row if t != q])
                      for q, row in partial.items()
                      for its_pairs_q in [len(ann.database) - (q in ann.database)])
        with pytest.warns(CoverageWarning) as caught:
            got = evaluate("fivr-5k", partial, fixture_root)
        message = str(caught[0].message)
        scored_pairs = cov.pairs_total - its_pairs
        assert (f"(with their {its_pairs} pairs); {missing} of {scored_pairs} (query, database video) pairs of "
                "the scored queries have no score and count as never retrieved") in message, message
        _close(got, _ref_fivr(partial, None, data, "5k", easy))   # the released default: misses


def test_partial_svd_pairs_are_misses(fixture_root):
    from hapref.evaluation import CoverageWarning
    _, sims = _sims("svd", fixture_root)
    full = evaluate("svd", sims, fixture_root)
    dropped = {q: {t: s for t, s in row.items() if s < max(row.values())} for q, row in sims.items()}
    with pytest.warns(CoverageWarning, match="never retrieved"):
        got = evaluate("svd", dropped, fixture_root)
    assert got["mAP"] < full["mAP"] and got["uAP"] < full["uAP"]


def test_cli_prints_coverage_and_warns_on_a_partial_file(fixture_root, tmp_path, capsys):
    from hapref.evaluation.__main__ import main
    folder = fixture_root / "annotations" / "fivr"
    data, easy = _load(folder / "fivr.pickle"), set((folder / "fivr_easy_duplicates.txt").read_text().split())
    ann, sims = _sims("fivr-5k", fixture_root, seed=2)
    partial = _partial(sims, 20)
    (tmp_path / "sims.pk").write_bytes(pickle.dumps(partial))
    assert main(["FIVR-5K", "--similarities", str(tmp_path / "sims.pk"), "--root", str(fixture_root / "annotations"),
                 "--out", str(tmp_path / "r.json")]) == 0
    out, err = capsys.readouterr()
    want = _ref_fivr(partial, None, data, "5k", easy)
    assert f"{want['DSVR']:.4f}" in out and "coverage: queries 6/6" in out and "whole database" in out
    assert "WARNING" in err and "never retrieved" in err
    assert json.loads((tmp_path / "r.json").read_text()) == pytest.approx(want, abs=1e-9)
    # a declared subset: --available FILE, and the report names it
    subset = ann.queries + ann.database[::2]
    (tmp_path / "ids.txt").write_text("\n".join(subset) + "\n")
    assert main(["fivr-5k", "--similarities", str(tmp_path / "sims.pk"), "--root", str(fixture_root),
                 "--available", str(tmp_path / "ids.txt")]) == 0
    out, err = capsys.readouterr()
    want = _ref_fivr(partial, subset, data, "5k", easy)
    assert f"{want['DSVR']:.4f}" in out and "declared subset" in out and "--available" in out
    # SVD without --unlabeled says which variant it scored
    _, svd = _sims("svd", fixture_root)
    (tmp_path / "svd.json").write_text(json.dumps(svd))
    assert main(["svd", "--similarities", str(tmp_path / "svd.json"), "--root", str(fixture_root)]) == 0
    out, err = capsys.readouterr()
    assert "--unlabeled" in err and "labelled pairs only" in out


def test_cli_features_file_lacking_videos_is_scored_against_what_it_holds(fixture_root, tmp_path, capsys):
    from hapref.evaluation.__main__ import main
    from hapref.evaluation.fixtures import write_features
    features = write_features(tmp_path / "f.hdf5", "evve", fixture_root, dims=8, leave_out=20)
    assert main(["evve", "--features", str(features), "--features-only", "--root", str(fixture_root),
                 "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "WARNING" in err and "database videos are counted" in err
    assert "database videos 40/60" in out and "--features" in out and "per event" in out


# ------------------------------------------------------------------------------------- ties (issue 22)
def _evve_ap(ranked_rel, n_pos):
    """The released EVVE score_ap_from_ranks_1 on one ranking, transcribed."""
    ap = 0.0
    for ntp, rank in enumerate(np.flatnonzero(ranked_rel)):
        before = 1.0 if rank == 0 else ntp / rank
        ap += (before + (ntp + 1) / (rank + 1)) / 2.0 / n_pos
    return ap


def test_expected_policy_is_the_mean_over_tie_orders_for_evve_and_ranked_ap():
    from hapref.evaluation.protocols import _group_starts, _positions_ap
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(40):
        scores = rng.integers(0, 3, size=7).astype(float)
        relevant = rng.random(7) < 0.5
        if not relevant.any():
            continue
        n_pos = int(relevant.sum()) + int(rng.integers(0, 2))
        trapezoid, ranked = [], []
        for s, r in tie_orders(scores, relevant):
            trapezoid.append(_evve_ap(r, n_pos))
            ranked.append(np.sum(np.cumsum(r) / np.arange(1, len(r) + 1) * r) / n_pos)
        s = np.sort(scores)[::-1]
        r = relevant[np.argsort(-scores, kind="stable")]
        got = _positions_ap(_group_starts(s), s.size, np.flatnonzero(r), n_pos, trapezoid=True)
        assert got == pytest.approx(np.mean(trapezoid), abs=1e-12)
        assert ranked_ap(scores, relevant, n_pos) == pytest.approx(np.mean(ranked), abs=1e-12)
        checked += 1
    assert checked > 20


def test_released_policy_reproduces_the_released_evaluators_on_tied_scores(fixture_root):
    folder = fixture_root / "annotations" / "fivr"
    data, easy = _load(folder / "fivr.pickle"), set((folder / "fivr_easy_duplicates.txt").read_text().split())
    for seed in (0, 1):
        _, sims = _sims("fivr-5k", fixture_root, seed=seed, decimals=1)
        got = evaluate("fivr-5k", sims, fixture_root, ties="released")
        _close(got, _ref_fivr(sims, None, data, "5k", easy), 1e-12)
        assert got.ties == "released" and got.tied > 0
        expected = evaluate("fivr-5k", sims, fixture_root)
        assert expected.ties == "expected" and expected.tied == got.tied
        shuffled = {q: dict(reversed(list(row.items()))) for q, row in reversed(list(sims.items()))}
        _close(evaluate("fivr-5k", shuffled, fixture_root), expected, 1e-12)   # order-independent
    queries, positives, _ = loaders.read_vcdb(fixture_root / "annotations" / "vcdb" / "vcdb.pickle")
    _, sims = _sims("vcdb", fixture_root, decimals=1)
    all_db = set(dataset_ids("vcdb", fixture_root)[1])
    _close(evaluate("vcdb", sims, fixture_root, ties="released"), _ref_vcdb(sims, all_db, queries, positives), 1e-12)
    lines = (fixture_root / "annotations" / "svd" / "test_groundtruth").read_text().splitlines()
    _, sims = _sims("svd", fixture_root, decimals=1)
    with_mp4 = {f"{q}.mp4": {f"{t}.mp4": s for t, s in row.items()} for q, row in sims.items()}
    all_db = set(with_mp4) | {t for row in with_mp4.values() for t in row}
    _close(evaluate("svd", with_mp4, fixture_root, ties="released"), _ref_svd(with_mp4, all_db, lines), 1e-12)
    with pytest.raises(ValueError, match="ties"):
        evaluate("svd", with_mp4, fixture_root, ties="sklearn")


def test_cli_says_when_ties_were_present_and_which_policy(fixture_root, tmp_path, capsys):
    from hapref.evaluation.__main__ import main
    _, sims = _sims("fivr-5k", fixture_root, decimals=1)
    (tmp_path / "s.json").write_text(json.dumps(sims))
    assert main(["fivr-5k", "--similarities", str(tmp_path / "s.json"), "--root", str(fixture_root)]) == 0
    out = capsys.readouterr().out
    assert "groups of tied scores" in out and "policy 'expected'" in out
    assert main(["fivr-5k", "--similarities", str(tmp_path / "s.json"), "--root", str(fixture_root),
                 "--ties", "released"]) == 0
    assert "policy 'released'" in capsys.readouterr().out
    _, sims = _sims("fivr-5k", fixture_root)
    (tmp_path / "s.json").write_text(json.dumps(sims))
    assert main(["fivr-5k", "--similarities", str(tmp_path / "s.json"), "--root", str(fixture_root)]) == 0
    assert "ties: none" in capsys.readouterr().out


# ------------------------------------------------------------------------------ real files (issue 22)
@needs_real
def test_real_fivr_5k_partial_file_prints_the_released_numbers(real_fivr, tmp_path, capsys):
    """Each FIVR-5K query scored against 100 of the 5,000 database videos: the CLI prints what the released
    FIVR('5k').evaluate gives on the same file, with a coverage warning."""
    from hapref.evaluation.__main__ import main
    data, easy = real_fivr
    ann = loaders.load_fivr(REAL / "annotations" / "fivr" / "fivr.pickle", "5k")
    sims = fixture_similarities(ann.queries, ann.database, ann.relevance("ISVR").numpy(), seed=0, separation=1.5)
    partial = _partial(sims, 100, seed=0, same=True)
    (tmp_path / "partial.pk").write_bytes(pickle.dumps(partial))
    assert main(["fivr-5k", "--similarities", str(tmp_path / "partial.pk"), "--root", str(REAL),
                 "--out", str(tmp_path / "r.json")]) == 0
    out, err = capsys.readouterr()
    want = _ref_fivr(partial, None, data, "5k", easy)
    assert json.loads((tmp_path / "r.json").read_text()) == pytest.approx(want, abs=1e-9)
    assert f"{want['DSVR']:.4f}" in out and "database videos" in out
    assert "WARNING" in err and "never retrieved" in err
    mine = {q: {t: s for t, s in row.items()} for q, row in partial.items()}   # the old, inflated reading
    assert evaluate("fivr-5k", mine, REAL, available=set(mine) | {t for r in mine.values() for t in r})["DSVR"] \
        > 10 * want["DSVR"]


@needs_real
def test_real_fivr_5k_tied_scores_released_and_expected(real_fivr):
    data, easy = real_fivr
    ann = loaders.load_fivr(REAL / "annotations" / "fivr" / "fivr.pickle", "5k")
    sims = fixture_similarities(ann.queries, ann.database, ann.relevance("ISVR").numpy(), seed=0, separation=1.5,
                                decimals=1)
    released = evaluate("fivr-5k", sims, REAL, ties="released")
    _close(released, _ref_fivr(sims, None, data, "5k", easy), 1e-12)
    expected = evaluate("fivr-5k", sims, REAL)
    assert expected.tied > 0 and abs(expected["CSVR_h"] - released["CSVR_h"]) > 1e-4


# ------------------------------------------------------------------ --checkpoint RUN: whitening (issue 22)
def test_cli_checkpoint_run_applies_the_runs_whitening(fixture_root, tmp_path, capsys):
    """A whitened HAP-VR run scored through the CLI and by hand (load_run, whiten, score, evaluate): same numbers."""
    from hapref.data.loaders import HDF5Features
    from hapref.evaluation import similarities
    from hapref.evaluation.__main__ import main
    from hapref.evaluation.fixtures import write_features
    from hapref.train import fit, load_pipeline, load_run
    from hapref.train.runs import load_run_scorer

    pipeline = load_pipeline("hapvr")
    task, config = pipeline.build("smoke", pipeline.DEFAULT_LOSS, 0, progress=False,
                                  overrides={"steps": "2", "checkpoint_every": "2"})
    run = tmp_path / "run"
    fit(task, config, out_dir=run, progress=False, run={"pipeline": "hapvr"})
    model, record = load_run(run)
    whitening = record["preprocess"]["whitening"]
    assert whitening.in_dim != whitening.out_dim          # unwhitened features would not even fit the network
    features = write_features(tmp_path / "f.hdf5", "evve", fixture_root, dims=whitening.in_dim, frames=(4, 12))
    assert [name for name, _ in load_run_scorer(run).preprocess] == ["whitening"]
    assert main(["evve", "--features", str(features), "--checkpoint", str(run), "--root", str(fixture_root),
                 "--no-progress", "--out", str(tmp_path / "r.json")]) == 0
    capsys.readouterr()
    queries, database = dataset_ids("evve", fixture_root)

    def whitened(ids):
        return [{"id": item["id"], "frames": whitening(torch.as_tensor(item["frames"]))}
                for item in HDF5Features(features, ids, min_len=1)]

    with torch.no_grad():
        q, db = whitened(queries), whitened(database)
        sims = similarities(model, q, db, progress=False)
    available = {v["id"] for v in q + db}
    want = evaluate("evve", sims, fixture_root, available=available)
    assert json.loads((tmp_path / "r.json").read_text()) == pytest.approx(dict(want), abs=1e-6)


# ---------------------------------------------------------------------------- CLI details (issue 22, item 5)
def test_cli_details_root_names_help_and_environment(fixture_root, monkeypatch):
    from hapref.evaluation import annotation_root
    from hapref.evaluation.__main__ import build_parser
    from hapref.evaluation.scoring import DEFAULT_MAX_CELLS, _share_size
    parser = build_parser()
    assert parser.parse_args(["FIVR-200K", "--similarities", "s"]).dataset == "fivr-200k"
    assert parser.parse_args(["CC_WEB_VIDEO", "--similarities", "s"]).dataset == "cc_web_video"
    help_text = " ".join(parser.format_help().split())
    assert DEFAULT_MAX_CELLS["cpu"] == 2 ** 17 and "default 2^17 on the CPU, 2^21 on CUDA" in help_text
    _, sims = _sims("evve", fixture_root)
    _close(evaluate("EVVE", sims, fixture_root / "annotations"), evaluate("evve", sims, fixture_root))
    monkeypatch.delenv("HAPREF_ANNOTATIONS", raising=False)
    monkeypatch.setenv("HAPREF_DATA", str(fixture_root))
    assert annotation_root() == fixture_root
    assert _share_size(list(range(7)), False) == 7 and _share_size(iter(range(7)), False) is None
    with pytest.raises(FileNotFoundError, match="--root DIR on the command line"):
        evaluate("evve", sims, fixture_root / "nowhere")


def test_scoring_runs_in_inference_mode(monkeypatch):
    import hapref.evaluation.scoring as scoring
    from hapref.similarity import VideoSimilarityNetwork
    net = VideoSimilarityNetwork(dims=8, attention=True, signed_scores=True).eval()
    seen, products = [], scoring.dot_products

    def spy(*args, **kwargs):
        seen.append(torch.is_inference_mode_enabled())
        return products(*args, **kwargs)

    monkeypatch.setattr(scoring, "dot_products", spy)
    videos = [{"id": f"v{i}", "frames": torch.nn.functional.normalize(torch.randn(6, 4, 8), dim=-1)} for i in range(2)]
    scoring.similarities(net, videos, videos, progress=False)
    assert seen and all(seen) and not torch.is_inference_mode_enabled()


def test_strict_refuses_an_incomplete_evaluation_and_the_warning_names_it(fixture_root, tmp_path, capsys):
    """Issue 44: ``evaluate(..., strict=True)`` raises and ``--strict`` exits non-zero on a partial file (which
    otherwise warns, naming the option); a complete file passes either way."""
    from hapref.evaluation import CoverageWarning
    from hapref.evaluation.__main__ import main
    from hapref.evaluation.fixtures import write_features
    _, sims = _sims("fivr-5k", fixture_root, seed=2)
    partial = _partial(sims, 20)
    with pytest.warns(CoverageWarning, match=r"strict=True \(--strict on the command line\) refuses"):
        evaluate("fivr-5k", partial, fixture_root)
    with pytest.raises(ValueError, match=r"fivr-5k: incomplete evaluation: .*never retrieved.*strict=True refuses"):
        evaluate("fivr-5k", partial, fixture_root, strict=True)
    assert evaluate("fivr-5k", sims, fixture_root, strict=True) == evaluate("fivr-5k", sims, fixture_root)
    (tmp_path / "partial.json").write_text(json.dumps(partial))
    (tmp_path / "full.json").write_text(json.dumps(sims))
    args = ["fivr-5k", "--root", str(fixture_root), "--out", str(tmp_path / "r.json")]
    assert main([*args, "--similarities", str(tmp_path / "partial.json")]) == 0
    assert "--strict" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--similarities", str(tmp_path / "partial.json"), "--strict"])
    assert exit_.value.code == 2 and "incomplete evaluation" in capsys.readouterr().err
    (tmp_path / "r.json").unlink()
    with pytest.raises(SystemExit):
        main([*args, "--similarities", str(tmp_path / "partial.json"), "--strict"])
    assert not (tmp_path / "r.json").exists()                  # nothing written for a refused evaluation
    assert main([*args, "--similarities", str(tmp_path / "full.json"), "--strict"]) == 0
    features = write_features(tmp_path / "f.hdf5", "evve", fixture_root, dims=8, leave_out=20)
    with pytest.raises(SystemExit):
        main(["evve", "--features", str(features), "--features-only", "--root", str(fixture_root),
              "--no-progress", "--strict"])


def test_strict_refuses_a_declared_subset_too_whose_warning_is_unchanged(fixture_root):
    from hapref.evaluation import CoverageWarning
    ann, sims = _sims("fivr-5k", fixture_root, seed=2)
    kept = ann.queries + ann.database[::2]
    with pytest.warns(CoverageWarning) as caught:
        evaluate("fivr-5k", sims, fixture_root, available=kept)
    assert "declared subset" in str(caught[0].message) and "strict" not in str(caught[0].message)
    with pytest.raises(ValueError, match="declared subset"):
        evaluate("fivr-5k", sims, fixture_root, available=kept, strict=True)
