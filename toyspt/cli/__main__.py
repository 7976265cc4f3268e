"""``python -m toyspt.cli`` = the ``toyspt`` command."""
from toyspt.cli.main import main

raise SystemExit(main())
