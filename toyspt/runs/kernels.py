"""The settings that decide which CPU kernels a run's arithmetic went through, as a ledger
record names them, and the environment that makes a later process dispatch the same ones.

Two libraries pick their vector kernels at run time: torch's own (ATen: ``DEFAULT``, ``AVX2``,
``AVX512``; capped by ``ATEN_CPU_CAPABILITY``) and oneDNN's (capped by ``ONEDNN_MAX_CPU_ISA``,
else the best ISA the CPU offers). On an AVX-512 host, capping ATen at AVX2 alone does not
reproduce an AVX2 host's records (oneDNN still takes AVX-512 paths); capping both did on a host
of the same CPU vendor, but not across vendors: MKL, which runs torch's float32 matrix products,
picks its kernels by CPU model (docs/reproducibility.md). Runs train on one torch thread
(:func:`toyspt.runs.specs.single_thread`),
so the thread count is fixed by the code, and recorded for completeness.
"""
from __future__ import annotations

import os

ATEN_LEVELS = ("DEFAULT", "AVX2", "AVX512")  # torch's CPU capabilities on x86, weakest first
# oneDNN's max-ISA names (ONEDNN_MAX_CPU_ISA), weakest first, with the /proc/cpuinfo flags each needs
ONEDNN_LEVELS = {
    "SSE41": ("sse4_1",),
    "AVX": ("avx",),
    "AVX2": ("avx2", "fma"),
    "AVX512_CORE": ("avx512f", "avx512bw", "avx512vl", "avx512dq"),
    "AVX512_CORE_VNNI": ("avx512_vnni",),
    "AVX512_CORE_BF16": ("avx512_bf16",),
    "AVX512_CORE_FP16": ("avx512_fp16",),
    "AVX512_CORE_AMX": ("amx_tile", "amx_int8", "amx_bf16"),
}
# the oneDNN ISA taken to match a torch capability in records older than the ``kernels`` field
ONEDNN_OF_ATEN = {"DEFAULT": "SSE41", "AVX2": "AVX2", "AVX512": "AVX512_CORE"}
ATEN_FLAGS = {"DEFAULT": (), "AVX2": ("avx2", "fma"), "AVX512": ("avx512f", "avx512bw", "avx512vl", "avx512dq")}
TORCH_THREADS = 1  # every run trains on one torch thread (toyspt.runs.specs.single_thread)
ONEDNN_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # oneDNN reads the first that is set


def cpu_flags() -> set[str]:
    """The host's CPU flags (``/proc/cpuinfo``; empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def onednn_offered(flags: set[str]) -> list[str]:
    """The oneDNN ISAs a CPU with ``flags`` runs, weakest first (each level needs the ones below)."""
    out = []
    for isa, need in ONEDNN_LEVELS.items():
        if not set(need) <= flags:
            break
        out.append(isa)
    return out


def aten_offered(flags: set[str]) -> list[str]:
    """torch's capabilities a CPU with ``flags`` runs, weakest first."""
    return [c for c in ATEN_LEVELS if set(ATEN_FLAGS[c]) <= flags]


def onednn_isa(flags: set[str] | None = None, env: dict | None = None) -> str:
    """The most oneDNN dispatches to in this process: its cap (``ONEDNN_MAX_CPU_ISA``) where it
    is set and below what the CPU offers, else the CPU's best ISA (``unknown``: no flags to read)."""
    env = os.environ if env is None else env
    offered = onednn_offered(cpu_flags() if flags is None else flags)
    cap = next((env[k].strip().upper() for k in ONEDNN_ENV if env.get(k)), None)
    best = offered[-1] if offered else "unknown"
    if cap in ("ALL", "DEFAULT", None):
        return best
    if cap in ONEDNN_LEVELS and cap not in offered:  # a cap above the CPU caps nothing
        return best
    return cap


def settings() -> dict:
    """What decides this process's kernels, as a record names it (``kernels``)."""
    import torch

    return dict(aten_cpu_capability=torch.backends.cpu.get_cpu_capability(), onednn_max_cpu_isa=onednn_isa(),
                mkldnn=bool(torch.backends.mkldnn.enabled), torch_threads=TORCH_THREADS)


