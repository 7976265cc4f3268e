"""Config validation: every field of every config has a rule, and every rule refuses what it
should (non-finite and out-of-range numbers, wrong types, wrong tuple lengths) naming the field."""
import dataclasses
import json
import math

import numpy as np
import pytest

from toyspt.data.tasks import TaskConfig
from toyspt.kinds.listops import ListOpsConfig  # noqa: E402

# every config that adopts toyspt.util.validation; a new config belongs here too
from toyspt.lra.demo import DemoConfig  # noqa: E402
from toyspt.lra.model import LRAConfig  # noqa: E402
from toyspt.lra.report import ReportConfig  # noqa: E402
from toyspt.nn.model import ModelConfig
from toyspt.runs.arms import parse_value
from toyspt.train.recipes import TrainConfig
from toyspt.ucr.data import UCRConfig  # noqa: E402
from toyspt.util.validation import (
    Bool,
    Float,
    Instance,
    Int,
    Number,
    Text,
    Tuple,
    rule_of,
    unruled,
    validate,
    validated,
)

# every config of toyspt: task, model, train, UCR data, LRA model/data/report/demo
CONFIGS = (TaskConfig, ModelConfig, TrainConfig, UCRConfig, LRAConfig, ListOpsConfig, ReportConfig, DemoConfig)
FIELDS = [(cls, f) for cls in CONFIGS for f in dataclasses.fields(cls)]
IDS = [f"{cls.__name__}.{f.name}" for cls, f in FIELDS]


def _step(rule: Number, bound: float, up: bool):
    """The nearest representable value past ``bound`` (an int rule steps by 1)."""
    if isinstance(rule, Int):
        return bound + 1 if up else bound - 1
    return math.nextafter(bound, math.inf if up else -math.inf)


def bad_values(rule, default) -> list:
    """Values ``rule`` must refuse, derived from its declared bounds, type and shape."""
    if isinstance(rule, Number):
        out = [math.nan, math.inf, -math.inf, True, "1", [1]]
        out += [] if rule.optional else [None]
        out += [2.5] if isinstance(rule, Int) else [10**400]  # an int beyond float range
        out += [_step(rule, rule.ge, up=False)] if rule.ge is not None else []
        out += [rule.gt] if rule.gt is not None else []
        out += [_step(rule, rule.le, up=True)] if rule.le is not None else []
        out += [rule.lt] if rule.lt is not None else []
        return out
    if isinstance(rule, Bool):
        return [1, 0, "true", None]
    if isinstance(rule, Text):
        return ([1, b"x"] + ([] if rule.optional else [None])
                + (["no-such-choice"] if rule.choices is not None else []))
    if isinstance(rule, Instance):
        return [None, 1, "x", dataclasses.asdict(default)]
    if isinstance(rule, Tuple):
        item = default[0]
        out = [list(default), None, item]
        if rule.length is not None:
            out += [(item,) * (rule.length - 1), (item,) * (rule.length + 1)]
        else:
            out += [(item,) * (rule.min_len - 1)]
        out += [(v,) + default[1:] for v in bad_values(rule.item, item) if v is not None]
        if rule.ordered and len(set(default)) > 1:
            out.append(tuple(sorted(default, reverse=True)))
        if rule.unique:
            out.append((item,) + default)
        return out
    raise AssertionError(f"no bad values known for rule {rule!r}")


@pytest.mark.parametrize("cls,f", FIELDS, ids=IDS)
def test_every_field_has_a_rule_that_refuses_bad_values(cls, f):
    rule = rule_of(f)
    assert rule is not None, f"{cls.__name__}.{f.name} declares no rule (use validated(default, rule))"
    if isinstance(rule, Number):  # every number here is a count, size, rate or scale
        assert rule.ge is not None or rule.gt is not None, f"{f.name}: numeric rule without a bound"
    default = getattr(cls(), f.name)
    values = bad_values(rule, default)
    assert values
    for value in values:
        with pytest.raises(ValueError) as e:
            cls(**{f.name: value})
        assert str(e.value).startswith(f.name), (value, str(e.value))


@pytest.mark.parametrize("cls,f", [(c, f) for c, f in FIELDS if isinstance(rule_of(f), Number)],
                         ids=[i for i, (c, f) in zip(IDS, FIELDS) if isinstance(rule_of(f), Number)])
