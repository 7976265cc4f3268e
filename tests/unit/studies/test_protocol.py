"""The studies' protocol (toyspt.studies.protocol) and registry (toyspt.studies.registry): every
registered study implements it, the figure job's tiers are its studies' tiers, each study's figures
are drawn in its tiers, and ``toyspt study`` names the registry's studies."""
import pytest

from toyspt.figs import FIGURES, STUDIES, TIERS, load, tiers_of
from toyspt.studies.protocol import MEMBERS, Study, missing
from toyspt.studies.registry import BY_TIER
from toyspt.studies.registry import STUDIES as BY_NAME
from toyspt.studies.registry import study as named


@pytest.mark.parametrize("name", list(BY_NAME))
def test_every_registered_study_implements_the_protocol(name):
    cls = BY_NAME[name]
    assert not missing(cls) and cls.name == name
    assert isinstance(cls.for_tier(cls.tiers[-1], quick=True, seeds=(0,)), Study)
    assert set(cls.figures) <= set(FIGURES)
    for fig in cls.figures:  # each of its figures is drawn in one of its tiers
        assert set(tiers_of(load(fig))) & set(cls.tiers), fig


def test_the_figure_job_reads_its_tiers_from_the_registry():
    assert STUDIES is BY_TIER and TIERS == tuple(t for s in BY_NAME.values() for t in s.tiers)


def test_a_class_lacking_a_member_is_named():
    class Half:
        name = "half"

    assert missing(Half) == [m for m in MEMBERS if m != "name"]
    with pytest.raises(ValueError, match="choose one of ucr, lra"):
        named("bogus")


def test_the_cli_names_the_registry_studies(capsys):
    from toyspt.cli.main import main
    from toyspt.cli.study import NAMES

    assert NAMES == ", ".join(BY_NAME)
    assert main(["study", "pilot", "ucr"]) == 2
    assert "no pilot" in capsys.readouterr().err
    assert main(["study", "progress", "bogus"]) == 2
    assert "choose one of" in capsys.readouterr().err


def test_the_lra_study_quick_specs_are_in_seed_order():
    s = named("lra").for_tier("lra", quick=True, seeds=(0, 1))
    seeds = [seed for (_, _, seed) in s.specs()]
    assert seeds == sorted(seeds)
    assert s.phase(next(iter(s.specs().values())), None) == 0
