"""`python -m smg_fast`.

The first command a newcomer runs shows the exactness claim, or says how to see it."""

import subprocess
import sys


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


def test_check_compares_with_transformers() -> None:
    out = _run("import sys; from smg_fast.__main__ import main; "
               "sys.exit(main(['--check', '--repeat', '1']))")
    assert out.returncode == 0, out.stderr
    line = out.stdout.strip().splitlines()[-1]
    assert line.startswith("test-pattern 1920x1080: pixel_values (10764, 1176) float32")
    assert line.endswith("| bit-exact with transformers")


def test_check_without_transformers_says_how_to_get_it() -> None:
    out = _run("import sys; sys.modules['transformers'] = None; "
               "from smg_fast.__main__ import main; sys.exit(main(['--check', '--repeat', '1']))")
    assert out.returncode == 0, out.stderr
    assert "pip install transformers==5.24.0" in out.stdout


def test_check_fails_when_the_output_differs() -> None:
    # The reference itself is perturbed (one pixel of the image it sees): the verdict must flip
    # to DIFFERS and the exit status to 1, which .ci/wheel.sh and users' scripts rely on.
    out = _run(
        "import sys, numpy as np, smg_fast.__main__ as m\n"
        "real = m._check\n"
        "def perturbed(model, image, ours):\n"
        "    image = np.array(image); image[0, 0, 0] ^= 0x80\n"
        "    return real(model, image, ours)\n"
        "m._check = perturbed\n"
        "sys.exit(m.main(['--check', '--repeat', '1']))\n")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "DIFFERS from transformers" in out.stdout


def test_check_reports_the_fast_decoders() -> None:
    out = _run("import sys; from smg_fast.__main__ import main; "
               "sys.exit(main(['--check', '--repeat', '1']))")
    assert "fast decoders: libjpeg-turbo in use (bit-exact with Pillow)" in out.stdout


def test_check_prints_no_pytorch_advice() -> None:
    # Without torch (the PIL reference needs none) transformers logs "PyTorch was not found":
    # noise on the command's output, filtered by smg-fast.
    out = _run("import sys; sys.modules['torch'] = None; from smg_fast.__main__ import main; "
               "sys.exit(main(['--check', '--repeat', '1']))")
    assert out.returncode == 0, out.stderr
    assert "bit-exact with transformers" in out.stdout
    assert "PyTorch was not found" not in out.stdout + out.stderr
