"""The kernel settings a record names (toyspt.runs.kernels): what a CPU offers, what an old
record is assumed to have run with, and the environment that dispatches a record's kernels."""
from toyspt.runs import kernels

AVX2_HOST = {"sse4_1", "avx", "avx2", "fma"}
AVX512_HOST = AVX2_HOST | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}


def test_what_a_cpu_offers_follows_its_flags_weakest_first():
    assert kernels.aten_offered(AVX2_HOST) == ["DEFAULT", "AVX2"]
    assert kernels.aten_offered(AVX512_HOST) == ["DEFAULT", "AVX2", "AVX512"]
    assert kernels.onednn_offered(AVX2_HOST) == ["SSE41", "AVX", "AVX2"]
    assert kernels.onednn_offered(AVX512_HOST)[-1] == "AVX512_CORE_VNNI"
    assert kernels.onednn_offered({"avx2"}) == []  # no SSE4.1 flag: nothing known


def test_onednn_isa_is_its_cap_where_set_and_offered_else_the_cpus_best():
    assert kernels.onednn_isa(AVX512_HOST, {}) == "AVX512_CORE_VNNI"
    assert kernels.onednn_isa(AVX512_HOST, {"ONEDNN_MAX_CPU_ISA": "avx2"}) == "AVX2"
    assert kernels.onednn_isa(AVX512_HOST, {"DNNL_MAX_CPU_ISA": "AVX2"}) == "AVX2"
    assert kernels.onednn_isa(AVX2_HOST, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}) == "AVX2"  # a cap above caps nothing
    assert kernels.onednn_isa(AVX2_HOST, {"ONEDNN_MAX_CPU_ISA": "ALL"}) == "AVX2"


def test_a_record_names_its_kernels_or_says_what_is_assumed():
    full = dict(aten_cpu_capability="AVX2", onednn_max_cpu_isa="AVX2", mkldnn=True, torch_threads=1)
    assert kernels.recorded({"kernels": full}) == (full, [])
    got, assumed = kernels.recorded({"cpu_capability": "AVX2", "cpu": "AMD EPYC"})
    assert got["onednn_max_cpu_isa"] == "AVX2" and any("oneDNN at AVX2" in a for a in assumed)
    got, assumed = kernels.recorded({"cpu_capability": "AVX512", "cpu": "Other CPU"}, here="This CPU")
    assert got["onednn_max_cpu_isa"] == "unknown"
    got, _ = kernels.recorded({"cpu_capability": "AVX512", "cpu": "This CPU"}, here="This CPU", flags=AVX512_HOST)
    assert got["onednn_max_cpu_isa"] == "AVX512_CORE_VNNI"
    assert kernels.recorded({})[0] == {}


def test_the_environment_caps_both_libraries_where_the_cpu_offers_the_recorded_sets():
    avx2 = dict(aten_cpu_capability="AVX2", onednn_max_cpu_isa="AVX2", mkldnn=True, torch_threads=1)
    env, why = kernels.environment(avx2, AVX512_HOST)
    assert why == "" and env["ATEN_CPU_CAPABILITY"] == "avx2" and env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    avx512 = dict(avx2, aten_cpu_capability="AVX512", onednn_max_cpu_isa="AVX512_CORE")
    env, why = kernels.environment(avx512, AVX2_HOST)
    assert env is None and "does not offer torch's AVX512" in why
    env, why = kernels.environment(dict(avx512, aten_cpu_capability="AVX2"), AVX2_HOST)
    assert env is None and "oneDNN's AVX512_CORE" in why
    env, why = kernels.environment(dict(avx2, onednn_max_cpu_isa="unknown"), AVX512_HOST)
    assert env is None and "unknown" in why


def test_this_process_names_what_it_dispatches():
    import torch

    s = kernels.settings()
    assert s["aten_cpu_capability"] == torch.backends.cpu.get_cpu_capability() and s["torch_threads"] == 1
    assert s["onednn_max_cpu_isa"] == kernels.onednn_isa()


def test_the_nearest_kernels_a_host_offers_stay_at_or_below_the_recorded_ones():
    amx = dict(aten_cpu_capability="AVX512", onednn_max_cpu_isa="AVX512_CORE_AMX", mkldnn=True, torch_threads=1)
    got, changed = kernels.nearest(amx, AVX512_HOST)
    assert got["aten_cpu_capability"] == "AVX512" and got["onednn_max_cpu_isa"] in kernels.onednn_offered(AVX512_HOST)
    assert kernels.environment(got, AVX512_HOST)[0] is not None and len(changed) == 1 and "AMX" in changed[0]
    got, changed = kernels.nearest(amx, AVX2_HOST)
    assert (got["aten_cpu_capability"], got["onednn_max_cpu_isa"]) == ("AVX2", "AVX2") and len(changed) == 2
    assert kernels.nearest(dict(amx, onednn_max_cpu_isa="AVX2"), AVX512_HOST)[1] == []  # offered: unchanged
