"""python -m lab_utils: the instructor's command line (lab_utils.instructor.cli)."""
import sys

# jsonschema (under nbformat, under papermill) builds an IRI grammar at import when rfc3987_syntax is installed: about
# 1.1 CPU-s per command, for a string format no notebook schema uses (as lab_utils.instructor.grading.sandboxed_run)
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # None: "not importable"

from .instructor.cli import main  # noqa: E402

sys.exit(main())
