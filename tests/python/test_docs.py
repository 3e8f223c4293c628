"""What the README, the docs and pyproject.toml tell a newcomer agrees with the repository."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "pyproject.toml",
    ROOT / "python" / "requirements-ci.txt",
    ROOT / "python" / "requirements.txt",
    ROOT / "python" / "requirements-cuda.txt",
]
# A repository path, glob or brace list: starts at a top-level folder, not inside a longer word,
# path or URL.
REPOSITORY_PATH = re.compile(
    r"(?<![\w/.-])((?:python|scripts|docs|tests|tools|include|src|bench|cmake|\.ci)/"
    r"[\w./*-]*(?:\{[\w.,-]*\}[\w./*-]*)*[\w*}])"
)


def _expand_braces(path):
    """docs/x_{a,b}.txt -> [docs/x_a.txt, docs/x_b.txt], as the shell would."""
    match = re.search(r"\{([^{}]*)\}", path)
    if match is None:
        return [path]
    return [
        expanded
        for alternative in match[1].split(",")
        for expanded in _expand_braces(path[: match.start()] + alternative + path[match.end() :])
    ]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_repository_path_named_exists(document):
    named = [path for found in REPOSITORY_PATH.findall(document.read_text()) for path in _expand_braces(found)]
    missing = [path for path in named if not any(ROOT.glob(path))]
    assert not missing, f"{document.name} names paths that do not exist: {missing}"


def test_one_cmake_minimum_everywhere():
    cmake_lists = re.search(r"cmake_minimum_required\(VERSION ([\d.]+)\)", (ROOT / "CMakeLists.txt").read_text())
    pyproject = re.search(r'cmake\.version = ">=([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    readme = re.search(r"CMake >= ([\d.]+)", (ROOT / "README.md").read_text())
    assert cmake_lists[1] == pyproject[1] == readme[1]


def test_cpu_wheel_command_installs_the_pinned_torch():
    pinned = re.search(r"^torch==([\w.]+)$", (ROOT / "python" / "requirements-ci.txt").read_text(), flags=re.MULTILINE)[
        1
    ]
    command = re.search(
        r"pip install torch==([\w.]+) --index-url https://download.pytorch.org/whl/cpu",
        (ROOT / "README.md").read_text(),
    )
    assert command is not None and command[1] == pinned


def test_readme_cmake_lines_are_the_tested_consumers():
    """tests/install_consumer builds against an installed dualkv with exactly these lines."""
    block = re.search(r"```cmake\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    consumer = (ROOT / "tests" / "install_consumer" / "CMakeLists.txt").read_text().splitlines()
    assert block is not None
    for line in block[1].strip().splitlines():
        assert line in consumer, f"README line not in the tested consumer: {line}"


def _pins(path):
    return dict(re.findall(r"^([\w.-]+)==([\w.]+)$", path.read_text(), flags=re.MULTILINE))


def test_user_requirements_pin_what_ci_pins():
    """The user requirements are a subset of CI's, at CI's versions: the README's install builds
    against the torch and transformers the tests ran with."""
    ci = _pins(ROOT / "python" / "requirements-ci.txt")
    for name in ("requirements.txt", "requirements-cuda.txt"):
        user = _pins(ROOT / "python" / name)
        assert user and all(ci.get(package) == version for package, version in user.items()), (name, user)


def test_readme_cpp_program_is_the_tested_consumer():
    """tests/install_consumer builds and runs exactly the README's C++ program against an installed dualkv."""
    block = re.search(r"```cpp\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    assert block is not None
    assert block[1] == (ROOT / "tests" / "install_consumer" / "app.cpp").read_text()
