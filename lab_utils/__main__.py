"""python -m lab_utils: the instructor's command line (lab_utils.instructor.cli)."""
import sys

from .instructor.cli import main

sys.exit(main())
