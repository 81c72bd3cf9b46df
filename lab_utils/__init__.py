"""lab_utils: the helper package of CNN Parallelism Lab."""
from . import data, hardware, measure, spec

__all__ = ["data", "hardware", "measure", "spec"]
__version__ = "0.1.0"
