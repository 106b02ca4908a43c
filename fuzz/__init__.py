"""Coverage-guided fuzz targets for the sans-IO core (issue 11).

:mod:`fuzz.targets` holds the targets as plain functions of one ``bytes`` argument, importable
without atheris (the tests feed them a fixed corpus); :mod:`fuzz.run` runs them under atheris:
``python -m fuzz.run --target all --runs 1000000``.
"""
