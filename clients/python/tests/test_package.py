"""The package as users get it: ``python -m build`` makes the sdist and, from it, the wheel; the
wheel installs into a fresh virtual environment (redis-py from the package index), and the
README's first example runs there against a real server, importing the installed package (not
this checkout's sources)."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

from conftest import Server

CLIENT = Path(__file__).resolve().parents[1]


def first_example() -> str:
    readme = (CLIENT / "README.md").read_text()
    m = re.search(r"```python\n(.*?)```", readme, re.S)
    assert m, "README.md has no python example"
    return m.group(1)


def test_sdist_and_wheel_build_install_and_run_the_readme_example(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(CLIENT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    sdists, wheels = list(dist.glob("*.tar.gz")), list(dist.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, list(dist.iterdir())
    with zipfile.ZipFile(wheels[0]) as z:
        names = z.namelist()
    assert "orca_queue/__init__.py" in names and "orca_queue/aio/worker.py" in names
    assert "orca_queue/py.typed" in names, "the wheel must say it is typed"
    with tarfile.open(sdists[0]) as t:
        assert any(n.endswith("src/orca_queue/queue.py") for n in t.getnames())

    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    py = env / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheels[0])],
        check=True,
        capture_output=True,
        timeout=300,
    )
    server = Server()
    try:
        code = first_example().replace("redis.Redis()", f"redis.Redis(port={server.port})")
        assert f"port={server.port}" in code
        script = tmp_path / "example.py"
        script.write_text(code)
        out = subprocess.run(
            [str(py), str(script)],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert out.returncode == 0, out.stderr
        where = subprocess.run(
            [str(py), "-c", "import orca_queue; print(orca_queue.__file__)"],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        ).stdout
        assert str(env) in where, where  # the installed package, not this checkout
    finally:
        server.stop()