def recorded(record: dict, here: str | None = None, flags: set[str] | None = None) -> tuple[dict, list[str]]:
    """(the kernel settings a record names, what is assumed for those it does not name). Records
    older than the ``kernels`` field name only torch's capability (``cpu_capability``) and the
    CPU model (``cpu``). oneDNN is then assumed to have run at: AVX2 where torch ran AVX2 (a CPU
    whose torch stops at AVX2 offers no AVX-512: the study's AMD EPYC host); where torch ran
    AVX512, this host's best ISA if the record's CPU model is this host's (``here``), else
    ``unknown`` (not reproducible: oneDNN's AVX-512 levels differ between CPU models). Always
    assumed: oneDNN enabled and one torch thread (the code fixes both)."""
    k = record.get("kernels")
    if isinstance(k, dict) and k.get("aten_cpu_capability") and k.get("onednn_max_cpu_isa"):
        return dict(k), []
    cap = record.get("cpu_capability")
    if not cap:
        return {}, ["torch's capability (the record names none: it predates the field)"]
    isa = ONEDNN_OF_ATEN.get(cap, "unknown") if cap != "AVX512" else "unknown"
    why = f"the record names only torch's {cap}"
    if cap == "AVX512" and here is not None and record.get("cpu") == here:
        offered = onednn_offered(cpu_flags() if flags is None else flags)
        isa = offered[-1] if offered else "unknown"
        why += f" and this host's CPU model ({here}), whose best oneDNN ISA is taken"
    assumed = [f"oneDNN at {isa} ({why})", "oneDNN enabled", f"{TORCH_THREADS} torch thread"]
    return dict(aten_cpu_capability=cap, onednn_max_cpu_isa=isa, mkldnn=True, torch_threads=TORCH_THREADS), assumed


def environment(kernels: dict, flags: set[str] | None = None) -> tuple[dict | None, str]:
    """(the environment variables that make a new process dispatch ``kernels``, ''), or (None,
    why this host cannot) when its CPU does not offer them."""
    flags = cpu_flags() if flags is None else flags
    cap, isa = kernels.get("aten_cpu_capability"), kernels.get("onednn_max_cpu_isa")
    if cap not in ATEN_LEVELS:
        return None, f"torch capability {cap!r} is not one this code can dispatch on x86 ({', '.join(ATEN_LEVELS)})"
    if cap not in aten_offered(flags):
        offered = ", ".join(aten_offered(flags))
        return None, f"this host's CPU does not offer torch's {cap} kernels (it offers {offered})"
    if isa not in ONEDNN_LEVELS or isa not in onednn_offered(flags):
        return None, (f"this host's CPU does not offer oneDNN's {isa} (it offers up to "
                      f"{(onednn_offered(flags) or ['nothing known'])[-1]})")
    if not kernels.get("mkldnn", True):
        return None, "the record ran with oneDNN disabled (torch.backends.mkldnn.enabled False): not reproduced here"
    return {"ATEN_CPU_CAPABILITY": cap.lower(), "ONEDNN_MAX_CPU_ISA": isa, "DNNL_MAX_CPU_ISA": isa,
            "OMP_NUM_THREADS": str(kernels.get("torch_threads") or TORCH_THREADS)}, ""


def _at_most(level, levels: list[str], offered: list[str]) -> str | None:
    """The strongest of ``offered`` at or below ``level`` in ``levels`` (the best offered where
    ``level`` is none of them; None where nothing is offered)."""
    if not offered:
        return None
    if level not in levels:
        return offered[-1]
    below = [x for x in offered if levels.index(x) <= levels.index(level)]
    return below[-1] if below else offered[0]


def nearest(kernels: dict, flags: set[str] | None = None) -> tuple[dict, list[str]]:
    """(the kernels this host offers nearest ``kernels``: each setting as recorded where offered,
    else the strongest offered below it, else the host's weakest; a line per setting changed).
    What ``toyspt ledger verify --anyway`` retrains under where the recorded ones are not offered."""
    flags = cpu_flags() if flags is None else flags
    cap, isa = kernels.get("aten_cpu_capability"), kernels.get("onednn_max_cpu_isa")
    out = dict(kernels, aten_cpu_capability=_at_most(cap, list(ATEN_LEVELS), aten_offered(flags)),
               onednn_max_cpu_isa=_at_most(isa, list(ONEDNN_LEVELS), onednn_offered(flags)), mkldnn=True,
               torch_threads=kernels.get("torch_threads") or TORCH_THREADS)
    said = {"aten_cpu_capability": "torch's capability", "onednn_max_cpu_isa": "oneDNN's ISA"}
    changed = [f"{said[k]} {kernels.get(k)!r} not offered here: retrained under {out[k]!r}"
               for k in said if out[k] != kernels.get(k)]
    if kernels.get("mkldnn") is False:
        changed.append("the record ran with oneDNN disabled: retrained with it enabled")
    return out, changed


__all__ = ["ATEN_LEVELS", "ONEDNN_LEVELS", "ONEDNN_OF_ATEN", "TORCH_THREADS", "cpu_flags", "onednn_offered",
           "aten_offered", "onednn_isa", "settings", "recorded", "environment", "nearest"]
