"""PathFinder bounded by memory: chunks sized by canvas pixels, marker disks inked in their
windows, and every config the repo draws drawing what it always drew (run keys and ledgers
depend on it)."""
import hashlib
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from toyspt.kinds.pathfinder import CHUNK, PathfinderConfig, _disks, chunk_size, draw

TINY = PathfinderConfig(size=8, origin_distance=3.0, contour_length=2, n_distractors=1)
# sha256 (first 16 hex digits) of every array a draw returns, pinned from the generator as it was
# before chunks were sized by pixels: 300 images cross a chunk's edge
PINNED = [(PathfinderConfig(), 300, 0, "2e98d9347a00e819"),
          (PathfinderConfig.lra32(), 5, 7, "613c4895cf6c00c4"),
          (replace(PathfinderConfig.lra32(6), continuity=2.0), 5, 7, "a068667848e48cad"),
          (TINY, 300, 0, "d183d2cf67c2cafe")]


def _digest(d) -> str:
    h = hashlib.sha256()
    for a in (d.images, d.labels, d.origins, d.ends, d.markers, d.marked, d.segments, d.contour):
        h.update(a.tobytes())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("cfg, n, seed, digest", PINNED)
def test_the_repo_s_configs_draw_what_they_always_drew(cfg, n, seed, digest):
    assert chunk_size(cfg) == CHUNK  # the RNG's stream is consumed chunk by chunk, as before
    assert _digest(draw(cfg, n, seed)) == digest


def test_disks_inked_in_their_windows_equal_the_full_canvas_test():
    rng = np.random.default_rng(0)
    R, rad = 40, 3.7
    centres = rng.uniform(-3, R + 3, size=(6, 2, 2))  # some near or past the edge
    ink = np.zeros((6, R, R), dtype=np.float32)
    _disks(ink, centres, rad)
    c = np.arange(R) + 0.5
    full = np.zeros_like(ink)
    for j in range(2):
        mx, my = centres[:, j, 0, None, None], centres[:, j, 1, None, None]
        full = np.maximum(full, (c[None, None, :] - mx) ** 2 + (c[None, :, None] - my) ** 2 <= rad * rad)
    assert np.array_equal(ink, full) and ink.any()


def test_a_large_canvas_within_the_bounds_draws_in_bounded_memory():
    """size 256 at antialias 8 (4M fine pixels an image): one image a chunk, so 16 images cost
    about what one does (growing 16 at once once took 1.2 GB for 16 images, and a MemoryError
    at 256)."""
    cfg = PathfinderConfig(size=256, antialias=8)
    assert chunk_size(cfg) == 1
    code = ("import resource\nfrom toyspt.kinds.pathfinder import PathfinderConfig, draw\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "d = draw(PathfinderConfig(size=256, antialias=8), 16, 0)\n"
            "print(d.images.shape[0], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    n, grown_kb = map(int, out.stdout.split())
    assert n == 16 and grown_kb < 300 * 1024, grown_kb
