"""Package layout only (the rest is in pyproject.toml).

libs/ holds the libraries (``arroyo``, ``arroyo_rpc``, ``arroyo_udf``); services/ installs as
``arroyo_services``, one subpackage per service; cli/ installs as ``arroyo_cli``, the ``arroyo``
command above them. pyproject.toml alone cannot map a second source
root onto a new package name while finding the packages under it, hence this file.
"""

from setuptools import find_packages, setup

services = [f"arroyo_services.{p}" for p in find_packages("services")]
setup(
    package_dir={"": "libs", "arroyo_services": "services", "arroyo_cli": "cli"},
    packages=[*find_packages("libs"), "arroyo_services", *services, "arroyo_cli"],
)
