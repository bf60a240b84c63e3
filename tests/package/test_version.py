"""The version is written once.

The package, its installed metadata and the compiled extension must agree, or a stale build would go
unnoticed."""

from importlib import metadata

import smg_fast
from smg_fast import _native


def test_extension_and_metadata_carry_the_package_version() -> None:
    assert _native.__version__ == smg_fast.__version__
    try:
        installed = metadata.version("smg-fast")
    except metadata.PackageNotFoundError:  # run from a source tree (PYTHONPATH=src)
        return
    assert installed == smg_fast.__version__


def test_a_stale_extension_is_refused_by_name() -> None:
    """An extension of another version fails the import with the rebuild advice.

    Even one without today's bindings fails there, not with a missing attribute somewhere."""
    import subprocess
    import sys

    code = ("import sys, types; m = types.ModuleType('smg_fast._native'); "
            "m.__version__ = '0.0.1'; sys.modules['smg_fast._native'] = m; import smg_fast")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "ImportError: smg_fast._native was built for version 0.0.1" in out.stderr
    assert "build_ext --inplace --force" in out.stderr
