"""Checks that the generated PathFinder is the task it claims to be, and its gallery.

* :func:`shortcut_checks`: classifiers that cannot trace a contour, trained on one draw and
  scored on another, must stay at chance: logistic regression on the pixels, a depth-3 tree
  on the distance between the two markers, logistic regression on the 16-bin histogram of
  pixel values. "At chance" = inside the central 99% interval of Binomial(n_test, 1/2)
  (:func:`chance_interval`); the balance of the labels is reported beside them.
* :func:`geometry_checks`: markers on contour ends (the first marker on a target's origin,
  the second on a target's far end, the same target iff label 1), contours never closer than
  ``gap`` except consecutive dashes of one contour, turns within the cap.
* :func:`gallery`: a PNG of examples of both labels (figures/kinds/pathfinder.png is written by
  ``toyspt data check pathfinder --gallery figures/kinds/pathfinder.png``).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

from toyspt.kinds.pathfinder import PathfinderConfig, draw


def chance_interval(n: int, level: float = 0.99) -> tuple[float, float]:
    """Central ``level`` interval of the accuracy of a coin-flip classifier on ``n`` examples."""
    lo, hi = stats.binom.interval(level, n, 0.5)
    return lo / n, hi / n


def _features(d) -> dict[str, np.ndarray]:
    dist = np.hypot(*(d.markers[:, 0] - d.markers[:, 1]).T)[:, None]
    hist = np.stack([np.histogram(im, bins=16, range=(0.0, 1.0))[0] for im in d.images]).astype(np.float64)
    return dict(pixels=d.images.reshape(len(d.images), -1).astype(np.float64), marker_distance=dist,
                pixel_histogram=hist / d.images[0].size)


def shortcut_checks(cfg: PathfinderConfig, n_train: int = 4000, n_test: int = 2000, seed: int = 0) -> dict:
    """Test accuracy of each shortcut classifier (trained on seed ``seed``, tested on ``seed + 1``),
    the 99% chance interval, and whether each lies inside it."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    tr, te = draw(cfg, n_train, seed), draw(cfg, n_test, seed + 1)
    ftr, fte = _features(tr), _features(te)
    models = dict(pixels=make_pipeline(StandardScaler(), LogisticRegression(C=0.01, max_iter=2000)),
                  marker_distance=DecisionTreeClassifier(max_depth=3, random_state=0),
                  pixel_histogram=make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)))
    lo, hi = chance_interval(n_test)
    out = dict(n_train=n_train, n_test=n_test, chance_low=lo, chance_high=hi,
               label_share_train=float(tr.labels.mean()), label_share_test=float(te.labels.mean()))
    for name, model in models.items():
        model.fit(ftr[name], tr.labels)
        acc = float((model.predict(fte[name]) == te.labels).mean())
        out[name] = dict(test_acc=acc, train_acc=float((model.predict(ftr[name]) == tr.labels).mean()),
                         at_chance=bool(lo <= acc <= hi))
    return out


def _seg_seg_distance(s, t, samples: int = 33) -> np.ndarray:
    """Distance between segments s and t ((..., 4) each): ``samples`` points of each against the
    other segment (at most half the sample spacing, L/(2 (samples - 1)), above the exact one)."""
    from toyspt.kinds.pathfinder import _seg_dist

    u = np.linspace(0, 1, samples)

    def one_way(a, b):
        px = a[..., 0, None] + u * (a[..., 2, None] - a[..., 0, None])
        py = a[..., 1, None] + u * (a[..., 3, None] - a[..., 1, None])
        return _seg_dist(px, py, *(b[..., i, None] for i in range(4))).min(axis=-1)
    return np.minimum(one_way(s, t), one_way(t, s))


