"""Every test here runs through the core's scoring pass and through its Python oracle."""

from tests.oracle.scoring_paths import scoring_path  # noqa: F401  (an autouse fixture)