def test_inclusive_bounds_and_values_just_inside_are_accepted(cls, f):
    rule = rule_of(f)
    inside = [v for v in (rule.ge, rule.le) if v is not None]
    inside += [_step(rule, rule.gt, up=True)] if rule.gt is not None else []
    inside += [_step(rule, rule.lt, up=False)] if rule.lt is not None else []
    companions = CROSS_FIELD.get((cls.__name__, f.name), {})  # what the other fields must be then
    for value in inside:
        assert getattr(cls(**{f.name: value, **companions}), f.name) == value


# fields whose bound value is only valid with another field changed (checks across fields)
# (the memory bounds: a size field at its bound needs the others small; toyspt.util.validation)
_TINY_TASK = dict(T=2, dim=1, n_train=1, n_val=1, n_test=1)
CROSS_FIELD = {("LRAConfig", "d_model"): dict(n_heads=1, n_layers=1, d_ff=8),
               ("LRAConfig", "n_layers"): dict(d_model=8, n_heads=1, d_ff=8),
               ("LRAConfig", "n_heads"): dict(d_model=8192, n_layers=1, d_ff=8),
               ("ModelConfig", "n_heads"): dict(d_model=8192, d_mlp=0),
               ("ListOpsConfig", "max_len"): dict(min_len=1),
               ("ListOpsConfig", "min_len"): dict(max_len=8192),  # min_len at its cap needs max_len there too
               **{("TaskConfig", k): {n: v for n, v in _TINY_TASK.items() if n != k}
                  for k in ("T", "dim", "n_train", "n_val", "n_test")}}


def test_no_config_has_an_unruled_field():
    assert {cls.__name__: unruled(cls) for cls in CONFIGS} == {cls.__name__: [] for cls in CONFIGS}


def test_values_are_normalised_so_equal_configs_hash_equal():
    a = TaskConfig(noise=0, freq_range=(1, 3), seed=np.int64(3))
    b = TaskConfig(noise=0.0, freq_range=(1.0, 3.0), seed=3)
    assert a == b and type(a.seed) is int and type(a.noise) is float
    assert json.dumps(dataclasses.asdict(a)) == json.dumps(dataclasses.asdict(b))
    assert TrainConfig(lr=1).lr == 1.0 and type(TrainConfig(lr=1).lr) is float


def test_rule_metadata_leaves_asdict_alone():
    cfg = ModelConfig()
    assert dataclasses.asdict(cfg) == {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}


def test_a_default_that_breaks_its_rule_fails_at_declaration():
    with pytest.raises(ValueError, match="default"):
        validated(-1, Int(ge=0))
    with pytest.raises(TypeError, match="rule"):
        validated(1)


def test_nested_configs_and_factories():
    @dataclasses.dataclass(frozen=True)
    class Outer:
        task: TaskConfig = validated(factory=TaskConfig, rule=Instance(TaskConfig))
        names: tuple[str, ...] = validated(("a",), Tuple(Text(("a", "b")), unique=True))
        scale: float | None = validated(None, Float(gt=0, optional=True))

        def __post_init__(self):
            validate(self)

    assert Outer().task == TaskConfig()
    for kw, field in ((dict(task=ModelConfig()), "task"), (dict(names=("a", "c")), "names[1]"),
                      (dict(names=("a", "a")), "names"), (dict(scale=0.0), "scale")):
        with pytest.raises(ValueError) as e:
            Outer(**kw)
        assert str(e.value).startswith(field + ":")


@pytest.mark.parametrize("text,like,expected", [
    ("abc", 32, "expected an int, got 'abc'"), ("3.5", 32, "expected an int, got '3.5'"),
    ("x", 0.1, "expected a number, got 'x'"), ("fast", None, "expected a number or none, got 'fast'"),
    ("a,b", (1, 2), "expected comma-separated ints, got 'a,b'"),
    ("1,,2", (1, 2), "expected comma-separated ints, got '1,,2'"),
    ("1,x", (1.0, 2.0), "expected comma-separated numbers, got '1,x'"),
    ("maybe", True, "expected a boolean (true/false), got 'maybe'"),
])
def test_parse_value_errors_say_what_was_expected(text, like, expected):
    with pytest.raises(ValueError) as e:
        parse_value(text, like)
    assert str(e.value) == expected


def test_parse_value_still_parses():
    assert parse_value("64", 32) == 64 and parse_value("1e-3", 0.1) == 1e-3
    assert parse_value("1/2/3", (1,)) == (1, 2, 3) and parse_value("1,2.5", (1.0, 2.0)) == (1.0, 2.5)
    assert parse_value("none", None) is None and parse_value("2", None) == 2.0
    assert parse_value("off", True) is False and parse_value("alibi", "sinusoidal") == "alibi"
