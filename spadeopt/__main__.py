import sys

from spadeopt.cli import main

sys.exit(main())