def geometry_checks(d, cfg: PathfinderConfig) -> dict:
    """What :func:`draw` promises of its geometry, measured (see the module docstring)."""
    n = len(d.labels)
    first = {c: np.array([d.segments[i][d.contour[i] == c][0, :2] for i in range(n)]) for c in (0, 1)}
    last = {c: np.array([d.segments[i][d.contour[i] == c][-1, 2:] for i in range(n)]) for c in (0, 1)}
    on_origin = np.array([np.allclose(d.markers[i, 0], first[d.marked[i]][i]) for i in range(n)])
    same = np.array([np.allclose(d.markers[i, 1], last[d.marked[i]][i]) for i in range(n)])
    other = np.array([np.allclose(d.markers[i, 1], last[1 - d.marked[i]][i]) for i in range(n)])
    ends_ok = on_origin & np.where(d.labels == 1, same, other)
    closest, max_turn = np.inf, 0.0
    for i in range(n):
        seg, cid = d.segments[i][d.contour[i] >= 0], d.contour[i][d.contour[i] >= 0]
        m = len(seg)
        order = np.zeros(m, dtype=np.int64)  # position of each dash within its contour
        for c in np.unique(cid):
            order[cid == c] = np.arange((cid == c).sum())
        a, b = np.triu_indices(m, 1)
        neighbours = (cid[a] == cid[b]) & (np.abs(order[a] - order[b]) == 1)
        dist = _seg_seg_distance(seg[a], seg[b])
        closest = min(closest, float(dist[~neighbours].min()) if (~neighbours).any() else np.inf)
        for c in np.unique(cid):
            v = seg[cid == c]
            ang = np.arctan2(v[:, 3] - v[:, 1], v[:, 2] - v[:, 0])
            if len(ang) > 1:
                turn = np.abs((np.diff(ang) + np.pi) % (2 * np.pi) - np.pi)
                max_turn = max(max_turn, float(turn.max()))
    return dict(markers_on_ends=float(ends_ok.mean()), closest_non_neighbour=closest, gap=cfg.gap,
                max_turn_deg=float(np.degrees(max_turn)),
                turn_cap_deg=float(np.degrees(min(np.pi / 2, np.pi / (2 * cfg.continuity)))))


def speed(cfg: PathfinderConfig, n: int = 2048, seed: int = 0) -> float:
    """Images per CPU-second of :func:`draw` (this process's CPU time: on a shared machine the
    wall clock measures the neighbours too)."""
    t0 = time.process_time()
    draw(cfg, n, seed)
    return n / (time.process_time() - t0)


def gallery(path: Path, configs: dict[str, PathfinderConfig], per_label: int = 4, seed: int = 0) -> Path:
    """A PNG with ``per_label`` examples of each label per config (rows), markers and all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from toyspt.util.atomic import atomic_write

    fig, axes = plt.subplots(len(configs), 2 * per_label, figsize=(2 * per_label * 1.3, len(configs) * 1.5),
                             squeeze=False)
    for row, (name, cfg) in zip(axes, configs.items()):
        d = draw(cfg, 8 * per_label, seed)
        pick = [*np.flatnonzero(d.labels == 1)[:per_label], *np.flatnonzero(d.labels == 0)[:per_label]]
        for ax, i in zip(row, pick):
            ax.imshow(d.images[i], cmap="gray", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"label {d.labels[i]}", fontsize=7)
        row[0].set_ylabel(name, fontsize=7)
    fig.suptitle("PathFinder (toyspt.kinds.pathfinder): label 1 = the markers sit on one contour", fontsize=8)
    fig.tight_layout()
    atomic_write(str(path), lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    plt.close(fig)
    return path


def check_presets(gallery_path: Path | None = None, json_path: Path | None = None, n_train: int = 4000,
                  n_test: int = 2000, echo=print) -> dict:
    """Every preset of ``--data pathfinder:NAME`` (and the LRA setting at 6 dashes) checked: its speed,
    shortcuts and geometry (``toyspt data check pathfinder``); with ``gallery_path``, the gallery PNG
    there; with ``json_path``, the numbers there. ``echo`` gets a line per preset."""
    from toyspt.kinds.tasks import PATHFINDER
    from toyspt.util.atomic import write_text

    configs = {name: src.pathfinder for name, src in PATHFINDER.items()}
    if gallery_path:
        echo(f"wrote {gallery(gallery_path, configs)}")
    report = {}
    # the LRA setting at its easy level (6 dashes): checked too, it is no preset (see docs/lra.md)
    for name, cfg in {**configs, "lra32_K6": PathfinderConfig.lra32(6)}.items():
        report[name] = dict(images_per_second=speed(cfg), shortcuts=shortcut_checks(cfg, n_train, n_test),
                            geometry=geometry_checks(draw(cfg, 200, 7), cfg))
        echo(f"{name} {json.dumps(report[name])}")
    if json_path:
        write_text(json_path, json.dumps(report, indent=1) + "\n")
    return report


__all__ = ["chance_interval", "shortcut_checks", "geometry_checks", "speed", "gallery", "check_presets"]
