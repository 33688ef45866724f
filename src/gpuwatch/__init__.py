"""gpuwatch: GPU utilization and idle-cost monitor.

The package root holds only the version; every feature lives in a subpackage.
"""

__version__ = "0.1.0"
