"""Sub-commands of ``hetsched-node``: one module each, ``add_arguments`` + ``run``."""
