"""The shared bottom layer: errors and exit codes, paths, atomic writes, versioned files, the
metric and runner-class registries and the ``run.json`` model. Imports nothing above itself;
stdlib-only where ``noxfile.py`` needs it before installs (errors, paths)."""
