"""The preloaded allocator: its setting, its environment, and the same numbers as glibc's malloc."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import fedrepro
from fedrepro.env import allocator
from fedrepro.errors import ConfigError
from fedrepro.execute.local import run_pool
from fedrepro.runs.store import RunStore

ROOT = Path(__file__).resolve().parent.parent


def test_system_means_no_preload():
    assert allocator.library("system") is None
    env = {"PATH": "/bin"}
    assert allocator.child_env(env, "system") == env


@pytest.mark.parametrize("bad", ["tcmallc", "glibc"])
def test_unknown_setting_names_the_variable_and_the_choices(bad):
    with pytest.raises(ConfigError, match=r"FEDREPRO_ALLOCATOR=.*valid: auto, system, tcmalloc, jemalloc"):
        allocator.library(bad)


def test_a_missing_library_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        allocator.library(str(tmp_path / "libnothing.so"))


@pytest.fixture
def any_path_accepted(monkeypatch):
    """The environment's plumbing alone: any path counts as a checked allocator library."""
    monkeypatch.setattr(allocator, "check_library", lambda path: path)


def test_child_env_prepends_once_and_keeps_other_preloads(tmp_path, any_path_accepted):
    lib = tmp_path / "libtcmalloc_fake.so"
    env = allocator.child_env({"LD_PRELOAD": "/other.so"}, str(lib))
    assert env["LD_PRELOAD"] == f"{lib}:/other.so"
    assert allocator.child_env(env, str(lib))["LD_PRELOAD"] == env["LD_PRELOAD"]


def test_for_children_restores_the_environment(tmp_path, monkeypatch, any_path_accepted):
    lib = tmp_path / "libtcmalloc_fake.so"
    monkeypatch.setenv("LD_PRELOAD", "/other.so")
    with allocator.for_children(str(lib)) as got:
        assert got == str(lib)
        assert os.environ["LD_PRELOAD"] == f"{lib}:/other.so"
    assert os.environ["LD_PRELOAD"] == "/other.so"
    monkeypatch.delenv("LD_PRELOAD")
    with allocator.for_children(str(lib)):
        pass
    assert "LD_PRELOAD" not in os.environ


# issue 53, class 7: FEDREPRO_ALLOCATOR set to any file was accepted, preloaded (the dynamic loader
# skips what it cannot load, with a message) and recorded as the allocator. A path is now used only
# when it is a tcmalloc or jemalloc shared library that, preloaded, serves malloc.

# A minimal allocator: malloc and its kin forwarded to glibc's, and tcmalloc's release call.
SHIM = r"""
#include <stddef.h>
extern void *__libc_malloc(size_t); extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t); extern void *__libc_realloc(void *, size_t);
#ifdef SERVES_MALLOC
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
void *calloc(size_t a, size_t b) { return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
#endif
void MallocExtension_ReleaseFreeMemory(void) {}
"""


def _compiled(tmp_path: Path, name: str, *defines: str) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not sys.platform.startswith("linux"):
        pytest.skip("needs a C compiler and Linux's dynamic loader")
    src = tmp_path / "shim.c"
    src.write_text(SHIM)
    out = tmp_path / name
    subprocess.run([cc, "-shared", "-fPIC", *(f"-D{d}" for d in defines), "-o", str(out), str(src)], check=True)
    return out


def _installed_tcmalloc() -> Path:
    lib = allocator._find("tcmalloc")
    folders = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu",
               "/usr/lib")
    path = next((Path(d) / lib for d in folders if lib and (Path(d) / lib).is_file()), None)
    if path is None:
        pytest.skip("tcmalloc is not installed here")
    return path


def _not_a_library(tmp_path):
    f = tmp_path / "libtcmalloc.so"
    f.write_text("not a library\n")
    return f


def _fifo(tmp_path):
    f = tmp_path / "libtcmalloc.so.4"
    os.mkfifo(f)
    return f


def _unnamed_elf(tmp_path):  # a real shared library, under a name that is no allocator's
    return _compiled(tmp_path, "libfoo.so", "SERVES_MALLOC")


def _elf_executable(tmp_path):  # the Python binary (a PIE: an ELF shared object that cannot be preloaded)
    f = tmp_path / "libjemalloc.so.2"
    shutil.copy(sys.executable if Path(sys.executable).stat().st_size < 50e6 else "/bin/ls", f)
    return f


def _no_malloc(tmp_path):  # loads, named as tcmalloc, but malloc stays glibc's
    return _compiled(tmp_path, "libtcmalloc_fake.so")


def _wrong_allocator(tmp_path):  # serves malloc, but the name claims jemalloc and it has no mallctl
    return _compiled(tmp_path, "libjemalloc.so.2", "SERVES_MALLOC")


BAD_LIBRARIES = {
    "a text file": (_not_a_library, "is not an ELF shared library"),
    "a fifo": (_fifo, "is not a regular file"),
    "an unnamed shared library": (_unnamed_elf, "names neither tcmalloc nor jemalloc"),
    "an executable": (_elf_executable, "does not serve malloc"),
    "a library that does not serve malloc": (_no_malloc, "does not serve malloc"),
    "another allocator than its name": (_wrong_allocator, "no mallctl, which jemalloc exports"),
    "/etc/passwd": (lambda tmp_path: Path("/etc/passwd"), "names neither"),
}


