"""Hostile and mistaken inputs through the front doors: each is one ``error:`` line with exit
2 (bad input) or 1 (a run that diverged), before any training, or a correct result."""
import os
import time

import numpy as np
import pytest

from toyspt.cli.flags import run_main
from toyspt.cli.main import main
from toyspt.lra.checkpoint import save_lra
from toyspt.lra.model import LRAConfig, build_lra

SMALL = ["--task.n_train", "32", "--task.n_val", "16", "--task.n_test", "16", "--task.T", "8",
         "--train.epochs", "1", "--train.pre_epochs", "1"]
CFG = LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=64)


def one_error(capsys, code, argv, *needles):
    t = time.perf_counter()
    assert main(argv) == code
    assert time.perf_counter() - t < 20  # nothing trained, nothing hung
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and "Traceback" not in "\n".join(err)
    line = err[-1]
    assert all(n in line for n in needles), line
    return line


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    save_lra(d / "a.ckpt", build_lra(CFG, 0), dataset={"_name_": "listops_new", "mlm_prob": 0.0})
    other = LRAConfig(n_layers=2, d_model=8, n_heads=2, d_ff=16, max_len=64)
    save_lra(d / "other.ckpt", build_lra(other, 0), dataset={"_name_": "listops_new", "mlm_prob": 0.0})
    pix = LRAConfig(n_layers=1, d_model=8, n_heads=2, d_ff=8, max_len=64, encoder="linear",
                    use_lengths=False)
    save_lra(d / "pix.ckpt", build_lra(pix, 0), dataset={"_name_": "cifar"})
    return d


GEN = ["--min-len", "8", "--max-len", "30", "--max-depth", "3", "--max-args", "4", "--fit-n", "0"]


@pytest.mark.parametrize("flags,needle", [
    ("--task.T 1000000000", "--task.T: expected an int >= 2 and <= 16384"),
    ("--model.n_layers 1000000000", "--model.n_layers: expected an int > 0 and <= 1024"),
    ("--task.noise 1e308", "--task.noise: expected a finite float >= 0 and <= 1000000.0"),
    ("--task.offset 1e300", "--task.offset: expected a finite float >= 0 and <= 1000000.0"),
    ("--train.lr 1e30", "--train.lr: expected a finite float > 0 and <= 100.0"),
    ("--task.T 1000 --task.n_train 1000000", "task: (n_train + n_val + n_test) x T x dim"),
    ("--model.d_model 8192 --model.n_layers 64", "model: n_layers x (4 d_model^2"),
])
def test_sizes_and_extremes_are_bounded_by_name(tmp_path, capsys, flags, needle):
    one_error(capsys, 2, ["train", "--recipe", "scratch", "--cache", str(tmp_path), *SMALL,
                          *flags.split()], needle)


def test_freq_band_above_nyquist_is_refused(tmp_path, capsys):
    one_error(capsys, 2, ["train", "--recipe", "scratch", "--cache", str(tmp_path), *SMALL,
                          "--task.family", "freq_band"], "above the Nyquist frequency T/2 = 4")


def test_unknown_family_is_refused_by_name(tmp_path, capsys):
    one_error(capsys, 2, ["train", "--cache", str(tmp_path), *SMALL, "--task.family", "sine"],
              "unknown task family 'sine'", "freq_band", "local_shuffle")


def test_seed_ranges_are_bounded_and_answer_at_once(capsys):
    t = time.perf_counter()
    one_error(capsys, 2, ["compare", "--seeds", "0-100000000"], "more than 10000 seeds")
    assert time.perf_counter() - t < 2


@pytest.mark.parametrize("argv,needle", [
    (["compare", "--arms", "scratch,scratch"], "arm 'scratch' appears twice"),
    (["compare", "--arms", "rope,scratch:pos=rope"], "appears twice"),
    (["ucr", "--dataset", "GunPoint,GunPoint"], "data set 'GunPoint' appears twice"),
])
def test_duplicates_are_refused_by_name(tmp_path, capsys, argv, needle):
    one_error(capsys, 2, [*argv, "--cache", str(tmp_path)], needle)


