import sys

from rubricgym.app.cli import main

sys.exit(main())
