"""Spec resolution and the input convention of gradscope gradcheck."""

from __future__ import annotations

import inspect

import pytest
import torch

from gradscope.errors import ConfigError, TargetError
from gradscope.examples import functions as ex
from gradscope.gradcheck.input_options import InputOptions, parse_arg, parse_dtype, parse_shape
from gradscope.gradcheck.inputs import DEFAULT_SHAPE, build
from gradscope.gradcheck.targets import resolve, resolve_object


def test_parse_shape():
    assert parse_shape("x=3,4") == ("x", (3, 4))
    assert parse_shape("x=3x4") == ("x", (3, 4))
    assert parse_shape("s=") == ("s", ())
    for bad in ("x", "x=0", "x=a,b", "1x=3"):
        with pytest.raises(ConfigError):
            parse_shape(bad)


def test_parse_arg_takes_literals_only():
    assert parse_arg("dim=1") == ("dim", 1)
    assert parse_arg("mode='mean'") == ("mode", "mean")
    assert parse_arg("sizes=[2, 3]") == ("sizes", [2, 3])
    assert parse_arg("opts={'a': None}") == ("opts", {"a": None})
    with pytest.raises(ConfigError, match="not a Python literal"):
        parse_arg("x=__import__('os').getcwd()")


def test_parse_dtype():
    assert parse_dtype("double") == "float64" and parse_dtype("torch.float32") == "float32"
    with pytest.raises(ConfigError):
        parse_dtype("int64")


def test_generated_inputs_follow_the_signature():
    def f(x, w, scale=2.0, *, mode="sum"):
        return x * w * scale

    problem = build(resolve_object(f, "f"), InputOptions())
    assert [(i.name, i.position, i.shape, i.dtype) for i in problem.infos] == [
        ("x", 0, DEFAULT_SHAPE, "float64"),
        ("w", 1, DEFAULT_SHAPE, "float64"),
    ]
    gen = torch.Generator().manual_seed(0)
    expected = [torch.randn(DEFAULT_SHAPE, generator=gen, dtype=torch.float64) for _ in "xw"]
    assert all(torch.equal(a, b) for a, b in zip(problem.inputs, expected, strict=False))


def test_shape_and_arg_override_one_parameter_each():
    def f(x, w, scale=2.0):
        return x * w * scale

    problem = build(
        resolve_object(f, "f"),
        InputOptions(shapes={"x": (3,), "w": (1,)}, args={"scale": 5}, seed=7),
    )
    assert [i.shape for i in problem.infos] == [(3,), (1,)]
    x, w = problem.inputs
    assert torch.allclose(problem.fn(x, w)[0], x * w * 5)


def test_a_function_with_a_default_tensor_gets_one_from_shape():
    def f(x, bias=None):
        return x if bias is None else x + bias

    assert len(build(resolve_object(f, "f"), InputOptions()).infos) == 1
    problem = build(resolve_object(f, "f"), InputOptions(shapes={"bias": (4, 4)}))
    assert [i.name for i in problem.infos] == ["x", "bias"]


def test_non_tensor_annotation_without_default_needs_arg():
    def f(x, repeats: int):
        return x.repeat(repeats, 1)

    with pytest.raises(TargetError, match="pass --arg repeats=VALUE"):
        build(resolve_object(f, "f"), InputOptions())
    assert build(resolve_object(f, "f"), InputOptions(args={"repeats": 2})).infos[0].name == "x"


def test_provider_wins_and_names_varargs():
    problem = build(resolve_object(ex.MaskedScaleSum, "m"), InputOptions())
    assert [(i.name, i.position) for i in problem.infos] == [("x", 0), ("w", 3)]
    assert [name for name, _ in problem.call] == [
        "x",
        "dim",
        "mask",
        "w",
        "options",
        "mode",
        "on_forward",
        "index",
    ]


def test_provider_tensors_without_requires_grad_are_all_checked():
    def f(x, y):
        return x * y

    f.gradcheck_inputs = lambda: (
        torch.ones(2, dtype=torch.float64),
        torch.ones(2, dtype=torch.float64),
    )
    problem = build(resolve_object(f, "f"), InputOptions())
    assert len(problem.infos) == 2 and problem.notes[0].slug == "no-requires-grad"


def test_classmethod_forward_drops_ctx():
    assert list(resolve_object(ex.MaskedScaleSum, "m").signature.parameters)[:2] == ["x", "dim"]


def test_resolve_kinds():
    assert resolve("gradscope.examples.functions:CustomReLU")[0].kind == "autograd.Function"
    assert resolve("CustomReLU")[0].label == "CustomReLU"  # built-in example by bare name
    assert resolve("torch.nn.functional:gelu")[0].kind == "function"
    found = resolve("gradscope.examples.functions")
    classes = [
        n
        for n, v in vars(ex).items()
        if inspect.isclass(v)
        and issubclass(v, torch.autograd.Function)
        and v.__module__ == ex.__name__
    ]
    assert [r.label.rpartition(":")[2] for r in found] == classes


def test_resolve_errors():
    with pytest.raises(TargetError, match="needs arguments"):
        resolve("torch.nn:Linear")
    with pytest.raises(TargetError, match=r"defines no torch\.autograd\.Function"):
        resolve("math")
    with pytest.raises(TargetError, match="returned int"):
        resolve_object(lambda: 3, "three")


# --- meta tensors: a shape and no values ------------------------------------------------------


class _OnMeta(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3, device="meta")

    def forward(self, x):
        return self.lin(x)


def _meta(*shape):
    return torch.randn(*shape, device="meta", dtype=torch.float64, requires_grad=True)


@pytest.mark.parametrize(
    ("target", "inputs", "named"),
    [
        (torch.sin, (_meta(3),), "input on the meta device"),  # the issue's provider
        (torch.mul, (torch.randn(3, dtype=torch.float64), _meta(3)), "other on the meta"),
        (torch.sum, ([_meta(2)],), "input[0] on the meta device"),  # nested in a list
        (_OnMeta(), (torch.randn(2, 3),), "lin.weight, lin.bias on the meta device"),
    ],
    ids=["provided", "one-of-two", "nested", "module-parameters"],
)
def test_meta_tensors_are_the_users_input_problem(target, inputs, named):
    from gradscope.gradcheck import check

    with pytest.raises(TargetError, match="cannot be checked numerically") as info:
        check(target, inputs)
    assert named in str(info.value)


def test_gradcheck_cli_on_a_meta_provider_is_exit_2(runner, tmp_path, monkeypatch):
    from gradscope.cli import app

    (tmp_path / "metafn.py").write_text(
        "import torch\n"
        "def f(x):\n    return x.sin()\n"
        "def gradcheck_inputs():\n"
        "    return (torch.randn(3, device='meta', dtype=torch.float64, requires_grad=True),)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = runner.invoke(app, ["gradcheck", "metafn:f"])
    assert result.exit_code == 2, result.output
    assert "x on the meta device" in result.stderr and "Traceback" not in result.stderr