@pytest.mark.parametrize("argv", [
    ["compare", "--arms", "scratch"], ["probe", "--at", "init"], ["ucr"], ["figs", "--quick"],
    ["lra", "demo", "--quick"], ["lra", "probe", "CKPT"],
])
def test_out_naming_a_file_is_refused_before_anything_runs(tmp_path, capsys, ckpt, argv):
    existing = tmp_path / "taken.csv"
    existing.write_text("x")
    argv = [str(ckpt / "a.ckpt") if a == "CKPT" else a for a in argv]
    for out in (existing, existing / "sub"):
        one_error(capsys, 2, [*argv, "--out", str(out)], "names an existing file")


@pytest.mark.parametrize("argv,needle", [
    (["probe", "--at", "init", "--n", "0"], "argument --n: must be >= 1, got 0"),
    (["probe", "--at", "init", "--n", "-5"], "argument --n: must be >= 1, got -5"),
    (["lra", "probe", "CKPT", "--n", "0"], "argument --n: must be >= 1, got 0"),
    (["lra", "probe", "CKPT", "--n", "-5"], "argument --n: must be >= 1, got -5"),
    (["lra", "probe", "CKPT", "--threads", "0"], "argument --threads: must be >= 1, got 0"),
    (["lra", "demo", "--threads", "0"], "argument --threads: must be >= 1, got 0"),
])
def test_counts_must_be_positive(capsys, ckpt, argv, needle):
    one_error(capsys, 2, [str(ckpt / "a.ckpt") if a == "CKPT" else a for a in argv], needle)


def test_special_files_and_folders_as_data_are_refused_by_type(tmp_path, capsys, ckpt):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would block forever
    a = str(ckpt / "a.ckpt")
    one_error(capsys, 2, ["lra", "probe", a, "--data", str(tmp_path)], "is a directory")
    one_error(capsys, 2, ["lra", "probe", a, "--data", str(fifo)], "is a FIFO")
    one_error(capsys, 2, ["lra", "probe", a, "--vocab", "/dev/zero", *GEN], "is a character device")
    one_error(capsys, 2, ["lra", "probe", a, "--task", "tokens", "--data", str(fifo) + ".npy"],
              "no such file")


def test_listops_line_over_the_csv_field_limit(tmp_path, capsys, ckpt):
    p = tmp_path / "long.tsv"
    p.write_text("Source\tTarget\n" + "( [MAX 1 " + "2 " * 70_000 + "] )\t2\n")
    one_error(capsys, 2, ["lra", "probe", str(ckpt / "a.ckpt"), "--data", str(p), "--fit-n", "0"],
              f"{p}:2: not a ListOps line")


