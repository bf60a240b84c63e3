"""The version is written once: the package, its installed metadata and the compiled extension
must agree, or a stale build would go unnoticed."""

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
