"""The README's "Adding a method" section is code that works: its FedProx, built from the README's
own text, registers, validates its parameters and trains bit for bit like ``methods/fedprox.py``."""
from __future__ import annotations

import ast
import re
import sys
import types
from pathlib import Path

import pytest

import fedrepro
from fedrepro.errors import ConfigError
from fedrepro.methods import METHODS

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_section_code(title: str) -> str:
    """The first python block under the README heading ``## <title>``."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    block = re.search(r"```python\n(.*?)```", text[start:end if end != -1 else None], re.S)
    assert block, f"no python block under '## {title}'"
    return block.group(1)


def load_module(code: str, name: str) -> types.ModuleType:
    """Execute ``code`` as the module ``name``, as a file in fedrepro/methods/ would be imported."""
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        exec(compile(code, str(README), "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


@pytest.fixture
def readme_method():
    code = readme_section_code("Adding a method")
    name = re.search(r'@register_method\("(\w+)"\)', code).group(1)
    load_module(code, "readme_adding_a_method")
    yield name
    METHODS.unregister(name)


def test_the_readme_method_trains_like_the_package_fedprox(readme_method, tiny):
    runs = {}
    for name in (readme_method, "fedprox"):
        res = fedrepro.run(tiny(**{"method.name": name, "method.args": {"mu": 0.1}, "train.rounds": 2}))
        runs[name] = res.rounds.drop(columns=[c for c in res.rounds.columns if c.startswith("time_")])
    assert runs[readme_method].to_dict("records") == runs["fedprox"].to_dict("records")
    assert runs["fedprox"]["acc_mean"].iloc[-1] > 0.25  # 4 balanced classes: chance is 0.25


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "high"])
def test_the_readme_method_rejects_bad_mu_by_name(readme_method, bad):
    with pytest.raises(ConfigError, match=r"method\.args\.mu"):
        METHODS.get(readme_method).parse_params({"mu": bad})


def test_redefining_a_method_replaces_it_but_a_clash_is_an_error(readme_method):
    code = readme_section_code("Adding a method")
    again = load_module(code, "readme_adding_a_method")  # a notebook cell run twice
    assert METHODS.get(readme_method) is again.MyFedProx
    with pytest.raises(ValueError, match="registered twice"):
        load_module(code, "another_module")


def test_the_readme_method_declares_the_package_fedprox_default_bounds_and_citation(readme_method):
    """The numbers in the README's code are the package's: μ's default and bounds, and the paper cited."""
    import dataclasses

    from fedrepro.methods import fedprox

    ours, theirs = (dataclasses.fields(cls)[0] for cls in (METHODS.get(readme_method).Params,
                                                            fedprox.FedProxParams))
    assert (ours.name, ours.default, dict(ours.metadata)) == (theirs.name, theirs.default, dict(theirs.metadata))
    cite = re.search(r"\(([^)]*\d{4})\)", METHODS.get(readme_method).__doc__).group(1)
    assert f"FedProx ({cite})" in fedprox.__doc__


def test_the_readme_runs_the_method_it_defines_with_a_valid_mu(readme_method):
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Adding a method\n"):]
    section = section[:section.find("\n## ", 1)]
    calls = re.findall(r'fedrepro\.run\(profile="smoke", method__name="(\w+)", method__args=(\{[^}]*\})\)', section)
    assert len(calls) == 1 and calls[0][0] == readme_method
    METHODS.get(readme_method).parse_params(ast.literal_eval(calls[0][1]))  # ConfigError when out of bounds
