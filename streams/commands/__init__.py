"""Sub-commands of ``hetsched``: one module each with ``add_arguments`` and ``run``."""
