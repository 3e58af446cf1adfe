"""python -m attnpool: the installed package's version and targets."""

import attnpool

print(f"attnpool {attnpool.__version__}")
print(f"compiled targets:  {' '.join(attnpool.targets())}")
print(f"supported targets: {' '.join(attnpool.supported_targets())}")
print(f"active target:     {attnpool.active_target()}")