@pytest.mark.parametrize("case", list(BAD_LIBRARIES))
def test_a_path_that_is_not_an_allocator_is_refused_in_one_line(tmp_path, monkeypatch, case):
    make, why = BAD_LIBRARIES[case]
    path = make(tmp_path)
    monkeypatch.setenv(allocator.ENV, str(path))
    with pytest.raises(ConfigError) as e:
        allocator.library()
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"FEDREPRO_ALLOCATOR={path}: ") and why in msg
    assert "valid: auto, system, tcmalloc, jemalloc or the path of a tcmalloc or jemalloc shared library" in msg
    with pytest.raises(ConfigError):  # nothing is preloaded into a child either
        allocator.child_env({})


def test_a_path_with_a_colon_is_refused(tmp_path):
    lib = _compiled(tmp_path, "libtcmalloc_shim.so", "SERVES_MALLOC")
    odd = tmp_path / "a:b"
    odd.mkdir()
    shutil.copy(lib, odd / lib.name)
    with pytest.raises(ConfigError, match="colon"):
        allocator.library(str(odd / lib.name))


def test_an_allocator_that_serves_malloc_is_used_and_recorded_as_what_serves_it(tmp_path):
    """A shim named as tcmalloc that serves malloc is accepted; a child started with it records
    tcmalloc (in_use reads which file serves malloc), and one without it records system."""
    lib = _compiled(tmp_path, "libtcmalloc_shim.so", "SERVES_MALLOC")
    assert allocator.library(str(lib)) == str(lib)
    code = "from fedrepro.env import allocator; print(allocator.in_use())"
    on = subprocess.run([sys.executable, "-c", code], env=allocator.child_env(setting=str(lib)), check=True,
                        capture_output=True, text=True)
    assert on.stdout.strip() == "tcmalloc"
    off = subprocess.run([sys.executable, "-c", code], env=allocator.child_env(setting="system"), check=True,
                         capture_output=True, text=True)
    assert off.stdout.strip() == "system"


def test_the_installed_tcmalloc_by_path_is_accepted():
    path = _installed_tcmalloc()
    assert allocator.library(str(path)) == str(path)


def test_a_file_that_cannot_be_preloaded_is_never_recorded(tmp_path):
    """What a child records is what serves its malloc, whatever LD_PRELOAD asked for: a file the
    dynamic loader skips leaves the system allocator recorded."""
    bogus = _not_a_library(tmp_path)
    env = {**os.environ, "LD_PRELOAD": str(bogus)}
    out = subprocess.run([sys.executable, "-c", "from fedrepro.env import allocator; print(allocator.in_use())"],
                         env=env, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "system"


def _rows(path: Path) -> list[dict]:
    rounds = fedrepro.RunResult(path).rounds
    return rounds.drop(columns=[c for c in rounds if c.startswith("time_")]).to_dict("records")


@pytest.mark.skipif(allocator.library("auto") is None, reason="no tcmalloc or jemalloc installed")
def test_preloaded_allocator_gives_the_same_numbers(tiny, tmp_path):
    """A conv run in a child process on the preloaded allocator (CLI), and in a pool worker (which
    preloads it), against this process on its own allocator: bit for bit."""
    if allocator.in_use() != "system":
        pytest.skip("this process already runs on a preloaded allocator: nothing to compare against")
    cfg = tiny(**{"model.name": "resnet8", "model.args": {"width": 8}})
    here = fedrepro.run(cfg.replace(runs_dir=str(tmp_path / "a"))).path
    yml = tmp_path / "cfg.yaml"
    yml.write_text(yaml.safe_dump({k: v for k, v in cfg.to_dict().items() if k != "profile"}
                                  | {"runs_dir": str(tmp_path / "b")}))
    out = subprocess.run([sys.executable, "-m", "fedrepro.app.cli", "run", "--profile", cfg.profile, "--config",
                          str(yml)],
                         capture_output=True, text=True, cwd=ROOT, env=allocator.child_env())
    assert out.returncode == 0, out.stderr
    child = Path(out.stdout.strip().splitlines()[-1].removeprefix("results: "))
    pooled = cfg.replace(runs_dir=str(tmp_path / "c"))
    assert not run_pool([pooled], workers=1, progress=False).failed
    worker = RunStore(pooled.runs_dir).path(pooled)
    expected = allocator.library("auto")
    for path in (child, worker):
        used = fedrepro.RunResult(path).meta["allocator"]
        assert used != "system" and allocator.LIBRARIES[used] in expected
        assert _rows(path) == _rows(here)


@pytest.mark.parametrize("setting", ["system", "tcmalloc", "jemalloc"])
def test_release_free_memory_runs_under_each_allocator(setting):
    lib = None if setting == "system" else allocator._find(setting)
    if setting != "system" and lib is None:
        pytest.skip(f"{setting} is not installed here")
    env = allocator.child_env(setting=setting)
    code = ("from fedrepro.env import allocator; b = bytearray(50 << 20); del b; allocator.release_free_memory(); "
            "print(allocator.in_use())")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert out.stdout.strip() == setting
