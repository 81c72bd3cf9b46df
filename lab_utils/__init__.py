"""lab_utils: the helper package of CNN Parallelism Lab."""
from . import allocator

allocator.configure()  # before anything allocates: fixed malloc thresholds here and in every process started from here

from . import data, hardware, measure, spec  # noqa: E402

__all__ = ["allocator", "data", "hardware", "measure", "spec"]
__version__ = "0.1.0"