def _npy_header(path, shape, dtype="|i1", sparse_bytes=0):
    """A .npy file whose header declares ``shape``; ``sparse_bytes`` of (sparse) zeros follow."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
        f.truncate(f.tell() + sparse_bytes)
    return path


def test_npy_declaring_2_to_the_40_elements_is_refused_from_its_header(tmp_path, capsys, ckpt):
    p = _npy_header(tmp_path / "huge.npy", (1 << 20, 1 << 20))
    one_error(capsys, 2, ["lra", "probe", str(ckpt / "a.ckpt"), "--task", "tokens", "--data", str(p)],
              "declares shape (1048576, 1048576)", "refused before reading")


def test_sparse_256_mib_npy_of_the_wrong_shape_is_not_widened(tmp_path, capsys, ckpt):
    import resource
    p = _npy_header(tmp_path / "sparse.npy", (256 << 20,), sparse_bytes=256 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    one_error(capsys, 2, ["lra", "probe", str(ckpt / "a.ckpt"), "--task", "tokens", "--data", str(p)],
              "token ids (N, T) must be integer ids")
    # refused from the header: neither the 256 MiB nor a 2 GiB int64 copy is ever made
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024


@pytest.mark.parametrize("labels,needle", [
    (np.array([0.0, np.nan, 1.0, 2.0]), "labels must be integers"),
    (np.array([0, 12, 1, 3]), "label 12 is out of range; labels must lie in 0..9"),
    (np.array([0, -1, 2, 3]), "label -1 is out of range"),
])
def test_probe_labels_out_of_range_or_nan(tmp_path, capsys, ckpt, labels, needle):
    x = np.random.default_rng(0).integers(0, 256, size=(4, 8, 8)).astype(np.uint8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", labels)
    one_error(capsys, 2, ["lra", "probe", str(ckpt / "pix.ckpt"), "--task", "image", "--data",
                          str(tmp_path / "x.npy"), "--labels", str(tmp_path / "y.npy"), "--n", "2",
                          "--fit-n", "0"], needle)


def test_ref_of_another_architecture_is_refused(capsys, ckpt):
    one_error(capsys, 2, ["lra", "probe", str(ckpt / "a.ckpt"), "--ref", str(ckpt / "other.ckpt"),
                          "--n", "1", *GEN], "--ref", "another architecture", "n_layers 2 vs 1")


def test_a_diverged_run_is_one_line_with_exit_1(capsys):
    def diverge():
        raise FloatingPointError("non-finite loss (nan) in recipe 'scratch', seed 0")
    assert run_main(diverge) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: non-finite loss") and "diverged" in err


def test_pixels_are_converted_only_as_far_as_probed(tmp_path, capsys, ckpt):
    """A sparse 256 MiB uint8 image array: the probe converts its first images, not 2 GiB of float64."""
    import resource
    p = _npy_header(tmp_path / "images.npy", (1 << 16, 64, 64), "|u1", sparse_bytes=256 << 20)
    np.save(tmp_path / "y.npy", np.zeros(4, dtype=np.int64))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    one_error(capsys, 2, ["lra", "probe", str(ckpt / "pix.ckpt"), "--task", "image", "--data", str(p),
                          "--labels", str(tmp_path / "y.npy"), "--n", "2", "--fit-n", "0"],
              "positional table")  # 4096 pixels per image > the model's 64 rows: refused after loading 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # 2 images read


# ------------------------------------------------- flags a config-less file's head cannot honour

BARE = ["--heads", "2", "--no-causal", "--window", "0", "--activation", "gelu"]


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """Config-less files (tensors only): a linear head, an MLP head, no decoder at all."""
    from toyspt.lra.checkpoint import lra_state_dict
    from toyspt.lra.lightning import write_checkpoint

    d = tmp_path_factory.mktemp("bare")
    for name, extra in (("linear", {}), ("mlp", {"head": "mlp"}), ("nohead", {"head": "none"})):
        cfg = LRAConfig(n_layers=1, d_model=16, n_heads=2, d_ff=32, max_len=64, **extra)
        write_checkpoint(d / f"{name}.ckpt", lra_state_dict(build_lra(cfg, 0)), None)
    return d


@pytest.mark.parametrize("file,flags,needle", [
    ("linear", "--head rec --pool sum --all-positions",
     "--pool sum and --all-positions: the model has a per-token SPT decoder, which does not pool"),
    ("linear", "--head none --pool max", "--pool max: the model has no head (--head none"),
    ("linear", "--head none --use-lengths", "--use-lengths: the model has no head"),
    ("nohead", "--pool mean --use-lengths", "--pool mean and --use-lengths: the model has no decoder"),
    ("mlp", "--head rec --pool mean --use-lengths", "--head rec says what decoder.0.output_transform is, "
                                                    "but the tensors hold an MLP classifier"),
    ("nohead", "--head cls", "--head cls says what decoder.0.output_transform is, but the tensors hold no "
                             "decoder"),
])
def test_a_flag_the_head_cannot_honour_is_refused_by_name(capsys, bare, file, flags, needle):
    one_error(capsys, 2, ["lra", "inspect", str(bare / f"{file}.ckpt"), *BARE, *flags.split()], needle)


def test_the_flags_a_head_does_honour_load(capsys, bare):
    assert main(["lra", "inspect", str(bare / "linear.ckpt"), *BARE, "--head", "rec"]) == 0
    assert "rec_out" in capsys.readouterr().out
    assert main(["lra", "inspect", str(bare / "linear.ckpt"), *BARE, "--pool", "sum", "--all-positions"]) == 0
    out = capsys.readouterr().out
    assert "pool             sum" in out and "use_lengths      False" in out
