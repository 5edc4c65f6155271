import sys

from dspark_attn_plugin.cli import main

sys.exit(main())
