"""The repository blueprint: what a project's structure is (derived on every use, never stored) and what Repo runs
learned about it (persisted at `$YAGENT_HOME/data/blueprint/{project}/blueprint.md`, written only at a Repo run's
completion).

`derivation.py` (modules, files, import edges, entry points, manifests, a fingerprint per section; Python imports by
`python_imports.py`, other languages by the code server's extraction), `document.py` (the file's format),
`checks.py` (the five checks an entry passes), `fold.py` (the deterministic fold), `store.py` (the file, its lock
and its last five revisions), `views.py` (the prompt shape, `read_blueprint`, a delegation's prose, `yagent
blueprint`), `reader.py` (a run's port onto all that), `completion.py` (the Repo completion: check, fold, write,
account), `view_process.py` (the short process `yagent blueprint` is answered by).
"""
