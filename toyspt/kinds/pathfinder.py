"""PathFinder, written here from the published description of the "pathfinder/snakes"
generator (Linsley et al. 2018, the source of LRA's PathFinder); no code of it is used.

An image holds two *target* contours and a few *distractor* contours, each a chain of
dashes ("paddles"). The two targets grow alternately, dash by dash, from origins
``origin_distance`` apart. Each new dash starts ``gap`` beyond the end of the previous one
and turns by an angle Δ drawn among ``n_turns`` candidates in (-90°, 90°) with weight
``max(cos(min(continuity·|Δ|, π/2)), 0)²`` (smooth contours; turns beyond π/(2·continuity)
are impossible), among the candidates that are *free*: every point of the new dash lies inside
the padded canvas and farther than ``gap`` from every dash already drawn (its own previous
dash is exactly ``gap`` away at the joint, so contours never touch, themselves included). A
target that cannot grow makes the image be drawn again; a distractor that cannot grow stops.
Distractors (``distractor_length`` dashes) start at free points after the targets.

Two markers (disks of ``marker_radius``): one on the origin of a random target, the other on
the far end of the same target (label 1) or of the other one (label 0). In both classes one
marker sits on an origin and one on a far end, and the origins are close, so only tracing the
contour decides the label.

Rendering: dashes are segments of width ``thickness`` drawn on a canvas ``antialias`` times
finer, then averaged down to ``size``×``size`` (anti-aliasing); ink is 1, background 0.
Geometry lives in that finer canvas's pixel units (lengths in the config are in output pixels).

Vectorised over images: every image of a chunk grows its k-th dash at once (numpy), and the
"distance from drawn dashes" test reads a grid of the dashes' ``gap``-neighbourhoods.
:func:`pathfinder` returns images and labels for a seed; :func:`draw` also returns the
geometry (origins, ends, markers) the checks read.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from toyspt.util.validation import Float, Int, validate, validated

VERSION = 1  # the generator's version, in every run key of its data: bump when the same config draws other images
CHUNK = 256  # at most this many images grown at once (the RNG's stream depends on it: never change it)
# values of one array a chunk may hold: the images of a chunk are at most PIXELS // (the values one
# image's largest array holds), so every config the repo draws (at most 64x64 fine pixels) keeps
# chunks of CHUNK images and draws what it always drew (tests/unit/kinds/test_pathfinder_memory.py)
PIXELS = CHUNK * 64 * 64
MAX_ROUNDS = 200  # redraw rounds for images whose targets got stuck before giving up


@dataclass(frozen=True)
class PathfinderConfig:
    size: int = validated(16, Int(ge=8, le=256))  # output image side (pixels); the sequence is size^2 long
    # supersampling factor of the drawing canvas (anti-aliasing); 1 = no anti-aliasing
    antialias: int = validated(2, Int(ge=1, le=8))
    dash_length: float = validated(2.0, Float(gt=0, le=64))  # length of one dash (output pixels)
    # gap between consecutive dashes of a contour = the least distance between any two dashes
    gap: float = validated(1.0, Float(gt=0, le=64))
    thickness: float = validated(0.5, Float(gt=0, le=16))  # stroke width of a dash (output pixels); < gap
    # dashes per target contour (the difficulty; at 16px, 6 is the shortest whose marker distance is no shortcut)
    contour_length: int = validated(6, Int(ge=1, le=256))
    n_distractors: int = validated(2, Int(ge=0, le=64))  # distractor contours per image
    distractor_length: int = validated(2, Int(ge=1, le=256))  # dashes per distractor (LRA: contour_length // 3)
    marker_radius: float = validated(1.0, Float(gt=0, le=16))  # radius of the two marker disks (output pixels)
    origin_distance: float = validated(3.0, Float(gt=0, le=256))  # distance between the targets' origins (px)
    continuity: float = validated(1.0, Float(ge=0.5, le=8))  # c in cos(min(c|Δ|, π/2))^2: larger = smoother
    n_turns: int = validated(15, Int(ge=3, le=181))  # candidate turn angles, evenly spread over (-90°, 90°)
    padding: float = validated(1.0, Float(ge=0, le=64))  # border kept free of dashes (output pixels)

    def __post_init__(self):
        validate(self)
        if self.thickness >= self.gap:
            raise ValueError(f"thickness: {self.thickness} must be below gap={self.gap}, or strokes of "
                             "neighbouring dashes would touch")
        if 2 * self.padding + self.origin_distance >= self.size:
            raise ValueError(f"origin_distance: {self.origin_distance} does not fit a {self.size}px image "
                             f"with padding {self.padding}")
        if self.gap * self.antialias < 1.5:
            raise ValueError(f"gap x antialias = {self.gap * self.antialias:g} fine pixels: at least 1.5 "
                             "are needed to tell dashes apart on the drawing grid (raise antialias)")

    @classmethod
    def lra32(cls, contour_length: int = 14) -> "PathfinderConfig":
        """The LRA 32x32 setting (14 dashes: "hard"; 6 and 9 the easy and intermediate levels)."""
        return cls(size=32, antialias=2, dash_length=2.0, gap=1.0, thickness=0.5, contour_length=contour_length,
                   n_distractors=5, distractor_length=4, marker_radius=1.5, origin_distance=7.0, continuity=1.0)


@dataclass(frozen=True)
class Drawn:
    """What :func:`draw` made: images (N, size, size) float32 in [0, 1], labels (N,) int64, and
    the geometry in output pixels (x, y): ``origins``/``ends`` (N, 2 targets, 2), ``markers``
    (N, 2, 2): [the marked origin, the marked far end], ``marked`` (N,) the target whose origin
    is marked, ``segments`` (N, M, 4) every dash (ax, ay, bx, by; NaN-padded) in drawing order and
    ``contour`` (N, M) its contour (0, 1 the targets, 2.. distractors, -1 padding)."""

    images: np.ndarray
    labels: np.ndarray
    origins: np.ndarray
    ends: np.ndarray
    markers: np.ndarray
    marked: np.ndarray
    segments: np.ndarray
    contour: np.ndarray


def chunk_size(cfg: PathfinderConfig) -> int:
    """Images grown at once: :data:`CHUNK`, fewer where one image's arrays are larger than
    ``PIXELS / CHUNK`` values. An image's largest arrays are its fine canvas ((size·antialias)²:
    the int16 clearance grid, the float32 ink), a dash's window (w², w = dash_length·antialias +
    2·(gap·antialias + 1) + 3: distances, indices) and a dash's candidate points (n_turns ·
    (2·dash_length·antialias + 1)). A chunk therefore holds at most max(PIXELS, one image's)
    values an array; with the dozen float64/int64 arrays of a stamp or a turn, a draw's peak
    is about 12 · 8 bytes · that (about 100 MiB for every config whose image fits 2^20 values a
    array; 400 MiB for the largest the fields allow, size 256 at antialias 8), beside the
    images it returns (4·size² bytes each)."""
    R, L, rho = cfg.size * cfg.antialias, cfg.dash_length * cfg.antialias, cfg.gap * cfg.antialias
    w = int(np.ceil(L + 2 * (rho + 1.0))) + 3
    per_image = max(R * R, w * w, cfg.n_turns * (int(np.ceil(2 * L)) + 1))
    return max(1, min(CHUNK, PIXELS // per_image))


def _seg_dist(px, py, ax, ay, bx, by):
    """Distance from points (px, py) to segments a-b (broadcast)."""
    dx, dy = bx - ax, by - ay
    t = np.clip(((px - ax) * dx + (py - ay) * dy) / np.maximum(dx * dx + dy * dy, 1e-12), 0.0, 1.0)
    return np.hypot(px - ax - t * dx, py - ay - t * dy)


class _Canvas:
    """The fine grid of one chunk: ``near[n, y, x]`` counts the dashes within ``gap`` (+ one fine
    pixel, :attr:`reach`) of the pixel centre; segments are kept for rendering."""

    def __init__(self, n: int, cfg: PathfinderConfig):
        self.cfg, self.a = cfg, cfg.antialias
        self.R = cfg.size * self.a
        self.near = np.zeros((n, self.R, self.R), dtype=np.int16)
        self.segs: list[tuple[np.ndarray, np.ndarray, int]] = []  # (image rows, (m, 4) segments, contour id)
        self.rho = cfg.gap * self.a  # clearance radius (fine pixels)
        # what a stamp marks: pixel centres within rho + 1 of a dash, so a checked point (its pixel's
        # centre <= 0.71 away, the next checked point <= 0.5 along the dash) clear of every stamp is
        # farther than rho from every dash
        self.reach = self.rho + 1.0
        self.L = cfg.dash_length * self.a
        self.lo, self.hi = cfg.padding * self.a, self.R - cfg.padding * self.a
        self.s = np.linspace(0.0, self.L, max(3, int(np.ceil(2 * self.L)) + 1))  # checked points, <= 0.5 fine px apart

    def _window(self, rows, seg, radius):
        """Pixel indices and distances of a square window around each segment."""
        w = int(np.ceil(self.L + 2 * radius)) + 2
        x0 = np.floor(np.minimum(seg[:, 0], seg[:, 2]) - radius).astype(np.int64)
        y0 = np.floor(np.minimum(seg[:, 1], seg[:, 3]) - radius).astype(np.int64)
        off = np.arange(w)
        xx = x0[:, None, None] + off[None, None, :]
        yy = y0[:, None, None] + off[None, :, None]
        d = _seg_dist(xx + 0.5, yy + 0.5, *(seg[:, i, None, None] for i in range(4)))
        inside = (xx >= 0) & (xx < self.R) & (yy >= 0) & (yy < self.R)
        r, yy, xx = np.broadcast_arrays(rows[:, None, None], np.clip(yy, 0, self.R - 1), np.clip(xx, 0, self.R - 1))
        return r, yy, xx, d, inside

    def stamp(self, rows, seg, cid: int):
        """Add dashes ``seg`` (m, 4: ax, ay, bx, by) of contour ``cid`` of images ``rows`` to the clearance grid."""
        if len(rows) == 0:
            return
        r, yy, xx, d, inside = self._window(rows, seg, self.reach)
        hit = inside & (d < self.reach)
        np.add.at(self.near, (r[hit], yy[hit], xx[hit]), 1)
        self.segs.append((rows.copy(), seg.copy(), cid))

    def segments(self) -> tuple[np.ndarray, np.ndarray]:
        """(n, M, 4) every image's dashes in drawing order (NaN-padded) and (n, M) contour ids (-1 pad)."""
        n = self.near.shape[0]
        count = np.zeros(n, dtype=np.int64)
        for rows, _, _ in self.segs:
            count[rows] += 1
        M = int(count.max()) if n else 0
        out, ids, fill = np.full((n, M, 4), np.nan), np.full((n, M), -1, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for rows, seg, cid in self.segs:
            out[rows, fill[rows]], ids[rows, fill[rows]] = seg, cid
            fill[rows] += 1
        return out, ids

    def free(self, rows, px, py, own=None):
        """(len(rows), ...) bool: points inside the padded canvas and clear of every dash but
        ``own`` (m, 4: each image's previous dash of the growing contour, whose joint with the new
        dash lies exactly ``gap`` away; turns of at most 90° keep the rest of it farther)."""
        ok = (px >= self.lo) & (px <= self.hi) & (py >= self.lo) & (py <= self.hi)
        xi = np.clip(px.astype(np.int64), 0, self.R - 1)
        yi = np.clip(py.astype(np.int64), 0, self.R - 1)
        rr = rows.reshape((-1,) + (1,) * (px.ndim - 1))
        near = self.near[rr, yi, xi]
        if own is not None:  # the grid's count less the previous dash's own stamp at these pixels
            shape = (-1,) + (1,) * (px.ndim - 1)
            near = near - (_seg_dist(xi + 0.5, yi + 0.5, *(own[:, i].reshape(shape) for i in range(4))) < self.reach)
        return ok & (near == 0)


def _grow(canvas: _Canvas, rows, pivot, heading, prev, rng, cfg):
    """One dash for each image ``rows`` from ``pivot`` (m, 2) turning from ``heading`` (m,);
    ``prev``: the previous dash (m, 4), None for a contour's first dash (any direction, no gap).
    Returns (ok, new pivot, new heading, segment)."""
    first = prev is None
    m = len(rows)
    if first:
        cand = rng.uniform(0, 2 * np.pi, size=(m, 1)) + np.linspace(0, 2 * np.pi, cfg.n_turns, endpoint=False)
        weight = np.ones((m, cfg.n_turns))
        start = 0.0
    else:
        turns = (np.arange(cfg.n_turns) + 0.5) / cfg.n_turns * np.pi - np.pi / 2  # open interval (-90°, 90°)
        cand = heading[:, None] + turns[None, :]
        ct = cfg.continuity * np.abs(turns)  # beyond the cap the weight is exactly 0 (cos(pi/2) is 6e-17 in floats)
        weight = np.broadcast_to(np.where(ct < np.pi / 2, np.cos(ct) ** 2, 0.0), (m, cfg.n_turns))
        start = canvas.rho
    ux, uy = np.cos(cand), np.sin(cand)  # (m, A)
    t = start + canvas.s
    px = pivot[:, 0, None, None] + ux[..., None] * t
    py = pivot[:, 1, None, None] + uy[..., None] * t
    ok_c = canvas.free(rows, px, py, prev).all(axis=-1)
    cum = np.cumsum(weight * ok_c, axis=1)
    ok = cum[:, -1] > 0
    u = rng.uniform(size=m) * cum[:, -1]  # below the total: the first candidate whose sum passes u has weight
    pick = np.minimum((cum <= u[:, None]).sum(axis=1), cfg.n_turns - 1)
    th = cand[np.arange(m), pick]
    a = pivot + start * np.stack([np.cos(th), np.sin(th)], axis=1)
    b = a + canvas.L * np.stack([np.cos(th), np.sin(th)], axis=1)
    return ok, b, th, np.concatenate([a, b], axis=1)


def _targets(canvas: _Canvas, rng, cfg: PathfinderConfig):
    """Grow the two targets of every image of the canvas; returns (ok (n,), origins, ends) in fine units."""
    n = canvas.near.shape[0]
    d = cfg.origin_distance * canvas.a
    lo, hi = canvas.lo + 1.0, canvas.hi - 1.0
    o1 = rng.uniform(lo, hi, size=(n, 2))
    phi = rng.uniform(0, 2 * np.pi, size=n)
    o2 = o1 + d * np.stack([np.cos(phi), np.sin(phi)], axis=1)
    ok = ((o2 >= lo) & (o2 <= hi)).all(axis=1)
    origins = np.stack([o1, o2], axis=1)
    pivot, heading, prev = origins.copy(), np.zeros((n, 2)), np.zeros((n, 2, 4))
    for k in range(cfg.contour_length):
        for c in range(2):
            rows = np.flatnonzero(ok)
            g, p, h, s = _grow(canvas, rows, pivot[rows, c], heading[rows, c], prev[rows, c] if k else None, rng, cfg)
            ok[rows[~g]] = False
            rows, p, h, s = rows[g], p[g], h[g], s[g]
            pivot[rows, c], heading[rows, c], prev[rows, c] = p, h, s
            canvas.stamp(rows, s, c)
    return ok, origins, pivot


def _distractors(canvas: _Canvas, rng, cfg: PathfinderConfig) -> None:
    """Grow ``n_distractors`` distractors per image from free points (stopping where stuck)."""
    n = canvas.near.shape[0]
    for j in range(cfg.n_distractors):
        start = rng.uniform(canvas.lo, canvas.hi, size=(n, 2))
        alive = canvas.free(np.arange(n), start[:, 0], start[:, 1])
        pivot, heading, prev = start, np.zeros(n), np.zeros((n, 4))
        for k in range(cfg.distractor_length):
            rows = np.flatnonzero(alive)
            g, p, h, s = _grow(canvas, rows, pivot[rows], heading[rows], prev[rows] if k else None, rng, cfg)
            alive[rows[~g]] = False
            rows = rows[g]
            pivot[rows], heading[rows], prev[rows] = p[g], h[g], s[g]
            canvas.stamp(rows, s[g], 2 + j)


def _render(canvas: _Canvas, markers_fine, cfg: PathfinderConfig) -> np.ndarray:
    """Ink the dashes (width ``thickness``) and the marker disks on the fine grid, then average
    ``antialias`` x ``antialias`` blocks."""
    n, R, a = canvas.near.shape[0], canvas.R, canvas.a
    ink = np.zeros((n, R, R), dtype=np.float32)
    half = cfg.thickness * a / 2
    for rows, seg, _ in canvas.segs:
        r, yy, xx, d, inside = canvas._window(rows, seg, half)
        hit = inside & (d <= half)
        ink[r[hit], yy[hit], xx[hit]] = 1.0
    _disks(ink, markers_fine, cfg.marker_radius * a)
    return ink.reshape(n, cfg.size, a, cfg.size, a).mean(axis=(2, 4)).astype(np.float32)


def _disks(ink: np.ndarray, centres, rad: float) -> None:
    """Ink the disks of radius ``rad`` around ``centres`` (n, k, 2) on ``ink`` (n, R, R), each in its
    bounding window: the pixels whose centre (x + 0.5, y + 0.5) lies within ``rad`` (the test a
    full-canvas comparison made, value for value, without its n·R² float64 temporaries)."""
    n, R = ink.shape[0], ink.shape[1]
    w = int(np.ceil(2 * rad)) + 3
    off = np.arange(w)
    for j in range(centres.shape[1]):
        mx, my = centres[:, j, 0], centres[:, j, 1]
        x0 = np.floor(mx - rad - 0.5).astype(np.int64) - 1
        y0 = np.floor(my - rad - 0.5).astype(np.int64) - 1
        xx, yy = x0[:, None, None] + off[None, None, :], y0[:, None, None] + off[None, :, None]
        hit = ((xx + 0.5) - mx[:, None, None]) ** 2 + ((yy + 0.5) - my[:, None, None]) ** 2 <= rad * rad
        hit &= (xx >= 0) & (xx < R) & (yy >= 0) & (yy < R)
        r, yy, xx = np.broadcast_arrays(np.arange(n)[:, None, None], yy, xx)
        ink[r[hit], yy[hit], xx[hit]] = 1.0


def _chunk(n: int, rng: np.random.Generator, cfg: PathfinderConfig):
    """``n`` images whose targets grew in full (redrawn until they do)."""
    origins, ends, canvases, need = [], [], [], n
    for _ in range(MAX_ROUNDS):
        canvas = _Canvas(need, cfg)
        ok, o, e = _targets(canvas, rng, cfg)
        rows = np.flatnonzero(ok)
        if len(rows):
            sub = _Canvas(0, cfg)  # the successful images and their dashes
            sub.near = canvas.near[rows]
            for r, seg, cid in canvas.segs:
                sel = np.isin(r, rows)
                sub.segs.append((np.searchsorted(rows, r[sel]), seg[sel], cid))
            canvases.append(sub)
            origins.append(o[rows])
            ends.append(e[rows])
        need -= len(rows)
        if need == 0:
            return canvases, np.concatenate(origins), np.concatenate(ends)
    raise ValueError(f"pathfinder: targets of {cfg.contour_length} dashes fail to fit a {cfg.size}px image in "
                     f"{MAX_ROUNDS} rounds (lower contour_length or dash_length, or raise size)")


def draw(cfg: PathfinderConfig, n: int, seed: int) -> Drawn:
    """``n`` PathFinder images of ``cfg`` with balanced labels, a pure function of (cfg, n, seed)."""
    if n <= 0:
        raise ValueError(f"n: need at least one image, got {n}")
    rng = np.random.default_rng([seed, 0x9A7F])
    labels = np.arange(n) % 2
    rng.shuffle(labels)
    images, origins, ends, segs = [], [], [], []
    step = chunk_size(cfg)
    for i in range(0, n, step):
        m = min(step, n - i)
        canvases, o, e = _chunk(m, rng, cfg)
        marked = rng.integers(0, 2, size=m)
        y = labels[i:i + m]
        far = np.where(y == 1, marked, 1 - marked)
        idx = np.arange(m)
        mk = np.stack([o[idx, marked], e[idx, far]], axis=1)
        start = 0
        for cv in canvases:
            k = cv.near.shape[0]
            _distractors(cv, rng, cfg)
            images.append(_render(cv, mk[start:start + k], cfg))
            segs.append(cv.segments())
            start += k
        origins.append((o, marked))
        ends.append(e)
    o = np.concatenate([x for x, _ in origins]) / cfg.antialias
    marked = np.concatenate([m for _, m in origins])
    e = np.concatenate(ends) / cfg.antialias
    idx = np.arange(n)
    far = np.where(labels == 1, marked, 1 - marked)
    markers = np.stack([o[idx, marked], e[idx, far]], axis=1)
    M = max(sg.shape[1] for sg, _ in segs)
    seg = np.concatenate([np.pad(sg, ((0, 0), (0, M - sg.shape[1]), (0, 0)), constant_values=np.nan) for sg, _ in segs])
    cid = np.concatenate([np.pad(c, ((0, 0), (0, M - c.shape[1])), constant_values=-1) for _, c in segs])
    return Drawn(np.concatenate(images), labels.astype(np.int64), o, e, markers, marked, seg / cfg.antialias, cid)


def pathfinder(cfg: PathfinderConfig | None = None, n: int = 1000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(images (n, size, size) float32 in [0, 1], labels (n,) int64) for ``seed``."""
    d = draw(cfg or PathfinderConfig(), n, seed)
    return d.images, d.labels


def scaled(cfg: PathfinderConfig, **changes) -> PathfinderConfig:
    """``cfg`` with fields replaced (validated again)."""
    return replace(cfg, **changes)


__all__ = ["VERSION", "PathfinderConfig", "Drawn", "draw", "pathfinder", "scaled", "CHUNK", "PIXELS", "chunk_size"]
