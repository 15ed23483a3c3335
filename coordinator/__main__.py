import sys

# kio (the protocol schemas) registers hypothesis strategies for its types whenever hypothesis is
# importable (a test dependency): a third of start-up. No groupd command uses them.
sys.modules.setdefault("hypothesis", None)

from .cli import main  # noqa: E402

raise SystemExit(main())
